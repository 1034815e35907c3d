"""TL314 loss-on-probabilities: a log-likelihood loss fed softmax probabilities.

`cross_entropy`/`CrossEntropyLoss` apply `log_softmax` themselves: given probabilities,
they compute a double softmax. `nll_loss`/`NLLLoss` expect log-probabilities: given
probabilities, the log is missing. The *input* (first argument) is followed through
reshapes (`.view`, `.reshape`, indexing) and through a name bound once in its scope; the
target (soft labels for distillation) is not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg
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
_SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.nn.Softmax"}
_LOG_SOFTMAX = {"torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                "torch.nn.LogSoftmax", "torch.log"}
_SHAPE_METHODS = frozenset({"view", "reshape", "flatten", "contiguous", "transpose", "permute", "squeeze",
                            "unsqueeze", "float", "to", "type_as", "view_as", "reshape_as"})


class LossOnProbabilities(Rule):
    code = "TL314"
    name = "loss-on-probabilities"
    severity = "error"
    # pre-filter: cross-entropy/NLL losses
    tokens = frozenset({"cross_entropy", "nll_loss", "crossentropyloss", "nllloss"})
    summary = "cross_entropy/nll_loss is given softmax probabilities instead of logits/log-probabilities."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        for call in ctx.index.calls:
            loss = _LOSSES.get(ctx.index.qualify(call.func) or view.origin(call.func) or "")
            if loss is None:
                continue
            arg = get_arg(call, "input", 0)
            if arg is None or _probabilities(view, arg.value, 0) != "softmax":
                continue
            if loss == "cross_entropy":
                message = ("cross_entropy applies log_softmax itself: given softmax probabilities it computes a "
                           "double softmax and flattens the gradients; pass the logits")
            else:
                message = ("nll_loss expects log-probabilities: given softmax probabilities the log is missing; "
                           "use log_softmax (or cross_entropy on the logits)")
            ctx.report(call, message)


def _probabilities(view: TrainingView, expr: cst.BaseExpression, depth: int) -> str | None:
    """"softmax" when `expr` holds softmax probabilities, "log" for log-probabilities."""
    if depth > 6:
        return None
    if type(expr) is cst.Subscript:
        return _probabilities(view, expr.value, depth + 1)
    if type(expr) is cst.Name:
        bound = view.resolve(expr)
        return _probabilities(view, bound, depth + 1) if bound is not None else None
    if type(expr) is not cst.Call:
        return None
    func = expr.func
    name = view.index.qualify(func) or view.origin(func)
    if name in _SOFTMAX or _ends_in_softmax(view, func):
        return "softmax"
    if name in _LOG_SOFTMAX:
        return "log"
    if type(func) is cst.Attribute and view.index.qualify(func) is None:
        method = func.attr.value
        if method == "softmax":
            return "softmax"
        if method in ("log_softmax", "log"):
            return "log"
        if method in _SHAPE_METHODS:
            return _probabilities(view, func.value, depth + 1)
    return None


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
