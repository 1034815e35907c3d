"""TL210 neg-inf-mask-fill: attention scores filled with -inf where a padding mask is:
a fully padded row becomes NaN after the softmax.

Not reported: a key-padding mask broadcast on the key axis only (`pad[:, None, None, :]`,
`.unsqueeze(1).unsqueeze(2)`, `.view(b, 1, 1, -1)`) in an attention that is not causal
(no other mask applied to the scores, unless under a flag that is False by default, and no
causal evidence for its class): every query row keeps its real keys, so a row is all -inf
only for a sequence that is entirely padding. Masks combined with a causal mask (left
padding then empties the first rows) and masks over query rows are reported.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.model import causal_evidence
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
    kind = "likely-defect"
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
                if _keys_only(ctx, use.mask, 0) and not _combined_or_causal(ctx, site, use):
                    continue  # a row is all -inf only for a sequence that is all padding
                seen.add(id(use.node))
                ctx.report(use.node, "attention scores filled with -inf at padded positions: a row whose keys are "
                                     "all padding (an empty or all-pad sequence, a padded query row) becomes "
                                     "softmax(-inf, ..., -inf) = NaN and poisons the loss and the gradients; fill "
                                     "with `torch.finfo(scores.dtype).min`", fix=finite_fill_fix(index, use))


# methods and functions that keep a mask's layout: a comparison's or a cast's result
_KEEPS_LAYOUT = frozenset({"bool", "to", "long", "int", "float", "half", "type", "logical_not", "eq", "ne",
                           "detach", "contiguous", "expand", "expand_as", "repeat", "byte"})
_CAUSAL_WORDS = frozenset({"causal", "tril", "triu", "subsequent", "future", "lookahead", "autoregressive"})


def _peel(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The mask under a layout-keeping wrapper (`~m`, `m == 0`, `m.bool()`,
    `torch.logical_not(m)`), or None when `expr` is no such wrapper."""
    if type(expr) is cst.UnaryOperation and type(expr.operator) in (cst.BitInvert, cst.Not):
        return expr.expression
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        other = expr.comparisons[0].comparator
        if type(other) in (cst.Integer, cst.Float, cst.Name, cst.Attribute):  # `== 0`, `== pad_id`
            return expr.left
        return None
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _KEEPS_LAYOUT:
        if expr.func.attr.value == "logical_not" and dotted_name(expr.func.value) == "torch":
            first = get_arg(expr, "input", 0)
            return first.value if first is not None else None
        return expr.func.value
    return None


def _key_axis_subscript(expr: cst.Subscript) -> bool:
    """`m[:, None, None, :]`, `m[:, None, None]`, `m[:, None, :]`: the batch first, then new
    axes only, the key axis kept last."""
    elements = [e.slice for e in expr.slice]
    if len(elements) < 2 or type(elements[0]) is not cst.Slice:
        return False
    rest = elements[1:]
    if type(rest[-1]) is cst.Slice or (type(rest[-1]) is cst.Index and type(rest[-1].value) is cst.Ellipsis):
        rest = rest[:-1]
    return bool(rest) and all(type(e) is cst.Index and type(e.value) is cst.Name and e.value.value == "None"
                              for e in rest)


def _unsqueezes_keep_keys_last(expr: cst.Call) -> cst.BaseExpression | None:
    """The 2-D mask under `.unsqueeze(1).unsqueeze(2)` (or `.unsqueeze(-2)`), when every new
    axis goes before the key axis; None otherwise."""
    dims: list[int] = []
    current: cst.BaseExpression = expr
    while type(current) is cst.Call and type(current.func) is cst.Attribute and current.func.attr.value == "unsqueeze":
        arg = get_arg(current, "dim", 0)
        value = literal_value(arg.value, None) if arg is not None else None
        if type(value) is not int:
            return None
        dims.append(value)
        current = current.func.value
    ndim = 2
    for dim in reversed(dims):
        if not (0 < dim < ndim or dim <= -2):
            return None
        ndim += 1
    return current if dims else None


def _follow(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> tuple[cst.BaseExpression, int] | None:
    """`expr` past `_peel` and the local names bound to a value (not a parameter's default):
    the expression reached and its depth; None when that goes too deep."""
    for _ in range(8):
        if depth > 4:
            return None
        inner = _peel(expr)
        if inner is not None:
            expr = inner
            continue
        if type(expr) is cst.Name:
            bound = ctx.bindings.expression(expr)
            if bound is not None and type(ctx.index.parent(bound)) is not cst.Param:
                expr, depth = bound, depth + 1
                continue
        return expr, depth
    return None


def _keys_only(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> bool:
    """The mask is a (batch, keys) padding mask broadcast on the key axis only."""
    reached = _follow(ctx, expr, depth)
    if reached is None:
        return False
    expr, depth = reached
    if type(expr) is cst.Subscript:
        return _key_axis_subscript(expr) and _plain(ctx, expr.value, depth + 1)
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        method = expr.func.attr.value
        if method == "unsqueeze":
            base = _unsqueezes_keep_keys_last(expr)
            return base is not None and _plain(ctx, base, depth + 1)
        if method in ("view", "reshape"):  # `.view(b, 1, 1, -1)`
            sizes = [literal_value(arg.value, None) for arg in expr.args]
            return (len(sizes) >= 3 and all(size == 1 for size in sizes[1:-1]) and sizes[-1] != 1
                    and not any(arg.star for arg in expr.args) and _plain(ctx, expr.func.value, depth + 1))
    return False  # a parameter or an unknown name: not known to be key-only


def _plain(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> bool:
    """A plain 2-D mask: a parameter or attribute, a comparison of one with a scalar, or a
    local name bound to one (nothing combined with it)."""
    reached = _follow(ctx, expr, depth)
    if reached is None:
        return False
    expr = reached[0]
    if type(expr) is cst.Attribute:
        return True
    # a parameter (with a default, or none: then no binding gives it a value)
    return type(expr) is cst.Name and (ctx.bindings.expression(expr) is not None
                                       or ctx.bindings.parameter(expr) is not None)


def _combined_or_causal(ctx: FileContext, site, use) -> bool:
    """Another mask reaches the same scores (a causal mask added or filled apart from the
    padding one), unless under a flag that is False by default, or the attention's class is
    causal (its model has a next-token loss, a `generate` loop, a causal name)."""
    index = ctx.index
    owner = ctx.models.class_of(site.softmax)
    if owner is not None and owner.name in causal_evidence(ctx):
        return True
    for node in site.between:
        if node is use.node or any(a is use.node for a in index.ancestors(node)):
            continue
        for sub in walk(node):
            name = last_name(sub) if type(sub) in (cst.Name, cst.Attribute) else None
            if name and (name in ("tril", "triu") or _CAUSAL_WORDS & set(snake_parts(name))):
                return not _off_by_default(ctx, node)
    for other in site.masks():
        if other.node is not use.node and not _off_by_default(ctx, other.node):
            return True
    return False


def _off_by_default(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`node` runs only under `if flag:` whose flag is False as the program runs by default
    (`mask_future_timesteps=False`)."""
    for around in ctx.index.ancestors(node):
        if type(around) is cst.If and ctx.bindings.value(around.test, None) is False:
            return True
    return False


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
