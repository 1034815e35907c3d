"""`--format json`: the stable schema (tests/tlint-output.schema.json)."""

from __future__ import annotations

import json
from typing import TextIO

from tlint import __version__
from tlint.encoding import printable
from tlint.reporters import OutputReport, fixable_counts, statistics_rows


def document(report: OutputReport) -> dict:
    diagnostics = []
    for diag in report.diagnostics:
        entry = diag.to_json()
        entry["path"], entry["message"] = printable(diag.path), printable(diag.message)
        if diag.suppressed:  # only present with --show-suppressed
            entry["suppressed"] = True
        diagnostics.append(entry)
    return {
        "tool": "tlint",
        "version": __version__,
        "diagnostics": diagnostics,
        "summary": {
            "files": len(report.files),
            "diagnostics": len(diagnostics),
            "by_code": report.by_code(),
            "parse_errors": report.parse_errors,
        },
    }


def render(report: OutputReport, stream: TextIO) -> None:
    stream.write(json.dumps(document(report), indent=2, ensure_ascii=False) + "\n")


def render_statistics(report: OutputReport, stream: TextIO) -> None:
    fixable = fixable_counts(report.diagnostics)
    rows = [{"code": code, "name": name, "severity": sev, "count": n, "fixable": fixable.get(code, 0)}
            for code, name, sev, n in statistics_rows(report.diagnostics)]
    stream.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
