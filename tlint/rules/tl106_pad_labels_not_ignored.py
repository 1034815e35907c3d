"""TL106 pad-labels-not-ignored: labels copied from padded input ids while nothing in the
project replaces the pad positions by the ignore index."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, last_name, snake_parts
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.facts import ids_expression, unpadded_ids

if TYPE_CHECKING:
    from tlint.context import FileContext

_COPY_METHODS = {"clone", "copy", "detach", "to", "cuda", "cpu", "long", "contiguous", "tolist"}
_COPY_FUNCTIONS = {"list", "copy.copy", "copy.deepcopy", "deepcopy", "torch.clone", "numpy.copy", "numpy.array"}
_LABEL_WORDS = {"labels", "label", "targets", "target", "lm"}


def _copied_ids(ctx: FileContext, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ids expression `expr` copies (`ids.clone()`, `list(ids)`, `ids[:]`, `ids[:, 1:]`)."""
    index, ids_names = ctx.index, ctx.data.ids_variables
    for _ in range(6):
        if ids_expression(expr, ids_names):
            return expr
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Attribute and func.attr.value in _COPY_METHODS:
                expr = func.value
                continue
            name = index.qualify(func) or dotted_name(func)
            if name in _COPY_FUNCTIONS and expr.args:
                expr = expr.args[0].value
                continue
            return None
        if type(expr) is cst.Subscript:
            expr = expr.value
            continue
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):  # `[seq.tolist() for seq in ids]`
            loop = expr.for_in
            if (type(loop.target) is cst.Name and loop.inner_for_in is None and not loop.ifs
                    and _copies_name(expr.elt, loop.target.value)):
                expr = loop.iter
                continue
            return None
        return None
    return None


def _copies_name(expr: cst.BaseExpression, name: str) -> bool:
    """`seq`, `seq.tolist()`, `list(seq)`, `seq[:]`: a copy of the name."""
    for _ in range(4):
        if type(expr) is cst.Name:
            return expr.value == name
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _COPY_METHODS:
            expr = expr.func.value
        elif type(expr) is cst.Call and dotted_name(expr.func) in ("list", "copy.copy") and len(expr.args) == 1:
            expr = expr.args[0].value
        elif type(expr) is cst.Subscript:
            expr = expr.value
        else:
            return False
    return False


def _labels_target(target: cst.BaseExpression) -> bool:
    if type(target) is cst.Subscript and len(target.slice) == 1:
        key = target.slice[0].slice
        return type(key) is cst.Index and type(key.value) is cst.SimpleString \
            and key.value.evaluated_value in ("labels", "label_ids")
    name = last_name(target)
    return name is not None and bool(set(snake_parts(name)) & _LABEL_WORDS) and "mask" not in name.lower()


class PadLabelsNotIgnored(Rule):
    code = "TL106"
    name = "pad-labels-not-ignored"
    severity = "error"
    tokens = frozenset({"input_ids"})  # pre-filter: labels copied from input ids
    summary = "Labels copied from padded input ids keep the pad positions in the loss."
    verify_site = "data"
    data_check = "label-pad-ignored"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        for node, value in self._label_copies(index):
            ids = _copied_ids(ctx, value)
            if ids is None or unpadded_ids(ctx.data, ids, index.enclosing_function(node) or index.module):
                continue
            ctx.report(
                node,
                "labels are a copy of padded input ids and nothing replaces the pad positions by -100 "
                "(or sets the loss `ignore_index` to the pad id): the model is trained to predict padding",
                when=ProjectCondition(any_of=("pads",), none_of=("masks-pad-labels",), scope="imports"),
            )

    @staticmethod
    def _label_copies(index):
        for node in index.assignments:
            if type(node) is cst.Assign and any(_labels_target(t.target) for t in node.targets):
                yield node, node.value
        for node in index.order:  # `{"input_ids": ids, "labels": [s.tolist() for s in ids]}`
            if type(node) is cst.Dict:
                for element in node.elements:
                    if (type(element) is cst.DictElement and type(element.key) is cst.SimpleString
                            and element.key.evaluated_value in ("labels", "label_ids")):
                        yield element, element.value
        for call in index.calls:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "labels":
                    parent = index.parent(call)
                    if type(parent) is cst.Attribute and parent.attr.value == "logits":
                        break  # `model(..., labels=ids).logits`: the loss is never read
                    yield call, arg.value
