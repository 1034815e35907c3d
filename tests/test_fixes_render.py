"""The fix builders that render new code in place: `code_at`, `with_keyword`, `unwrap_with`."""

from __future__ import annotations

import libcst as cst
import pytest

from tlint import fixes
from tlint.source import FileIndex


def first_call(src: str):
    index = FileIndex(cst.parse_module(src))
    return index, index.calls[0]


@pytest.mark.parametrize(("src", "rendered"), [
    ("x = f(a)\n", "f(a, k=v)"),
    ("x = f( a )\n", "f( a, k=v )"),
    ("x = f()\n", "f(k=v)"),
    ("x = f(a, b = 1)\n", "f(a, b = 1, k = v)"),
    ("x = f(a,)\n", "f(a, k=v,)"),
    ("x = ((f(a)))\n", "f(a, k=v)"),
    ("def g():\n    if 1:\n        y = f(\n            a,\n            b=2,\n        )\n",
     "f(\n            a,\n            b=2,\n            k=v,\n        )"),
    ("def g():\n    y = f(\n        a\n    )\n", "f(\n        a,\n        k=v\n    )"),
    ("def g():\n    y = f(\n        a)\n", "f(\n        a,\n        k=v)"),
])
def test_with_keyword_rendered_in_place(src, rendered):
    index, call = first_call(src)
    assert fixes.code_at(index, call, fixes.with_keyword(call, "k", "v")) == rendered


def test_unwrap_with_keeps_comments_strings_and_relative_indentation():
    src = (
        "def f():\n"
        "    with guard():\n"
        "\n"
        "        # first\n"
        "        x = 1  # one\n"
        "        for b in loader:\n"
        "            s = '''a\n"
        "  b'''\n"
        "            y = (2 +\n"
        "                 3)  # last\n"
    )
    module = cst.parse_module(src)
    index = FileIndex(module)
    stmt = module.body[0].body.body[0]
    edit = fixes.unwrap_with(index, stmt)
    assert edit.content == (
        "# first\n"
        "    x = 1  # one\n"
        "    for b in loader:\n"
        "        s = '''a\n"
        "  b'''\n"
        "        y = (2 +\n"
        "             3)"
    )


@pytest.mark.parametrize("src", [
    "async def f():\n    async with guard():\n        pass\n",
    "def f():\n    with guard():  # why\n        pass\n",
    "def f():\n    with guard(): pass\n",
    "def f():\n    with guard(  # why\n    ):\n        pass\n",
    "def f():\n    with guard():\n# at column 0\n        pass\n",
])
def test_unwrap_with_declines_when_not_exact(src):
    module = cst.parse_module(src)
    index = FileIndex(module)
    stmt = module.body[0].body.body[0]
    assert fixes.unwrap_with(index, stmt) is None
