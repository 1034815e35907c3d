"""`tlint check --add-suppressions [REASON]`: every current finding gets a suppression that
tlint/suppressions.py matches, merged into the line's comment, never inside a string; the
files keep their encoding and line endings; a second run adds nothing and `tlint check`
then passes."""

from __future__ import annotations

import codecs

import pytest

from tests.cliutil import SYNTAX_ERROR, main_in, make_project
from tlint.baseline import add_suppressions
from tlint.diagnostics import Diagnostic, Position, Range
from tlint.suppressions import apply_suppressions, parse_suppressions

HEADER = "import torch\nimport torch.nn as nn\n\n\ndef setup():\n    model = nn.Transformer(d_model=512).cuda()\n" \
         "    model = model.half()\n"
# Each Adam call is TL308 (eps underflows in fp16, a warning) and TL304 (no warmup: practice,
# off by default).
ADAM = "torch.optim.Adam(model.parameters(), lr=1e-4)"
SOURCE = HEADER + f"""\
    first = {ADAM}
    second = torch.optim.Adam(model.parameters(), lr=float(\"\"\"1e-4
\"\"\"))
    third = {ADAM}  # noqa: TL101
    fourth = {ADAM}  # tlint: ignore[TL101] kept reason
    fifth = {ADAM}  # type: ignore
    return first, second, third, fourth, fifth
"""


def _check(root, *args, capsys, monkeypatch):
    return main_in(root, "check", *args, capsys=capsys, monkeypatch=monkeypatch)


