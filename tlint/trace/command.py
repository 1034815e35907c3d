"""`tlint trace [--steps N] [--format text|json] [-o FILE] [--no-check] -- python train.py ARGS` (README
"Tracing a training run"): run the user's training script, unmodified, in a child process
(`tlint.trace.child`, through `tlint.verify.child.Child`: its own process group, a report
pipe the script cannot forge, bounded output, nothing left running), stop it after N
optimizer steps, and report what the run-time invariants (`tlint.runtime.invariants`) found,
at the user's lines, paired with `tlint check`'s findings of the same rules in the files the
run went through (`tlint.trace.pairing`). Under a launcher (`torchrun ARGS`, `accelerate
launch ARGS`) the child runs the launcher and each script it starts runs in a child of its
own (`tlint.trace.launch`); their reports come tagged with their rank and are merged here
(`merge`). No torch here.

Exit status: 0 no finding, 1 findings, 2 bad input (no command after `--`, no such script,
a script that raised or exited non-zero, a child that crashed)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlint.runtime.invariants import RULES
from tlint.verify.child import EXIT_GRACE_S, POLL_S, Child, ReportError, report_error

CHILD_MODULE = "tlint.trace.child"
DEFAULT_STEPS = 5
FORMATS = ("text", "json", "concise", "github", "sarif", "junit", "lsp")  # the last five: tlint.reporters
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_HARMLESS_OPTIONS = ("-u", "-B")  # unbuffered, no bytecode: the child does both anyway
MAX_PROCS = 1024  # a launcher's traced processes


class TraceUsageError(Exception):
    """Bad input: one line, exit 2."""


@dataclass
class Target:
    target: str           # the script's path, or the module's name
    args: list[str]
    module: bool
    launcher: str | None = None  # the launcher's command name (`torchrun`, `accelerate`): target is its module


# the launchers whose launched scripts are traced (README "Launchers"): command -> its module;
# `python -m MODULE` of one of these modules is the same launcher
LAUNCHERS = {"torchrun": "torch.distributed.run", "accelerate": "accelerate.commands.accelerate_cli"}
LAUNCHER_MODULES = {"torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch",
                    "accelerate.commands.accelerate_cli"}


def parse_target(words: list[str] | None, cwd: Path) -> Target:
    """`python SCRIPT ARGS`, `python -m MODULE ARGS` (or `SCRIPT.py ARGS`), `torchrun ARGS`,
    `accelerate launch ARGS`."""
    if not words:
        raise TraceUsageError("give the command to trace after `--`, e.g. `tlint trace -- python train.py`")
    rest = list(words)
    first = rest[0]
    name = Path(first).name
    if name in LAUNCHERS:
        if name == "accelerate" and rest[1:2] != ["launch"]:
            raise TraceUsageError("tlint trace runs `accelerate launch ARGS`, not another accelerate command")
        return Target(LAUNCHERS[name], rest[1:], True, name)
    if _PYTHON.match(name) or os.path.realpath(first) == os.path.realpath(sys.executable):
        rest.pop(0)
    elif not first.endswith(".py"):
        raise TraceUsageError(f"tlint trace runs `python SCRIPT ARGS`, `python -m MODULE ARGS`, `torchrun ARGS` "
                              f"or `accelerate launch ARGS`, not {first!r}")
    while rest and rest[0] in _HARMLESS_OPTIONS:
        rest.pop(0)
    if not rest:
        raise TraceUsageError("give the script to trace: `tlint trace -- python train.py ARGS`")
    if rest[0] == "-m":
        if len(rest) < 2 or not rest[1] or rest[1].startswith("-"):
            raise TraceUsageError("`-m` needs a module name: `tlint trace -- python -m pkg.train ARGS`")
        return Target(rest[1], rest[2:], True, rest[1] if rest[1] in LAUNCHER_MODULES else None)
    if rest[0].startswith("-"):
        raise TraceUsageError(f"tlint trace runs `python SCRIPT` or `python -m MODULE`; the Python option "
                              f"{rest[0]!r} is not supported")
    script = cwd / rest[0]
    if not script.is_file():
        raise TraceUsageError(f"no such script: {rest[0]}")
    return Target(rest[0], rest[1:], False)


@dataclass
class TraceRun:
    """What the child reported, and how it ended."""

    findings: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    check: list[dict[str, Any]] | None = None   # the static findings paired (None: not run)
    checked: list[str] = field(default_factory=list)  # the files `tlint check` read
    error: tuple[str, str] | None = None
    how: str = ""
    last_words: str = ""
    procs: dict[int, TraceRun] = field(default_factory=dict)  # a launcher's traced processes, by start order
    ranks: dict[int, int] = field(default_factory=dict)       # their ranks


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise ReportError(what)


def _site(data: Any) -> bool:
    return data is None or (isinstance(data, dict) and isinstance(data.get("path"), str)
                            and isinstance(data.get("line"), int) and isinstance(data.get("function", ""), str))


def check_finding(data: Any) -> dict[str, Any]:
    _expect(isinstance(data, dict) and data.get("code") in RULES and data.get("severity") in ("error", "warning")
            and isinstance(data.get("message"), str) and _site(data.get("site"))
            and isinstance(data.get("step"), int) and isinstance(data.get("count"), int)
            and isinstance(data.get("related", []), list) and all(_site(s) for s in data.get("related", [])),
            "a malformed finding")
    return data


def apply(event: dict[str, Any], run: TraceRun) -> None:
    kind = event["event"]
    if "proc" in event:  # a launched process's event, forwarded by the launcher's process
        proc, rank = event.pop("proc"), event.pop("rank", None)
        _expect(isinstance(proc, int) and 0 <= proc < MAX_PROCS and isinstance(rank, int) and 0 <= rank < 1 << 16
                and run.end is None and run.ranks.setdefault(proc, rank) == rank, "a launched process's event "
                "without its process and rank, or after the end")
        if kind == "bad":
            raise ReportError(f"from the launched process of rank {rank}: {str(event.get('problem'))[:200]}")
        apply(event, run.procs.setdefault(proc, TraceRun()))
        return
    if kind == "ready":
        return
    if kind == "finding":
        _expect(run.end is None, "a finding after the end")
        run.findings.append(check_finding(event.get("finding")))
    elif kind == "end":
        _expect(run.end is None and isinstance(event.get("steps"), int) and isinstance(event.get("stopped"), bool)
                and isinstance(event.get("findings"), list) and isinstance(event.get("observed", {}), dict)
                and isinstance(event.get("counts", {}), dict) and isinstance(event.get("lrs", []), list)
                and isinstance(event.get("scales", []), list) and isinstance(event.get("launched", 0), int)
                and isinstance(event.get("launcher_exit", 0), int), "an `end` event out of place or malformed")
        run.findings = [check_finding(f) for f in event["findings"]]
        run.end = event
        if run.procs:
            merge(run)
    elif kind == "error":
        _expect((run.error is None or bool(run.procs)) and isinstance(event.get("kind"), str)
                and isinstance(event.get("message"), str), "an `error` event without its kind and message")
        if run.error is None:  # (a launcher that failed after a rank did: the rank's error is the one told)
            run.error = (event["kind"], event["message"])
    else:
        raise ReportError(f"an unknown event {kind[:40]!r}")


def merge(run: TraceRun) -> None:
    """A launcher's run: every rank checked its own process; one report of them all. A finding
    of the same rule at the same line on several ranks is one finding, with `ranks` (each
    rank's count added, its first step the earliest); steps, stop and learning rates are the
    lowest rank's; event counts are added; a rank's error is the run's (the lowest rank's)."""
    order = sorted(run.procs, key=lambda p: (run.ranks[p], p))
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for proc in order:
        sub, rank = run.procs[proc], run.ranks[proc]
        for finding in sub.findings:
            site = finding.get("site") or {}
            key = (finding["code"], site.get("path"), site.get("line"))
            if key not in merged:
                merged[key] = {**finding, "ranks": [rank]}
                continue
            into = merged[key]
            into["count"] += finding["count"]
            into["step"] = min(into["step"], finding["step"])
            if rank not in into["ranks"]:
                into["ranks"].append(rank)
    run.findings = list(merged.values())
    ended: list[dict[str, Any]] = [e for e in (run.procs[p].end for p in order) if e is not None]
    end = dict(run.end or {})
    if ended:
        first = ended[0]
        observed: dict[str, list[Any]] = {}
        counts: dict[str, int] = {}
        for sub_end in ended:
            for kind, entries in (sub_end.get("observed") or {}).items():
                observed.setdefault(kind, []).extend(entries if isinstance(entries, list) else [])
            for kind, n in (sub_end.get("counts") or {}).items():
                if isinstance(n, int):
                    counts[kind] = counts.get(kind, 0) + n
        end.update(steps=first["steps"], stopped=all(e["stopped"] for e in ended), observed=observed, counts=counts,
                   lrs=first.get("lrs", []), scales=first.get("scales", []))
    end["ranks"] = [{"rank": run.ranks[p], "steps": (run.procs[p].end or {}).get("steps"),
                     "stopped": bool((run.procs[p].end or {}).get("stopped"))} for p in order]
    run.end = end
    failed = [p for p in order if run.procs[p].error is not None]  # (a rank the launcher stopped has no error)
    if failed:
        kind, message = run.procs[failed[0]].error or ("", "")
        run.error = (kind, f"rank {run.ranks[failed[0]]}: {message}")
    elif any(run.procs[p].end is None for p in order):
        proc = next(p for p in order if run.procs[p].end is None)
        run.error = ("crash", f"the process of rank {run.ranks[proc]} ended before tlint trace's report")


def run_child(target: Target, steps: int, cwd: Path, verbose: bool = True) -> TraceRun:
    """Run the script in the child until it ends (or, after its `end`, EXIT_GRACE_S more);
    `verbose`: its output streamed to stderr (else only its end kept, for errors)."""
    run = TraceRun()
    request = json.dumps({"target": target.target, "args": target.args, "module": target.module, "steps": steps,
                          "launcher": target.launcher is not None, "program": target.launcher})
    with Child(CHILD_MODULE, request, prefix="tlint-trace-", verbose=verbose, cwd=cwd) as proc:
        try:
            grace: float | None = None
            while True:
                exited = proc.exited
                for event in proc.drain() if exited else proc.read(POLL_S):
                    apply(event, run)
                if exited:
                    break
                if run.end is not None and grace is None:
                    grace = time.monotonic() + EXIT_GRACE_S
                if grace is not None and time.monotonic() >= grace:  # e.g. a thread of the script that lives on
                    proc.kill()
                    break
        except ReportError as exc:
            run.error = report_error("the script", str(exc))
    run.how, run.last_words = proc.how, proc.last_words
    return run


# --- output ------------------------------------------------------------------------------------

def _display(path: str, cwd: Path) -> str:
    try:
        return str(Path(path).relative_to(cwd))
    except ValueError:
        return path


def _finding_json(finding: dict[str, Any], cwd: Path) -> dict[str, Any]:
    site = finding.get("site") or {}
    return {"code": finding["code"], "name": RULES[finding["code"]], "severity": finding["severity"],
            "message": finding["message"], "path": _display(site["path"], cwd) if site else None,
            "line": site.get("line"), "function": site.get("function"), "step": finding["step"],
            "count": finding["count"], "source": "trace", "static": finding.get("static"),
            "related": [{"path": _display(s["path"], cwd), "line": s["line"]} for s in finding.get("related", [])],
            **({"ranks": finding["ranks"]} if "ranks" in finding else {})}


def report_json(run: TraceRun, target: Target, steps: int, cwd: Path, status: int) -> dict[str, Any]:
    from tlint import __version__

    end = run.end or {}
    return {"tool": "tlint", "version": __version__, "command": "trace",
            "target": {"script" if not target.module else "module": target.target, "args": target.args},
            "steps_asked": steps, "steps": end.get("steps", 0), "stopped": bool(end.get("stopped", False)),
            "findings": [_finding_json(f, cwd) for f in run.findings],
            "check": None if run.check is None else {
                "files": [_display(f, cwd) for f in run.checked],
                "findings": [{**c, "path": _display(c["path"], cwd)} for c in run.check]},
            "events": end.get("counts", {}), "lrs": end.get("lrs", []), "scales": end.get("scales", []),
            **({"launcher": target.launcher, "ranks": end.get("ranks", [])} if target.launcher else {}),
            "error": {"kind": run.error[0], "message": run.error[1]} if run.error else None, "exit": status}


def report_text(run: TraceRun, steps: int, cwd: Path) -> str:
    lines = []
    for f in run.findings:
        j = _finding_json(f, cwd)
        where = f"{j['path']}:{j['line']}" if j["path"] else "<unknown>"
        count = f", ×{j['count']}" if j["count"] > 1 else ""
        static = {"confirmed": ", confirms tlint check", "new": ", new"}.get(j["static"] or "", "")
        ranks = f", rank{'s' if len(j['ranks']) > 1 else ''} {', '.join(map(str, j['ranks']))}" if "ranks" in j else ""
        lines.append(f"{where}: {j['severity']} {j['code']} {j['name']}: {j['message']} "
                     f"[trace{static}{ranks}, step {j['step']}{count}]")
    if run.check:
        lines.append(f"tlint check on the {len(run.checked)} file{'s' if len(run.checked) != 1 else ''} the run "
                     "went through, the rules trace observes:")
        for c in run.check:
            lines.append(f"  {_display(c['path'], cwd)}:{c['line']}: {c['code']} {c['name']}: {c['verdict']}")
    end = run.end
    if end is not None:
        done = end["steps"]
        how = f"stopped after --steps {steps}" if end["stopped"] else "the script ended"
        errors = sum(f["severity"] == "error" for f in run.findings)
        warnings = len(run.findings) - errors
        what = f"{len(run.findings)} finding{'s' if len(run.findings) != 1 else ''}"
        if run.findings:
            what += f" ({errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''})"
        procs: list[dict[str, Any]] | None = end.get("ranks")
        each = ""
        if procs is not None:
            each = (f" in each of {len(procs)} launched processes (ranks {', '.join(str(r['rank']) for r in procs)})"
                    if len(procs) != 1 else f" in 1 launched process (rank {procs[0]['rank']})")
        lines.append(f"tlint trace: {done} optimizer step{'s' if done != 1 else ''}{each} ({how}); {what}")
    return "\n".join(lines) + ("\n" if lines else "")


def report_other(fmt: str, run: TraceRun, cwd: Path) -> str:
    """The trace findings in one of `tlint check`'s other formats (`tlint.reporters`), as
    diagnostics at the user's lines (the message ends with `[trace]`)."""
    import io

    from tlint.diagnostics import Diagnostic, Position, Range
    from tlint.reporters import OutputReport, SourceLines, render
    from tlint.rules import BY_CODE

    sources = SourceLines()
    diagnostics = []
    for f in run.findings:
        site = f.get("site")
        if not site:
            continue
        path = _display(site["path"], cwd)
        text = sources.line(path, site["line"]) or ""
        column = len(text) - len(text.lstrip()) + 1
        diagnostics.append(Diagnostic(f["code"], RULES[f["code"]], f["severity"], f["message"] + " [trace]", path,
                                      Range(Position(site["line"], column), Position(site["line"], len(text) + 1)),
                                      kind=BY_CODE[f["code"]].kind))
    diagnostics.sort(key=Diagnostic.sort_key)
    files = sorted({d.path for d in diagnostics} | {_display(p, cwd) for p in run.checked})
    stream = io.StringIO()
    render(fmt, OutputReport(diagnostics, files, 0, sources), stream)
    return stream.getvalue()


