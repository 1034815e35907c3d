"""`--format github`: GitHub Actions workflow commands, one annotation per finding.

A notebook's finding is an annotation of the file (no `line`: GitHub would count the
lines of the notebook's JSON) whose message starts with `cell N, line L, column C:`.

Escaping follows the Actions runner: `%`, CR and LF in the message; those and `:` and `,`
in property values. A file name's bytes that are not UTF-8, and control characters in names
and messages (the log viewer would act on ESC), are written as escapes (`\\xNN`)."""

from __future__ import annotations

from typing import TextIO

from tlint.encoding import terminal_safe
from tlint.reporters import OutputReport

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(report: OutputReport, stream: TextIO) -> None:
    for diag in report.diagnostics:
        start, end = diag.range.start, diag.range.end
        props: dict[str, object] = {"file": terminal_safe(diag.path)}
        message = terminal_safe(diag.message, keep_newlines=True)
        if diag.cell is None:
            props.update({"line": start.line, "col": start.column, "endLine": end.line, "endColumn": end.column})
        else:  # a notebook: GitHub's lines would be the JSON's; the cell's position goes in the message
            message = f"{diag.where()}: {message}"
        props["title"] = f"{diag.code} {diag.name}"
        joined = ",".join(f"{key}={escape_property(str(value))}" for key, value in props.items())
        stream.write(f"::{_LEVEL[diag.severity]} {joined}::{escape_data(message)}\n")
