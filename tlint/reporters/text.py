"""Human-readable output: each finding with a code frame, then a summary by code.

Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""

from __future__ import annotations

import os
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from tlint.diagnostics import SEVERITY_RANK, Diagnostic
from tlint.encoding import frame_safe, terminal_safe
from tlint.reporters import OutputReport, fixable_counts, plural, statistics_rows

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_FRAME_LINES = 4  # at most this many lines of a multi-line finding are shown
_TAB = "    "


def _console(stream: TextIO, color: bool | None) -> Console:
    if color is None:
        color = stream.isatty() and not os.environ.get("NO_COLOR")
    return Console(file=stream, force_terminal=color, no_color=not color, highlight=False,
                   soft_wrap=True, emoji=False, markup=False)


def render(report: OutputReport, stream: TextIO, *, color: bool | None = None, quiet: bool = False) -> None:
    """Each finding's headline, then its code frame (findings on one span share a frame);
    then, unless `quiet`, the summary, the counts per code and what --fix would do."""
    console = _console(stream, color)
    for group in _same_span(report.diagnostics):
        for diag in group:
            console.print(_headline(diag))
        frame = _frame(group, report)
        if frame is not None:
            console.print(frame)
        console.print()
    if quiet:
        return
    console.print(_summary(report))
    if report.diagnostics:
        console.print(_table(statistics_rows(report.diagnostics), header=False))
        fixable = _fixable(report.diagnostics)
        if fixable:
            console.print(Text(fixable, style="cyan"))


def _same_span(diagnostics: list[Diagnostic]) -> list[list[Diagnostic]]:
    """The findings grouped by (path, range), in the order of each group's first finding:
    two findings on one span are printed with one code frame."""
    groups: dict[tuple, list[Diagnostic]] = {}
    for diag in diagnostics:
        groups.setdefault((diag.path, diag.cell, diag.range), []).append(diag)
    return list(groups.values())


def _fixable(diagnostics) -> str:
    """"[*] 2 fixable with `tlint check --fix` (1 more with --unsafe-fixes)." or ""."""
    safe = sum(1 for d in diagnostics if d.fix is not None and not d.suppressed and d.fix.applicability == "safe")
    unsafe = sum(1 for d in diagnostics if d.fix is not None and not d.suppressed and d.fix.applicability != "safe")
    if not safe and not unsafe:
        return ""
    if not safe:
        return f"{plural(unsafe, 'fix', 'fixes')} available with `tlint check --fix --unsafe-fixes`."
    more = f" ({unsafe} more with --unsafe-fixes)" if unsafe else ""
    return f"[*] {safe} fixable with `tlint check --fix`{more}."


def render_statistics(report: OutputReport, stream: TextIO, *, color: bool | None = None, quiet: bool = False) -> None:
    console = _console(stream, color)
    console.print(_table(statistics_rows(report.diagnostics), header=True, fixable=fixable_counts(report.diagnostics)))


def _headline(diag: Diagnostic) -> Text:
    text = Text()
    text.append(f"{terminal_safe(diag.path)}:{diag.where()}:", style="bold")
    text.append(" ")
    text.append(diag.code, style=_SEVERITY_STYLE[diag.severity])
    text.append(f" [{diag.severity}] ")
    text.append(terminal_safe(diag.message, keep_newlines=True))
    text.append(f" ({diag.name})", style="dim")
    if diag.fix is not None and not diag.suppressed:
        text.append(" [*]" if diag.fix.applicability == "safe" else " [unsafe fix]", style="cyan")
    if diag.suppressed:
        text.append(" [suppressed]", style="dim")
    return text


def _frame(group: list[Diagnostic], report: OutputReport) -> Text | None:
    """The flagged lines of one span, underlined: a span on one line gets one caret line; a
    multi-line span gets two, from its start to the end of its first line and from the
    indentation of its last line to its end (the lines between are shown without carets,
    at most `_FRAME_LINES` - 2 of them, else `...`). In a notebook, the lines and their
    numbers are the finding's cell's."""
    diag = group[0]
    cell = diag.cell  # a notebook's finding: the lines of its cell
    start, end = diag.range.start, diag.range.end
    last_line, end_column = end.line, end.column
    if last_line > start.line and end_column <= 1:  # the span ends where a line starts: the line before
        previous = report.sources.line(diag.path, last_line - 1, cell)
        if previous is not None:
            last_line, end_column = last_line - 1, len(previous.rstrip()) + 1
    first_text = report.sources.line(diag.path, start.line, cell)
    if first_text is None:
        return None
    style = _SEVERITY_STYLE[max((d.severity for d in group), key=lambda sev: SEVERITY_RANK[sev])]
    rows: list[tuple[int | None, str | None, tuple[int, int] | None]] = []  # (line number, text, caret span)
    if last_line == start.line:
        rows.append((start.line, first_text, (start.column - 1, end_column - 1)))
    else:
        rows.append((start.line, first_text, (start.column - 1, len(first_text.rstrip()))))
        middle = range(start.line + 1, last_line)
        if len(middle) <= _FRAME_LINES - 2:
            rows += [(n, text, None) for n in middle if (text := report.sources.line(diag.path, n, cell)) is not None]
        else:
            rows.append((None, None, None))
        last_text = report.sources.line(diag.path, last_line, cell)
        if last_text is not None:
            indent = len(last_text) - len(last_text.lstrip())
            rows.append((last_line, last_text, (indent, end_column - 1)))
    gutter = len(str(max(n for n, _, _ in rows if n is not None)))
    frame = Text()
    frame.append(f"{'':>{gutter}} |\n", style="blue")
    for lineno, line, caret in rows:
        if lineno is None or line is None:
            frame.append(f"{'':>{gutter}} | ...\n", style="blue")
            continue
        frame.append(f"{lineno:>{gutter}} | ", style="blue")
        line = frame_safe(line)  # one character for one: the caret columns stay
        frame.append(line.replace("\t", _TAB) + "\n")
        if caret is not None:
            first, stop = caret
            pad = cell_len(line[:first].replace("\t", _TAB))
            width = max(1, cell_len(line[first:stop].replace("\t", _TAB)))
            frame.append(f"{'':>{gutter}} | ", style="blue")
            frame.append(" " * pad + "^" * width + "\n", style=style)
    hints = "; ".join(f"tlint rule {code}" for code in dict.fromkeys(d.code for d in group))
    frame.append(f"{'':>{gutter}} = hint: {hints}", style="dim")
    return frame


def _summary(report: OutputReport) -> Text:
    checked = plural(len(report.files), "file")
    hidden = report.hidden_suppressed
    note = f" ({hidden} suppressed, --show-suppressed shows them)" if hidden else ""
    if not report.diagnostics:
        return Text(f"No findings in {checked}{note}.", style="bold green")
    files = len({d.path for d in report.diagnostics})
    return Text(f"Found {plural(len(report.diagnostics), 'finding')} in {files} of {checked}{note}:", style="bold")


def _table(rows: list[tuple[str, str, str, int]], *, header: bool, fixable: dict[str, int] | None = None) -> Text:
    """Counts per code; with `fixable` (--statistics), a column of how many have a safe fix."""
    all_rows = [("count", "fixable", "code", "name", "severity")] if header else []
    all_rows += [(str(n), str(fixable.get(code, 0)) if fixable is not None else "", code, name, sev)
                 for code, name, sev, n in rows]
    if not all_rows:
        return Text("No findings.")
    widths = [max(len(row[i]) for row in all_rows) for i in range(5)]
    lines = []
    for count, fixes, code, name, sev in all_rows:
        fixes_column = f"  {fixes:>{widths[1]}}" if fixable is not None else ""
        lines.append(f"  {count:>{widths[0]}}{fixes_column}  {code:<{widths[2]}}  {name:<{widths[3]}}  {sev}")
    return Text("\n".join(lines))
