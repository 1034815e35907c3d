"""Output that cannot be turned against its reader: control characters in file names and
in quoted literals are escaped in every format read on a terminal (text, concise, github,
doctor's text, --show-files, --show-fixes), code frames show them as control pictures, and
a notebook cell holding a lone surrogate is written as an escape instead of ending the
output with an encoding error (text, SARIF, LSP)."""

from __future__ import annotations

import json

import pytest

from tests.cliutil import main_in, make_project
from tlint.encoding import frame_safe, terminal_safe

EVIL = "e\x1b[2Jvil.py"  # ESC [2J clears the screen
TOKENIZERS = ('from transformers import AutoTokenizer\n'
              'a = AutoTokenizer.from_pretrained("bert\\x1b[31m\\u202e")\n'  # a literal holding ESC and RLO
              'b = AutoTokenizer.from_pretrained("gpt2")\n')
UNUSED = "x = 1  # tlint: ignore\n"
NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [],
                       "source": ["import torch\n", "x = '\ud800'  # tlint: ignore\n"]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _hostile_names(tmp_path):
    root = make_project(tmp_path / "repo", {"t.py": TOKENIZERS})
    (root / EVIL).write_text(UNUSED)
    (root / "new\nline.py").write_text(UNUSED)  # a name that would forge a line of its own
    return root


@pytest.mark.parametrize("fmt", ["text", "concise", "github"])
def test_control_characters_in_names_and_literals_are_escaped(tmp_path, capsys, monkeypatch, fmt):
    root = _hostile_names(tmp_path)
    proc = main_in(root, "check", "--no-cache", "--select", "TL002,TL104", "--output-format", fmt, ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr  # (info findings only: TL002, and TL104, a practice rule)
    out = proc.stdout
    assert "\x1b" not in out and "\u202e" not in out and "new\nline" not in out, repr(out)
    assert "e\\x1b[2Jvil.py" in out and "new\\x0aline.py" in out
    assert '"bert\\x1b[31m\\u202e"' in out  # the quoted literal of TL104's message
    if fmt == "text":  # the code frame: control pictures, one column each
        assert '2 | a = AutoTokenizer.from_pretrained("bert\\x1b[31m\\u202e")' in out  # (its source is escapes)
        assert "1 | x = 1  # tlint: ignore" in out


def test_code_frames_show_control_characters_as_pictures_and_keep_the_carets(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "repo", {})
    (root / "raw.py").write_text('s = "\x1b[2J"  # tlint: ignore\n')  # a raw ESC in a string literal
    proc = main_in(root, "check", "--no-cache", "--select", "TL002", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert "\x1b" not in proc.stdout
    frame = [line for line in proc.stdout.splitlines() if "|" in line]
    assert frame[1] == '1 | s = "\u241b[2J"  # tlint: ignore'
    assert frame[2] == "  |             " + "^" * 15  # under the comment, as without the ESC


def test_show_files_and_show_fixes_escape_names(tmp_path, capsys, monkeypatch):
    root = _hostile_names(tmp_path)
    proc = main_in(root, "check", "--show-files", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert sorted(proc.stdout.splitlines()) == ["e\\x1b[2Jvil.py", "new\\x0aline.py", "t.py"]
    proc = main_in(root, "check", "--no-cache", "--select", "TL002", "--show-fixes", "--fix-only", ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert "\x1b" not in proc.stdout and "- e\\x1b[2Jvil.py:" in proc.stdout and "- new\\x0aline.py:" in proc.stdout


def test_doctor_text_escapes_names_and_literals(tmp_path, capsys, monkeypatch):
    # (TL104, whose message quotes the literal, is a practice rule: the project selects it)
    root = make_project(tmp_path / "run\x1b[2J", {"t.py": TOKENIZERS, "tlint.toml": 'extend-select = ["TL104"]\n'})
    proc = main_in(root.parent, "doctor", root.name, capsys=capsys, monkeypatch=monkeypatch)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout, repr(proc.stdout)
    assert "tlint doctor run\\x1b[2J" in proc.stdout and '"bert\\x1b[31m\\u202e"' in proc.stdout


@pytest.mark.parametrize("fmt", ["text", "concise", "github", "sarif", "lsp", "json", "junit"])
def test_a_lone_surrogate_in_a_notebook_cell_is_written_as_an_escape(tmp_path, capsys, monkeypatch, fmt):
    root = make_project(tmp_path / "repo", {"ok.py": UNUSED})
    (root / "nb.ipynb").write_text(json.dumps(NOTEBOOK))  # JSON escapes: the file itself is ASCII
    proc = main_in(root, "check", "--no-cache", "--select", "TL001,TL002", "--output-format", fmt, ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 1 and "internal error" not in proc.stderr, proc.stderr
    proc.stdout.encode("utf-8")  # no lone surrogate reaches the stream
    assert "nb.ipynb" in proc.stdout and "ok.py" in proc.stdout  # the rest of the folder is reported
    if fmt == "text":
        assert "2 | x = '\ufffd'  # tlint: ignore" in proc.stdout


def test_the_escapes():
    assert terminal_safe("plain.py") == "plain.py"
    assert terminal_safe("caf\u00e9 \u4e2d.py") == "caf\u00e9 \u4e2d.py"  # printable text stays
    assert terminal_safe("a\x1b[2J\x07\x7f\x9b\u202e\u2066\ud800") == "a\\x1b[2J\\x07\\x7f\\x9b\\u202e\\u2066\\ud800"
    assert terminal_safe("two\nlines\r", keep_newlines=True) == "two\nlines\\x0d"
    assert terminal_safe("bad-\udcff.py") == "bad-\\xff.py"  # a name's byte that is not UTF-8
    assert frame_safe("a\x1b\tb\x00\x7f\u202e\ud800") == "a\u241b\tb\u2400\u2421\ufffd\ufffd"
