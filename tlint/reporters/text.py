"""Human-readable output: each finding with a code frame, then a summary by code.

Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""

from __future__ import annotations

import os
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from tlint.diagnostics import Diagnostic
from tlint.reporters import OutputReport, statistics_rows

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_FRAME_LINES = 4  # at most this many lines of a multi-line finding are shown
_TAB = "    "


def _console(stream: TextIO, color: bool | None) -> Console:
    if color is None:
        color = stream.isatty() and not os.environ.get("NO_COLOR")
    return Console(file=stream, force_terminal=color, no_color=not color, highlight=False,
                   soft_wrap=True, emoji=False, markup=False)


def render(report: OutputReport, stream: TextIO, *, color: bool | None = None) -> None:
    console = _console(stream, color)
    for diag in report.diagnostics:
        console.print(_headline(diag))
        frame = _frame(diag, report)
        if frame is not None:
            console.print(frame)
        console.print()
    console.print(_summary(report))
    if report.diagnostics:
        console.print(_table(statistics_rows(report.diagnostics), header=False))
        fixable = _fixable(report.diagnostics)
        if fixable:
            console.print(Text(fixable, style="cyan"))


def _fixable(diagnostics) -> str:
    """"[*] 2 fixable with `tlint check --fix` (1 more with --unsafe-fixes)." or ""."""
    safe = sum(1 for d in diagnostics if d.fix is not None and not d.suppressed and d.fix.applicability == "safe")
    unsafe = sum(1 for d in diagnostics if d.fix is not None and not d.suppressed and d.fix.applicability != "safe")
    if not safe and not unsafe:
        return ""
    if not safe:
        return f"{_plural(unsafe, 'fix')} available with `tlint check --fix --unsafe-fixes`."
    more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
    return f"[*] {safe} fixable with `tlint check --fix`{more}."


def render_statistics(report: OutputReport, stream: TextIO, *, color: bool | None = None) -> None:
    console = _console(stream, color)
    console.print(_table(statistics_rows(report.diagnostics), header=True))


def _headline(diag: Diagnostic) -> Text:
    start = diag.range.start
    text = Text()
    text.append(f"{diag.path}:{start.line}:{start.column}:", style="bold")
    text.append(" ")
    text.append(diag.code, style=_SEVERITY_STYLE[diag.severity])
    text.append(f" [{diag.severity}] ")
    text.append(diag.message)
    text.append(f" ({diag.name})", style="dim")
    if diag.fix is not None and not diag.suppressed:
        text.append(" [*]" if diag.fix.applicability == "safe" else " [unsafe fix]", style="cyan")
    if diag.suppressed:
        text.append(" [suppressed]", style="dim")
    return text


def _frame(diag: Diagnostic, report: OutputReport) -> Text | None:
    """The flagged lines, each underlined where the finding's range covers it."""
    start, end = diag.range.start, diag.range.end
    last = min(end.line, start.line + _FRAME_LINES - 1)
    numbered = [(n, report.sources.line(diag.path, n)) for n in range(start.line, last + 1)]
    lines = [(n, line) for n, line in numbered if line is not None]
    if not lines:
        return None
    gutter = len(str(lines[-1][0]))
    frame = Text()
    frame.append(f"{'':>{gutter}} |\n", style="blue")
    for lineno, line in lines:
        first = start.column - 1 if lineno == start.line else len(line) - len(line.lstrip())
        stop = end.column - 1 if lineno == end.line else len(line.rstrip())
        frame.append(f"{lineno:>{gutter}} | ", style="blue")
        frame.append(line.replace("\t", _TAB) + "\n")
        pad = cell_len(line[:first].replace("\t", _TAB))
        width = max(1, cell_len(line[first:stop].replace("\t", _TAB)))
        frame.append(f"{'':>{gutter}} | ", style="blue")
        frame.append(" " * pad + "^" * width + "\n", style=_SEVERITY_STYLE[diag.severity])
    if end.line > last:
        frame.append(f"{'':>{gutter}} | ...\n", style="blue")
    frame.append(f"{'':>{gutter}} = hint: tlint rule {diag.code}", style="dim")
    return frame


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _summary(report: OutputReport) -> Text:
    checked = _plural(len(report.files), "file")
    hidden = report.hidden_suppressed
    note = f" ({hidden} suppressed, --show-suppressed shows them)" if hidden else ""
    if not report.diagnostics:
        return Text(f"No findings in {checked}{note}.", style="bold green")
    files = len({d.path for d in report.diagnostics})
    return Text(f"Found {_plural(len(report.diagnostics), 'finding')} in {files} of {checked}{note}:", style="bold")


def _table(rows: list[tuple[str, str, str, int]], *, header: bool) -> Text:
    all_rows = [("count", "code", "name", "severity")] if header else []
    all_rows += [(str(n), code, name, sev) for code, name, sev, n in rows]
    if not all_rows:
        return Text("No findings.")
    widths = [max(len(row[i]) for row in all_rows) for i in range(4)]
    lines = [
        f"  {count:>{widths[0]}}  {code:<{widths[1]}}  {name:<{widths[2]}}  {sev}"
        for count, code, name, sev in all_rows
    ]
    return Text("\n".join(lines))
