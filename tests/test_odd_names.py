"""File names that are not valid UTF-8 (issue 23): every output format carries them,
escaped as that format's rules say, under a strict UTF-8 stdout and under `C.UTF-8`
(where Python writes undecodable bytes back raw): text, JSON, GitHub and JUnit write each
such byte `\\xNN`; SARIF and LSP URIs percent-encode the name's bytes (`%FF`)."""

from __future__ import annotations

import io
import json
import os
import pkgutil
import sys
from pathlib import Path

import pytest

import tlint.reporters
from tests.cliutil import make_project, run_tlint, tlint_env
from tlint import cli

MODEL = (
    "from torch import nn\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def forward(self, x, mask):\n"
    "        return x.mean(1)\n"
)
FORMATS = sorted(name for _, name, is_package in pkgutil.iter_modules(tlint.reporters.__path__) if not is_package)
# what each format must show of `bad\xff.py` and of the broken link's target `/nowhere\xfe`
EXPECTED = {
    "concise": ["bad\\xff.py:5:26: TL103", "link\\xfd.py:1:1: TL001", "to /nowhere\\xfe"],
    "text": ["bad\\xff.py:5:26: TL103", "link\\xfd.py:1:1: TL001", "to /nowhere\\xfe"],
    "json": ['"path": "bad\\\\xff.py"', '"path": "link\\\\xfd.py"', "to /nowhere\\\\xfe"],
    "github": ["file=bad\\xff.py,line=5", "file=link\\xfd.py,line=1", "to /nowhere\\xfe"],
    "sarif": ['"uri": "bad%FF.py"', '"uri": "link%FD.py"', "to /nowhere\\\\xfe"],
    "junit": ['classname="bad\\xff.py"', "bad\\xff.py:5:26: TL103", "to /nowhere\\xfe"],
    "lsp": ["/bad%FF.py\"", "/link%FD.py\"", "to /nowhere\\\\xfe"],
}


@pytest.fixture
def odd_tree(tmp_path):
    root = make_project(tmp_path, {"model.py": MODEL})
    try:
        (root / os.fsdecode(b"bad\xff.py")).write_text(MODEL)
        os.symlink(b"/nowhere\xfe", os.path.join(os.fsencode(root), b"link\xfd.py"))
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    return root


def test_every_format_is_tested():
    assert set(FORMATS) >= set(EXPECTED), FORMATS


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"], ids=["strict-utf8", "c-utf8"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_carries_names_that_are_not_utf8(odd_tree, monkeypatch, fmt, errors):
    monkeypatch.chdir(odd_tree)
    out = io.BytesIO()
    stream = io.TextIOWrapper(out, encoding="utf-8", errors=errors, write_through=True)
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace"))
    code = cli.main(["check", "--no-cache", "--format", fmt, "."])
    stream.flush()
    text = out.getvalue().decode("utf-8")  # valid UTF-8, whatever the stream would have let through
    assert code == 1, text
    for expected in EXPECTED.get(fmt, []):
        assert expected in text, (expected, text)
    if fmt in ("json", "sarif"):
        json.loads(text)
    if fmt == "lsp":
        assert all(json.loads(line)["uri"].startswith("file://") for line in text.splitlines())


def test_sarif_in_a_child_under_c_utf8_and_a_strict_stdout(odd_tree):
    for extra in ({"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": ""}, {"PYTHONIOENCODING": "utf-8:strict"}):
        env = tlint_env(**extra)
        proc = run_tlint("check", "--no-cache", "--format", "sarif", ".", cwd=Path(odd_tree), env=env)
        assert proc.returncode == 1, proc.stderr
        uris = [loc["physicalLocation"]["artifactLocation"]["uri"]
                for result in json.loads(proc.stdout)["runs"][0]["results"] for loc in result["locations"]]
        assert sorted(uris) == ["bad%FF.py", "link%FD.py", "model.py"]
