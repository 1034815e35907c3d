"""TL318 schedule-sized-in-epochs: a schedule sized in epochs, stepped on every iteration
(the mirror of TL306).

A scheduler whose length argument (`T_max`, `total_iters`, `step_size`, `T_0`,
`total_steps`, `num_training_steps`, ...) counts epochs — every name it reads, followed
through the bindings view, says "epoch" (`args.epochs`, `num_train_epochs`,
`self.hparams.max_epochs`) and nothing in it counts steps (`len(loader)`, `steps`,
`iters`, `batches`, `steps_per_epoch`) — whose `.step()` runs in the training loop itself
(or a helper it runs) under no test the optimiser step does not share; or a LightningModule
that returns such a schedule with `"interval": "step"`. A loop that iterates epochs
(`for epoch in range(epochs)`: full-batch training, one step per epoch) is not a batch loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import PARAM
from tlint.views.training import OPTIMIZER_STEP, SCHEDULER_STEP, SchedulerSite, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.views.bindings import BindingsView
    from tlint.views.training_common import Event, TrainingLoop

# (keyword, position) of the arguments that size a schedule, by constructor name.
_SIZE_ARGUMENTS = {
    "get_scheduler": (("num_training_steps", 3),),
    "OneCycleLR": (("total_steps", 2),),
    "CosineAnnealingLR": (("T_max", 1),),
    "CosineAnnealingWarmRestarts": (("T_0", 1),),
    "LinearLR": (("total_iters", 3),),
    "PolynomialLR": (("total_iters", 1),),
    "ConstantLR": (("total_iters", 2),),
    "StepLR": (("step_size", 1),),
}
_HF_DEFAULT = (("num_training_steps", 2),)
_STEP_WORDS = frozenset({"step", "steps", "iter", "iters", "iteration", "iterations", "updates", "batches", "batch",
                         "len", "length", "loader", "dataloader", "samples"})
_EPOCH_WORDS = frozenset({"epoch", "epochs"})


class ScheduleSizedInEpochs(Rule):
    code = "TL318"
    name = "schedule-sized-in-epochs"
    kind = "defect"
    tokens = frozenset({"epoch"})  # pre-filter: the size counts epochs
    summary = "A schedule sized in epochs is stepped on every iteration."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        bindings = ctx.bindings
        sized: dict[cst.Call, SchedulerSite] = {}
        for site in view.schedulers:
            arg = self._size(site)
            if arg is not None and _counts_epochs(bindings, arg) is True:
                sized[site.call] = site
        if not sized:
            return
        reported = False
        for loop in view.loops:
            if loop.is_step_function or _iterates_epochs(loop):
                continue
            steps = loop.of(OPTIMIZER_STEP)
            for event in loop.of(SCHEDULER_STEP):
                call = event.node
                if type(call) is not cst.Call or call.args or not _bound_to(ctx, view.receiver(call), sized):
                    continue
                if not steps or not any(_paced_like(event, step) for step in steps):
                    continue
                reported = True
                ctx.report(call, "this schedule is sized in epochs but stepped on every iteration: it runs its "
                           "whole course in the first few hundred batches and then stays at its final rate; size "
                           "it in optimiser steps (epochs * len(loader)) or step it once per epoch")
        if not reported:
            self._check_lightning(ctx, view, list(sized.values()))

    @staticmethod
    def _size(site: SchedulerSite) -> cst.BaseExpression | None:
        last = site.name.rsplit(".", 1)[-1]
        if site.name.startswith(("transformers.", "diffusers.")) and last != "get_scheduler":
            arguments: tuple[tuple[str, int], ...] = _HF_DEFAULT
        else:
            arguments = _SIZE_ARGUMENTS.get(last, ())
        for keyword, position in arguments:
            arg = get_arg(site.call, keyword, position)
            if arg is not None:
                return arg.value
        return None

    def _check_lightning(self, ctx: FileContext, view: TrainingView, sized: list[SchedulerSite]) -> None:
        for module in view.lightning_modules:
            method = module.methods.get("configure_optimizers")
            if method is None or module.manual_optimization or not _asks_for_step_interval(method):
                continue
            for site in sized:
                if view.index.is_inside(site.call, method):
                    ctx.report(site.call, "this schedule is sized in epochs but returned with \"interval\": "
                               "\"step\": Lightning steps it on every optimiser step, so it runs its course in the "
                               "first few hundred batches; size it in steps or use \"interval\": \"epoch\"")


def _counts_epochs(bindings: BindingsView, expr: cst.BaseExpression, depth: int = 0) -> bool | None:
    """True: the expression counts epochs only; False: it counts steps (or something
    else); None: it names no count at all (a literal)."""
    if depth > 4:
        return False
    found: bool | None = None
    dotted = {id(part) for node in walk(expr) if type(node) is cst.Attribute for part in (node.value, node.attr)}
    dotted |= {id(n) for node in walk(expr) if type(node) is cst.Subscript for n in walk(node.value)
               if any(type(e.slice) is cst.Index and type(e.slice.value) is cst.SimpleString for e in node.slice)}
    for node in walk(expr):
        if type(node) is cst.Call:
            name = last_name(node.func)
            if name in ("len", "round", "int", "max", "min", "ceil", "floor"):
                if name == "len":
                    return False
                continue
            if type(node.func) is cst.Attribute and type(node.func.value) is cst.Name \
                    and node.func.value.value in ("math", "np", "numpy"):
                continue
            return False  # a call of something else: unknown unit
        if type(node) in (cst.Attribute, cst.SimpleString):
            word = node.attr.value if type(node) is cst.Attribute else str(literal_value(node, ""))
            parts = set(snake_parts(word))
            if parts & _STEP_WORDS:
                return False
            if parts & _EPOCH_WORDS:
                found = True
            continue
        if type(node) is not cst.Name:
            continue
        if id(node) in dotted:
            continue  # the receiver or the attribute of `args.epochs`: judged on the Attribute
        parts = set(snake_parts(node.value))
        if parts & _STEP_WORDS:
            return False
        if parts & _EPOCH_WORDS:
            found = True
            continue
        bound = bindings.expression(node)
        if bound is not None and bound is not expr:
            inner = _counts_epochs(bindings, bound, depth + 1)
            if inner is False:
                return False
            if inner:
                found = True
        elif type(node) is cst.Name and node.value not in ("None", "True", "False"):
            return False  # a count of unknown unit
    return found


def _bound_to(ctx: FileContext, receiver: cst.BaseExpression | None, sites: dict[cst.Call, SchedulerSite],
              depth: int = 0) -> bool:
    """`receiver` holds one of `sites` on every path: its bindings (a parameter's through
    the arguments of every call site of its function) are all such constructions."""
    bindings = ctx.bindings
    if type(receiver) is cst.Name:
        bound = bindings.reaching(receiver)
    elif type(receiver) is cst.Attribute:
        bound = bindings.attribute(receiver)
    else:
        return False
    if not bound or depth > 3:
        return False
    for binding in bound:
        if binding.value in sites:
            continue
        param = binding.node
        if binding.kind != PARAM or type(param) is not cst.Param or type(binding.scope) is not cst.FunctionDef:
            return False
        callers = ctx.calls.callers(binding.scope)
        if not callers or any(site.arguments is None or param.name.value not in site.arguments
                              or not _bound_to(ctx, site.arguments[param.name.value], sites, depth + 1)
                              for site in callers):
            return False
    return True


def _iterates_epochs(loop: TrainingLoop) -> bool:
    """The training loop's own iteration is an epoch (`for epoch in range(n_epochs)`)."""
    node = loop.node
    if type(node) is cst.For:
        for part in (node.target, node.iter):
            for n in walk(part):
                if type(n) in (cst.Name, cst.Attribute) and set(snake_parts(last_name(n) or "")) & _EPOCH_WORDS:
                    return True
    return False


def _paced_like(sched: Event, step: Event) -> bool:
    """The scheduler step runs whenever the optimiser step runs (its tests are the step's)."""
    return all(any(c.test is d.test and c.negated == d.negated for d in step.conditions) for c in sched.conditions)


def _asks_for_step_interval(method: cst.FunctionDef) -> bool:
    for node in walk(method):
        if type(node) is cst.DictElement and literal_value(node.key, None) == "interval":
            return literal_value(node.value, None) == "step"
        if type(node) is cst.Arg and node.keyword is not None and node.keyword.value == "interval":
            return literal_value(node.value, None) == "step"
    return False
