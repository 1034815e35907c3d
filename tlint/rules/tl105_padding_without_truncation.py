"""TL105 padding-without-truncation: a tokenizer call pads (to a length, or into tensors)
but never truncates, so over-long sequences are kept whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, has_star_kwargs, literal_value
from tlint.rules.base import Rule
from tlint.views.facts import pads_in_call

if TYPE_CHECKING:
    from tlint.context import FileContext

_NO_TRUNCATION = (False, None, "do_not_truncate")


def _literal_texts(index, expr: cst.BaseExpression) -> bool:
    """A string literal, a list/tuple of them, or a name assigned only such a literal."""
    if type(expr) is cst.List or type(expr) is cst.Tuple:
        return bool(expr.elements) and all(isinstance(literal_value(e.value, default=None), str) for e in expr.elements)
    if isinstance(literal_value(expr, default=None), str):
        return True
    if type(expr) is cst.Name:
        values = [node.value for node in index.assignments if type(node) is cst.Assign
                  and any(type(t.target) is cst.Name and t.target.value == expr.value for t in node.targets)]
        return bool(values) and all(_literal_texts(index, v) for v in values if type(v) is not cst.Name)
    return False


class PaddingWithoutTruncation(Rule):
    code = "TL105"
    name = "padding-without-truncation"
    severity = "warning"
    tokens = frozenset({"pad"})  # pre-filter: `padding=`/`pad_to_max_length=` of a tokenizer call
    summary = "A tokenizer call pads to a length or into tensors but does not truncate."
    verify_site = "data"

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        index = ctx.index
        for call in ctx.data.tokenizer_encode_calls:
            if not pads_in_call(call) or has_star_kwargs(call):
                continue
            text = get_arg(call, "text", 0)
            if text is None or _literal_texts(index, text.value):
                continue  # images/audio only, or a few prompts written in the code: nothing to truncate
            max_length = get_arg(call, "max_length")
            if max_length is None and get_arg(call, "return_tensors") is None:
                continue
            truncation = get_arg(call, "truncation")
            if truncation is not None and literal_value(truncation.value, default=True) not in _NO_TRUNCATION:
                continue
            spelled = dotted_name(call.func) or "tokenizer"
            if max_length is not None:
                why = ("`max_length` only sets the padded length: longer sequences are kept whole, "
                       "overflowing the positional table or the model's context")
            else:
                why = ("sequences longer than the model's maximum length are kept whole and overflow "
                       "its positional table")
            ctx.report(call, f"`{spelled}(...)` pads but does not truncate (no truthy `truncation=`): {why}; "
                             "pass `truncation=True`")
