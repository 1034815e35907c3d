"""Pairing `tlint trace`'s findings with `tlint check`'s (README "Tracing a training run"):
the static findings of the rules trace observes, in the files the run went through, each get
a verdict, and each trace finding is marked `confirmed` (a static finding at its line) or
`new`. No torch here.

- `confirmed`: a trace finding of the same rule at the static finding's line (its own line,
  or one of the lines it involves: the backward, the step).
- `refuted`: the line ran and the invariant could have failed there within the steps run
  (TL305: the scheduler step ran; TL310: the reset ran with an optimizer step after it;
  TL303: the clip ran in a run that scaled its loss; TL312: the switch to eval mode ran
  with an optimizer step after it; TL214: the dropout or attention call ran inside a model
  in eval mode), and the invariant held.
- `not-observed`: otherwise (the line did not run, or not where the invariant could fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tlint.runtime.invariants import RULE_EVENTS, RULES


def lint(files: list[Path]) -> list[Any]:
    """Unsuppressed `tlint check` findings of the rules trace observes, in `files`."""
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    result = Linter(ConfigResolver(), jobs=1).run(files)
    return [d for d in result.diagnostics if not d.suppressed and d.code in RULES]


def run_files(observed: dict[str, Any], script: Path | None, cwd: Path) -> list[Path]:
    """The script and every file of the user's, under `cwd`, where the run saw an event."""
    files = {script.resolve()} if script is not None else set()
    for entries in observed.values():
        for entry in entries if isinstance(entries, list) else ():
            path = Path(entry.get("path", "")) if isinstance(entry, dict) else None
            if path is not None and path.suffix == ".py" and (path == cwd or cwd in path.parents) and path.is_file():
                files.add(path)
    return sorted(files)


def _seen(observed: dict[str, Any], code: str, path: str, line: int) -> list[dict[str, Any]]:
    out = []
    for kind in RULE_EVENTS[code]:
        for entry in observed.get(kind, []):
            if isinstance(entry, dict) and entry.get("path") == path and entry.get("line") == line:
                out.append({**entry, "kind": kind})
    return out


def could_fail(code: str, seen: list[dict[str, Any]], steps: int, counts: dict[str, Any]) -> bool:
    """Whether the invariant could have failed at a line where `seen` are its events."""
    if not seen:
        return False
    if code in ("TL310", "TL312"):
        return any(isinstance(e.get("first_step"), int) and e["first_step"] < steps for e in seen)
    if code == "TL303":
        return bool(counts.get("scale"))
    return True


def _lines(finding: dict[str, Any]) -> set[tuple[str, int]]:
    sites = [finding.get("site"), *finding.get("related", [])]
    return {(s["path"], s["line"]) for s in sites if isinstance(s, dict)}


def pair(diagnostics: list[Any], findings: list[dict[str, Any]], end: dict[str, Any]) -> list[dict[str, Any]]:
    """The static findings with their verdicts; marks each trace finding's `static`."""
    observed, steps, counts = end.get("observed", {}), end.get("steps", 0), end.get("counts", {})
    for finding in findings:
        finding["static"] = "new"
    out = []
    for diag in diagnostics:
        path, line = str(Path(diag.path).resolve()), diag.range.start.line
        matches = [f for f in findings if f["code"] == diag.code and (path, line) in _lines(f)]
        if matches:
            verdict = "confirmed"
            for finding in matches:
                finding["static"] = "confirmed"
        elif could_fail(diag.code, _seen(observed, diag.code, path, line), steps, counts):
            verdict = "refuted"
        else:
            verdict = "not-observed"
        out.append({"code": diag.code, "name": diag.name, "severity": diag.severity, "message": diag.message,
                    "path": path, "line": line, "verdict": verdict})
    return out
