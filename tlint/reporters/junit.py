"""`--format junit`: a JUnit XML report for CI test viewers (GitLab, Jenkins, GitHub test
reporters), in the subset they all read: `<testsuites>` around one `<testsuite name="tlint">`
of `<testcase>` elements, each with at most one `<failure>`, `<error>` or `<skipped>`.

Each linted file is a test: a file without findings is one passing `<testcase
classname="PATH" name="tlint">`. A file's findings are one `<testcase classname="PATH">`
each (viewers keep only the first `<failure>` of a test case, and merge test cases of the
same name, so each finding is its own, named after its code and position), holding a
`<failure type="CODE" message="the message">` whose text is
`path:line:col: CODE [severity] message (name)`. Parse errors (TL001) and internal errors
(TL003) are `<error>`s. Suppressed findings (shown only with --show-suppressed) are
`<skipped>`, never failures. The totals are the attributes `tests`, `failures`, `errors`
and `skipped`.

The document is ASCII: other characters are character references, and characters XML 1.0
cannot carry at all (control characters, lone surrogates) are written as `\\xNN`/`\\uNNNN`
escapes. Times are 0, so the output is byte-identical between runs."""

from __future__ import annotations

import re
from typing import TextIO

from tlint.diagnostics import Diagnostic
from tlint.reporters import Report

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
    start = diag.range.start
    return f"{diag.path}:{start.line}:{start.column}: {diag.code} [{diag.severity}] {diag.message} ({diag.name})"


def _outcome(diag: Diagnostic) -> str:
    if diag.suppressed:
        return "skipped"
    return "error" if diag.code in ERROR_CODES else "failure"


def _case_name(diag: Diagnostic) -> str:
    start = diag.range.start
    return f"{diag.code} {diag.name} at {start.line}:{start.column}"


def render(report: Report, stream: TextIO) -> None:
    by_path: dict[str, list[Diagnostic]] = {path: [] for path in report.files}
    for diag in report.diagnostics:
        by_path.setdefault(diag.path, []).append(diag)
    cases: list[str] = []
    counts = {"failure": 0, "error": 0, "skipped": 0}
    for path in sorted(by_path):
        findings = by_path[path]
        if not findings:
            cases.append(f"    <testcase{_attributes(classname=path, name='tlint', time='0')}/>\n")
            continue
        seen: dict[str, int] = {}
        for diag in findings:
            name = _case_name(diag)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # two findings of one code at one position: keep the names unique
                name = f"{name} ({seen[name]})"
            outcome = _outcome(diag)
            counts[outcome] += 1
            if outcome == "skipped":
                child = f"<skipped{_attributes(message=f'suppressed: {diag.message}')}/>"
            else:
                child = (f"<{outcome}{_attributes(type=diag.code, message=diag.message)}>"
                         f"{escape(finding_text(diag))}</{outcome}>")
            cases.append(f"    <testcase{_attributes(classname=path, name=name, time='0')}>\n"
                         f"      {child}\n    </testcase>\n")
    totals = {"tests": len(cases), "failures": counts["failure"], "errors": counts["error"]}
    stream.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    stream.write(f"<testsuites{_attributes(name='tlint', **totals, time='0')}>\n")
    stream.write(f"  <testsuite{_attributes(name='tlint', **totals, skipped=counts['skipped'], time='0')}>\n")
    stream.writelines(cases)
    stream.write("  </testsuite>\n</testsuites>\n")
