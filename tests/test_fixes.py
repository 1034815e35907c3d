"""The fix machinery (tlint/fixes.py) and TL002's fix: applying, overlaps, passes,
encodings, atomic writes, --diff/--fix/--unsafe-fixes on the command line."""

from __future__ import annotations

import os

import pytest

from tests.fixutil import assert_fix, run_main, source
from tlint.diagnostics import Edit, Fix, Position, Range
from tlint.fixes import apply_fixes


def _edit(l1, c1, l2, c2, text):
    return Edit(Range(Position(l1, c1), Position(l2, c2)), text)


def test_apply_fixes_in_source_order_skipping_overlaps():
    text = "a = 1\nb = 2\nc = 3\n"
    first = Fix("safe", (_edit(1, 5, 1, 6, "10"),))
    overlapping = Fix("safe", (_edit(1, 1, 1, 6, "a = 9"),))
    third = Fix("safe", (_edit(3, 5, 3, 6, "30"),))
    new, count = apply_fixes(text, [third, overlapping, first])
    # `overlapping` starts first, so it wins over `first`; `third` is independent
    assert (new, count) == ("a = 9\nb = 2\nc = 30\n", 2)


def test_two_insertions_at_one_point_take_one_per_pass():
    text = "x = 1\n"
    one = Fix("safe", (_edit(1, 1, 1, 1, "a = 0\n"),))
    two = Fix("safe", (_edit(1, 1, 1, 1, "b = 0\n"),))
    new, count = apply_fixes(text, [one, two])
    assert count == 1 and new == "a = 0\nx = 1\n"


def test_a_fix_that_breaks_the_syntax_is_not_applied():
    text = "x = f(1)\n"
    broken = Fix("safe", (_edit(1, 5, 1, 6, "f(("),))
    assert apply_fixes(text, [broken]) == (text, 0)


def test_crlf_and_code_point_columns():
    text = "s = 'é'\r\nx = 1\r\n"
    fix = Fix("safe", (_edit(2, 5, 2, 6, "2"),))
    assert apply_fixes(text, [fix]) == ("s = 'é'\r\nx = 2\r\n", 1)


BEFORE_TL002 = """\
    import torch

    # tlint: ignore[TL301]
    x = torch.ones(3)  # tlint: ignore[TL101] padded upstream
    y = 2  # tlint: ignore  # type: ignore
    z = 3  # tlint: ignore[TL101, TL102]
"""


def test_tl002_fix_removes_unused_suppressions(tmp_path):
    assert_fix(tmp_path, "TL002", BEFORE_TL002, """\
    import torch

    x = torch.ones(3)
    y = 2  # type: ignore
    z = 3
""", select=["TL002", "TL101", "TL102", "TL301"])


def test_tl002_fix_keeps_the_codes_that_are_used(tmp_path):
    assert_fix(tmp_path, "TL002", """\
    from transformers import AutoModelForCausalLM
    def train(model, loader, opt):
        for batch in loader:
            model(**batch).loss.backward()
            opt.step()  # tlint: ignore[TL101, missing-grad-clipping]
            opt.zero_grad()
""", """\
    from transformers import AutoModelForCausalLM
    def train(model, loader, opt):
        for batch in loader:
            model(**batch).loss.backward()
            opt.step()  # tlint: ignore[missing-grad-clipping]
            opt.zero_grad()
""", select=["TL002", "TL101", "TL301"])


@pytest.mark.parametrize("encoding,prefix,newline", [
    ("utf-8", b"\xef\xbb\xbf", "\n"),
    ("latin-1", b"# -*- coding: latin-1 -*-\n", "\r\n"),
])
def test_fix_keeps_encoding_bom_and_line_ends(tmp_path, encoding, prefix, newline):
    body = newline.join(["s = 'caf\u00e9'", "x = 1  # tlint: ignore", ""])
    path = tmp_path / "m.py"
    path.write_bytes(prefix + body.encode(encoding))
    status, out, err = run_main(tmp_path, "check", "m.py", "--fix", "--no-cache", "--select", "TL002")
    data = path.read_bytes()
    assert data == prefix + newline.join(["s = 'caf\u00e9'", "x = 1", ""]).encode(encoding), (data, err)


def test_fix_rewrites_a_symlink_target_and_keeps_the_link(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("x = 1  # tlint: ignore\n", encoding="utf-8")
    os.chmod(real, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    run_main(tmp_path, "check", "link.py", "--fix", "--no-cache", "--select", "TL002")
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8") == "x = 1\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_diff_writes_nothing_and_exits_0_when_nothing_to_fix(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n", encoding="utf-8")
    status, out, err = run_main(tmp_path, "check", "m.py", "--diff", "--no-cache")
    assert (status, out) == (0, "")
    assert "would fix 0 findings" in err


def test_fix_from_stdin_prints_the_fixed_source(tmp_path, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x = 1  # tlint: ignore\n")))
    status, out, err = run_main(tmp_path, "check", "--stdin-filename", "m.py", "--fix", "--select", "TL002")
    assert out == "x = 1\n"
    assert status == 0


def test_fix_exit_code_reflects_what_is_left(tmp_path):
    # TL301 (missing clipping) has no safe fix: it is left, so --fix exits 1 (it is practice,
    # info: `--fail-on info` makes it fail the run).
    (tmp_path / "train.py").write_text(source("""\
        import torch
        from transformers import AutoModelForCausalLM
        def train(model, loader, opt):
            for batch in loader:
                loss = model(batch)  # tlint: ignore
                loss.backward()
                opt.step()
                opt.zero_grad()
    """), encoding="utf-8")
    status, out, err = run_main(tmp_path, "check", "train.py", "--fix", "--no-cache", "--select", "TL002,TL301",
                                  "--fail-on", "info")
    assert "fixed 1 finding" in err, err
    assert status == 1 and "TL301" in out
