"""TL106 pad-labels-not-ignored: labels copied from padded input ids while nothing in the
project replaces the pad positions by the ignore index."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.facts import ids_expression, unpadded_ids
from tlint.views.model import loss_calls

if TYPE_CHECKING:
    from tlint.context import FileContext

_COPY_METHODS = {"clone", "copy", "detach", "to", "cuda", "cpu", "long", "contiguous", "tolist"}
_COPY_FUNCTIONS = {"list", "copy.copy", "copy.deepcopy", "deepcopy", "torch.clone", "numpy.copy", "numpy.array"}
_CONCATENATE = {"torch.cat", "torch.concat", "torch.concatenate"}  # the labels hold the ids' pads too
_LABEL_WORDS = {"labels", "label", "targets", "target", "lm"}


def _copied_ids(ctx: FileContext, expr: cst.BaseExpression, scope: cst.CSTNode) -> cst.BaseExpression | None:
    """The ids expression `expr` copies (`ids.clone()`, `list(ids)`, `ids[:]`, `ids[:, 1:]`,
    the ids part of `torch.cat((text[:, 1:], image_ids), dim=1)`). Ids are known by name
    (`input_ids`, a name assigned from them) or, in `scope`, by use: a name fed to an
    embedding lookup (`ctx.data.embedded_ids`: `text` in `self.text_emb(text)`)."""
    index, ids_names = ctx.index, ctx.data.ids_variables
    for _ in range(6):
        if ids_expression(expr, ids_names):
            return expr
        if type(expr) is cst.Name:
            return expr if (id(scope), expr.value) in ctx.data.embedded_ids(ctx) else None
        if type(expr) is cst.Call:
            func = expr.func
            if type(func) is cst.Attribute and func.attr.value in _COPY_METHODS:
                expr = func.value
                continue
            name = index.qualify(func) or dotted_name(func)
            if name in _COPY_FUNCTIONS and expr.args:
                expr = expr.args[0].value
                continue
            first = expr.args[0].value if expr.args else None
            if name in _CONCATENATE and (type(first) is cst.Tuple or type(first) is cst.List):
                parts = [el.value for el in first.elements if type(el) is cst.Element]
                return next((found for part in parts if (found := _copied_ids(ctx, part, scope)) is not None), None)
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


_PASS_THROUGH = _COPY_METHODS | {"view", "reshape", "flatten", "float"}
_MASKING_METHODS = {"masked_fill", "masked_fill_", "fill_", "index_fill_", "index_fill", "scatter_", "scatter",
                    "where", "__setitem__"}


def _follow(ctx: FileContext, scope, name: str, after: int, losses: dict, depth: int) -> bool | None:
    """Where the labels held in `name` (in `scope`, from source position `after`) go: True
    when they reach a cross-entropy/NLL loss with the default ignore index (-100) and nothing
    masks them on the way; False when something may (a write into them, `masked_fill`,
    `torch.where`, a loss `ignore_index` set to the pad id); None when they reach no loss
    seen here. Calls of the file's own functions are followed into their parameters."""
    index = ctx.index
    body = scope.body if type(scope) is cst.FunctionDef else scope
    found: bool | None = None
    stop = None  # rebound to unrelated data: later uses hold something else
    for use in walk(body, into_functions=False):
        if type(use) is not cst.Name or use.value != name:
            continue
        at = index.position[id(use)]
        if at <= after or (stop is not None and at > stop):
            continue
        current: cst.CSTNode = use
        parent = index.parent(current)
        while True:  # `labels[:n]`, `labels.view(-1).to(device)`: still the labels
            if type(parent) is cst.Subscript and parent.value is current:
                if type(index.parent(parent)) is cst.AssignTarget:
                    return False  # `labels[labels == pad_id] = -100`
                current, parent = parent, index.parent(parent)
            elif type(parent) is cst.Attribute and parent.value is current:
                if parent.attr.value in _MASKING_METHODS:
                    return False
                call = index.parent(parent)
                if type(call) is not cst.Call or parent.attr.value not in _PASS_THROUGH:
                    break
                current, parent = call, index.parent(call)
            else:
                break
        if type(parent) is cst.AugAssign:
            return False  # written into: `labels += ...`
        if type(parent) is cst.AssignTarget and current is use:  # `labels = ...` again
            statement = index.parent(parent)
            value = statement.value if type(statement) is cst.Assign else None
            if value is None or not any(type(n) is cst.Name and n.value == name for n in walk(value)):
                stop = at  # rebound to other data: later uses hold something else
            continue
        if type(parent) is not cst.Arg:
            continue
        call = index.parent(parent)
        if type(call) is not cst.Call:
            continue
        if last_name(call.func) in _MASKING_METHODS:
            return False  # `torch.where(mask, -100, labels)`
        if id(call) in losses:
            if not _default_ignore_index(ctx, call):
                return False
            found = True
            continue
        callee = ctx.calls.callee(call)
        if callee is None or depth >= 2:
            continue
        bound = ctx.calls.bind(call, callee) or {}
        param = next((p for p, value in bound.items() if value is parent.value), None)
        if param is None:
            continue
        inner = _follow(ctx, callee, param, index.position[id(callee.body)], losses, depth + 1)
        if inner is False:
            return False
        found = found or inner
    return found


