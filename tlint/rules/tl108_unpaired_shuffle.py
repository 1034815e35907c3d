"""TL108 unpaired-shuffle: two paired sequences shuffled independently, or two shuffled
loaders zipped into (input, target) pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.facts import DATA_LOADERS

if TYPE_CHECKING:
    from tlint.context import FileContext

SHUFFLES = frozenset({"random.shuffle", "numpy.random.shuffle"})
PERMUTATIONS = frozenset({"numpy.random.permutation", "torch.randperm"})
RNG_FACTORIES = frozenset({"random.Random", "numpy.random.default_rng", "numpy.random.RandomState",
                           "numpy.random.Generator"})
_INPUT_WORDS = {"x", "xs", "input", "inputs", "feature", "features", "feats", "data", "text", "texts", "sentence",
                "sentences", "src", "source", "sources", "question", "questions", "image", "images", "imgs", "query",
                "queries", "doc", "docs", "ids", "tokens", "samples", "examples", "audio", "videos"}
_TARGET_WORDS = {"y", "ys", "label", "labels", "target", "targets", "tgt", "tgts", "answer", "answers", "caption",
                 "captions", "passage", "passages", "response", "responses", "output", "outputs", "gold", "masks"}
# Calls that put two batches side by side rather than pairing them element by element.
_COMBINING = {"cat", "stack", "concat", "concatenate", "hstack", "vstack", "zip", "print", "max", "min", "len",
              "sum", "append", "extend", "update", "log", "info", "format", "chain"}


def _paired_words(a: str, b: str) -> bool:
    pa, pb = set(snake_parts(a)), set(snake_parts(b))
    common = pa & pb
    pa, pb = pa - common, pb - common
    return bool((pa & _INPUT_WORDS and pb & _TARGET_WORDS) or (pb & _INPUT_WORDS and pa & _TARGET_WORDS))


class UnpairedShuffle(Rule):
    code = "TL108"
    name = "unpaired-shuffle"
    kind = "defect"
    # pre-filter: shuffles, permutations, shuffled loaders
    tokens = frozenset({"shuffle", "permutation", "randperm", "dataloader"})
    summary = "Paired sequences are shuffled independently (or shuffled loaders are zipped into pairs)."
    verify_site = "data"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        zipped = self._zipped_pairs(index)
        scopes: dict[cst.CSTNode, list[tuple[cst.Call, set[str]]]] = {}
        rngs = self._rng_names(index)
        for call in index.calls:
            names = self._shuffled_by(index, call, rngs)
            if names:
                scopes.setdefault(index.enclosing_function(call) or index.module, []).append((call, names))
        for events in scopes.values():
            for i, (call, names) in enumerate(events):
                for _earlier, before in events[:i]:
                    pair = next(((a, b) for a in before for b in names if a != b and a not in names and b not in before
                                 and ((a, b) in zipped or (b, a) in zipped or _paired_words(a, b))), None)
                    if pair is not None:
                        ctx.report(call, f"`{pair[1]}` is shuffled independently of `{pair[0]}`: the pairs no longer "
                                         "line up (each input gets another example's target); draw one permutation "
                                         "and index both with it, or shuffle a list of pairs")
                        break
                else:
                    continue
                break
        self._check_zipped_loaders(ctx)

    @staticmethod
    def _rng_names(index) -> set[str]:
        out: set[str] = set()
        for node in index.assignments:
            if type(node) is cst.Assign and type(node.value) is cst.Call \
                    and index.qualify(node.value.func) in RNG_FACTORIES:
                out.update(n for n in (last_name(t.target) for t in node.targets) if n)
        return out

    @staticmethod
    def _shuffled_by(index, call: cst.Call, rngs: set[str]) -> set[str]:
        """The sequences `call` reorders: `shuffle(a)` -> {a}; `a[perm]`, `b[perm]` for a
        permutation `perm` (held in a variable or written inline)."""
        func = call.func
        qualified = index.qualify(func)
        method = func.attr.value if type(func) is cst.Attribute else None
        from_rng = type(func) is cst.Attribute and (last_name(func.value) in rngs or (  # (a method: `method` is set)
            type(func.value) is cst.Call and index.qualify(func.value.func) in RNG_FACTORIES))
        if qualified in SHUFFLES or (from_rng and method == "shuffle"):
            name = last_name(call.args[0].value) if call.args else None
            return {name} if name else set()
        if not (qualified in PERMUTATIONS or (from_rng and method == "permutation")):
            return set()
        indexed = set()
        parent = index.parent(call)
        holder = None
        if type(parent) is cst.Assign and len(parent.targets) == 1 and type(parent.targets[0].target) is cst.Name:
            holder = parent.targets[0].target.value
        scope = index.enclosing_function(call) or index.module
        for node in walk(scope):
            if type(node) is cst.Subscript and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
                key = node.slice[0].slice.value
                if key is call or (holder and type(key) is cst.Name and key.value == holder):
                    name = last_name(node.value)
                    if name:
                        indexed.add(name)
        if indexed:
            return indexed
        first = call.args[0].value if call.args else None
        if type(first) in (cst.Name, cst.Attribute) and type(index.parent(parent)) is not cst.Subscript:
            name = last_name(first)
            if name and not any(p in ("n", "num", "size", "len", "length", "count") for p in snake_parts(name)):
                return {name}
        return set()

    @staticmethod
    def _zipped_pairs(index) -> set[tuple[str, str]]:
        out = set()
        for call in index.calls:
            if type(call.func) is cst.Name and call.func.value == "zip" and len(call.args) == 2:
                a, b = (last_name(arg.value) for arg in call.args)
                if a and b:
                    out.add((a, b))
        return out

    # --- (b) shuffled loaders zipped into pairs ------------------------------------------

    def _check_zipped_loaders(self, ctx) -> None:
        index = ctx.index
        shuffled = self._shuffled_loaders(index)
        for loop in index.loops:
            if type(loop) is not cst.For:
                continue
            target: cst.BaseExpression
            iterable, target = loop.iter, loop.target
            if type(iterable) is cst.Call and last_name(iterable.func) == "enumerate" and iterable.args:
                iterable = iterable.args[0].value
                if type(target) is cst.Tuple and len(target.elements) == 2:
                    target = target.elements[1].value
            if not (type(iterable) is cst.Call and last_name(iterable.func) == "zip" and len(iterable.args) == 2):
                continue
            if not all(self._is_shuffled_loader(index, arg.value, shuffled) for arg in iterable.args):
                continue
            if not ((type(target) is cst.Tuple or type(target) is cst.List) and len(target.elements) == 2):
                continue
            origin: dict[str, set[int]] = {}
            for side, element in enumerate(target.elements):
                for node in walk(element.value):
                    if type(node) is cst.Name:
                        origin[node.value] = {side}
            if self._pairs_sides(index, loop, origin):
                ctx.report(iterable, "two shuffled loaders are zipped and their batches used as aligned pairs: each "
                                     "loader shuffles on its own, so the pairs are random; use one dataset that "
                                     "returns both halves of each pair")

    @staticmethod
    def _shuffled_loaders(index) -> set[str]:
        out: set[str] = set()
        for node in index.assignments:
            if type(node) is cst.Assign and type(node.value) is cst.Call and _shuffling_loader(index, node.value):
                out.update(n for n in (last_name(t.target) for t in node.targets) if n)
        return out

    @staticmethod
    def _is_shuffled_loader(index, expr, names: set[str]) -> bool:
        while type(expr) is cst.Call and last_name(expr.func) in ("iter", "cycle") and expr.args:
            expr = expr.args[0].value
        if type(expr) is cst.Call:
            return _shuffling_loader(index, expr)
        return last_name(expr) in names

    @staticmethod
    def _pairs_sides(index, loop: cst.For, origin: dict[str, set[int]]) -> bool:
        def sides(expr) -> set[int]:
            out: set[int] = set()
            for node in walk(expr):
                if type(node) is cst.Name:
                    out |= origin.get(node.value, set())
            return out

        body_nodes = list(walk(loop.body))
        for node in body_nodes:  # one pass in source order is enough for straight-line steps
            if type(node) is cst.Assign:
                got = sides(node.value)
                if got:
                    for target in node.targets:
                        for name in walk(target.target):
                            if type(name) is cst.Name:
                                origin[name.value] = origin.get(name.value, set()) | got
        for node in body_nodes:
            if type(node) is not cst.Call or last_name(node.func) in _COMBINING:
                continue
            pure = [sides(arg.value) for arg in node.args]
            if {0} in pure and {1} in pure:
                return True
        return False


def _shuffling_loader(index, call: cst.Call) -> bool:
    if index.qualify(call.func) not in DATA_LOADERS:
        return False
    shuffle = get_arg(call, "shuffle", 2)
    return shuffle is not None and literal_value(shuffle.value, default=None) is True
