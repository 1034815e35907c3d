"""ModelView sees the members of nested containers (issue 21): `nn.ModuleDict` from a dict
or `dict(...)`, `nn.Sequential` with or without an `OrderedDict`, list comprehensions,
starred lists, local names bound to them and helper factories of the file."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tlint.source import FileIndex
from tlint.views.model import ModelView

HEAD = """
import copy
from collections import OrderedDict

import torch.nn as nn


class Attn(nn.Module):
    def forward(self, x):
        return x.softmax(-1)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = Attn()

    def forward(self, x):
        return x + self.attn(x)


def make_blocks(d, n):
    return nn.ModuleList([Block(d) for _ in range(n)])


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])
"""


def _view(body: str) -> ModelView:
    text = textwrap.dedent(HEAD).lstrip("\n") + "\n\nclass Model(nn.Module):\n" + textwrap.indent(
        textwrap.dedent(body).lstrip("\n"), "    ")
    return ModelView(FileIndex(cst.parse_module(text)))


def _resolve(view: ModelView, expr: str):
    """The sub-module that the callee of `expr` (a call written in Model.forward) names."""
    module_class = view.classes["Model"]
    forward = module_class.forward
    assert forward is not None
    for node in view.index.calls:
        if view.index.enclosing_function(node) is forward and cst.Module([]).code_for_node(node) == expr:
            return module_class.attribute_of(node.func)
    raise AssertionError(f"no call of {expr} in forward")


MEMBERS = [
    ("ModuleDict(dict(...))",
     "self.t = nn.ModuleDict(dict(wte=nn.Embedding(9, 4), h=nn.ModuleList([Block(4) for _ in range(2)])))",
     ["self.t.wte(x)", "self.t.h[0](x)"], [("t.wte", "torch.nn.Embedding", False), ("t.h", "Block", True)]),
    ("ModuleDict({...}) by key",
     "self.t = nn.ModuleDict({'wte': nn.Embedding(9, 4), 'blk': Block(4)})",
     ["self.t['wte'](x)", "self.t.blk(x)"], [("t.wte", "torch.nn.Embedding", False), ("t.blk", "Block", False)]),
    ("Sequential(OrderedDict)",
     "self.s = nn.Sequential(OrderedDict([('fc', nn.Linear(4, 4)), ('blk', Block(4))]))",
     ["self.s.fc(x)", "self.s.blk(x)"], [("s.fc", "torch.nn.Linear", False), ("s.blk", "Block", False)]),
    ("Sequential by position",
     "self.s = nn.Sequential(nn.Linear(4, 4), Block(4))",
     ["self.s[0](x)", "self.s[1](x)"], [("s.0", "torch.nn.Linear", False), ("s.1", "Block", False)]),
    ("conditional expression: its first built branch",
     "self.blk = Block(4) if True else None\n    self.pos = None if False else nn.Embedding(9, 4)",
     ["self.blk(x)", "self.pos(x)"], [("blk", "Block", False), ("pos", "torch.nn.Embedding", False)]),
    ("nested: a ModuleDict inside a ModuleDict",
     "self.t = nn.ModuleDict(dict(enc=nn.ModuleDict(dict(pos=nn.Embedding(9, 4)))))",
     ["self.t.enc.pos(x)", "self.t['enc']['pos'](x)"], [("t.enc.pos", "torch.nn.Embedding", False)] * 2),
]


@pytest.mark.parametrize(("declaration", "uses", "wanted"), [m[1:] for m in MEMBERS], ids=[m[0] for m in MEMBERS])
def test_container_members_are_sub_modules(declaration, uses, wanted):
    body = f"def __init__(self):\n    super().__init__()\n    {declaration}\n\ndef forward(self, x):\n"
    body += "".join(f"    {use}\n" for use in uses)
    view = _view(body)
    for use, (path, ctor, is_list) in zip(uses, wanted):
        sub = _resolve(view, use)
        assert sub is not None, use
        assert (sub.path, sub.ctor, sub.is_list) == (path, ctor, is_list), use
    # the members join the model: Model and Block are one group, and Model does attention
    if any(ctor == "Block" for _, ctor, _ in wanted):
        group = next(g for g in view.groups() if any(c.name == "Model" for c in g))
        assert {c.name for c in group} >= {"Model", "Block"}
        assert view.does_attention(view.classes["Model"])


LISTS = [
    ("starred list comprehension", "self.blocks = nn.Sequential(*[Block(4) for _ in range(2)])"),
    ("starred local name", "blocks = [Block(4) for _ in range(2)]\n    self.blocks = nn.Sequential(*blocks)"),
    ("local name bound to the container", "blocks = nn.ModuleList([Block(4), Block(4)])\n    self.blocks = blocks"),
    ("list with a starred element", "self.blocks = nn.ModuleList([*[Block(4) for _ in range(2)]])"),
    ("helper factory of the file", "self.blocks = make_blocks(4, 2)"),
    ("local list filled by append", "blocks = []\n    for _ in range(2):\n        blocks.append(Block(4))\n"
                                    "    self.blocks = nn.ModuleList(blocks)"),
    ("append of a local name", "blocks = []\n    for _ in range(2):\n        b = Block(4)\n        blocks.append(b)\n"
                               "    self.blocks = nn.Sequential(*blocks)"),
    ("local list filled by +=", "blocks = []\n    blocks += [Block(4) for _ in range(2)]\n"
                                "    self.blocks = nn.Sequential(*blocks)"),
    ("local list filled by extend", "blocks = []\n    blocks.extend(Block(4) for _ in range(2))\n"
                                    "    self.blocks = nn.ModuleList(blocks)"),
    ("local list filled by insert", "blocks = []\n    blocks.insert(0, Block(4))\n    self.blocks = nn.ModuleList(blocks)"),
    ("container attribute filled by append", "self.blocks = nn.ModuleList()\n    for _ in range(2):\n"
                                             "        self.blocks.append(Block(4))"),
    ("container attribute filled in a helper method", "self.blocks = nn.ModuleList()\n    self._build()\n\n"
                                                      "def _build(self):\n    self.blocks.extend([Block(4), Block(4)])"),
    ("Sequential filled by add_module", "self.blocks = nn.Sequential()\n    for i in range(2):\n"
                                        "        self.blocks.add_module(f'b{i}', Block(4))"),
]


@pytest.mark.parametrize("declaration", [m[1] for m in LISTS], ids=[m[0] for m in LISTS])
def test_lists_of_blocks_are_lists_of_their_element(declaration):
    body = f"def __init__(self):\n    super().__init__()\n    {declaration}\n\ndef forward(self, x):\n"
    body += "    for block in self.blocks:\n        x = block(x)\n    return x\n"
    view = _view(body)
    sub = view.classes["Model"].attributes["blocks"]
    assert (sub.ctor, sub.is_list) == ("Block", True)
    assert {c.name for c in view.groups()[0]} >= {"Model", "Block"} or any(
        {"Model", "Block"} <= {c.name for c in g} for g in view.groups())


def test_filled_lists_keep_every_element_constructor():
    """A list filled with different constructors: the first is its element, the others
    join the model too (`others`); `self.heads["lm"] = ...` is a member by its key."""
    body = """
        def __init__(self):
            super().__init__()
            layers = [nn.Embedding(9, 4)]
            for _ in range(2):
                layers.append(Block(4))
            layers += [nn.LayerNorm(4)]
            self.layers = nn.ModuleList(layers)
            self.heads = nn.ModuleDict()
            self.heads["lm"] = nn.Linear(4, 9)
            self.heads[name] = Block(4)

        def forward(self, x):
            self.heads.lm(x)
            self.heads["lm"](x)
    """
    view = _view(body)
    layers = view.classes["Model"].attributes["layers"]
    assert (layers.ctor, layers.is_list) == ("torch.nn.Embedding", True)
    assert [o.ctor for o in layers.others] == ["Block", "torch.nn.LayerNorm"]
    assert {"Model", "Block", "Attn"} <= {c.name for c in view.groups()[0]} or any(
        {"Model", "Block"} <= {c.name for c in g} for g in view.groups())
    assert view.does_attention(view.classes["Model"])
    assert _resolve(view, "self.heads.lm(x)").ctor == "torch.nn.Linear"
    assert _resolve(view, 'self.heads["lm"](x)').path == "heads.lm"
    assert [o.ctor for o in view.classes["Model"].attributes["heads"].others] == ["Block"]


def test_what_is_added_elsewhere_is_not_an_element():
    """Appends after the list is wrapped, to a list of another function, or of a
    parameter, are not elements of the container."""
    body = """
        def __init__(self, given):
            super().__init__()
            blocks = []
            self.late = nn.ModuleList(blocks)
            blocks.append(Block(4))
            given.append(Block(4))
            self.given = nn.ModuleList(given)
            self.other = nn.ModuleList(self._make())

        def _make(self):
            out = []
            out.append(Block(4))
            return out
    """
    attributes = _view(body).classes["Model"].attributes
    assert not attributes["late"].is_list and not attributes["given"].is_list
    assert attributes["other"].ctor == "torch.nn.ModuleList"


def test_what_is_not_known_stays_unknown():
    body = """
        def __init__(self, layer, blocks):
            super().__init__()
            self.copies = clones(layer, 2)          # deep copies of a parameter: element unknown
            self.given = blocks                     # a parameter: unknown
            self.filled = nn.ModuleList()           # filled later
            self.t = nn.ModuleDict(dict(a=nn.Linear(4, 4)))

        def forward(self, x):
            self.t.a.weight(x)                      # an attribute of a member, not a member
            self.t.missing(x)
            self.t[name](x)                         # a key that is not literal: the container
    """
    view = _view(body)
    attributes = view.classes["Model"].attributes
    assert attributes["copies"].ctor == "torch.nn.ModuleList" and not attributes["copies"].is_list
    assert attributes["given"].ctor is None and attributes["filled"].children == {}
    assert _resolve(view, "self.t.a.weight(x)") is None
    assert _resolve(view, "self.t.missing(x)") is None
    assert _resolve(view, "self.t[name](x)").path == "t"


def test_member_reads():
    body = """
        def __init__(self):
            super().__init__()
            self.t = nn.ModuleDict(dict(wte=nn.Embedding(9, 4), wpe=nn.Embedding(9, 4)))
            self.d = nn.ModuleDict({"a": nn.Linear(4, 4)})

        def forward(self, x):
            y = self.t.wte(x) + self.t["wte"](x)
            for m in self.d.values():
                y = m(y)
            return y
    """
    reads = _view(body).classes["Model"].member_reads
    assert reads == {"t.wte": {"forward"}, "d.*": {"forward"}}
