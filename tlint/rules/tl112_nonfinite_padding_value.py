"""TL112 nonfinite-padding-value: inputs padded or pre-filled with NaN or ±inf."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.facts import (
    FULL_TENSORS,
    FUNCTIONAL_PAD,
    PAD_SEQUENCE,
    nonfinite_value,
)

if TYPE_CHECKING:
    from tlint.context import FileContext

# Tensors where ±inf is a meaningful fill: attention masks, biases and scores (TL210's business).
_SCORE_WORDS = {"mask", "masks", "bias", "attn", "attention", "score", "scores", "logits", "energy"}
_INPUT_WORDS = {"pad", "padded", "padding", "input", "inputs", "batch", "batched", "features", "feats", "x", "seq",
                "seqs", "sequence", "sequences", "values", "data", "ids", "embeds", "embeddings", "src", "tgt",
                "series"}
_TRIANGULAR = {"torch.triu", "torch.tril"}


def _named_like_scores(expr: cst.BaseExpression | None) -> bool:
    for node in walk(expr) if expr is not None else ():
        name = last_name(node) if type(node) in (cst.Name, cst.Attribute) else None
        if name and set(snake_parts(name)) & _SCORE_WORDS:
            return True
    return False


def _spelled(value: float) -> str:
    return "NaN" if math.isnan(value) else ("-inf" if value < 0 else "inf")


class NonfinitePaddingValue(Rule):
    code = "TL112"
    name = "nonfinite-padding-value"
    kind = "defect"
    tokens = frozenset({"pad", "torch", "new_full"})  # pre-filter: `pad_sequence`, `F.pad`, `torch.full`, `new_full`
    summary = "Inputs are padded or pre-filled with NaN or ±inf."
    probes = ("nan-trace",)
    data_check = "nan-inf"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        for call in index.calls:
            qualified = index.qualify(call.func)
            if qualified in PAD_SEQUENCE:
                value, padded = get_arg(call, "padding_value", 2), get_arg(call, "sequences", 0)
            elif qualified in FUNCTIONAL_PAD:
                value, padded = get_arg(call, "value", 3), get_arg(call, "input", 0)
            elif qualified in FULL_TENSORS or (type(call.func) is cst.Attribute and call.func.attr.value == "new_full"):
                value, padded = get_arg(call, "fill_value", 1), None
                if not self._fills_inputs(index, call):
                    continue
            else:
                continue
            number = nonfinite_value(index, value.value) if value is not None else None
            if number is None or (padded is not None and _named_like_scores(padded.value)):
                continue
            parent = index.parent(call)
            if not math.isnan(number) and type(parent) is cst.Assign and any(
                    _named_like_scores(t.target) for t in parent.targets):
                continue
            ctx.report(call, f"inputs are padded with {_spelled(number)}: any reduction over the sequence (a sum, a "
                             "mean, a norm, a matmul with a zero weight) turns it into NaN for the whole example; "
                             "pad with a finite value and mask the padded positions")

    @staticmethod
    def _fills_inputs(index, call: cst.Call) -> bool:
        """`torch.full(...)` assigned to a name that holds inputs (`padded`, `batch_x`, `inputs`),
        not to a mask/bias/scores buffer, and never made triangular (a causal mask)."""
        parent = index.parent(call)
        if type(parent) is not cst.Assign:
            return False
        names = [last_name(t.target) for t in parent.targets]
        # (no None past the first test; mypy does not narrow the list by `any`)
        if not names or any(n is None for n in names) or any(set(snake_parts(n)) & _SCORE_WORDS for n in names):  # type: ignore[arg-type]
            return False
        if not any(set(snake_parts(n)) & _INPUT_WORDS for n in names):  # type: ignore[arg-type]
            return False  # `dist = torch.full(..., inf)` for a running minimum is not an input
        scope = index.enclosing_function(call) or index.module
        for other in index.statement_calls.get(scope, ()):
            if index.qualify(other.func) in _TRIANGULAR or last_name(other.func) in ("triu", "tril", "triu_", "tril_"):
                if any(type(n) is cst.Name and n.value in names for arg in other.args for n in walk(arg.value)):
                    return False
                if type(other.func) is cst.Attribute and last_name(other.func.value) in names:
                    return False
        return True
