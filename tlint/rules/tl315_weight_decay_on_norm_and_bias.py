"""TL315 weight-decay-on-norm-and-bias: AdamW decays every parameter, norms and biases too.

`AdamW(model.parameters(), weight_decay=w)` with an explicit `w` > 0: one group, so
biases, LayerNorm gains and embeddings are pulled towards zero along with the weight
matrices. Explicit parameter groups are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name
from tlint.rules.base import Rule
from tlint.views.training import TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_WRAPPERS = frozenset({"filter", "list", "tuple"})


class WeightDecayOnNormAndBias(Rule):
    code = "TL315"
    name = "weight-decay-on-norm-and-bias"
    kind = "practice"
    tokens = frozenset({"adamw"})  # pre-filter: AdamW optimisers
    summary = "AdamW applies weight decay to biases, norms and embeddings (no parameter groups)."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        for site in view.optimizers:
            if "adamw" not in site.name.rsplit(".", 1)[-1].lower():
                continue
            decay = get_arg(site.call, "weight_decay")
            params = get_arg(site.call, "params", 0)
            if decay is None or params is None or not _all_parameters(params.value):
                continue
            value = view.literal(decay.value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                ctx.report(decay, "weight decay applies to every parameter, biases, norm gains and embeddings "
                           "included; put those in a group with weight_decay=0.0")


def _all_parameters(expr: cst.BaseExpression) -> bool:
    """`model.parameters()`, possibly wrapped in `filter(...)`/`list(...)`."""
    if type(expr) is not cst.Call:
        return False
    name = last_name(expr.func)
    if name == "parameters" and type(expr.func) is cst.Attribute:
        return True
    if name in _WRAPPERS and type(expr.func) is cst.Name:
        return any(_all_parameters(arg.value) for arg in expr.args)
    return False
