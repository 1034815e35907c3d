"""TL115 ignore-index-wrong-vocabulary: in a sequence-to-sequence file with a source and a
target pad id, a loss or a target mask built with the source pad id.

A source pad id is an expression that says "source" and "pad" — `SRC_PAD_IDX`,
`self.src_pad_idx`, `SRC.vocab.stoi[SRC.pad_token]`, `src_vocab["<pad>"]`, or a name bound to
one (followed through the bindings view); a target pad id says "target" (`trg`, `tgt`,
`target`, `dec`) and "pad". Reported when the file binds a target pad id (a name, a
parameter or a `self.` attribute) and a source pad id is given

- as the `ignore_index` of a loss (`nn.CrossEntropyLoss(ignore_index=...)`,
  `F.cross_entropy(..., ignore_index=...)`, any call with that keyword), or
- to a comparison with a target-side tensor (`trg != src_pad_idx`, `tgt.ne(SRC_PAD)`,
  `labels == self.src_pad_idx`): a target mask;

unless both ids are known to be equal (then either is right).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import libcst as cst

from tlint import fixes
from tlint.cst import last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import UNKNOWN

if TYPE_CHECKING:
    from tlint.context import FileContext

_SOURCE = frozenset({"src", "source", "enc", "encoder"})
_TARGET = frozenset({"trg", "tgt", "target", "dec", "decoder"})
_TARGET_TENSORS = _TARGET | frozenset({"targets", "labels", "label", "gold"})
_PAD_STRINGS = frozenset({"<pad>", "<blank>", "[PAD]", "<PAD>", "pad"})
_COMPARE_METHODS = frozenset({"ne", "eq", "not_equal", "equal"})
_SWAPS = {"src": ("trg", "tgt"), "SRC": ("TRG", "TGT"), "source": ("target",), "SOURCE": ("TARGET",),
          "enc": ("dec",), "ENC": ("DEC",), "encoder": ("decoder",), "ENCODER": ("DECODER",)}


def _words(expr: cst.CSTNode) -> set[str]:
    """Every word of the names, attributes and string keys in `expr`."""
    out: set[str] = set()
    for node in walk(expr):
        if type(node) is cst.Name:
            out.update(snake_parts(node.value))
        elif type(node) is cst.SimpleString:
            value = literal_value(node, None)
            if isinstance(value, str):
                out.add("pad" if value in _PAD_STRINGS else value.lower())
    return out


def _pad_word(words: set[str]) -> bool:
    return any(w.startswith("pad") for w in words)


def _target_pad_word(name: str) -> bool:
    """A target pad name (`TRG_PAD_IDX`, `tgt_pad_id`), checked cheaply first."""
    if "pad" not in name.lower():
        return False
    words = set(snake_parts(name))
    return bool(words & _TARGET) and _pad_word(words) and not words & _SOURCE


class IgnoreIndexWrongVocabulary(Rule):
    code = "TL115"
    name = "ignore-index-wrong-vocabulary"
    kind = "defect"
    tokens = frozenset({"pad"})  # pre-filter: pad ids
    summary = "A seq2seq loss or target mask uses the source vocabulary's pad id."

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        if not any(_target_pad_word(name) for name in index.identifiers):
            return  # (no target pad id in the file: nothing to confuse it with)
        targets = self._target_pad_names(ctx)
        if not targets:
            return
        for call in index.calls:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "ignore_index" \
                        and self._source_pad(ctx, arg.value, targets):
                    ctx.report(arg.value, "the loss ignores the source vocabulary's pad id, but it is computed on "
                               "the targets: target padding is trained on (and a real target token with that id "
                               "is ignored); use the target pad id", fix=self._fix(arg.value, targets))
            func = call.func
            if type(func) is cst.Attribute and func.attr.value in _COMPARE_METHODS and len(call.args) == 1 \
                    and self._target_side(ctx, func.value) and self._source_pad(ctx, call.args[0].value, targets):
                self._report_mask(ctx, call.args[0].value, targets)
        roots: list[cst.CSTNode] = [v for node in index.assignments if (v := getattr(node, "value", None)) is not None]
        # (and every comparison of a function that takes target tokens: `return trg != pad`)
        roots += [f for f in index.functions
                  if any(set(snake_parts(p.name.value)) & _TARGET_TENSORS for p in f.params.params)]
        seen: set[int] = set()
        for root in roots:
            for comparison in walk(root):
                if type(comparison) is not cst.Comparison or len(comparison.comparisons) != 1 \
                        or id(comparison) in seen:
                    continue
                seen.add(id(comparison))
                left, right = comparison.left, comparison.comparisons[0].comparator
                if type(comparison.comparisons[0].operator) not in (cst.NotEqual, cst.Equal):
                    continue
                for tensor, pad in ((left, right), (right, left)):
                    if self._target_side(ctx, tensor) and self._source_pad(ctx, pad, targets):
                        self._report_mask(ctx, pad, targets)

    def _report_mask(self, ctx: FileContext, pad: cst.BaseExpression, targets: dict[str, list[Any]]) -> None:
        ctx.report(pad, "the target mask compares target tokens with the source vocabulary's pad id: target "
                   "padding is kept (and real tokens with that id are masked); compare with the target pad id",
                   fix=self._fix(pad, targets))

    def _target_side(self, ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """`expr` holds target tokens: its name says so (`trg`, `tgt_ids`, `labels`), or it is
        a parameter that a call site of its function gives such a tensor
        (`make_pad_mask(q, k)` called as `make_pad_mask(trg, trg)`)."""
        name = last_name(expr) if type(expr) in (cst.Name, cst.Attribute) else None
        if type(expr) is cst.Subscript:
            name = last_name(expr.value)
        if not name:
            return False
        words = set(snake_parts(name))
        if words & _TARGET_TENSORS:
            return not words & _SOURCE  # (`src_tgt_ids` says both: not judged)
        if type(expr) is not cst.Name or depth > 1:
            return False
        param = ctx.bindings.parameter(expr)
        function = ctx.index.enclosing_function(expr)
        if param is None or function is None:
            return False
        return any(site.arguments is not None and param.name.value in site.arguments
                   and self._target_side(ctx, site.arguments[param.name.value], depth + 1)
                   for site in ctx.calls.callers(function))

    @staticmethod
    def _target_pad_names(ctx: FileContext) -> dict[str, list[Any]]:
        """Target pad names bound in the file (assignments, parameters, `self.` attributes),
        with the values they may have."""
        index = ctx.index
        out: dict[str, list[Any]] = {}

        def add(name: str, value: Any) -> None:
            if _target_pad_word(name):
                out.setdefault(name, []).append(value)

        for node in index.assignments:
            if type(node) is cst.Assign:
                targets = [t.target for t in node.targets]
            else:  # an annotated or augmented assignment
                targets = [cast("cst.AnnAssign | cst.AugAssign", node).target]
            for target in targets:
                for element in walk(target):  # (`a, b = ...`; `self.x = ...` gives `self` and `x`)
                    if type(element) is cst.Name and _target_pad_word(element.value):
                        single = len(targets) == 1 and type(target) in (cst.Name, cst.Attribute) \
                            and node.value is not None
                        add(element.value, ctx.bindings.value(node.value) if single else UNKNOWN)
        for function in index.functions:
            for param in function.params.params:
                add(param.name.value, UNKNOWN)
        return out

    def _source_pad(self, ctx: FileContext, expr: cst.BaseExpression, targets: dict[str, list[Any]]) -> bool:
        """`expr` is the source pad id (through the names it is bound to) and not known to
        equal the target pad id."""
        current: cst.BaseExpression | None = expr
        for _ in range(4):
            if current is None:
                return False
            words = _words(current)
            if words & _TARGET:
                return False
            if words & _SOURCE and _pad_word(words):
                return not self._known_equal(ctx, expr, targets)
            if type(current) is not cst.Name:
                return False
            current = ctx.bindings.expression(current)
        return False

    @staticmethod
    def _known_equal(ctx: FileContext, expr: cst.BaseExpression, targets: dict[str, list[Any]]) -> bool:
        """Both ids are known and equal: the counterpart's (`SRC_PAD_IDX` -> `TRG_PAD_IDX`), or,
        without one, every target pad id's."""
        mine = ctx.bindings.value(expr)
        if mine is UNKNOWN:
            return False
        counterpart = _counterpart(expr, targets)
        theirs = targets[counterpart] if counterpart else [v for values in targets.values() for v in values]
        return bool(theirs) and all(v is not UNKNOWN and v == mine for v in theirs)

    @staticmethod
    def _fix(expr: cst.BaseExpression, targets: dict[str, list[Any]]):
        """`SRC_PAD_IDX` -> `TRG_PAD_IDX`, `self.src_pad_idx` -> `self.trg_pad_idx`, when
        exactly that target name is bound in the file."""
        candidate = _counterpart(expr, targets)
        if candidate is None:
            return None
        node = expr.attr if type(expr) is cst.Attribute else expr
        return fixes.fix("unsafe", f"Use `{candidate}`", fixes.replace(node, candidate))


def _counterpart(expr: cst.BaseExpression, targets: dict[str, list[Any]]) -> str | None:
    """The target pad name that spells `expr`'s source name with the target word."""
    node = expr.attr if type(expr) is cst.Attribute else expr
    if type(node) is not cst.Name:
        return None
    parts = node.value.split("_")
    for word, swaps in _SWAPS.items():
        if word not in parts:
            continue
        for swap in swaps:
            candidate = "_".join(swap if p == word else p for p in parts)
            if candidate in targets:
                return candidate
    return None