def test_adds_merges_and_is_idempotent(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"a.py": SOURCE, "clean.py": "x = 1\n"})
    before = _check(tmp_path, ".", capsys=capsys, monkeypatch=monkeypatch)
    assert before.returncode == 1 and before.stdout.count("TL308") >= 5
    added = _check(tmp_path, "--add-suppressions=legacy code", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert added.returncode == 0, added.stderr
    assert "tlint: added 5 suppressions in 1 file" in added.stderr
    text = (tmp_path / "a.py").read_text(encoding="utf-8")
    assert text == HEADER + f"""\
    first = {ADAM}  # tlint: ignore[TL308] legacy code
    second = torch.optim.Adam(model.parameters(), lr=float(\"\"\"1e-4
\"\"\"))  # tlint: ignore[TL308] legacy code
    third = {ADAM}  # noqa: TL101, TL308
    fourth = {ADAM}  # tlint: ignore[TL101, TL308] kept reason
    fifth = {ADAM}  # type: ignore  # tlint: ignore[TL308] legacy code
    return first, second, third, fourth, fifth
"""
    assert (tmp_path / "clean.py").read_text(encoding="utf-8") == "x = 1\n"
    again = _check(tmp_path, "--add-suppressions", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert again.returncode == 0 and "tlint: added 0 suppressions in 0 files" in again.stderr
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == text
    after = _check(tmp_path, ".", capsys=capsys, monkeypatch=monkeypatch)
    assert after.returncode == 0, after.stdout
    assert "5 suppressed" in after.stdout


def test_parse_and_internal_errors_are_never_suppressed(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "a.py": HEADER + f"    return {ADAM}\n"})
    proc = _check(tmp_path, "--add-suppressions", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 1
    assert "tlint: added 1 suppression in 1 file" in proc.stderr
    assert "bad.py:1:10: TL001" in proc.stderr and "never suppressed" in proc.stderr
    assert (tmp_path / "bad.py").read_text(encoding="utf-8") == SYNTAX_ERROR
    assert (tmp_path / "a.py").read_text(encoding="utf-8").endswith("  # tlint: ignore[TL308]\n")


def test_practice_rules_are_suppressed_only_when_selected(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"a.py": HEADER + f"    return {ADAM}\n"})
    proc = _check(tmp_path, "--add-suppressions", "--extend-select", "practice", ".", capsys=capsys,
                  monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.py").read_text(encoding="utf-8").endswith("  # tlint: ignore[TL304, TL308]\n")
    # the default set does not run TL304: its suppression is not unused (no TL002)
    unused = _check(tmp_path, "--extend-select", "TL002", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert unused.returncode == 0 and "TL002" not in unused.stdout


def test_encoding_bom_and_line_endings_are_kept(tmp_path, capsys, monkeypatch):
    latin = ("# -*- coding: latin-1 -*-\r\n" + HEADER.replace("\n", "\r\n")
             + f"    name = 'café'\r\n    return {ADAM}\r\n").encode("latin-1")
    bom = codecs.BOM_UTF8 + (HEADER + f"    name = 'naïve ✓'\n    return {ADAM}").encode("utf-8")  # no final newline
    make_project(tmp_path, {})
    (tmp_path / "latin.py").write_bytes(latin)
    (tmp_path / "bom.py").write_bytes(bom)
    proc = _check(tmp_path, "--add-suppressions", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "latin.py").read_bytes() == latin[:-2] + b"  # tlint: ignore[TL308]\r\n"
    assert (tmp_path / "bom.py").read_bytes() == bom + b"  # tlint: ignore[TL308]"


def test_a_path_after_the_flag_is_a_path_and_usage_errors(tmp_path, capsys, monkeypatch):
    make_project(tmp_path, {"src/a.py": HEADER + f"    return {ADAM}\n"})
    proc = _check(tmp_path, "--add-suppressions", "src", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "src" / "a.py").read_text(encoding="utf-8").endswith("# tlint: ignore[TL308]\n")
    for extra in (["--fix"], ["--diff"], ["--stdin-filename", "x.py"]):
        monkeypatch.setattr("sys.stdin", open(tmp_path / "src" / "a.py"))  # noqa: SIM115
        proc = _check(tmp_path, "--add-suppressions", *extra, capsys=capsys, monkeypatch=monkeypatch)
        assert proc.returncode == 2 and "--add-suppressions works on files" in proc.stderr


# --- placement, on synthetic findings ---------------------------------------------------


def _diag(code: str, start: tuple[int, int], end: tuple[int, int]) -> Diagnostic:
    return Diagnostic(code, "x", "warning", "m", "a.py", Range(Position(*start), Position(*end)))


def _suppressed(text: str, diags: list[Diagnostic]) -> bool:
    apply_suppressions(diags, parse_suppressions(text))
    return all(d.suppressed for d in diags)


def test_line_ends_inside_strings_or_continuations_get_the_end_line_or_a_line_above():
    source = ('def f():\n'
              '    x = g("""a\n'          # 2: ends inside a string
              'b""") + \\\n'               # 3: a backslash continuation
              '        h()\n'              # 4
              '    y = k("""\n'           # 5: ends inside a string ...
              '""" + \\\n'                  # 6: ... and the next with a backslash
              '  "")\n'                    # 7
              '    z = \'\'\'# tlint: ignore[TL101]\'\'\' + m()\n'  # 8: suppression-like text in a string
              '    # tlint: ignore[TL205]\n'  # 9: a comment line above 10
              '    w = n("""\n'            # 10
              '""" \\\n'                     # 11
              '    )\n')                   # 12
    diags = [_diag("TL201", (2, 9), (4, 12)),   # start line ends in a string, end line is fine
             _diag("TL202", (3, 1), (3, 9)),    # only inside: the line above (2) ends in a string too
             _diag("TL203", (6, 1), (6, 4)),    # backslash line, the line above ends inside a string
             _diag("TL204", (8, 5), (8, 40)),   # suppression-like text in a string is no comment
             _diag("TL206", (10, 9), (11, 4)),  # start and end unusable: merged into line 9's comment
             _diag("TL207", (5, 9), (6, 4))]    # start and end unusable: a new comment line above
    done = add_suppressions(source, diags, "why")
    assert [(d.code, d.range.start.line) for d in done.left] == [("TL202", 3), ("TL203", 6)]
    assert done.added == 4
    assert done.text == ('def f():\n'
                         '    x = g("""a\n'
                         'b""") + \\\n'
                         '        h()  # tlint: ignore[TL201] why\n'
                         '    # tlint: ignore[TL207] why\n'
                         '    y = k("""\n'
                         '""" + \\\n'
                         '  "")\n'
                         '    z = \'\'\'# tlint: ignore[TL101]\'\'\' + m()  # tlint: ignore[TL204] why\n'
                         '    # tlint: ignore[TL205, TL206]\n'
                         '    w = n("""\n'
                         '""" \\\n'
                         '    )\n')
    moved = [_diag("TL201", (2, 9), (4, 12)), _diag("TL207", (6, 9), (7, 4)),
             _diag("TL204", (9, 5), (9, 40)), _diag("TL206", (11, 9), (12, 4))]
    assert _suppressed(done.text, moved)
    compile(done.text, "a.py", "exec")


def test_form_feed_lines_count_like_findings():
    source = "x = 1\n\x0c\ny = f()\n"
    done = add_suppressions(source, [_diag("TL201", (3, 5), (3, 8))])
    assert done.text == "x = 1\n\x0c\ny = f()  # tlint: ignore[TL201]\n"
    assert _suppressed(done.text, [_diag("TL201", (3, 5), (3, 8))])


@pytest.mark.parametrize("code", ["TL001", "TL002", "TL003"])
def test_engine_codes_are_left_alone(code):
    source = "x = f()\n"
    done = add_suppressions(source, [_diag(code, (1, 1), (1, 8))])
    assert done.text == source and done.added == 0


def _finding(code: str, line: int) -> Diagnostic:
    return Diagnostic(code, "x", "warning", "m", "a.py", Range(Position(line, 1), Position(line, 5)))


@pytest.mark.parametrize(("text", "expected"), [
    ("x = 1\n", "# tlint: ignore-file[TL209]\nx = 1\n"),
    ("", "# tlint: ignore-file[TL209]\n"),
    ("#!/usr/bin/env python\r\nx = 1\r\n", "#!/usr/bin/env python\r\n# tlint: ignore-file[TL209]\r\nx = 1\r\n"),
    ("#!/usr/bin/env python", "#!/usr/bin/env python\n# tlint: ignore-file[TL209]\n"),
    ("# -*- coding: latin-1 -*-\nx = 1\n", "# -*- coding: latin-1 -*-\n# tlint: ignore-file[TL209]\nx = 1\n"),
    ("#!/bin/python\n# vim: set fileencoding=utf-8 :\nx = 1\n",
     "#!/bin/python\n# vim: set fileencoding=utf-8 :\n# tlint: ignore-file[TL209]\nx = 1\n"),
    ('"""Doc."""\n# tlint: ignore-file[TL101]  legacy\n', '"""Doc."""\n# tlint: ignore-file[TL101, TL209]  legacy\n'),
    ("x = 1  # tlint: ignore-file[TL209]\n", None),
    ("# tlint: ignore-file\nx = 1\n", None),
    ('s = "# tlint: ignore-file[TL209]"\n', '# tlint: ignore-file[TL209]\ns = "# tlint: ignore-file[TL209]"\n'),
])
def test_file_suppression_placement_and_merge(text, expected):
    from tlint.baseline import add_file_suppression

    assert add_file_suppression(text, "TL209") == expected
    if expected is not None:  # what it writes suppresses the code everywhere in the file
        diag = _finding("TL209", expected.count("\n") or 1)
        apply_suppressions([diag], parse_suppressions(expected))
        assert diag.suppressed


def test_file_suppression_never_for_engine_codes():
    from tlint.baseline import add_file_suppression

    assert add_file_suppression("x = 1\n", "TL001") is None and add_file_suppression("x = 1\n", "TL002") is None