def _fail(fmt: str, kind: str, message: str) -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps({"tool": "tlint", "command": "trace", "error": {"kind": kind, "message": message},
                                     "exit": 2}) + "\n")
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2


def trace(target: Target, steps: int, cwd: Path, *, check: bool = True, verbose: bool = True) -> tuple[TraceRun, int]:
    """Run and pair (`check`: `tlint check` on the files the run went through); the run and
    its exit status (0 no finding, 1 findings, 2 the script or its child failed). `tlint
    doctor` runs it too."""
    run = run_child(target, steps, cwd, verbose)
    if run.end is not None and check:
        from tlint.trace.pairing import lint, pair, run_files

        files = run_files(run.end.get("observed", {}), None if target.module else cwd / target.target, cwd)
        run.checked = [str(f) for f in files]
        run.check = pair(lint(files), run.findings, run.end) if files else []
    status = 1 if run.findings else 0
    if run.error is not None or run.end is None:
        status = 2
    return run, status


def failure(run: TraceRun) -> str:
    """Why a run with exit status 2 failed, in one line."""
    if run.error is not None:
        return run.error[1]
    return f"the script's process {run.how} before tlint trace's report"


def run_command(args: Any) -> int:
    fmt = args.format or "text"
    cwd = Path.cwd()
    if args.steps is not None and args.steps < 0:
        return _fail(fmt, "arguments", "--steps must be 0 (run to the end) or more")
    steps = DEFAULT_STEPS if args.steps is None else args.steps
    try:
        if args.words:
            words = args.words if _PYTHON.match(Path(args.words[0]).name) else ["python", *args.words]
            raise TraceUsageError(f"put the command to trace after `--`: tlint trace -- {' '.join(words)}")
        target = parse_target(args.target, cwd)
    except TraceUsageError as exc:
        return _fail(fmt, "arguments", str(exc))
    from importlib.util import find_spec

    if find_spec("torch") is None:
        return _fail(fmt, "no-torch", "tlint trace runs a PyTorch training script and needs PyTorch, which is not "
                     "installed: pip install torch")
    run, status = trace(target, steps, cwd, check=not getattr(args, "no_check", False))
    if fmt == "json":
        out = json.dumps(report_json(run, target, steps, cwd, status), indent=2) + "\n"
    elif fmt == "text":
        out = report_text(run, steps, cwd)
    else:
        out = report_other(fmt, run, cwd)
    if args.output is not None:
        from tlint.bounded import open_output

        try:
            with open_output(args.output) as stream:
                stream.write(out)
        except OSError as exc:
            sys.stderr.write(f"tlint: error: cannot write {args.output} (--output): {exc.strerror or exc}\n")
            return 2
    elif fmt == "json" or status != 2 or run.findings:
        sys.stdout.write(out)
    if status == 2 and fmt != "json":
        if run.error is not None:
            sys.stderr.write(f"tlint: error: {run.error[1]}\n")
        else:
            sys.stderr.write(f"tlint: error: the script's process {run.how} before tlint trace's report "
                             "(its output is above)\n")
    return status
