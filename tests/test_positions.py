"""Positions: generating only the top-level statements that hold the requested nodes
(placed from Python's own line numbers) gives exactly what generating the whole module
gives, and falls back to that whenever its assumptions do not hold."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from tlint.cst import clear_caches
from tlint.engine import parse_source
from tlint.positions import _by_statement, node_ranges
from tlint.source import FileIndex

REPO = Path(__file__).resolve().parent.parent

TRICKY = {
    "decorators and comments": '''\
# header comment

import torch  # trailing


@torch.no_grad()
# between decorator and def
@staticmethod
def f(x):
    return x + 1

class A:

    # leading comment
    def g(self, y):  # why
        if y:
            return (y
                    + 1)
        return y; z = 2
''',
    "semicolons and blank lines at the end": "a = 1; b = 2\n\n\nc = f(a,\n      b)\n\n# the end\n",
    "no trailing newline": "x = 1\ny = g(x)",
    "parenthesised decorator": "@(\n    deco\n)\ndef h():\n    pass\nk = h()\n",
    "windows newlines": "a = 1\r\nb = f(a)\r\n",
    "tabs and a continuation": "if x:\n\ty = 1 + \\\n\t\t2\n\tz = y\n",
    "strings spanning lines": 's = """one\ntwo"""\nt = f(s)\n',
}


def _both(text: str):
    lines: list[int] = []
    module = parse_source(text, "t.py", statement_lines=lines)
    assert type(module) is cst.Module
    index = FileIndex(module)
    nodes = list(index.order)
    try:
        return node_ranges(module, nodes), _by_statement(module, nodes, text, lines, index), \
            node_ranges(module, nodes, text=text, statement_lines=lines, index=index)
    finally:
        clear_caches()


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_statement_positions_equal_whole_module_positions(name):
    whole, by_statement, used = _both(TRICKY[name])
    assert used == whole
    assert by_statement in (None, whole)


def test_unusual_files_fall_back_to_the_whole_module():
    assert _both(TRICKY["windows newlines"])[1] is None  # Python and LibCST may count lines apart
    assert _both(TRICKY["no trailing newline"])[1] is None  # the last statement's newline is not in the file
    assert _both(TRICKY["parenthesised decorator"])[1] is None  # Python's line is the name's, not the `@`'s
    assert _both(TRICKY["decorators and comments"])[1] is not None  # the common case takes the short way


# slow for tlint/: every node of every file of the package, an exhaustive property check (fixtures/ is the quick one)
@pytest.mark.parametrize("folder", ["fixtures", pytest.param("tlint", marks=pytest.mark.slow)])
def test_every_node_of_the_projects_own_files(folder):
    checked = 0
    for path in sorted((REPO / folder).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        whole, by_statement, used = _both(text)
        assert used == whole, path
        assert by_statement in (None, whole), path
        checked += by_statement is not None
    assert checked > 0
