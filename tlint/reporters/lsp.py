"""`--format lsp`: JSON Lines of LSP `publishDiagnostics` params, one per linted file
(files without findings too, so an editor clears stale ones). Positions are 0-based lines
and UTF-16 code units, computed from each line's text."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TextIO

from tlint.diagnostics import Diagnostic, Position, Range
from tlint.docs import rule_url
from tlint.encoding import printable
from tlint.reporters import OutputReport, SourceLines

_SEVERITY = {"error": 1, "warning": 2, "info": 3}


def file_uri(path: str) -> str:
    """The file URI of `path`: its bytes percent-encoded (those that are not UTF-8 too)."""
    return Path(os.path.abspath(path)).as_uri()


def utf16_character(line: str | None, column: int) -> int:
    """The 0-based UTF-16 offset of a 1-based code-point column on `line`."""
    index = column - 1
    if line is None:
        return index
    head = line[:index]
    return len(head.encode("utf-16-le")) // 2 + max(0, index - len(line))


def lsp_position(sources: SourceLines, path: str, position: Position) -> dict[str, int]:
    line = sources.line(path, position.line)
    return {"line": position.line - 1, "character": utf16_character(line, position.column)}


def lsp_range(sources: SourceLines, path: str, rng: Range) -> dict:
    return {"start": lsp_position(sources, path, rng.start), "end": lsp_position(sources, path, rng.end)}


def lsp_diagnostic(diag: Diagnostic, sources: SourceLines) -> dict:
    fix = None
    if diag.fix is not None:
        fix = {
            "applicability": diag.fix.applicability,
            "edits": [{"range": lsp_range(sources, diag.path, edit.range), "newText": edit.content}
                      for edit in diag.fix.edits],
        }
    return {
        "range": lsp_range(sources, diag.path, diag.range),
        "severity": _SEVERITY[diag.severity],
        "code": diag.code,
        "codeDescription": {"href": rule_url(diag.code, diag.name)},
        "source": "tlint",
        "message": printable(diag.message),
        "data": {"fix": fix},
    }


def render(report: OutputReport, stream: TextIO) -> None:
    by_path: dict[str, list[Diagnostic]] = {}
    for diag in report.diagnostics:
        by_path.setdefault(diag.path, []).append(diag)
    for path in sorted(set(report.files) | set(by_path)):
        payload = {"uri": file_uri(path),
                   "diagnostics": [lsp_diagnostic(d, report.sources) for d in by_path.get(path, [])]}
        stream.write(json.dumps(payload, ensure_ascii=False) + "\n")
