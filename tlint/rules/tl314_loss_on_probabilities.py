"""TL314 loss-on-probabilities: a log-likelihood loss fed probabilities.

`cross_entropy`/`CrossEntropyLoss` apply `log_softmax` themselves: given probabilities,
they compute a double softmax. `nll_loss`/`NLLLoss` expect log-probabilities: given
probabilities, the log is missing. Probabilities are a softmax (function, method,
`nn.Softmax` module, an `nn.Sequential` ending in one), the exponential of a log-softmax,
or a sigmoid. The *input* (first argument) is followed through reshapes (`.view`,
`.reshape`, indexing), through the assignments that reach it (every one must agree),
through parameters (the arguments of this file's calls) and through the returns of a
helper of this file. The loss itself may be held in a local, an attribute or a
parameter (`self.criterion = nn.CrossEntropyLoss()`, `loss_fn=F.cross_entropy`). The
target (soft labels for distillation) is not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import assignment_targets, get_arg, walk
from tlint.rules.base import Rule
from tlint.views.training import TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_LOSSES = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.CrossEntropyLoss": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll_loss",
    "torch.nn.NLLLoss": "nll_loss",
}
_FUNCTIONAL_LOSSES = frozenset({"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"})
_LOSS_WORDS = frozenset({"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"})
_SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.nn.Softmax",
            "torch.Tensor.softmax"}
_LOG_SOFTMAX = {"torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                "torch.nn.LogSoftmax", "torch.log"}
_SIGMOID = {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit", "torch.nn.Sigmoid"}
_EXP = {"torch.exp", "torch.special.exp"}
_MODULES = {"torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax": "log", "torch.nn.Sigmoid": "sigmoid"}
_SHAPE_METHODS = frozenset({"view", "reshape", "flatten", "contiguous", "transpose", "permute", "squeeze",
                            "unsqueeze", "float", "to", "type_as", "view_as", "reshape_as", "clamp", "clip",
                            "double", "half", "bfloat16"})
_METHODS = {"softmax": "softmax", "log_softmax": "log", "log": "log", "sigmoid": "sigmoid"}
_MAX_DEPTH = 8

_MESSAGES = {
    ("cross_entropy", "softmax"): "cross_entropy applies log_softmax itself: given softmax probabilities it "
                                  "computes a double softmax and flattens the gradients; pass the logits",
    ("cross_entropy", "sigmoid"): "cross_entropy applies log_softmax itself: given sigmoid outputs it squashes "
                                  "the scores twice and flattens the gradients; pass the logits",
    ("nll_loss", "softmax"): "nll_loss expects log-probabilities: given softmax probabilities the log is "
                             "missing; use log_softmax (or cross_entropy on the logits)",
    ("nll_loss", "sigmoid"): "nll_loss expects log-probabilities: given sigmoid outputs the log is missing; "
                             "use log_softmax (or cross_entropy on the logits)",
}


class LossOnProbabilities(Rule):
    code = "TL314"
    name = "loss-on-probabilities"
    kind = "defect"
    # pre-filter: cross-entropy/NLL losses
    tokens = frozenset({"cross_entropy", "nll_loss", "crossentropyloss", "nllloss"})
    summary = "cross_entropy/nll_loss is given softmax probabilities instead of logits/log-probabilities."

    def check(self, ctx: FileContext) -> None:
        if not ctx.index.identifiers & _LOSS_WORDS:
            return
        view: TrainingView = ctx.training
        holders = _loss_holders(view)
        for call in ctx.index.calls:
            loss = _loss_kind(view, call.func, holders, 0)
            if loss is None:
                continue
            arg = get_arg(call, "input", 0)
            kind = _probabilities(view, arg.value, 0) if arg is not None else None
            message = _MESSAGES.get((loss, kind or ""))
            if message is not None:
                ctx.report(call, message)


def _loss_holders(view: TrainingView) -> frozenset[str]:
    """Names (last parts) that are assigned a loss, or parameters of a function that some
    call of this file passes one: the callees worth resolving."""
    names: set[str] = set()
    index = view.index
    for node in index.assignments:
        if type(node) in (cst.Assign, cst.AnnAssign) and node.value is not None \
                and _constructed_loss(view, node.value) is not None:
            for target in assignment_targets(node):
                for part in walk(target):
                    if type(part) is cst.Name:
                        names.add(part.value)
    for call in index.calls:
        for arg in call.args:
            if arg.keyword is not None and _constructed_loss(view, arg.value) is not None:
                names.add(arg.keyword.value)
            elif arg.keyword is None and _constructed_loss(view, arg.value) is not None:
                return frozenset({"*"})  # passed by position: any parameter may hold it
    return frozenset(names)


def _constructed_loss(view: TrainingView, expr: cst.BaseExpression) -> str | None:
    """The loss an expression builds or names directly: `nn.CrossEntropyLoss()`, `F.nll_loss`."""
    if type(expr) is cst.Call:
        return _LOSSES.get(view.index.qualify(expr.func) or "")
    if type(expr) in (cst.Name, cst.Attribute):
        name = view.index.qualify(expr) or ""
        return _LOSSES[name] if name in _FUNCTIONAL_LOSSES else None
    return None


def _loss_kind(view: TrainingView, func: cst.BaseExpression, holders: frozenset[str], depth: int) -> str | None:
    """The loss a call runs: a loss function or module, or a name, attribute or parameter
    that holds one (every binding that reaches it agreeing)."""
    if type(func) is cst.Call:  # `nn.CrossEntropyLoss()(probs, y)`
        return _constructed_loss(view, func)
    qualified = view.index.qualify(func)
    if qualified is not None:
        return _LOSSES.get(qualified)
    if type(func) not in (cst.Name, cst.Attribute) or depth > 4:
        return None
    name = func.value if type(func) is cst.Name else func.attr.value  # type: ignore[attr-defined]
    if name not in holders and "*" not in holders:
        return None
    sources = view.sources(func)
    if not sources:
        return _LOSSES.get(view.origin(func) or "")
    kinds = {_constructed_loss(view, s) or _loss_kind(view, s, holders, depth + 1)
             if type(s) in (cst.Name, cst.Attribute) else _constructed_loss(view, s) for s in sources}
    return kinds.pop() if len(kinds) == 1 else None


def _probabilities(view: TrainingView, expr: cst.BaseExpression, depth: int) -> str | None:
    """"softmax" or "sigmoid" when `expr` holds probabilities, "log" for log-probabilities."""
    if depth > _MAX_DEPTH:
        return None
    kind = type(expr)
    if kind is cst.Subscript:
        return _probabilities(view, expr.value, depth + 1)  # type: ignore[attr-defined]
    if kind is cst.Name or kind is cst.Attribute:
        return _agreed(view, view.sources(expr), depth)
    if kind is not cst.Call:
        return None
    call: cst.Call = expr  # type: ignore[assignment]
    func = call.func
    name = view.index.qualify(func) or ""
    if name in _SOFTMAX or _ends_in_softmax(view, func):
        return "softmax"
    if name in _LOG_SOFTMAX:
        return "log"
    if name in _SIGMOID:
        return "sigmoid"
    if name in _EXP:
        return _exp_of(view, call.args[0].value if call.args else None, depth)
    if name:
        return None
    if type(func) is cst.Attribute:
        method = func.attr.value
        if method in _METHODS:
            return _METHODS[method]
        if method == "exp":
            return _exp_of(view, func.value, depth)
        if method in _SHAPE_METHODS:
            return _probabilities(view, func.value, depth + 1)
    module = _module_kind(view, func)
    if module is not None:
        return module
    helper = view.calls.callee(call)
    if helper is not None:
        returns = [n.value for n in walk(helper.body, into_functions=False) if type(n) is cst.Return]
        if returns and all(r is not None for r in returns):
            return _agreed(view, returns, depth)  # type: ignore[arg-type]  # no None left
    return None


def _agreed(view: TrainingView, sources: list[cst.BaseExpression] | None, depth: int) -> str | None:
    if not sources:
        return None
    kinds = {_probabilities(view, s, depth + 1) for s in sources}
    return kinds.pop() if len(kinds) == 1 else None


def _exp_of(view: TrainingView, expr: cst.BaseExpression | None, depth: int) -> str | None:
    """`exp(log_softmax(x))` is softmax(x)."""
    return "softmax" if expr is not None and _probabilities(view, expr, depth + 1) == "log" else None


def _module_kind(view: TrainingView, func: cst.BaseExpression) -> str | None:
    """`self.softmax(x)` after `self.softmax = nn.Softmax(-1)` (every assignment agreeing)."""
    if type(func) not in (cst.Name, cst.Attribute):
        return None
    sources = view.sources(func)
    if not sources:
        return _MODULES.get(view.origin(func) or "")
    kinds = {_MODULES.get(view.index.qualify(s.func) or "") if type(s) is cst.Call else None for s in sources}
    return kinds.pop() if len(kinds) == 1 else None


def _ends_in_softmax(view: TrainingView, func: cst.BaseExpression) -> bool:
    """A model built as `nn.Sequential(..., nn.Softmax(-1))` (moved with `.to(device)`)."""
    built = view.resolve(func) if type(func) is cst.Name else None
    while type(built) is cst.Call and type(built.func) is cst.Attribute and built.func.attr.value in (
        "to", "cuda", "cpu", "float", "half"
    ):
        built = built.func.value
    if type(built) is not cst.Call or view.index.qualify(built.func) != "torch.nn.Sequential":
        return False
    layers = [a.value for a in built.args if a.keyword is None and not a.star]
    return bool(layers) and type(layers[-1]) is cst.Call and view.index.qualify(layers[-1].func) in _SOFTMAX
