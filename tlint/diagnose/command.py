"""`tlint diagnose RUN [RUN2]`: read the runs, find, compare, report (text, JSON, PNG plots).

Exit codes: 0 no finding is an error, 1 a finding is an error, 2 bad input (a missing,
unreadable, oversized or malformed log; a missing optional package).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from tlint import __version__
from tlint.diagnose.compare import compared_settings, config_differences, curve_differences, separation
from tlint.diagnose.findings import Finding, diagnose
from tlint.diagnose.readers import DiagnoseError, Run, read_run

SCHEMA_VERSION = 1


def run_command(args: Any) -> int:
    runs: list[Run] = []
    try:
        for path in args.runs:
            runs.append(read_run(Path(path)))
        findings = [diagnose(r) for r in runs]
        comparison = _compare(runs[0], runs[1]) if len(runs) == 2 else None
        artifacts: list[str] = []
        if args.artifacts is not None:
            from tlint.diagnose.plots import write_plots

            artifacts = write_plots(runs, findings, comparison, Path(args.artifacts))
    except DiagnoseError as exc:
        return _fail(args.format, str(exc))
    document = report_json(runs, findings, comparison, artifacts)
    if args.format == "json":
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    else:
        render_text(document, sys.stdout)
    return document["exit_code"]


def _fail(fmt: str, message: str) -> int:
    if fmt == "json":
        sys.stdout.write(json.dumps({"tool": "tlint", "command": "diagnose", "version": __version__,
                                     "schema": SCHEMA_VERSION, "error": message}, indent=2) + "\n")
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2


def _compare(a: Run, b: Run) -> dict[str, Any]:
    differences, ignored = config_differences(a, b)
    curves, compared = curve_differences(a, b)
    return {"separation": separation(a, b), "config_differences": differences, "ignored_keys": ignored,
            "curve_differences": curves,
            "compared": {"recorded_settings": compared_settings(a, b), "logged_curves": compared}}


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become strings ("nan", "inf", "-inf")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def run_json(run: Run, findings: list[Finding]) -> dict[str, Any]:
    steps = sorted({s for points in run.series.values() for s, _ in points})
    return {
        "path": run.path,
        "sources": run.sources,
        "steps": {"first": steps[0], "last": steps[-1], "logged": len(steps)} if steps else None,
        "series": {name: len(points) for name, points in sorted(run.series.items())},
        "vocab_size": run.vocab_size,
        "config": {"settings": len(run.config)},
        "findings": [f.as_dict() for f in findings],
        "watch_findings": run.watch_findings,
        "notes": run.notes,
    }


def report_json(runs: list[Run], findings: list[list[Finding]], comparison: dict[str, Any] | None,
                artifacts: list[str]) -> dict[str, Any]:
    errors = sum(f.severity == "error" for fs in findings for f in fs)
    warnings = sum(f.severity == "warning" for fs in findings for f in fs)
    return _clean({
        "tool": "tlint", "command": "diagnose", "version": __version__, "schema": SCHEMA_VERSION,
        "runs": [run_json(r, fs) for r, fs in zip(runs, findings)],
        "comparison": comparison,
        "artifacts": artifacts,
        "summary": {"errors": errors, "warnings": warnings},
        "exit_code": 1 if errors else 0,
    })


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "(not recorded)" if value is None else json.dumps(value) if not isinstance(value, str) else value


def render_text(document: dict[str, Any], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    color = stream.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, emoji=False,
                      markup=False, width=None if color else 160)
    names = "ab"
    for i, run in enumerate(document["runs"]):
        label = f"run {names[i]}: " if len(document["runs"]) == 2 else "run: "
        steps = run["steps"]
        span = f"steps {steps['first']}-{steps['last']} ({steps['logged']} logged)" if steps else "no steps"
        console.print(Text(f"{label}{run['path']}", style="bold"))
        console.print(f"  {span}; series: " + ", ".join(f"{k} ({n})" for k, n in run["series"].items())
                      + (f"; vocabulary {run['vocab_size']}" if run["vocab_size"] else ""))
        console.print("  read: " + ", ".join(run["sources"]))
        for note in run["notes"]:
            console.print(f"  note: {note}")
        if not run["findings"]:
            console.print("  no findings")
        for f in run["findings"]:
            line = Text("  ")
            line.append(f"{f['severity']:<7}", style=_STYLE[f["severity"]])
            line.append(f" {f['kind']}: {f['message']}")
            console.print(line)
            if f["causes"]:
                table = Table(show_header=False, box=None, padding=(0, 1), pad_edge=False)
                for c in f["causes"]:
                    tests = ", ".join(c["rules"] + [f"verify --probe {p}" for p in c["probes"]])
                    table.add_row(f"     {c['rank']}.", c["cause"], Text(tests, style="dim"))
                console.print(table)
        for w in run["watch_findings"]:
            console.print(f"  watch finding at step {w.get('step')}: {w.get('kind')} ({w.get('severity')}): "
                          f"{w.get('message')}")
    comparison = document["comparison"]
    if comparison is not None:
        console.print(Text("comparison (a vs b)", style="bold"))
        sep = comparison["separation"]
        if sep is None:
            console.print("  the losses do not separate beyond noise")
        else:
            console.print(f"  losses separate at step {sep['step']}: a - b = {sep['difference']:.4g} "
                          f"(noise {sep['noise']:.3g}; {sep['final_difference']:.4g} at the last common step); "
                          f"run {sep['worse']} is worse")
        diffs, curves = comparison["config_differences"], comparison["curve_differences"]
        compared = comparison["compared"]
        for c in curves:
            where = f"at step {c['step']}" if c["step"] is not None else "(no common logged step)"
            ratio = f" (b/a = {c['ratio']:.3g})" if c["ratio"] is not None else ""
            console.print(f"  {c['key']} differs {where}: a {_value(c['a'])}, b {_value(c['b'])}{ratio}")
        if not diffs and not curves:
            if compared["recorded_settings"] or compared["logged_curves"]:
                what = [f"{compared['recorded_settings']} recorded settings"] if compared["recorded_settings"] else []
                what += compared["logged_curves"]
                console.print(f"  no difference in what both runs recorded ({', '.join(what)})")
            else:
                console.print("  the runs record no configuration and no learning-rate curve: their settings "
                              "cannot be compared")
        elif not diffs:
            console.print("  recorded configurations: no difference" if compared["recorded_settings"]
                          else "  no recorded configuration")
        else:
            table = Table(title=None, show_header=True, box=None, padding=(0, 2))
            table.add_column("setting")
            table.add_column("a")
            table.add_column("b")
            for d in diffs:
                table.add_row(d["key"], _value(d["a"]), _value(d["b"]))
            console.print("  recorded configurations differ in:")
            console.print(table)
    for path in document["artifacts"]:
        console.print(f"wrote {path}")
    s = document["summary"]
    console.print(f"{s['errors']} error(s), {s['warnings']} warning(s)")
