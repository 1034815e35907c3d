"""TL113 mask-padded-with-pad-id: an attention mask padded (or pre-filled) with the token
pad id, as if it were a sequence of ids.

A mask is padded by `pad_sequence(masks, padding_value=V)`, `F.pad(mask, pad, value=V)`,
by hand (`mask + [V] * n`, `mask += [V] * n`, `mask.extend([V] * n)`), or pre-filled
(`torch.full(shape, V)`, `x.new_full(shape, V)`, `[V] * max_len`) where V is a pad token
id: `tokenizer.pad_token_id`, `pad_id`, `PAD_IDX`, or a name bound to one (followed through
the bindings view). A mask is what the padded expression or its destination (the assigned
name, the dict key, the keyword) calls a mask (`attention_mask`, `masks`, `attn_mask`), not
a padding mask (`key_padding_mask`, `pad_mask`: True marks padding there, so a non-zero fill
is what it needs) and not a mask *token* (`mask_token_id`). Silent when V is known to be 0
on every path (then padding with it is padding with 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import get_arg, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.facts_data import FULL_TENSORS, FUNCTIONAL_PAD, PAD_SEQUENCE, pad_id_like, tokenizer_like

if TYPE_CHECKING:
    from tlint.context import FileContext

_MASK_PARTS = frozenset({"mask", "masks"})
# a padding mask (True = pad), or the id of a mask token: not an attention mask
_NOT_ATTENTION = frozenset({"pad", "padding", "padded", "id", "ids", "idx", "index", "token", "tokens", "causal",
                            "triu", "tril", "future", "subsequent", "look", "ahead",
                            "label", "labels", "loss", "slot", "target", "targets"})  # (a label mask: not attention)
# the pad of labels (`pad_token_label_id`, usually the ignore index): not a token pad id
_LABEL_PARTS = frozenset({"label", "labels", "target", "targets", "loss"})
_NUMPY_FULL = frozenset({"numpy.full", "numpy.full_like"})
_LIST_METHODS = frozenset({"extend", "append"})


def _mask_word(word: str | None) -> bool:
    if not word:
        return False
    parts = set(snake_parts(word))
    return bool(parts & _MASK_PARTS) and not parts & _NOT_ATTENTION


def _names_a_mask(expr: cst.CSTNode | None) -> bool:
    """`expr` says it holds an attention mask: a name, an attribute or a string key."""
    if expr is None:
        return False
    for node in walk(expr):
        if type(node) is cst.Name and _mask_word(node.value):
            return True
        if type(node) is cst.SimpleString and _mask_word(str(literal_value(node, ""))):
            return True
    return False


class MaskPaddedWithPadId(Rule):
    code = "TL113"
    name = "mask-padded-with-pad-id"
    kind = "defect"
    tokens = frozenset({"pad"})  # pre-filter: a pad id (`pad_token_id`, `pad_id`, `PAD_IDX`)
    summary = "An attention mask is padded or pre-filled with the token pad id instead of 0."
    verify_site = "data"
    data_check = "mask-pad-agreement"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        seen: set[int] = set()
        for call in index.calls:
            found = self._padded_call(ctx, call)
            if found is not None and id(found[0]) not in seen:
                seen.add(id(found[0]))
                self._report(ctx, *found)
        for node in index.assignments:  # list padding by hand: `mask = mask + [pad_id] * n`, `mask += ...`
            target = node.targets[0].target if type(node) is cst.Assign and len(node.targets) == 1 else \
                getattr(node, "target", None)
            if node.value is None or not _names_a_mask(target):
                continue
            for inner in walk(node.value):
                if type(inner) is cst.BinaryOperation and type(inner.operator) is cst.Multiply:
                    found = self._list_padding(ctx, inner)
                    if found is not None and id(found[1]) not in seen:
                        seen.add(id(found[1]))
                        self._report(ctx, *found)

    def _report(self, ctx: FileContext, node: cst.CSTNode, value: cst.BaseExpression | None, how: str) -> None:
        ctx.report(node, f"the attention mask is {how} the token pad id: padded slots get a non-zero mask value "
                         "(1 or more), so the model attends to padding wherever the pad id is not 0; pad masks "
                         "with 0", fix=fixes.fix("safe", "Pad the mask with `0`", fixes.replace(value, "0"))
                   if value is not None else None)

    def _padded_call(self, ctx: FileContext, call: cst.Call) -> tuple[cst.CSTNode, cst.BaseExpression | None,
                                                                      str] | None:
        index = ctx.index
        qualified = index.qualify(call.func)
        func = call.func
        if qualified in PAD_SEQUENCE:
            value, padded, how = get_arg(call, "padding_value", 2), get_arg(call, "sequences", 0), "padded with"
        elif qualified in FUNCTIONAL_PAD:
            value, padded, how = get_arg(call, "value", 3), get_arg(call, "input", 0), "padded with"
        elif qualified in FULL_TENSORS or qualified in _NUMPY_FULL:
            value, padded, how = get_arg(call, "fill_value", 1), None, "pre-filled with"
        elif type(func) is cst.Attribute and func.attr.value == "new_full":
            value, padded, how = get_arg(call, "fill_value", 1), None, "pre-filled with"
        elif type(func) is cst.Attribute and func.attr.value == "pad" and call.args \
                and tokenizer_like(ctx.data, func.value):
            # `tokenizer.pad({"input_ids": masks})`: the masks padded as ids, with the pad id
            mapping = call.args[0].value
            if type(mapping) is cst.Dict and any(
                    type(e) is cst.DictElement and literal_value(e.key, None) == "input_ids" and _names_a_mask(e.value)
                    for e in mapping.elements):
                return call, None, "padded as token ids, with"
            return None
        elif type(func) is cst.Attribute and func.attr.value in _LIST_METHODS and call.args:
            # `mask.extend([pad_id] * n)` / `mask.append(pad_id)`
            if not _names_a_mask(func.value):
                return None
            arg = call.args[0].value
            if func.attr.value == "append":
                return (call, arg, "padded with") if self._pad_id(ctx, arg) else None
            element = _repeated_element(arg)
            return (call, element, "padded with") if element is not None and self._pad_id(ctx, element) else None
        else:
            return None
        if value is None or not self._pad_id(ctx, value.value):
            return None
        padded_value = padded.value if padded is not None else None
        if not (_names_a_mask(padded_value) or _names_a_mask(_destination(index, call))):
            return None
        return call, value.value, how

    def _list_padding(self, ctx: FileContext, node: cst.BinaryOperation) -> tuple[cst.CSTNode, cst.BaseExpression,
                                                                                    str] | None:
        """`mask + [pad_id] * n`, `mask += [pad_id] * n`, `mask = [pad_id] * max_len`."""
        element = _repeated_element(node)
        if element is None or not self._pad_id(ctx, element):
            return None
        index = ctx.index
        parent = index.parent(node)
        if type(parent) is cst.BinaryOperation and type(parent.operator) is cst.Add and parent.right is node:
            if _names_a_mask(parent.left):
                return parent, element, "padded with"
            return None
        if type(parent) is cst.AugAssign and type(parent.operator) is cst.AddAssign:
            return (parent, element, "padded with") if _names_a_mask(parent.target) else None
        if type(parent) in (cst.Assign, cst.AnnAssign, cst.DictElement, cst.Arg) \
                and _names_a_mask(_destination(index, node)):
            return node, element, "pre-filled with"
        return None

    @staticmethod
    def _pad_id(ctx: FileContext, expr: cst.BaseExpression) -> bool:
        """`expr` is a token pad id (through the names it is bound to), not known to be 0."""
        bindings = ctx.bindings
        if bindings.all_values(expr, lambda v: v == 0 and not isinstance(v, bool)):
            return False
        current: cst.BaseExpression | None = expr
        for _ in range(4):
            if current is None:
                return False
            if pad_id_like(current):
                return not set(snake_parts(_last(current))) & _LABEL_PARTS
            if type(current) is not cst.Name:
                return False
            current = bindings.expression(current)
        return False


def _last(expr: cst.BaseExpression) -> str:
    if type(expr) is cst.Attribute:
        return expr.attr.value
    return expr.value if type(expr) is cst.Name else ""


def _repeated_element(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """V of `[V] * n` / `n * [V]`."""
    if type(expr) is not cst.BinaryOperation or type(expr.operator) is not cst.Multiply:
        return None
    for side in (expr.left, expr.right):
        if type(side) is cst.List and len(side.elements) == 1 and type(side.elements[0]) is cst.Element:
            return side.elements[0].value
    return None


def _destination(index, node: cst.CSTNode) -> cst.CSTNode | None:
    """Where the value of `node` goes: the assigned target, the dict key, the keyword."""
    parent = index.parent(node)
    for _ in range(4):  # through `.long()`, `torch.tensor(...)`, `np.array(...)`, `[... for r in rows]`
        if type(parent) in (cst.ListComp, cst.GeneratorExp, cst.Element, cst.List):
            parent = index.parent(parent)
            continue
        if type(parent) in (cst.Attribute, cst.Arg) and type(index.parent(parent)) is cst.Call \
                and not (type(parent) is cst.Arg and parent.keyword is not None):
            parent = index.parent(index.parent(parent))
            continue
        if type(parent) is cst.Call:
            parent = index.parent(parent)
            continue
        break
    if type(parent) is cst.Assign:
        return parent.targets[0].target if len(parent.targets) == 1 else None
    if type(parent) is cst.AnnAssign:
        return parent.target
    if type(parent) is cst.DictElement:
        return parent.key
    if type(parent) is cst.Arg and parent.keyword is not None:
        return parent.keyword
    return None
