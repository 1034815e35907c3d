"""`--format junit`: a JUnit XML report for CI test viewers (GitLab, Jenkins, GitHub test
reporters): `<testsuites>` around one `<testsuite name="tlint">`, one `<testcase>` per
linted file, one `<failure>` per finding (issue 10's layout).

Each linted file is a test case `<testcase classname="PATH" name="tlint">`: it passes when
the file has no finding; otherwise it holds a `<failure type="CODE" message="the message">`
per finding, whose text is `path:line:col: CODE [severity] message (name)`, in source
order. Parse errors (TL001) and internal errors (TL003) are `<error>`s. Some viewers show
only the first failure of a test case, so the case's `<system-out>` lists every finding of
the file too. Suppressed findings (shown only with --show-suppressed) are never failures: a
file whose findings are all suppressed is `<skipped>`. The totals count test cases, as
JUnit does: `tests` (files), `failures` (files with failures), `errors` (files with
errors, which take precedence), `skipped`.

The document is ASCII: other characters are character references, and characters XML 1.0
cannot carry at all (control characters, lone surrogates) are written as `\\xNN`/`\\uNNNN`
escapes. Times are 0, so the output is byte-identical between runs."""

from __future__ import annotations

import re
from typing import TextIO

from tlint.diagnostics import Diagnostic
from tlint.encoding import printable
from tlint.reporters import OutputReport

ERROR_CODES = frozenset({"TL001", "TL003"})
# Not allowed in XML 1.0, even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(value: str, *, attribute: bool = False) -> str:
    """`value` as XML 1.0 character data (or a double-quoted attribute value)."""
    value = _NOT_XML.sub(lambda m: _visible(m.group()), value)
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if attribute:  # keep whitespace through attribute-value normalisation
        value = value.replace('"', "&quot;").replace("\t", "&#9;").replace("\n", "&#10;").replace("\r", "&#13;")
    else:
        value = value.replace("\r", "&#13;")
    return value.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _attributes(**values: object) -> str:
    return "".join(f' {key}="{escape(str(value), attribute=True)}"' for key, value in values.items())


def finding_text(diag: Diagnostic) -> str:
    return (f"{printable(diag.path)}:{diag.where()}: {diag.code} [{diag.severity}] "
            f"{printable(diag.message)} ({diag.name})")


def render(report: OutputReport, stream: TextIO) -> None:
    by_path: dict[str, list[Diagnostic]] = {path: [] for path in report.files}
    for diag in report.diagnostics:
        by_path.setdefault(diag.path, []).append(diag)
    cases: list[str] = []
    counts = {"failure": 0, "error": 0, "skipped": 0}
    for path in sorted(by_path):
        findings = by_path[path]
        opening = f"    <testcase{_attributes(classname=printable(path), name='tlint', time='0')}"
        if not findings:
            cases.append(f"{opening}/>\n")
            continue
        shown = [d for d in findings if not d.suppressed]
        if not shown:
            counts["skipped"] += 1
            what = f"{len(findings)} suppressed finding{'' if len(findings) == 1 else 's'}"
            cases.append(f"{opening}>\n      <skipped{_attributes(message=what)}/>\n    </testcase>\n")
            continue
        counts["error" if any(d.code in ERROR_CODES for d in shown) else "failure"] += 1
        lines = [f"{opening}>\n"]
        for diag in shown:
            tag = "error" if diag.code in ERROR_CODES else "failure"
            lines.append(f"      <{tag}{_attributes(type=diag.code, message=printable(diag.message))}>"
                         f"{escape(finding_text(diag))}</{tag}>\n")
        listing = "\n".join(finding_text(d) + (" [suppressed]" if d.suppressed else "") for d in findings)
        lines.append(f"      <system-out>{escape(listing)}</system-out>\n    </testcase>\n")
        cases.append("".join(lines))
    totals = {"tests": len(cases), "failures": counts["failure"], "errors": counts["error"]}
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(f"<testsuites{_attributes(name='tlint', **totals, time='0')}>\n")
    stream.write(f"  <testsuite{_attributes(name='tlint', **totals, skipped=counts['skipped'], time='0')}>\n")
    stream.writelines(cases)
    stream.write("  </testsuite>\n</testsuites>\n")
