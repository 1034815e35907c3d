"""`--format lsp`: JSON Lines of LSP `publishDiagnostics` params, one per linted file
(files without findings too, so an editor clears stale ones). Positions are 0-based lines
and UTF-16 code units, computed from each line's text. In a notebook, positions are within
one cell (a notebook cell is its own text document in an editor), named by `data.cell` (and
each fix edit's `cell`): 1-based, over all the notebook's cells."""

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
    return len(head.encode("utf-16-le", "surrogatepass")) // 2 + max(0, index - len(line))  # a lone surrogate: one unit


def lsp_position(sources: SourceLines, path: str, position: Position, cell: int | None = None) -> dict[str, int]:
    line = sources.line(path, position.line, cell)
    return {"line": position.line - 1, "character": utf16_character(line, position.column)}


def lsp_range(sources: SourceLines, path: str, rng: Range, cell: int | None = None) -> dict:
    return {"start": lsp_position(sources, path, rng.start, cell), "end": lsp_position(sources, path, rng.end, cell)}


def lsp_diagnostic(diag: Diagnostic, sources: SourceLines) -> dict:
    fix = None
    if diag.fix is not None:
        fix = {
            "applicability": diag.fix.applicability,
            "edits": [{"range": lsp_range(sources, diag.path, edit.range, edit.cell), "newText": edit.content,
                       **({"cell": edit.cell} if edit.cell is not None else {})}
                      for edit in diag.fix.edits],
        }
    data: dict = {"fix": fix}
    if diag.cell is not None:
        data["cell"] = diag.cell
    return {
        "range": lsp_range(sources, diag.path, diag.range, diag.cell),
        "severity": _SEVERITY[diag.severity],
        "code": diag.code,
        "codeDescription": {"href": rule_url(diag.code, diag.name)},
        "source": "tlint",
        "message": printable(diag.message),
        "data": data,
    }


def render(report: OutputReport, stream: TextIO) -> None:
    by_path: dict[str, list[Diagnostic]] = {}
    for diag in report.diagnostics:
        by_path.setdefault(diag.path, []).append(diag)
    for path in sorted(set(report.files) | set(by_path)):
        payload = {"uri": file_uri(path),
                   "diagnostics": [lsp_diagnostic(d, report.sources) for d in by_path.get(path, [])]}
        stream.write(json.dumps(payload, ensure_ascii=False) + "\n")
