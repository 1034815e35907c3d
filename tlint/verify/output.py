"""`tlint verify` reports: text (rich tables, one row per probe and one per finding) and
JSON (verifier.md's stable schema)."""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from tlint import __version__

_STATUS_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow",
                 "confirmed": "bold red", "not-reproduced": "green", "not-checkable": "yellow"}


def summary(probes: list[dict], findings: list[dict]) -> dict[str, int]:
    return {"probes": len(probes), "failed": sum(p["status"] == "fail" for p in probes),
            "confirmed": sum(f["verdict"] == "confirmed" for f in findings)}


def exit_code(probes: list[dict], findings: list[dict]) -> int:
    counts = summary(probes, findings)
    return 1 if counts["failed"] or counts["confirmed"] else 0


def report_json(model: dict[str, Any], probes: list[dict], findings: list[dict]) -> dict[str, Any]:
    keys = ("probe", "status", "figure", "tolerance", "unit", "module", "detail")
    return {
        "tool": "tlint", "version": __version__,
        "model": {k: model[k] for k in ("factory", "class", "parameters", "call")},
        "probes": [{k: p[k] for k in keys} for p in probes],
        "findings": findings,
        "summary": summary(probes, findings),
    }


def render_json(model: dict, probes: list[dict], findings: list[dict], stream: TextIO) -> None:
    stream.write(json.dumps(report_json(model, probes, findings), indent=2, ensure_ascii=False) + "\n")


def error_json(kind: str, message: str) -> str:
    return json.dumps({"tool": "tlint", "error": {"kind": kind, "message": message}}, ensure_ascii=False) + "\n"


def render_text(model: dict, probes: list[dict], findings: list[dict], stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    color = stream.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, emoji=False,
                      markup=False, width=None if color else 160)
    causal = "causal" if model.get("causal") else "not causal"
    console.print(f"model {model['class']} from {model['factory']}: {model['parameters']:,} parameters, "
                  f"vocabulary {model.get('vocab_size')}, {causal}")
    console.print(f"call style \"{model['call']}\": {model.get('convention', '')}")
    table = Table(title="probes", title_justify="left")
    for column in ("probe", "status", "figure", "tolerance", "unit", "detail"):
        table.add_column(column, overflow="fold")
    for p in probes:
        figure = "" if p["figure"] is None else f"{p['figure']:.4g}"
        table.add_row(p["probe"], Text(p["status"], style=_STATUS_STYLE[p["status"]]), figure,
                      f"{p['tolerance']:g}", p["unit"], p["detail"])
    console.print(table)
    if findings:
        table = Table(title="static findings", title_justify="left")
        for column in ("finding", "location", "verdict", "probe", "reason"):
            table.add_column(column, overflow="fold")
        for f in findings:
            where = f"{f['path']}:{f['range']['start']['line']}:{f['range']['start']['column']}"
            table.add_row(f["code"], where, Text(f["verdict"], style=_STATUS_STYLE[f["verdict"]]),
                          f["probe"] or "", f["reason"])
        console.print(table)
    counts = summary(probes, findings)
    console.print(f"{counts['probes']} probes, {counts['failed']} failed; {len(findings)} static findings, "
                  f"{counts['confirmed']} confirmed")
