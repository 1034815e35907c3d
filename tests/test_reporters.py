"""Output formats: the JSON schema, LSP's 0-based UTF-16 positions, GitHub escaping, text."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from tests.cliutil import REPO, SYNTAX_ERROR, make_project, run_tlint
from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range
from tlint.reporters import OutputReport, SourceLines, render, statistics_rows
from tlint.reporters.github import escape_data, escape_property
from tlint.reporters.lsp import utf16_character

SCHEMA = json.loads((Path(__file__).parent / "tlint-output.schema.json").read_text(encoding="utf-8"))


def diag(code="TL101", name="missing-attention-mask", severity="error", message="msg", path="a.py",
         start=(1, 1), end=(1, 1), fix=None) -> Diagnostic:
    return Diagnostic(code, name, severity, message, path, Range(Position(*start), Position(*end)), fix)


def rendered(fmt: str, report: OutputReport, **kwargs) -> str:
    stream = io.StringIO()
    if kwargs:
        from importlib import import_module

        import_module(f"tlint.reporters.{fmt}").render(report, stream, **kwargs)
    else:
        render(fmt, report, stream)
    return stream.getvalue()


# --- json -------------------------------------------------------------------------------


def test_json_matches_the_schema(tmp_path):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "good.py": "x = 1\n"})
    proc = run_tlint("--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["summary"] == {"files": 2, "diagnostics": 1, "by_code": {"TL001": 1}, "parse_errors": 1}
    (entry,) = doc["diagnostics"]
    assert entry["range"] == {"start": {"line": 1, "column": 10}, "end": {"line": 1, "column": 10}}
    assert entry["fix"] is None
    assert entry["url"].endswith("/rules/TL001-parse-error.md")


def test_json_of_the_demo_project_matches_the_schema():
    proc = run_tlint("check", "fixtures/demo", "--format", "json", cwd=REPO)
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert proc.returncode == (1 if doc["diagnostics"] else 0)
    assert doc["summary"]["diagnostics"] == len(doc["diagnostics"])


def test_json_fix_shape_matches_the_schema():
    fix = Fix("unsafe", (Edit(Range(Position(2, 1), Position(2, 7)), "y"),))
    report = OutputReport([diag(fix=fix)], ["a.py"], 0)
    doc = json.loads(rendered("json", report))
    jsonschema.validate(doc, SCHEMA)
    assert doc["diagnostics"][0]["fix"] == {"applicability": "unsafe", "edits": [
        {"range": {"start": {"line": 2, "column": 1}, "end": {"line": 2, "column": 7}}, "content": "y"}]}


# --- lsp --------------------------------------------------------------------------------


def test_lsp_positions_are_zero_based_utf16(tmp_path):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "good.py": "x = 1\n"})
    proc = run_tlint("--format", "lsp", ".", cwd=tmp_path)
    assert proc.returncode == 1
    payloads = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [p["uri"] for p in payloads] == [(tmp_path / "bad.py").as_uri(), (tmp_path / "good.py").as_uri()]
    assert payloads[1]["diagnostics"] == []  # clean files too, so editors clear old ones
    (found,) = payloads[0]["diagnostics"]
    # `x = "😀" +` then the error: code-point column 10 (1-based) is 9 code points in,
    # and the emoji is 2 UTF-16 units, so the LSP character is 10.
    assert found["range"] == {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 10}}
    assert found["severity"] == 1
    assert found["code"] == "TL001" and found["source"] == "tlint"
    assert found["codeDescription"]["href"].endswith("/rules/TL001-parse-error.md")
    assert found["data"] == {"fix": None}


def test_utf16_character():
    assert utf16_character("abc", 1) == 0
    assert utf16_character("😀😀x", 3) == 4
    assert utf16_character("éé x", 4) == 3  # BMP characters are one unit
    assert utf16_character("ab", 5) == 4  # past the end of the line: counted as is
    assert utf16_character(None, 7) == 6


def test_lsp_severities_and_fix_edits_in_lsp_coordinates():
    source = 'a = "😀"; b = 1\nc = 2\n'
    fix = Fix("safe", (Edit(Range(Position(1, 10), Position(1, 15)), "b = 2"),))
    report = OutputReport(
        [diag(severity="warning", start=(1, 10), end=(1, 15), fix=fix),
         diag(code="TL002", name="unused-suppression", severity="info", start=(2, 1), end=(2, 6))],
        ["a.py"], 0, SourceLines({"a.py": source}))
    (payload,) = [json.loads(line) for line in rendered("lsp", report).splitlines()]
    first, second = payload["diagnostics"]
    assert first["severity"] == 2 and second["severity"] == 3
    assert first["range"] == {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 15}}
    assert first["data"]["fix"] == {"applicability": "safe", "edits": [
        {"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 15}}, "newText": "b = 2"}]}
    assert second["range"]["start"] == {"line": 1, "character": 0}


# --- github -----------------------------------------------------------------------------


def test_github_annotations(tmp_path):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR})
    proc = run_tlint("--format", "github", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == (
        "::error file=bad.py,line=1,col=10,endLine=1,endColumn=10,title=TL001 parse-error::"
        "syntax error: invalid syntax\n")


def test_github_escaping_and_levels():
    assert escape_data("100% sure\r\nnext") == "100%25 sure%0D%0Anext"
    assert escape_property("dir,a:b/x%.py") == "dir%2Ca%3Ab/x%25.py"
    report = OutputReport(
        [diag(severity="warning", message="50%\nof it", path="we,ird:dir/a.py", start=(3, 2), end=(4, 6)),
         diag(code="TL002", name="unused-suppression", severity="info", path="b.py")],
        ["we,ird:dir/a.py", "b.py"], 0)
    assert rendered("github", report).splitlines() == [
        "::warning file=we%2Cird%3Adir/a.py,line=3,col=2,endLine=4,endColumn=6,"
        "title=TL101 missing-attention-mask::50%25%0Aof it",
        "::notice file=b.py,line=1,col=1,endLine=1,endColumn=1,title=TL002 unused-suppression::msg",
    ]


# --- text -------------------------------------------------------------------------------


def test_text_frame_underlines_the_range():
    source = "def f(model, ids):\n\tout = model(input_ids=ids)\n    return out\n"
    report = OutputReport([diag(path="a.py", start=(2, 8), end=(2, 28), message="no mask")], ["a.py", "b.py"], 0,
                    SourceLines({"a.py": source}))
    assert rendered("text", report, color=False).splitlines() == [
        "a.py:2:8: TL101 [error] no mask (missing-attention-mask)",
        "  |",
        "2 |     out = model(input_ids=ids)",
        "  |           ^^^^^^^^^^^^^^^^^^^^",
        "  = hint: tlint rule TL101",
        "",
        "Found 1 finding in 1 of 2 files:",
        "  1  TL101  missing-attention-mask  error",
    ]


def test_text_frame_of_a_multi_line_range_and_wide_characters():
    source = 'x = f("😀",\n      2,\n      3)\n'
    report = OutputReport([diag(start=(1, 9), end=(3, 8))], ["a.py"], 0, SourceLines({"a.py": source}))
    lines = rendered("text", report, color=False).splitlines()
    assert lines[1:8] == [  # a multi-line span: two caret lines, its first and its last
        "  |",
        '1 | x = f("😀",',
        "  |          ^^",  # after the emoji, which takes two cells
        "2 |       2,",
        "3 |       3)",
        "  |       ^",
        "  = hint: tlint rule TL101",
    ]


def test_text_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    report = OutputReport([diag()], ["a.py"], 0, SourceLines({"a.py": "model(input_ids=x)\n"}))
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    coloured = Terminal()
    render("text", report, coloured)
    assert "\x1b[" in coloured.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    render("text", report, plain)
    assert "\x1b[" not in plain.getvalue()
    assert plain.getvalue() == rendered("text", report, color=False)


def test_text_with_no_findings():
    assert rendered("text", OutputReport([], ["a.py", "b.py"], 0), color=False) == "No findings in 2 files.\n"


def test_text_marks_fixable_findings_and_counts_them():
    edit = Edit(Range(Position(1, 1), Position(1, 2)), "y")
    report = OutputReport([diag(fix=Fix("safe", (edit,))), diag(start=(2, 1), end=(2, 1), fix=Fix("unsafe", (edit,))),
                     diag(start=(3, 1), end=(3, 1))], ["a.py"], 0)
    out = rendered("text", report, color=False)
    headlines = [line for line in out.splitlines() if line.startswith("a.py:")]
    assert headlines[0].endswith("(missing-attention-mask) [*]")
    assert headlines[1].endswith("(missing-attention-mask) [unsafe fix]")
    assert headlines[2].endswith("(missing-attention-mask)")
    assert out.rstrip().endswith("[*] 1 fixable with `tlint check --fix` (1 more with --unsafe-fixes).")


def test_statistics_rows_most_frequent_first():
    rows = statistics_rows([diag(), diag(code="TL201", name="x", severity="warning"),
                            diag(code="TL201", name="x", severity="warning")])
    assert rows == [("TL201", "x", "warning", 2), ("TL101", "missing-attention-mask", "error", 1)]


@pytest.mark.parametrize("fmt", ["text", "json", "github", "lsp"])
def test_every_format_handles_an_unreadable_source(fmt):
    report = OutputReport([diag(path="gone.py", start=(3, 4), end=(3, 9))], ["gone.py"], 0)
    assert rendered(fmt, report)
