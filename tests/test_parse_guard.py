"""LibCST's native parser overflows its stack (a segfault, fatal to a single-process run)
on deep nesting that CPython may compile: `parse_source` refuses such files with TL001
before LibCST sees them. The crash inputs run in a child process, so a regression fails
the test instead of killing pytest."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tlint.diagnostics import Diagnostic
from tlint.reading import _MAX_LIBCST_DEPTH, _deep_expression_risk, parse_source

DEPTH = 2 * _MAX_LIBCST_DEPTH + 2000  # 8,000: crashes LibCST 1.9 where it is not refused first


def _tree(text: str):
    """Python's tree of `text` as Python 3.10 builds it: 3.11 and 3.12 refuse deep chains
    under the default recursion limit, 3.10 does not."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * DEPTH))
    try:
        return compile(text, "deep.py", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("text", [
    "x = " + " + ".join(["a"] * DEPTH) + "\n",
    "x = (\n" + " +\n".join(["'s'"] * DEPTH) + "\n)\n",
    "x = y" + "[0]" * DEPTH + "\n",
    "x = a" + ".b" * DEPTH + "\n",
    "def f():\n    if c:\n        return g" + "()" * DEPTH + "\n",
    "import a" + ".b" * DEPTH + "\n",
    "from a" + ".b" * DEPTH + " import c\n",
], ids=["additions", "multi-line-additions", "subscripts", "attributes", "calls-in-a-body", "import",
        "from-import"])
def test_deep_chains_are_a_risk(text):
    try:
        tree = _tree(text)
    except (RecursionError, MemoryError, SyntaxError):
        pytest.skip("this Python refuses the chain itself")
    assert _deep_expression_risk(tree, text)


@pytest.mark.parametrize("text", [
    "x = [" + "1, " * DEPTH + "]\n",                          # long but flat
    "x = " + " < ".join(["a"] * DEPTH) + "\n",                # flat for both parsers
    "s = (\n" + "\n".join(["'piece'"] * 2000) + "\n)\n",      # implicit concatenation
    "import " + ", ".join(f"m{i}.sub" for i in range(DEPTH)) + "\n",
    "\n".join(f"v{i} = a + b * c.d[e](f)" for i in range(DEPTH)) + "\n",
])
def test_long_flat_code_is_not_a_risk(text):
    assert not _deep_expression_risk(_tree(text), text)


def test_dotted_import_that_python_compiles_is_tl001_in_a_single_process(tmp_path):
    # CPython keeps `a.b.b...` one string; LibCST builds 8,000 nested Attribute nodes and
    # crashed the whole `--jobs 1` run before the guard
    (tmp_path / "deep.py").write_text("import a" + ".b" * DEPTH + "\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    proc = subprocess.run([sys.executable, "-m", "tlint", "check", str(tmp_path), "--jobs", "1", "--no-cache",
                           "--select", "ALL"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "deep.py:1:1: TL001" in proc.stdout and "nested" in proc.stdout
    assert "TL003" not in proc.stdout


def test_parse_source_refuses_before_libcst():
    text = "import a" + ".b" * DEPTH + "\n"
    result = parse_source(text, "deep.py")
    assert isinstance(result, Diagnostic) and result.code == "TL001" and "nested" in result.message
