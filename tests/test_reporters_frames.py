"""The text format's code frames (at most two caret lines for a multi-line span; one frame
for the findings on one span), the concise format, and plurals ("1 fix", "2 fixes",
"1 probe")."""

from __future__ import annotations

import io

from tests.test_reporters import diag, rendered
from tlint.diagnostics import Edit, Fix, Position, Range
from tlint.reporters import OutputReport, SourceLines, plural, render

CALL = "out = model(\n    input_ids,\n    labels,\n    extra,\n    more,\n)\nprint(out)\n"


def frame_lines(report: OutputReport) -> list[str]:
    return rendered("text", report, color=False, quiet=True).splitlines()


def test_a_multi_line_span_has_two_caret_lines():
    report = OutputReport([diag(start=(1, 7), end=(3, 11))], ["a.py"], 0, SourceLines({"a.py": CALL}))
    assert frame_lines(report) == [
        "a.py:1:7: TL101 [error] msg (missing-attention-mask)",
        "  |",
        "1 | out = model(",
        "  |       ^^^^^^",
        "2 |     input_ids,",
        "3 |     labels,",
        "  |     ^^^^^^",
        "  = hint: tlint rule TL101",
        "",
    ]


def test_a_long_span_shows_its_first_and_last_lines():
    report = OutputReport([diag(start=(1, 7), end=(6, 2))], ["a.py"], 0, SourceLines({"a.py": CALL}))
    lines = frame_lines(report)
    assert lines[1:8] == [
        "  |",
        "1 | out = model(",
        "  |       ^^^^^^",
        "  | ...",
        "6 | )",
        "  | ^",
        "  = hint: tlint rule TL101",
    ]
    assert sum(1 for line in lines if line.strip(" |^") == "" and "^" in line) == 2


def test_a_span_ending_at_a_line_start_ends_on_the_line_before():
    report = OutputReport([diag(start=(2, 5), end=(4, 1))], ["a.py"], 0, SourceLines({"a.py": CALL}))
    assert frame_lines(report)[1:6] == [
        "  |",
        "2 |     input_ids,",
        "  |     ^^^^^^^^^^",
        "3 |     labels,",
        "  |     ^^^^^^^",
    ]


def test_two_findings_on_one_span_share_one_frame():
    same = dict(start=(7, 1), end=(7, 11))
    report = OutputReport([diag(code="TL101", severity="warning", **same),
                           diag(code="TL102", name="missing-key-padding-mask", **same),
                           diag(code="TL103", name="unused-mask-argument", start=(7, 1), end=(7, 6))],
                          ["a.py"], 0, SourceLines({"a.py": CALL}))
    assert frame_lines(report) == [
        "a.py:7:1: TL101 [warning] msg (missing-attention-mask)",
        "a.py:7:1: TL102 [error] msg (missing-key-padding-mask)",
        "  |",
        "7 | print(out)",
        "  | ^^^^^^^^^^",
        "  = hint: tlint rule TL101; tlint rule TL102",
        "",
        "a.py:7:1: TL103 [error] msg (unused-mask-argument)",
        "  |",
        "7 | print(out)",
        "  | ^^^^^",
        "  = hint: tlint rule TL103",
        "",
    ]


def test_plurals():
    assert [plural(1, "fix", "fixes"), plural(2, "fix", "fixes"), plural(0, "probe"), plural(1, "probe")] == [
        "1 fix", "2 fixes", "0 probes", "1 probe"]
    edit = Edit(Range(Position(1, 1), Position(1, 2)), "y")
    for count, expected in ((1, "1 fix available"), (2, "2 fixes available")):
        report = OutputReport([diag(start=(n, 1), end=(n, 1), fix=Fix("unsafe", (edit,))) for n in range(count)],
                              ["a.py"], 0)
        assert rendered("text", report, color=False).rstrip().endswith(
            f"{expected} with `tlint check --fix --unsafe-fixes`."), rendered("text", report, color=False)
    one = OutputReport([diag()], ["a.py"], 0)
    assert "Found 1 finding in 1 of 1 file:" in rendered("text", one, color=False)


def test_verify_summary_line_plurals():
    from tlint.verify.output import render_text

    model = {"class": "M", "factory": "m:build", "parameters": 10, "vocab_size": 5, "causal": False,
             "call": "ids", "convention": ""}
    probe = {"probe": "nan-trace", "status": "pass", "figure": 0.0, "tolerance": 0.0, "unit": "", "detail": ""}
    finding = {"code": "TL101", "path": "a.py", "range": {"start": {"line": 1, "column": 1}}, "verdict": "confirmed",
               "probe": "mask-leak", "reason": ""}
    stream = io.StringIO()
    render_text(model, [probe], [finding], stream)
    assert stream.getvalue().rstrip().splitlines()[-1] == "1 probe, 0 failed; 1 static finding, 1 confirmed"
    stream = io.StringIO()
    render_text(model, [probe, probe], [], stream)
    assert stream.getvalue().rstrip().splitlines()[-1] == "2 probes, 0 failed; 0 static findings, 0 confirmed"


def test_concise_lines():
    edit = Edit(Range(Position(1, 1), Position(1, 2)), "y")
    report = OutputReport([diag(start=(3, 4), message="two\nlines", fix=Fix("safe", (edit,))),
                           diag(path="b.py", code="TL102", start=(1, 1), fix=Fix("unsafe", (edit,)))],
                          ["a.py", "b.py", "c.py"], 0, hidden_suppressed=1)
    out = io.StringIO()
    render("concise", report, out)
    assert out.getvalue().splitlines() == [
        "a.py:3:4: TL101 two lines [*]",
        "b.py:1:1: TL102 msg",
        "Found 2 findings in 2 of 3 files (1 suppressed); 1 fixable with --fix.",
    ]
    quiet = io.StringIO()
    render("concise", report, quiet, quiet=True)
    assert quiet.getvalue() == "a.py:3:4: TL101 two lines [*]\nb.py:1:1: TL102 msg\n"
    empty = io.StringIO()
    render("concise", OutputReport([], ["a.py"], 0), empty)
    assert empty.getvalue() == "No findings in 1 file.\n"
