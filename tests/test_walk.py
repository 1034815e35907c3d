"""`cst.walk` answers from the file's preorder (built by `FileIndex`) exactly what walking
the tree node by node gives, with and without nested scopes, and walks any other tree the
slow way."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from tlint.cst import _walk, clear_caches, walk
from tlint.source import FileIndex

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("folder", ["fixtures", "tlint/views"])
def test_walk_from_the_index_equals_the_node_by_node_walk(folder):
    for path in sorted((REPO / folder).rglob("*.py")):
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        index = FileIndex(module)
        try:
            assert len(index.order) == len(list(_walk(module, True)))
            for node in index.order[::7]:  # a sample: every node is quadratic
                for into in (True, False):
                    fast = list(walk(node, into_functions=into))
                    slow = list(_walk(node, into))
                    assert len(fast) == len(slow) and all(a is b for a, b in zip(fast, slow)), (path, node)
        finally:
            clear_caches()


def test_a_tree_the_index_does_not_hold_is_walked_the_slow_way():
    module = cst.parse_module("def f(x):\n    return g(x)\n")
    FileIndex(module)
    other = cst.parse_module("def f(x):\n    return g(x)\n")  # equal text, other nodes
    try:
        assert [type(n).__name__ for n in walk(other.body[0], into_functions=False)][:3] == [
            "FunctionDef", "Name", "Parameters"]
        assert all(a is b for a, b in zip(walk(other), _walk(other, True)))
    finally:
        clear_caches()
    assert list(walk(module)) == list(_walk(module, True))  # after clear_caches: the slow way
