"""`tlint check --format junit`: JUnit XML that CI test viewers read, valid against the
Jenkins xUnit plugin's JUnit schema (tests/junit-10.xsd, MIT; see
tests/JUNIT-SCHEMA-LICENSE.txt), with the same findings as the JSON output."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from tests.cliutil import REPO, SYNTAX_ERROR, main_in, make_project
from tlint.diagnostics import Diagnostic, Position, Range
from tlint.reporters import OutputReport, render

# one worker for the module: its module-scoped fixture runs once
pytestmark = pytest.mark.xdist_group("test_junit")

XSD = Path(__file__).with_name("junit-10.xsd")


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def _suite(text: str, schema: xmlschema.XMLSchema) -> ET.Element:
    schema.validate(text)
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == "tlint"
    for key in ("tests", "failures", "errors"):
        assert root.get(key) == suite.get(key)
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == len(suite)
    assert all(case.get("name") == "tlint" for case in cases)  # one test case per file
    assert len({case.get("classname") for case in cases}) == len(cases)
    tags = [{child.tag for child in case} for case in cases]
    assert int(suite.get("errors")) == sum("error" in t for t in tags)
    assert int(suite.get("failures")) == sum("failure" in t and "error" not in t for t in tags)
    assert int(suite.get("skipped")) == sum(t == {"skipped"} for t in tags)
    return suite


def _problems(case: ET.Element) -> list[ET.Element]:
    return [child for child in case if child.tag in ("failure", "error")]


def _render(diagnostics: list[Diagnostic], files: list[str]) -> str:
    stream = io.StringIO()
    render("junit", OutputReport(diagnostics, files, 0), stream)
    return stream.getvalue()


def test_demo_project_matches_the_json_output(schema, capsys, monkeypatch):
    junit = main_in(REPO, "check", "fixtures/demo", "--no-cache", "--format", "junit",
                    capsys=capsys, monkeypatch=monkeypatch)
    plain = main_in(REPO, "check", "fixtures/demo", "--no-cache", "--format", "json",
                    capsys=capsys, monkeypatch=monkeypatch)
    assert junit.returncode == plain.returncode == 1, junit.stderr
    suite, doc = _suite(junit.stdout, schema), json.loads(plain.stdout)
    cases = {case.get("classname"): case for case in suite.findall("testcase")}
    assert set(cases) == {p.relative_to(REPO).as_posix() for p in (REPO / "fixtures" / "demo").rglob("*.py")}
    failures = [(path, failure) for path, case in sorted(cases.items()) for failure in _problems(case)]
    assert len(failures) == len(doc["diagnostics"])  # one failure per finding, in the JSON's order
    for (path, failure), entry in zip(failures, doc["diagnostics"]):
        start = entry["range"]["start"]
        assert path == entry["path"]
        assert (failure.tag, failure.get("type"), failure.get("message")) == ("failure", entry["code"], entry["message"])
        assert failure.text == (f"{entry['path']}:{start['line']}:{start['column']}: {entry['code']} "
                                f"[{entry['severity']}] {entry['message']} ({entry['name']})")
    flagged = {entry["path"] for entry in doc["diagnostics"]}
    assert int(suite.get("failures")) == len(flagged)
    for path, case in cases.items():
        if path in flagged:  # every finding is also in the case's output, for one-failure viewers
            assert case.find("system-out").text.splitlines() == [f.text for f in _problems(case)]
        else:
            assert not len(case)


def test_clean_files_pass_and_parse_errors_are_errors(tmp_path, schema, capsys, monkeypatch):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "good.py": "x = 1\n", "sub/ok.py": "y = 2\n"})
    proc = main_in(tmp_path, "check", "--no-cache", "--format", "junit", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 1 and proc.stdout.isascii()
    suite = _suite(proc.stdout, schema)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "1")
    bad, good, ok = suite.findall("testcase")
    assert [c.get("classname") for c in (bad, good, ok)] == ["bad.py", "good.py", "sub/ok.py"]
    assert not len(good) and not len(ok)
    (error,) = _problems(bad)
    assert error.tag == "error" and error.get("type") == "TL001"
    assert error.text.startswith("bad.py:1:10: TL001 [error] ") and error.text.endswith(" (parse-error)")


def test_suppressed_findings_are_not_failures(tmp_path, schema, capsys, monkeypatch):
    source = "import torch\n\nx = 1  # tlint: ignore[TL999]\ntorch.autograd.set_detect_anomaly(True)  # tlint: ignore[TL313]\n"
    make_project(tmp_path, {"a.py": source})
    hidden = main_in(tmp_path, "check", "--no-cache", "--extend-select", "TL313", "--format", "junit", "a.py", capsys=capsys, monkeypatch=monkeypatch)
    assert hidden.returncode == 0, hidden.stdout + hidden.stderr
    suite = _suite(hidden.stdout, schema)
    (case,) = suite.findall("testcase")
    assert not len(case) and suite.get("failures") == "0"
    shown = main_in(tmp_path, "check", "--no-cache", "--extend-select", "TL313", "--format", "junit", "--show-suppressed", "a.py",
                    capsys=capsys, monkeypatch=monkeypatch)
    suite = _suite(shown.stdout, schema)
    (case,) = suite.findall("testcase")
    assert [child.tag for child in case] == ["skipped"] and "1 suppressed finding" in case[0].get("message")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "0", "1")


def test_everything_is_escaped(schema):
    nasty = 'a <b> & "c" \'d\'\ttab\nnewline\x00nul\x1b[31mesc\x7f del ✓ 😀 \udc80 \ufffe'
    diags = [Diagnostic("TL101", "missing-attention-mask", "error", nasty, 'we"ird <&>.py',
                        Range(Position(3, 5), Position(3, 9))),
             Diagnostic("TL101", "missing-attention-mask", "error", "again", 'we"ird <&>.py',
                        Range(Position(3, 5), Position(3, 9))),
             Diagnostic("TL003", "internal-error", "error", "rule crashed", "z.py", Range.point(1))]
    text = _render(diags, ['we"ird <&>.py', "z.py", "\x01ctl.py"])
    assert text.isascii()
    suite = _suite(text, schema)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    ctl, weird, crash = suite.findall("testcase")
    assert ctl.get("classname") == "\\x01ctl.py"
    assert weird.get("classname") == 'we"ird <&>.py'
    first, second = _problems(weird)
    # (a byte that was not UTF-8, as in a file name: `\\x80`, as every format writes it)
    visible = 'a <b> & "c" \'d\'\ttab\nnewline\\x00nul\\x1b[31mesc\x7f del ✓ 😀 \\x80 \\ufffe'
    assert first.get("message") == visible  # tab and newline survive attribute normalisation
    assert first.text == f'we"ird <&>.py:3:5: TL101 [error] {visible} (missing-attention-mask)'
    assert second.get("message") == "again"
    assert [child.tag for child in _problems(crash)] == ["error"] and crash[0].get("type") == "TL003"


def test_no_files_is_an_empty_valid_report(schema):
    suite = _suite(_render([], []), schema)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("0", "0", "0")


def test_schema_rejects_what_viewers_would_not_read(schema):
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate('<testsuite name="tlint" tests="1"><testcase name="x"/></testsuite>')  # no failures/errors
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        schema.validate('<testsuite name="t" tests="1" failures="0" errors="0"><testcase/></testsuite>')