def _only_gather_indices(ctx: FileContext, node: cst.Assign, scope: cst.CSTNode) -> bool:
    """Every later use of the name `node` binds is the index of a `gather` (`logp.gather(-1,
    labels.unsqueeze(-1))`, `torch.gather(logp, 2, labels[..., None])`): per-token
    log-probabilities picked at the ids, which a mask weights where they are reduced. No
    loss sees them as labels, and -100 cannot be written into a gather index."""
    if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
        return False
    name = node.targets[0].target.value
    index = ctx.index
    after = index.ends[index.position[id(node)]] - 1
    body = scope.body if type(scope) is cst.FunctionDef else scope
    uses = 0
    for use in walk(body, into_functions=False):
        if type(use) is not cst.Name or use.value != name or index.position[id(use)] <= after:
            continue
        current: cst.CSTNode = use
        parent = index.parent(current)
        while True:  # `labels.unsqueeze(-1)`, `labels[..., None]`, `labels.long()`: still the ids
            if type(parent) is cst.Subscript and parent.value is current:
                current, parent = parent, index.parent(parent)
            elif type(parent) is cst.Attribute and parent.value is current and parent.attr.value in _INDEX_SHAPING:
                call = index.parent(parent)
                if type(call) is not cst.Call:
                    return False
                current, parent = call, index.parent(call)
            else:
                break
        if type(parent) is not cst.Arg:
            return False
        call = index.parent(parent)
        if type(call) is not cst.Call or last_name(call.func) != "gather":
            return False
        method = type(call.func) is cst.Attribute and index.qualify(call.func) is None
        if get_arg(call, "index", 1 if method else 2) is not parent:
            return False
        uses += 1
    return uses > 0


_INDEX_SHAPING = frozenset({"unsqueeze", "long", "to", "view", "reshape", "contiguous", "clone", "detach"})


def _default_ignore_index(ctx: FileContext, call: cst.Call) -> bool:
    """The loss ignores only -100: no `ignore_index=`, or -100, on the call or on the
    `nn.CrossEntropyLoss(...)` object it calls."""
    arg = get_arg(call, "ignore_index")
    if arg is None and type(call.func) is cst.Name:
        bound = ctx.bindings.reaching(call.func)
        ctor = bound[0].value if len(bound) == 1 else None
        arg = get_arg(ctor, "ignore_index") if type(ctor) is cst.Call else None
    return arg is None or literal_value(arg.value, default=None) == -100 or ctx.bindings.value(arg.value, None) == -100


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
    kind = "defect"
    # pre-filter: labels copied from input ids, or from ids fed to an embedding (`self.text_emb(text)`)
    tokens = frozenset({"input_ids", "embedding"})
    summary = "Labels copied from padded input ids keep the pad positions in the loss."
    verify_site = "data"
    data_check = "label-pad-ignored"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        for node, value in self._label_copies(index):
            scope = index.enclosing_function(node) or index.module
            ids = _copied_ids(ctx, value, scope)
            if ids is None or unpadded_ids(ctx.data, ids, scope):
                continue
            # Masking found elsewhere in the project counts only when these labels may reach it:
            # labels followed into a loss with the default ignore index, untouched on the way,
            # are reported whatever other labels the project masks.
            if type(node) is cst.Assign and _only_gather_indices(ctx, node, scope):
                continue  # per-token log-probabilities picked at the ids, not a loss over labels
            unmasked = type(node) is cst.Assign and self._reach_unmasked_loss(ctx, node)
            ctx.report(
                node,
                "labels are a copy of padded input ids and nothing replaces the pad positions by -100 "
                "(or sets the loss `ignore_index` to the pad id): the model is trained to predict padding",
                when=ProjectCondition(any_of=("pads",), none_of=() if unmasked else ("masks-pad-labels",),
                                      scope="program"),
            )

    @staticmethod
    def _reach_unmasked_loss(ctx: FileContext, node: cst.Assign) -> bool:
        if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
            return False
        losses = {id(call): call for call, _, _ in loss_calls(ctx.index)}
        scope = ctx.index.enclosing_function(node) or ctx.index.module
        end = ctx.index.ends[ctx.index.position[id(node)]]  # after the copy's own statement
        verdict = _follow(ctx, scope, node.targets[0].target.value, end - 1, losses, 0)
        return verdict is True

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
