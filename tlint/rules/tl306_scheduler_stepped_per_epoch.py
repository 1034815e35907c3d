"""TL306 scheduler-stepped-per-epoch: a schedule sized in steps, stepped once per epoch.

A scheduler whose length is given in optimiser steps — its size argument
(`num_training_steps`, `total_steps`, `T_max`, `total_iters`, ...) is computed from
`len(loader)` or from a name that counts steps (`max_steps`, `num_update_steps`), or
`OneCycleLR(steps_per_epoch=...)`, or a `LambdaLR`/`MultiplicativeLR` whose rate function
(a lambda or a function of this file) reads such a count besides its own argument — whose
`.step()` is called in the epoch loop around a training loop rather than in the training
loop itself; or returned by a LightningModule's `configure_optimizers` without
`"interval": "step"` (Lightning then steps it per epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.calls import parameters
from tlint.views.training import SCHEDULER_STEP, SchedulerSite, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

# (keyword, position) of the arguments that size a schedule, by constructor name.
_SIZE_ARGUMENTS = {
    "get_scheduler": (("num_training_steps", 3), ("num_warmup_steps", 2)),
    "OneCycleLR": (("total_steps", 2), ("steps_per_epoch", 4)),
    "CosineAnnealingLR": (("T_max", 1),),
    "LinearLR": (("total_iters", 3),),
    "PolynomialLR": (("total_iters", 1),),
    "ConstantLR": (("total_iters", 2),),
}
_LAMBDA_SCHEDULERS = frozenset({"LambdaLR", "MultiplicativeLR"})
_HF_DEFAULT = (("num_training_steps", 2), ("num_warmup_steps", 1))
_STEP_WORDS = frozenset({"step", "steps", "iter", "iters", "iteration", "iterations", "updates", "batches"})


class SchedulerSteppedPerEpoch(Rule):
    code = "TL306"
    name = "scheduler-stepped-per-epoch"
    kind = "defect"
    # pre-filter: schedulers (`lr_scheduler`, `get_*_schedule*`, `*Scheduler`, `*Warmup*`, `SWALR`)
    tokens = frozenset({"sched", "warmup", "swalr"})
    summary = "A schedule sized in optimiser steps is stepped once per epoch."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        sized = [site for site in view.schedulers if self._sized_in_steps(view, site)]
        if not sized:
            return
        targets = {site.target for site in sized if site.target}
        for call in ctx.index.calls:
            if view.event_kind(call) != SCHEDULER_STEP or call.args:
                continue
            if last_name(view.receiver(call)) in targets and self._per_epoch(view, call):
                ctx.report(call, "this schedule is sized in optimiser steps but stepped once per epoch: its "
                           "warmup and decay last thousands of epochs; call scheduler.step() after each "
                           "optimizer.step() in the batch loop")
        self._check_lightning(ctx, view, sized)

    @staticmethod
    def _per_epoch(view: TrainingView, call: cst.Call) -> bool:
        judged = False
        for loop in view.loops:
            if loop.is_step_function:
                continue
            if view.index.is_inside(call, loop.node) or any(view.index.is_inside(call, f) for f in loop.helpers):
                return False
            around = [*loop.outer, loop.epoch_loop]
            judged = judged or any(a is not None and view.index.is_inside(call, a) for a in around)
        return judged

    def _sized_in_steps(self, view: TrainingView, site: SchedulerSite) -> bool:
        last = site.name.rsplit(".", 1)[-1]
        if site.name.startswith(("transformers.", "diffusers.")) and last != "get_scheduler":
            arguments: tuple[tuple[str, int], ...] = _HF_DEFAULT
        else:
            arguments = _SIZE_ARGUMENTS.get(last, ())
        if last in _LAMBDA_SCHEDULERS:
            arg = get_arg(site.call, "lr_lambda", 1)
            return arg is not None and _lambda_counts_steps(view, arg.value)
        for keyword, position in arguments:
            arg = get_arg(site.call, keyword, position)
            if arg is None:
                continue
            if keyword == "steps_per_epoch" or _counts_steps(view, arg.value, 0):
                return True
        return False

    def _check_lightning(self, ctx, view: TrainingView, sized: list[SchedulerSite]) -> None:
        for module in view.lightning_modules:
            method = module.methods.get("configure_optimizers")
            if method is None or module.manual_optimization or _asks_for_step_interval(method):
                continue
            for site in sized:
                if view.index.is_inside(site.call, method):
                    ctx.report(site.call, "this schedule is sized in optimiser steps but Lightning steps it once "
                               "per epoch by default; return it as {\"scheduler\": ..., \"interval\": \"step\"}")


def _counts_steps(view: TrainingView, expr: cst.BaseExpression, depth: int) -> bool:
    """The expression counts optimiser steps: `len(loader)`, `max_steps`, `num_update_steps * epochs`."""
    if depth > 3:
        return False
    for node in walk(expr):
        if type(node) is cst.Call and last_name(node.func) == "len":
            return True
        if type(node) in (cst.Name, cst.Attribute):
            name = last_name(node) or ""
            if set(snake_parts(name)) & _STEP_WORDS:
                return True
            if type(node) is cst.Name:
                bound = view.resolve(node)
                if bound is not None and bound is not expr and _counts_steps(view, bound, depth + 1):
                    return True
    return False


def _lambda_counts_steps(view: TrainingView, expr: cst.BaseExpression) -> bool:
    """A rate function sized in steps: a lambda or a function of this file whose body
    reads a step count other than its own argument (`step < warmup_steps`)."""
    function: cst.Lambda | cst.FunctionDef | None = None
    if type(expr) is cst.Lambda:
        function = expr
    elif type(expr) is cst.Name:
        function = view.local_function(expr)
    if function is None:
        return False
    own = {p.name.value for p in parameters(function)[:1]}  # the step (or epoch) it is called with
    body = function.body
    for node in walk(body):
        if type(node) is cst.Name and node.value in own:
            continue
        if type(node) in (cst.Name, cst.Attribute) and set(snake_parts(last_name(node) or "")) & _STEP_WORDS:
            if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value in own:
                continue
            return True
        if type(node) is cst.Call and last_name(node.func) == "len":
            return True
    return False


def _asks_for_step_interval(method: cst.FunctionDef) -> bool:
    for node in walk(method):
        if type(node) is cst.DictElement and literal_value(node.key, None) == "interval":
            return literal_value(node.value, "step") == "step"
        if type(node) is cst.Arg and node.keyword is not None and node.keyword.value == "interval":
            return literal_value(node.value, "step") == "step"
    return False
