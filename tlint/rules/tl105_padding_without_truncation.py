"""TL105 padding-without-truncation: a tokenizer call pads (to a length, or into tensors)
but never truncates, so over-long sequences are kept whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, has_star_kwargs, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import ASSIGN, LOOP
from tlint.views.facts import pads_in_call

if TYPE_CHECKING:
    from tlint.context import FileContext

_NO_TRUNCATION = (False, None, "do_not_truncate")
_MEDIA_KEYWORDS = ("images", "image", "audio", "audios", "videos", "video", "pixel_values", "raw_speech")
_MOVES = ("to", "cuda", "cpu", "long", "int", "squeeze", "contiguous")


def _from_literals(ctx: FileContext, expr: cst.BaseExpression | None, depth: int = 0) -> bool:
    """Texts written in the code: a string literal, a list/tuple of them, a slice or item
    of one, a comprehension over one (`[prompts[i:i + n] for i in ...]`), or a name every
    binding of which (an assignment, a loop or comprehension target) is one of those."""
    if expr is None or depth > 6:
        return False
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(_from_literals(ctx, e.value, depth + 1) for e in expr.elements)
    if isinstance(expr, cst.Subscript):
        return _from_literals(ctx, expr.value, depth + 1)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return _from_literals(ctx, expr.elt, depth + 1)
    if isinstance(expr, cst.Name):
        bound = ctx.bindings.reaching(expr)
        if not bound:
            return False
        for binding in bound:
            node = binding.node
            if binding.kind == ASSIGN:
                if not _from_literals(ctx, binding.value, depth + 1):
                    return False
            elif binding.kind == LOOP and isinstance(node, (cst.For, cst.CompFor)):
                if not _from_literals(ctx, node.iter, depth + 1):
                    return False
            else:
                return False
        return True
    return isinstance(literal_value(expr, default=None), str)


def _multimodal(call: cst.Call) -> bool:
    """A vision/audio processor (`processor(images=..., text=...)`, `processor.tokenizer(...)`):
    its text is a caption or a prompt beside an image or a clip, and truncating it would cut
    the image tokens the processor expands in the prompt."""
    if any(arg.keyword is not None and arg.keyword.value in _MEDIA_KEYWORDS for arg in call.args):
        return True
    spelled = dotted_name(call.func) or ""
    return any("processor" in snake_parts(part) for part in spelled.split("."))


def _truncating_slice(subscript: cst.Subscript) -> bool:
    """`[:n]`, `[:, :n]`, `[-n:]`, `[:, -n:]`: keeps a bounded number of positions (a shift
    such as `[:-1]` or `[1:]` does not)."""
    for element in subscript.slice:
        part = element.slice
        if type(part) is not cst.Slice:
            continue
        if part.upper is not None:
            upper = literal_value(part.upper, default=None)
            if upper is None or (isinstance(upper, int) and upper >= 2):
                return True
        elif part.lower is not None:
            lower = part.lower
            if type(lower) is cst.UnaryOperation and type(lower.operator) is cst.Minus:
                value = literal_value(lower.expression, default=None)
                if value is None or (isinstance(value, int) and value >= 2):
                    return True
    return False


def _sliced_after(ctx: FileContext, call: cst.Call) -> bool:
    """The ids are truncated by a slice right after the call: `tok.encode(x)[:n]`,
    `tok(x)["input_ids"][:, -n:]`, or a name bound from the call's output (or from its
    `input_ids`) sliced later in the same function (`ids = ids[:, -max_len:]`)."""
    index = ctx.index
    node: cst.CSTNode = call
    parent = index.parent(node)
    while parent is not None:
        if type(parent) is cst.Subscript and parent.value is node:
            if _truncating_slice(parent):
                return True
        elif not (type(parent) is cst.Attribute or (type(parent) is cst.Call and parent.func is node)):
            break
        node, parent = parent, index.parent(parent)
    if type(parent) is not cst.Assign or parent.value is not node:
        return False
    scope = index.enclosing_function(call)
    if scope is None:
        return False
    held = {t.target.value for t in parent.targets if type(t.target) is cst.Name}
    if not held:
        return False
    after = index.position[id(parent)]
    body = list(walk(scope.body, into_functions=False))
    for statement in body:  # names bound from the output: `ids, mask = enc["input_ids"], enc["attention_mask"]`
        if type(statement) is cst.Assign and index.position[id(statement)] > after:
            values = statement.value.elements if type(statement.value) is cst.Tuple else [statement.value]
            for target in statement.targets:
                names = target.target.elements if type(target.target) is cst.Tuple else [target.target]
                for i, name in enumerate(names):
                    name = getattr(name, "value", name)
                    value = values[i] if len(values) == len(names) else statement.value
                    value = getattr(value, "value", value)
                    if type(name) is cst.Name and _reads(value, held):
                        held.add(name.value)
    return any(type(node) is cst.Subscript and index.position[id(node)] > after and _reads(node.value, held)
               and _truncating_slice(node) for node in body)


def _reads(expr: cst.CSTNode, names: set[str]) -> bool:
    """`x`, `x["input_ids"]`, `x.input_ids`, `x[...].to(device)` for a name `x` in `names`."""
    for _ in range(6):
        if isinstance(expr, cst.Name):
            return expr.value in names
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _MOVES:
            expr = expr.func.value
        else:
            return False
    return False


class PaddingWithoutTruncation(Rule):
    code = "TL105"
    name = "padding-without-truncation"
    kind = "likely-defect"
    tokens = frozenset({"pad"})  # pre-filter: `padding=`/`pad_to_max_length=` of a tokenizer call
    summary = "A tokenizer call pads to a length or into tensors but does not truncate."
    verify_site = "data"

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        for call in ctx.data.tokenizer_encode_calls:
            if not pads_in_call(call) or has_star_kwargs(call):
                continue
            text = get_arg(call, "text", 0)
            if text is None or _from_literals(ctx, text.value) or _multimodal(call):
                continue  # images/audio, or a few prompts written in the code: nothing to truncate
            max_length = get_arg(call, "max_length")
            if max_length is None and get_arg(call, "return_tensors") is None:
                continue
            truncation = get_arg(call, "truncation")
            if truncation is not None:
                if literal_value(truncation.value, default=True) not in _NO_TRUNCATION:
                    continue
                if max_length is None:
                    continue  # `truncation=False` without a length: whole sequences wanted, on purpose
            elif self._legacy_truncation(call, max_length):
                continue
            if _sliced_after(ctx, call):
                continue  # truncated by hand: `tok.encode(x)[:n]`, `ids = ids[:, -max_len:]`
            spelled = dotted_name(call.func) or "tokenizer"
            if max_length is not None:
                why = ("`max_length` only sets the padded length: longer sequences are kept whole, "
                       "overflowing the positional table or the model's context")
            else:
                why = ("sequences longer than the model's maximum length are kept whole and overflow "
                       "its positional table")
            ctx.report(call, f"`{spelled}(...)` pads but does not truncate (no truthy `truncation=`): {why}; "
                             "pass `truncation=True`")

    @staticmethod
    def _legacy_truncation(call: cst.Call, max_length: cst.Arg | None) -> bool:
        """The older API (Transformers 2-4) truncates without `truncation=`: a
        `truncation_strategy=` other than "do_not_truncate", or `max_length` given with the
        legacy `pad_to_max_length=True` (a `max_length` then switched truncation on)."""
        strategy = get_arg(call, "truncation_strategy")
        if strategy is not None:
            return literal_value(strategy.value, default=True) not in _NO_TRUNCATION
        return max_length is not None and get_arg(call, "pad_to_max_length") is not None \
            and get_arg(call, "padding") is None
