"""The bindings, calls and data views on their own (issue 19): a table of snippets, each
with the value (or bindings, or callers) a marked use must resolve to.

In every snippet the use is the argument of the last `use(...)` call of the file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from tlint.config import Settings
from tlint.context import FileContext
from tlint.source import FileIndex
from tlint.views.bindings import ASSIGN, AUGMENT, LOOP, PARAM, UNKNOWN, WITH

U = UNKNOWN


def _ctx(source: str) -> FileContext:
    text = textwrap.dedent(source).lstrip("\n")
    index = FileIndex(cst.parse_module(text))
    return FileContext(Path("snippet.py"), text, index, Settings(Path("."), None))


def _use(ctx: FileContext) -> cst.BaseExpression:
    calls = [c for c in ctx.index.calls if type(c.func) is cst.Name and c.func.value == "use"]
    assert calls, "the snippet has no use(...)"
    return calls[-1].args[0].value


VALUES = [
    # --- plain names, in source order ---------------------------------------------------
    ("constant", "LR = 3e-4\nuse(LR)", 3e-4),
    ("arithmetic", "K = 4\nB = 8\nuse(K * B // 2)", 16),
    ("rebound: the last one holds", "k = 1\nk = 4\nuse(k)", 4),
    ("rebound after the use", "k = 4\nuse(k)\nk = 1", 4),
    ("a branch may rebind: unknown", "k = 1\nif flag:\n    k = 4\nuse(k)", U),
    ("both branches agree", "if flag:\n    k = 4\nelse:\n    k = 4\nuse(k)", 4),
    ("rebound in both branches, differently", "if flag:\n    k = 2\nelse:\n    k = 4\nuse(k)", U),
    ("rebound inside the use's own branch", "k = 1\nif flag:\n    k = 4\n    use(k)", 4),
    ("augmented once: folded", "k = 1\nk += 1\nuse(k)", 2),
    ("augmented under an if: both values", "k = 5\nif ddp:\n    k *= 8\nuse(k)", U),
    ("augmented in a loop: unknown", "k = 1\nfor _ in range(3):\n    k += 1\nuse(k)", U),
    ("reads its previous value", "k = 2\nk = k * 3\nuse(k)", 6),
    ("tuple unpacking", "a, b = 2, 8\nuse(b)", 8),
    ("unpacking an unknown", "a, b = f()\nuse(b)", U),
    ("starred unpacking", "a, *b = 1, 2, 3\nuse(a)", U),
    ("loop target", "for k in range(3):\n    pass\nuse(k)", U),
    ("with target", "with open('f') as k:\n    use(k)", U),
    ("walrus", "if (n := 5) > 2:\n    pass\nuse(n)", 5),
    ("loop-carried rebinding", "k = 1\nfor _ in xs:\n    use(k)\n    k = 2", U),
    ("module constant read in a function", "K = 8\ndef f():\n    use(K)", 8),
    ("module name rebound: unknown in a function", "K = 8\nK = 2\ndef f():\n    use(K)", U),
    ("comprehension target shadows", "x = 5\nys = [use(x) for x in range(3)]", U),
    ("lambda parameter shadows", "x = 5\nf = lambda x: use(x)", U),
    ("class body read from a method is not seen", "class A:\n    k = 4\n    def f(self):\n        use(k)", U),
    ("an import is unknown", "from cfg import K\nuse(K)", U),
    # --- parameters: the default, or what every call site passes -------------------------
    ("parameter default, not called here", "def f(k=4):\n    use(k)", 4),
    ("parameter without default, not called", "def f(k):\n    use(k)", U),
    ("every call site agrees", "def f(k=1):\n    use(k)\nf(k=4)\nf(4)", 4),
    ("call sites disagree", "def f(k=1):\n    use(k)\nf(2)\nf(4)", U),
    ("a call site leaves the default", "def f(k=4):\n    use(k)\nf()\nf(k=4)", 4),
    ("a starred call site hides it", "def f(k=4):\n    use(k)\nf(*args)", U),
    ("method called through self", "class T:\n    def step(self, k=1):\n        use(k)\n"
                                   "    def run(self):\n        self.step(k=8)", 8),
    ("parameter rebound in the body", "def f(k=4):\n    k = 2\n    use(k)", 2),
    # --- self.<attr> set in __init__, used in another method -----------------------------
    ("self attribute from __init__", "class T:\n    def __init__(self):\n        self.k = 4\n"
                                     "    def step(self):\n        use(self.k)", 4),
    ("self attribute through an __init__ parameter and the constructor call",
     "class T:\n    def __init__(self, k=1):\n        self.k = k\n    def step(self):\n        use(self.k)\n"
     "t = T(k=8)", 8),
    ("self attribute set twice differently", "class T:\n    def __init__(self):\n        self.k = 4\n"
                                             "    def grow(self):\n        self.k = 8\n"
                                             "    def step(self):\n        use(self.k)", U),
    ("self attribute incremented", "class T:\n    def __init__(self):\n        self.k = 4\n"
                                   "    def grow(self):\n        self.k += 1\n"
                                   "    def step(self):\n        use(self.k)", U),
    # --- config objects ----------------------------------------------------------------
    ("argparse default", "import argparse\np = argparse.ArgumentParser()\n"
                         "p.add_argument('--lr', type=float, default=1e-3)\nargs = p.parse_args()\nuse(args.lr)", 1e-3),
    ("argparse store_true", "import argparse\np = argparse.ArgumentParser()\n"
                            "p.add_argument('--fp16', action='store_true')\nargs = p.parse_args()\nuse(args.fp16)", False),
    ("vars(args) subscript", "import argparse\np = argparse.ArgumentParser()\n"
                             "p.add_argument('--grad-accum', type=int, default=4)\nargs = vars(p.parse_args())\n"
                             "use(args['grad_accum'])", 4),
    ("dict literal subscript", "cfg = {'lr': 2e-5, 'accum': 8}\nuse(cfg['accum'])", 8),
    ("dict() subscript", "cfg = dict(lr=2e-5, accum=8)\nuse(cfg['accum'])", 8),
    ("dict literal .get with default", "cfg = {'lr': 2e-5}\nuse(cfg.get('accum', 2))", 2),
    ("kwargs.get: the default when no caller passes it",
     "def train(**kwargs):\n    use(kwargs.get('accum', 4))\ntrain(lr=1)", 4),
    ("kwargs.get: a caller passes it", "def train(**kwargs):\n    use(kwargs.get('accum', 4))\ntrain(accum=16)", 16),
    ("nested dataclass config", "from dataclasses import dataclass, field\n@dataclass\nclass Train:\n"
                                "    accum: int = 4\n@dataclass\nclass Config:\n"
                                "    train: Train = field(default_factory=Train)\ncfg = Config()\n"
                                "use(cfg.train.accum)", 4),
    ("pydantic Field", "from pydantic import BaseModel, Field\nclass Config(BaseModel):\n"
                       "    accum: int = Field(8, ge=1)\ncfg = Config()\nuse(cfg.accum)", 8),
    ("click option", "import click\n@click.command()\n@click.option('--accum', default=4)\n"
                     "def main(accum):\n    use(accum)", 4),
    ("option overwritten after parsing", "import argparse\np = argparse.ArgumentParser()\n"
                                         "p.add_argument('--steps', type=int, default=10)\nargs = p.parse_args()\n"
                                         "args.steps = compute()\nuse(args.steps)", U),
    ("math.inf", "import math\nuse(math.inf)", float("inf")),
    ("float of a string", "use(float('1e-4'))", 1e-4),
]


@pytest.mark.parametrize("source, expected", [(s, e) for _, s, e in VALUES], ids=[n for n, _, _ in VALUES])
def test_value(source, expected):
    ctx = _ctx(source)
    got = ctx.bindings.value(_use(ctx))
    if expected is UNKNOWN:
        assert got is UNKNOWN, got
    else:
        assert got == expected and type(got) is type(expected)


def test_values_per_call_site_and_all_values():
    ctx = _ctx("def f(k=1):\n    use(k)\nf(2)\nf(4)\nf(k=n)\n")
    use = _use(ctx)
    values = ctx.bindings.values(use)
    assert values[:2] == [2, 4] and values[2] is UNKNOWN
    assert ctx.bindings.all_values(use, lambda k: k > 1)  # every resolvable site triggers
    assert not ctx.bindings.all_values(use, lambda k: k > 2)
    none = _ctx("def f(k):\n    use(k)\nf(n)\n")
    assert not none.bindings.all_values(_use(none), lambda k: True)  # none resolves: silent


def test_values_of_a_conditional_augmented_assignment():
    ctx = _ctx("k = 5\nif ddp:\n    k *= 8\nuse(k)")
    assert ctx.bindings.values(_use(ctx)) == [5, 40]
    assert ctx.bindings.all_values(_use(ctx), lambda k: k > 1)


def test_values_unpacked_from_a_local_helpers_returned_tuple():
    """`total, warmup = helper(n, 0)`: the element the helper returns, its parameters taking
    what the callers pass, also through a conditional `*=` on a parameter."""
    source = """\
        def compute(total, warmup):
            if isinstance(warmup, float):
                warmup *= total
            return total, warmup
        steps, warm = compute(1000, {value})
        use({name})
    """
    zero = _ctx(source.format(value="0", name="warm"))
    assert zero.bindings.value(_use(zero)) == 0
    ratio = _ctx(source.format(value="0.1", name="warm"))
    assert ratio.bindings.nonzero(_use(ratio))  # 0.1 or 100.0 (the ways disagree: unknown, set)
    total = _ctx(source.format(value="0", name="steps"))
    assert total.bindings.value(_use(total)) == 1000
    two = _ctx("def f():\n    if c:\n        return 1, 2\n    return 3, 4\na, b = f()\nuse(b)")
    assert two.bindings.value(_use(two)) is UNKNOWN  # two returns: not followed


KINDS = [
    ("x = 1\nuse(x)", [ASSIGN]),
    ("x = 1\nx += 2\nuse(x)", [AUGMENT]),
    ("for x in xs:\n    use(x)", [LOOP]),
    ("with f() as x:\n    use(x)", [WITH]),
    ("def g(x=3):\n    use(x)", [PARAM]),
    ("x = 1\nif c:\n    x = 2\nuse(x)", [ASSIGN, ASSIGN]),
    ("x = 0\nwhile c:\n    use(x)\n    x = x + 1", [ASSIGN, ASSIGN]),
]


@pytest.mark.parametrize("source, kinds", KINDS)
def test_reaching_kinds(source, kinds):
    ctx = _ctx(source)
    assert [b.kind for b in ctx.bindings.reaching(_use(ctx))] == kinds


def test_expression_and_parameter():
    ctx = _ctx("def f(size=512):\n    use(size)\n")
    expr = ctx.bindings.expression(_use(ctx))
    assert type(expr) is cst.Integer and type(ctx.index.parent(expr)) is cst.Param
    assert ctx.bindings.parameter(_use(ctx)).name.value == "size"
    twice = _ctx("n = 1\nif c:\n    n = 2\nuse(n)\n")
    assert twice.bindings.expression(_use(twice)) is None


def test_attribute_bindings_and_before():
    ctx = _ctx("class M:\n    def __init__(self, d):\n        self.proj = Linear(d, d)\n"
               "    def forward(self, x):\n        h = self.proj(x)\n        use(h)\n")
    use = _use(ctx)
    forward = ctx.index.enclosing_function(use)
    before = ctx.bindings.before(forward, use)
    assert sorted(before) == ["h", "self", "x"]
    proj = [n for n in ctx.index.order if type(n) is cst.Attribute and n.attr.value == "proj"][-1]
    assert [b.kind for b in ctx.bindings.attribute(proj)] == [ASSIGN]


# --- the calls view --------------------------------------------------------------------


def _call(ctx: FileContext, spelled: str) -> cst.Call:
    return next(c for c in ctx.index.calls if ctx.module.code_for_node(c.func) == spelled)


def test_callee_through_an_instance_of_a_local_class():
    ctx = _ctx("""
        class Wrapper:
            def step(self):
                self.optimizer.step()

        class Other:
            def step(self):
                pass

        class Trainer:
            def __init__(self, opt):
                self.opt = Wrapper(opt)

            def train(self):
                self.opt.step()

        w = Wrapper(None)
        w.step()
        x.step()
    """)
    wrapper_step = ctx.index.classes_by_name["Wrapper"].body.body[0]
    assert ctx.calls.callee(_call(ctx, "self.opt.step")) is wrapper_step
    assert ctx.calls.callee(_call(ctx, "w.step")) is wrapper_step
    assert ctx.calls.callee(_call(ctx, "x.step")) is None  # two classes have a `step`


def test_callers_and_bind():
    ctx = _ctx("""
        def train(model, accum=1, *, lr=1e-3):
            pass

        train(m, 4, lr=3e-4)
        train(m)
        train(*args)
    """)
    fn = ctx.index.functions_by_name["train"][0]
    sites = ctx.calls.callers(fn)
    assert [sorted(s.arguments) if s.arguments is not None else None for s in sites] == \
        [["accum", "lr", "model"], ["model"], None]


def test_init_callers_and_complete_sites():
    ctx = _ctx("""
        import torch.nn as nn

        class Block(nn.Module):
            def forward(self, x, mask=None):
                return x

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.extra = Block()

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return self.extra(x)

        def helper(x):
            return x

        helper(1)
        callbacks = [helper]
    """)
    forward = ctx.index.classes_by_name["Block"].body.body[0]
    sites = ctx.calls.complete_sites(forward)
    assert sites is not None and len(sites) == 2
    helper = ctx.index.functions_by_name["helper"][0]
    assert ctx.calls.complete_sites(helper) is None  # passed along: called with anything


# --- the data view ---------------------------------------------------------------------


def test_data_view_sets_nothing_on_the_index():
    ctx = _ctx("""
        from transformers import AutoTokenizer
        MAX = 128
        tok = AutoTokenizer.from_pretrained("gpt2")
        enc = tok(texts, padding=True, max_length=MAX)
        ids = enc["input_ids"]
        use(MAX)
    """)
    before = {name for name in vars(ctx.index) if name.startswith("_")}
    assert ctx.data.tokenizer_variables == {"tok"}
    assert len(ctx.data.tokenizer_encode_calls) == 1
    assert ctx.data.ids_variables == {"ids"}
    assert ctx.data.constant(_use(ctx)) == 128
    assert {name for name in vars(ctx.index) if name.startswith("_")} == before  # no private caches


def test_a_failing_view_is_isolated(monkeypatch):
    from tlint.context import ViewError
    from tlint.views import bindings

    def boom(self, *args):
        raise RuntimeError("boom")

    monkeypatch.setattr(bindings.BindingsView, "__init__", boom)
    ctx = _ctx("x = 1\nuse(x)\n")
    with pytest.raises(ViewError):
        ctx.bindings.value(_use(ctx))
    with pytest.raises(ViewError):  # views built on it fail too, and are reported as such
        ctx.data.constant(_use(ctx))
