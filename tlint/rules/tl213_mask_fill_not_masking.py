"""TL213 mask-fill-not-masking: attention scores filled at masked positions, before their
softmax, with a value that does not mask (zero, positive, or of a tiny magnitude): the
masked keys keep a real share of the attention, so the padding or causal mask has no
effect."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import UNKNOWN

if TYPE_CHECKING:
    from tlint.context import FileContext

# A fill at or below this masks: exp(-10) is already under 5e-5 of an average score's weight,
# and real masks use -1e4, -1e9, finfo.min or -inf. Above it (0, 1, -1, -1e-9) masks nothing.
MASKING_LIMIT = -10.0


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fill_values(bindings, expr) -> list:
    """The known numeric values `expr` has as the program runs by default, through the
    bindings (constants, `self.<attr>`, parameter defaults and call sites, config); a
    unary minus in front of a bound name is applied. [] when none is known."""
    sign = 1.0
    while type(expr) is cst.UnaryOperation and type(expr.operator) in (cst.Minus, cst.Plus):
        if literal_value(expr, UNKNOWN) is not UNKNOWN:
            break
        if type(expr.operator) is cst.Minus:
            sign = -sign
        expr = expr.expression
    values = bindings.values(expr)
    if not values or any(v is UNKNOWN or not _number(v) for v in values):
        return []
    return [sign * v for v in values]


def does_not_mask(values: list) -> bool:
    return bool(values) and all(not math.isnan(v) and v > MASKING_LIMIT for v in values)


def _mask_word(expr) -> bool:
    """A name with a `mask` word (`attention_mask`, `self.causal_mask`, `extended_mask`)."""
    for node in walk(expr):
        name = last_name(node) if type(node) in (cst.Name, cst.Attribute) else None
        if name and any(part == "mask" or part.endswith("mask") for part in snake_parts(name)):
            return True
    return False


class MaskFillNotMasking(Rule):
    code = "TL213"
    name = "mask-fill-not-masking"
    kind = "defect"
    tokens = frozenset({"softmax"})  # pre-filter: hand-written attention sites: a softmax of a q-k product
    summary = "Attention scores are masked with a value that does not mask (zero, positive, tiny)."
    probes = ("mask-leak", "causal-leak")

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        bindings = ctx.bindings
        seen: set[int] = set()
        for site in ctx.models.attention.sites:
            flow = site.flow
            from_scores = _carries(flow, site.product.node)
            for node in site.between:
                for sub in walk(node):
                    if id(sub) in seen:
                        continue
                    found = self._fill(sub, index, bindings, flow, from_scores)
                    if found is None:
                        continue
                    seen.add(id(sub))
                    value_node, values, how = found
                    shown = ", ".join(sorted({_show(v) for v in values}))
                    ctx.report(sub, f"attention scores {how} {shown} at masked positions before the softmax: "
                                    f"a masked key keeps the weight exp({shown} - max), not ~0 (a real share, or "
                                    "more than the unmasked keys), so the padding/causal mask has no effect; "
                                    "fill with a large negative value (`torch.finfo(scores.dtype).min`, -1e9)")

    def _fill(self, sub, index, bindings, flow, from_scores):
        """(the fill value's node, its values, how) when `sub` masks the scores with a value
        that does not mask; None otherwise."""
        if type(sub) is cst.Call:
            attr = last_name(sub.func)
            at = flow.order_of(sub, index)
            if attr in ("masked_fill", "masked_fill_") and type(sub.func) is cst.Attribute:
                if "torch.masked_fill" in (index.qualify(sub.func), dotted_name(sub.func)):
                    target, value = get_arg(sub, "input", 0), get_arg(sub, "value", 2)
                    filled = target.value if target is not None else None
                else:
                    value, filled = get_arg(sub, "value", 1), sub.func.value
                if value is None or filled is None or not from_scores(filled, at):
                    return None
                values = fill_values(bindings, value.value)
                return (value.value, values, "filled with") if does_not_mask(values) else None
            if attr == "where" and index.qualify(sub.func) in ("torch.where", "torch.Tensor.where", None):
                args = [a.value for a in sub.args if a.keyword is None]
                branches = args[1:3] if len(args) >= 3 else []
                if len(branches) != 2:
                    return None
                known = [fill_values(bindings, b) for b in branches]
                for number, (branch, other) in enumerate((branches, branches[::-1])):
                    values = known[number]
                    if values and not known[1 - number] and does_not_mask(values) and from_scores(other, at):
                        return branch, values, "replaced by"
            return None
        if type(sub) is cst.BinaryOperation and type(sub.operator) in (cst.Add, cst.Subtract):
            for operand in (sub.left, sub.right):
                found = self._scaled_mask(operand, bindings, flow, index, sub)
                if found is None:
                    continue
                value, values = found
                if type(sub.operator) is cst.Subtract and operand is sub.right:
                    values = [-v for v in values]
                other = sub.right if operand is sub.left else sub.left
                if does_not_mask(values) and from_scores(other, flow.order_of(sub, index)):
                    return value, values, "shifted by"
        return None

    def _scaled_mask(self, operand, bindings, flow, index, at_node):
        """`(1 - mask) * c` (or a name bound to it in this function): (c's node, values)."""
        at = flow.order_of(at_node, index)
        for node in flow.trace(operand, at):
            for sub in walk(node):
                if type(sub) is not cst.BinaryOperation or type(sub.operator) is not cst.Multiply:
                    continue
                for factor, other in ((sub.left, sub.right), (sub.right, sub.left)):
                    if not _mask_word(other) or _mask_word(factor):
                        continue
                    values = fill_values(bindings, factor)
                    if values and all(v != 0 for v in values):
                        return factor, values
        return None


def _carries(flow, product):
    """`from_scores(expr, at)`: does `expr` carry the query-key product (the scores masked)?"""

    def from_scores(expr, at) -> bool:
        return any(node is product or any(sub is product for sub in walk(node)) for node in flow.trace(expr, at))

    return from_scores


def _show(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:g}"
