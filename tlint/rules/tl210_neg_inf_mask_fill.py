"""TL210 neg-inf-mask-fill: attention scores filled with -inf where a padding mask is:
a fully padded row becomes NaN after the softmax."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, get_arg, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.vocabulary import is_padding_mask_name

if TYPE_CHECKING:
    from tlint.context import FileContext

_INF_NAMES = frozenset({"math.inf", "numpy.inf", "torch.inf", "numpy.Inf", "numpy.NINF"})


def is_negative_infinity(index, expr) -> bool:
    value = literal_value(expr, default=None)
    if isinstance(value, float):
        return value == -math.inf
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus:
        return index.qualify(expr.expression) in _INF_NAMES
    return index.qualify(expr) == "numpy.NINF"


def from_padding(site, mask_expr, index) -> bool:
    """Is the mask (or something it is combined with) a padding mask: a parameter named
    like one (`attention_mask`, `key_padding_mask`, `src_pad_mask`), or any value whose
    name has a `pad`/`padding` word?"""
    flow = site.flow
    for node in flow.trace(mask_expr, flow.order_of(mask_expr, index)):
        for sub in walk(node):
            if type(sub) is cst.Name:
                if sub.value in flow.params and is_padding_mask_name(sub.value):
                    return True
                if {"pad", "padding"} & set(snake_parts(sub.value)):
                    return True
            elif type(sub) is cst.Attribute and {"pad", "padding"} & set(snake_parts(sub.attr.value)):
                return True
    return False


class NegInfMaskFill(Rule):
    code = "TL210"
    name = "neg-inf-mask-fill"
    severity = "warning"
    tokens = frozenset({"softmax", "logsumexp"})  # pre-filter: hand-written attention sites (softmax, logsumexp)
    summary = "Attention scores masked with -inf from a padding mask (fully padded rows give NaN)."
    probes = ("nan-trace",)

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        seen = set()
        for site in ctx.models.attention.sites:
            for use in site.masks():
                if use.value is None or id(use.node) in seen or not is_negative_infinity(index, use.value):
                    continue
                if not from_padding(site, use.mask, index):
                    continue
                seen.add(id(use.node))
                ctx.report(use.node, "attention scores filled with -inf at padded positions: a row whose keys are "
                                     "all padding (an empty or all-pad sequence, a padded query row) becomes "
                                     "softmax(-inf, ..., -inf) = NaN and poisons the loss and the gradients; fill "
                                     "with `torch.finfo(scores.dtype).min`", fix=finite_fill_fix(index, use))


def finite_fill_fix(index, use):
    """Fill with `torch.finfo(scores.dtype).min`, `scores` being the filled tensor (the
    receiver of `masked_fill`, the input of `torch.masked_fill`) when it is a plain name or
    attribute (`scores`, `self.scores`: evaluating it again costs nothing). `torch` is
    spelled as the module imports it; when it does not, `import torch` is added at the top.
    Safe: the rows that were not all masked get the same weights (exp(finfo.min - max)
    is 0 as exp(-inf) is), and an all-masked row becomes uniform instead of NaN."""
    call = use.node
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute or use.value is None:
        return None
    if "torch.masked_fill" in (index.qualify(call.func), dotted_name(call.func)):
        first = get_arg(call, "input", 0)
        receiver = first.value if first is not None else None
    else:
        receiver = call.func.value
    scores = dotted_name(receiver)
    if scores is None:
        return None
    edits = []
    torch = fixes.local_name_for(index, "torch", call)
    if torch is None:
        if "torch" in index.identifiers:
            return None  # `torch` means something else here, or is imported where we cannot see
        added = fixes.add_import(index.module, "import torch")
        if added is None:
            return None
        edits.append(added)
        torch = "torch"
    value = f"{torch}.finfo({scores}.dtype).min"
    edits.append(fixes.replace(use.value, value))
    return fixes.fix("safe", f"Fill with `{value}`" + (" (and `import torch`)" if len(edits) > 1 else ""), *edits)
