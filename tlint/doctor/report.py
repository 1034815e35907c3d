"""`tlint doctor`'s report: the JSON document (schema/doctor-output.schema.json) and the text
(rich) rendering of it. The HTML file (html.py) is drawn from the same document plus the
steps' images."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, TextIO

from tlint import __version__
from tlint.doctor.plan import Plan
from tlint.doctor.steps import Results

SCHEMA_VERSION = 1
CURVE_KEYS = ("loss_curve", "curve", "losses", "train_loss", "eval_loss")  # loss lists in a probe's `extra`
_CONTAINERS = ("runs", "curves")                 # keys that only group the runs: left out of the labels
EVIDENCE_SHOWN = 4                               # per item in the text report (the JSON has all)
EVIDENCE_CHARS = 240                             # of each one's text, in the text report


def clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become strings ("nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def curves(extra: Any, path: tuple[str, ...] = (), depth: int = 0) -> dict[str, dict[str, list]]:
    """The loss curves in a training probe's `extra` (overfit-batch's run and control,
    warmup-ab's four runs, data-ab's user and cleaned runs with their eval losses): every
    list of numbers under a `loss_curve`-like key, as `{label: {"steps", "loss"}}`, the label
    made of the keys above it (and `train`/`eval` for data-ab's two series of a run); eval
    losses are placed at their `eval_steps`, the others at 1, 2, ..."""
    out: dict[str, dict[str, list]] = {}
    if not isinstance(extra, dict) or depth > 3:
        return out
    for key, value in extra.items():
        if key in CURVE_KEYS and isinstance(value, list) and value \
                and all(v is None or isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            names = [p for p in path if p not in _CONTAINERS]
            if key in ("train_loss", "eval_loss"):
                names.append(key.split("_")[0])
            label = " ".join(names) or str(key)
            if key == "train_loss" and isinstance(extra.get("diverged_at"), int):
                label += f" (diverged at step {extra['diverged_at']})"
            steps = extra.get("eval_steps") if key == "eval_loss" else None
            if not (isinstance(steps, list) and len(steps) == len(value)):
                steps = list(range(1, len(value) + 1))
            out[label] = {"steps": list(steps), "loss": [None if v is None else float(v) for v in value]}
        elif isinstance(value, dict):
            out.update(curves(value, (*path, str(key)), depth + 1))
    return out


def document(plan: Plan, results: Results, items: list[dict[str, Any]], user_code: list[str],
             html: str | None, exit_code: int) -> dict[str, Any]:
    verify = None
    if results.verify is not None:
        from tlint.verify.output import report_json

        verify = report_json(results.verify["model"], results.verify["probes"], results.verify["findings"])
        for entry, probe in zip(verify["probes"], results.verify["probes"]):
            found = curves(probe.get("extra") or {})
            if found:
                entry["loss_curves"] = found
    scan = None
    if results.scan is not None:
        from tlint.verify.data import report_json as scan_json

        scan = scan_json(results.scan)
    check = None
    if results.check is not None:
        check = {**results.check, "diagnostics": [{k: v for k, v in d.items() if k != "abspath"}
                                                  for d in results.check["diagnostics"]]}
    impacts = [i["impact"] for i in items]
    return clean({
        "tool": "tlint", "command": "doctor", "version": __version__, "schema": SCHEMA_VERSION,
        "path": str(plan.path), "config": _shown(plan.config_path),
        "user_code": user_code,
        "steps": [s.as_dict() for s in results.steps],
        "items": items,
        "parts": {"check": check, "scan_data": scan, "verify": verify, "trace": results.trace,
                  "diagnose": results.diagnose},
        "notes": plan.notes,
        "html": html,
        "summary": {"items": len(items), **{k: impacts.count(k) for k in ("high", "medium", "low")}},
        "exit_code": exit_code,
    })


def _shown(path: Any) -> str | None:
    """A path as the user would write it: relative to the working folder when inside it."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def error_document(kind: str, message: str) -> dict[str, Any]:
    return {"tool": "tlint", "command": "doctor", "version": __version__, "schema": SCHEMA_VERSION,
            "error": {"kind": kind, "message": message}}


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def evidence_parts(e: dict[str, Any]) -> tuple[str, str, str]:
    """(source, where, what) of one piece of evidence, for the text and HTML reports."""
    source = e.get("source", "")
    if source == "diagnose":
        steps = e.get("steps")
        where = f"{e.get('run')}" + (f" steps {steps['first']}-{steps['last']}" if steps else "")
        cause = f" (likely cause {e['cause']})" if e.get("cause") else ""
        return "logs", where, f"{e.get('kind')} ({e.get('severity')}){cause}: {e.get('text', '')}"
    if e.get("status") == "fail":
        name = e.get("probe") or e.get("check")
        where = f"probe {name}" if e.get("probe") else f"check {name} ({e.get('loader')} loader)"
        figure = "" if e.get("figure") is None else f"{_number(e['figure'])} {e.get('unit', '')}".strip()
        tolerance = "" if e.get("tolerance") in (None, 0, 0.0) else f" (tolerance {_number(e['tolerance'])})"
        return source, where, f"fails: {figure}{tolerance}; {e.get('text', '')}" if figure else \
            f"fails: {e.get('text', '')}"
    where = f"{e['path']}:{e['line']}" if e.get("path") and e.get("line") else e.get("path") or ""
    if e.get("verdict"):
        by = e.get("probe") or e.get("check")
        return source, where, f"{e['verdict']}" + (f" by {by}" if by else "") + f": {e.get('text', '')}"
    return source, where, e.get("text", "")


_IMPACT_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan"}
_STATUS_STYLE = {"ran": "green", "skipped": "dim", "error": "bold red"}


def step_outcome(step: dict[str, Any]) -> str:
    """A few words on what a step found (the display, the text report, the HTML)."""
    s = step["summary"]
    if step["status"] == "skipped":
        return f"skipped: {step['reason']}"
    if step["status"] == "error" and step["step"] != "check":
        return f"error: {step['reason']}"
    name = step["step"]
    if name == "check":
        out = f"{s.get('findings', 0)} findings in {s.get('files', 0)} files"
        return out + (f"; error: {step['reason']}" if step["status"] == "error" else "")
    if name == "scan-data":
        return f"{s.get('checks', 0)} checks, {s.get('failed', 0)} failed"
    if name == "verify":
        stages = s.get("by_stage", {})
        parts = [f"{stage} {c['fail']} of {c['pass'] + c['fail'] + c['skip']} failed"
                 + (f", {c['skip']} skipped" if c["skip"] else "") for stage, c in stages.items()]
        return f"{s.get('model')}: " + "; ".join(parts) + f"; {s.get('confirmed', 0)} findings confirmed"
    if name == "trace":
        found = s.get("findings", 0)
        return f"{s.get('steps', 0)} optimizer steps of `{s.get('command', '')}`: {found} finding{'s' * (found != 1)}"
    if name == "diagnose":
        runs = s.get("runs", [])
        return f"{len(runs)} run(s): {s.get('errors', 0)} error(s), {s.get('warnings', 0)} warning(s)"
    return ""


def render_text(doc: dict[str, Any], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tlint.encoding import terminal_safe as safe  # names and messages come from the user's files

    color = stream.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, emoji=False,
                      markup=False, width=None if color else 160)
    console.print(Text(f"tlint doctor {safe(doc['path'])}", style="bold")
                  + Text(f" (config: {safe(doc['config'] or 'none found')})", style="dim"))
    table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False)
    for step in doc["steps"]:
        seconds = f"{step['seconds']:.1f} s" if step["status"] != "skipped" else ""
        status = Text(step["status"], style=_STATUS_STYLE[step["status"]])
        table.add_row(Text(f"  {step['step']}", style="bold"), status, safe(step_outcome(step)),
                      Text(seconds, style="dim"))
    console.print(table)
    for note in doc["notes"]:
        console.print(f"  note: {safe(note)}")
    items = doc["items"]
    console.print(Text("ranked by likely impact (data → model → training → A/B, logs throughout)" if items
                       else "nothing found", style="bold"))
    for item in items:
        line = Text(f"{item['rank']:>3}. ")
        line.append(f"{item['impact']:<6}", style=_IMPACT_STYLE[item["impact"]])
        line.append(f" [{item['stage']}] ", style="dim")
        line.append(safe(item["title"]))
        if item["runtime"]:
            line.append(f"  ({safe(item['runtime'])})", style="dim")
        console.print(line)
        evidence = item["evidence"]
        for e in evidence[:EVIDENCE_SHOWN]:
            source, where, what = evidence_parts(e)
            what = what if len(what) <= EVIDENCE_CHARS else what[:EVIDENCE_CHARS - 1].rstrip() + "…"
            console.print(Text(f"       {source:<9} ", style="dim") + Text(f"{safe(where)}  " if where else "")
                          + Text(safe(what)))
        if len(evidence) > EVIDENCE_SHOWN:
            console.print(Text(f"       (+{len(evidence) - EVIDENCE_SHOWN} more evidence: --format json)",
                               style="dim"))
        console.print(Text("       fix: ", style="green") + Text(safe(item["fix"])))
    s = doc["summary"]
    if doc["html"]:
        console.print(f"wrote {safe(doc['html'])}")
    console.print(f"{s['items']} item(s): {s['high']} high, {s['medium']} medium, {s['low']} low impact; "
                  f"exit {doc['exit_code']}")
