"""A bounded, sampled run of scripts/corpus_run.py: a few real files of the standard
library, torch and transformers (those installed) linted with every rule on must give no
internal error (TL003). The full run is `python scripts/corpus_run.py`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# slow: a benchmark: lints sampled files of installed packages with every rule
pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import corpus_run

from tests.torchutil import import_torch


@pytest.mark.parametrize("corpus", ["stdlib", "torch", "transformers"])
def test_sampled_corpus_has_no_internal_error(corpus):
    if corpus == "torch":
        import_torch()  # a failure, not a skip, under TLINT_REQUIRE_TORCH=1
    if corpus != "stdlib" and importlib.util.find_spec(corpus) is None:
        pytest.skip(f"{corpus} is not installed")
    report = corpus_run.run_corpus(corpus, sample=15, seed=2026)
    assert report.files == 15 and report.lines > 0
    assert report.internal_errors == []


def test_python_files_walks_everything_but_caches(tmp_path):
    for name in ("a.py", "build/b.py", "__pycache__/c.py", "site-packages/d.py", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    found = [p.relative_to(tmp_path).as_posix() for p in corpus_run.python_files(tmp_path)]
    assert found == ["a.py", "build/b.py"]


def test_long_implicitly_concatenated_string_is_linted(tmp_path):
    """Found by the stdlib run (pydoc_data/topics.py): a string of more than a thousand implicitly
    concatenated pieces is valid Python and must not be TL001 (recursion limit)."""
    import libcst as cst

    from tests.lintutil import lint_paths
    from tlint.cst import literal_value

    pieces = "".join(f"    'line {i}\\n'\n" for i in range(1100))
    path = tmp_path / "topics.py"
    path.write_text(f"topics = {{'assert': (\n{pieces})}}\nlabels = -100\n", encoding="utf-8")
    result = lint_paths([path], select=["ALL"])
    assert [d.code for d in result.diagnostics if d.code in ("TL001", "TL003")] == []
    long = cst.parse_module(path.read_text(encoding="utf-8")).body[0].body[0].value.elements[0].value
    assert literal_value(long).startswith("line 0\nline 1\n")
    expr = cst.parse_expression("'a' 'b' 'c'")
    assert literal_value(expr) == "abc"
    assert literal_value(cst.parse_expression("b'a' b'b'")) == b"ab"
    assert literal_value(cst.parse_expression("'a' f'{x}'"), default=None) is None


def test_literal_value_of_every_piece_of_a_long_concatenation_is_linear(monkeypatch):
    """A walker calling `literal_value` on every node meets each right-nested suffix of an
    implicit concatenation: the pieces must be evaluated once per chain, not once per suffix
    (quadratic: a 3,000-piece string took ~29 s)."""
    import libcst as cst

    from tlint.cst import literal_value, walk

    calls = []
    original = cst.SimpleString.evaluated_value

    def counting(self):
        calls.append(self)
        return original.fget(self)

    monkeypatch.setattr(cst.SimpleString, "evaluated_value", property(counting))
    n = 300
    expr = cst.parse_expression("(" + " ".join(f"'p{i} '" for i in range(n)) + ")")
    chains = [node for node in walk(expr) if isinstance(node, cst.ConcatenatedString)]
    assert len(chains) == n - 1
    values = [literal_value(node) for node in chains]
    assert values[0] == "".join(f"p{i} " for i in range(n))
    assert values[-1] == f"p{n - 2} p{n - 1} "
    assert all(values[i].endswith(values[i + 1]) for i in range(n - 2))
    assert len(calls) <= n + 2
    # a suffix met after another chain was evaluated is still right
    other = cst.parse_expression("'x' 'y'")
    assert literal_value(other) == "xy"
    assert literal_value(chains[5]) == "".join(f"p{i} " for i in range(5, n))
    mixed = cst.parse_expression("'a' f'{x}' 'b' 'c'")
    inner = [node for node in walk(mixed) if isinstance(node, cst.ConcatenatedString)]
    assert [literal_value(node, default=None) for node in inner] == [None, None, "bc"]
