"""Reporters: one module per output format, each a `render(report, stream)`.

They are imported lazily (the JSON, concise and GitHub formats never load rich). The formats:
text, concise, json, github, lsp, sarif, junit (`tlint check --output-format`; each is
`tlint.reporters.<name>`, listed in `FORMATS`)."""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

from tlint.diagnostics import SEVERITY_RANK, Diagnostic

_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceLines:
    """The lines of each reported file, read once, for code frames and UTF-16 columns.
    Standard input is passed in, under its display name. In a notebook, lines are a
    cell's (`cell`: its number, as `Diagnostic.cell`). A file named in `unread` (its
    analysis could not read it: not a regular file, too large) is never opened; any other
    is read through `tlint.bounded`, as the analysis read it (a file that became a FIFO or
    grew since gives no frame)."""

    def __init__(self, texts: dict[str, str] | None = None, unread: Iterable[str] = ()) -> None:
        self._texts: dict[str, str | None] = dict(texts or {})
        for path in unread:
            self._texts.setdefault(path, None)
        self._lines: dict[tuple[str, int | None], list[str] | None] = {}
        self._cells: dict[str, list[str | None]] = {}  # a notebook's cells, parsed once

    def _text(self, path: str) -> str | None:
        if path not in self._texts:
            from tlint.bounded import read_bytes, source_limit
            from tlint.encoding import decode_source

            try:
                self._texts[path] = decode_source(read_bytes(path, source_limit(path)))
            except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
                self._texts[path] = None
        return self._texts[path]

    def lines(self, path: str, cell: int | None = None) -> list[str] | None:
        key = (path, cell)
        if key not in self._lines:
            text = self._text(path)
            if text is None:
                self._lines[key] = None
            elif cell is None:
                self._lines[key] = _NEWLINE.split(text)
            else:
                if path not in self._cells:
                    from tlint.notebook import cell_texts

                    self._cells[path] = cell_texts(text)
                cells = self._cells[path]
                source = cells[cell - 1] if 1 <= cell <= len(cells) else None
                self._lines[key] = _NEWLINE.split(source) if source is not None else None
        return self._lines[key]

    def line(self, path: str, lineno: int, cell: int | None = None) -> str | None:
        lines = self.lines(path, cell)
        if lines is None or not 1 <= lineno <= len(lines):
            return None
        return lines[lineno - 1]


@dataclass
class OutputReport:
    """What a reporter renders: the diagnostics to show, and the run's totals (not a rule's
    `Finding`)."""

    diagnostics: list[Diagnostic]
    files: list[str]
    parse_errors: int
    sources: SourceLines = field(default_factory=SourceLines)
    hidden_suppressed: int = 0  # suppressed findings not shown (no --show-suppressed)

    def by_code(self) -> dict[str, int]:
        return dict(sorted(Counter(d.code for d in self.diagnostics).items()))


def statistics_rows(diagnostics: list[Diagnostic]) -> list[tuple[str, str, str, int]]:
    """(code, name, severity, count) per code, the most frequent first."""
    counts = Counter((d.code, d.name, d.severity) for d in diagnostics)
    return sorted(((code, name, sev, n) for (code, name, sev), n in counts.items()),
                  key=lambda row: (-row[3], row[0], -SEVERITY_RANK[row[2]]))


def fixable_counts(diagnostics: list[Diagnostic]) -> dict[str, int]:
    """Per code, how many of the (unsuppressed) findings have a safe fix: the fixable column
    of --statistics."""
    return dict(Counter(d.code for d in diagnostics
                        if d.fix is not None and not d.suppressed and d.fix.applicability == "safe"))


def plural(count: int, word: str, many: str | None = None) -> str:
    """"1 fix", "2 fixes": `many` is the plural where it is not `word` + "s"."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


FORMATS = ("text", "concise", "json", "github", "lsp", "sarif", "junit")
STATISTICS_FORMATS = ("text", "concise", "json")
_QUIET_FORMATS = ("text", "concise")  # the formats that print a summary, which --quiet drops


def render(fmt: str, report: OutputReport, stream: TextIO, *, statistics: bool = False, quiet: bool = False) -> None:
    """Write `report` in format `fmt`; with `statistics`, counts per code instead; with
    `quiet`, the findings without the summary."""
    module = importlib.import_module(f"tlint.reporters.{'text' if statistics and fmt == 'concise' else fmt}")
    kwargs = {"quiet": True} if quiet and fmt in _QUIET_FORMATS else {}
    (module.render_statistics if statistics else module.render)(report, stream, **kwargs)
