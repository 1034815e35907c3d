"""`--output-format concise`: one line a finding, `path:line:col: CODE message` (Ruff's
concise format; what editors' problem matchers and pre-commit read), then one summary line.
In a notebook: `path:cell N, line L, column C: CODE message`.

No code frame, no colour, no rich: the same bytes on a terminal and in a pipe."""

from __future__ import annotations

from typing import TextIO

from tlint.encoding import terminal_safe
from tlint.reporters import OutputReport, plural

# A concise line has at most this many characters: a longer message is shortened at a
# clause ("; ", ": ", ", ") or a word and ends with "…" (the text and JSON formats keep it
# whole). A path longer than the line is kept whole, with the message cut to "…".
MAX_LINE = 200
_BREAKS = ("; ", ": ", ", ", " ")


def line(diag) -> str:
    """`path:line:col: CODE message`, with ` [*]` for a safe fix (as in the text format) and
    ` [suppressed]` for a finding shown by --show-suppressed. A message is one line: a line
    break in it is written as a space. A file name's bytes that are not UTF-8, and control
    characters in names and messages: escapes (`\\xNN`, `tlint.encoding.terminal_safe`).
    At most `MAX_LINE` characters (`bounded`)."""
    message = " ".join(diag.message.split("\n")) if "\n" in diag.message else diag.message
    marks = ""
    if diag.fix is not None and not diag.suppressed and diag.fix.applicability == "safe":
        marks += " [*]"
    if diag.suppressed:
        marks += " [suppressed]"
    head = f"{terminal_safe(diag.path)}:{diag.where()}: {diag.code} "
    return head + bounded(terminal_safe(message), MAX_LINE - len(head) - len(marks)) + marks + "\n"


def bounded(message: str, room: int) -> str:
    """`message` when it has at most `room` characters; else its longest start that ends at a
    clause break (or, failing one in its second half, a word break) and fits with "…"."""
    if len(message) <= room:
        return message
    if room <= 1:
        return "…"
    limit = room - 1  # the ellipsis
    for breaks in (_BREAKS[:3], _BREAKS[3:]):
        cut = max(message.rfind(b, 0, limit + 1) for b in breaks)
        if cut >= limit // 2:
            return message[:cut].rstrip(" ,;:") + "…"
    return message[:limit].rstrip() + "…"


def render(report: OutputReport, stream: TextIO, *, quiet: bool = False) -> None:
    for diag in report.diagnostics:
        stream.write(line(diag))
    if not quiet:
        stream.write(summary(report) + "\n")


def summary(report: OutputReport) -> str:
    checked = plural(len(report.files), "file")
    hidden = f" ({report.hidden_suppressed} suppressed)" if report.hidden_suppressed else ""
    if not report.diagnostics:
        return f"No findings in {checked}{hidden}."
    fixable = sum(1 for d in report.diagnostics
                  if d.fix is not None and not d.suppressed and d.fix.applicability == "safe")
    fixes = f"; {fixable} fixable with --fix" if fixable else ""
    files = len({d.path for d in report.diagnostics})
    return f"Found {plural(len(report.diagnostics), 'finding')} in {files} of {checked}{hidden}{fixes}."
