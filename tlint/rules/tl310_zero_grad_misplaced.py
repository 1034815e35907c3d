"""TL310 zero-grad-misplaced: gradients reset between `backward()` and the step.

In one iteration's event sequence, a `zero_grad` that follows a backward and precedes the
optimiser step that would use that backward's gradients wipes them: the step applies
nothing (or only momentum). A reset under a condition the step does not share (skipping a
non-finite batch: `if not torch.isfinite(loss): optimizer.zero_grad(); continue`) is a
different branch, not a wipe; a reset of another optimiser (GANs) is not one either.

Under `accelerator.accumulate(model)`, the prepared optimiser skips its `step()` and
`zero_grad()` until the micro-batch that syncs: a reset of the *module*
(`model.zero_grad()`) there runs on every micro-batch and wipes what the ones before it
accumulated, wherever it sits in the iteration (unless under `if
accelerator.sync_gradients:`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.training import BACKWARD, OPTIMIZER_STEP, ZERO_GRAD, TrainingView, covers

if TYPE_CHECKING:
    from tlint.context import FileContext


class ZeroGradMisplaced(Rule):
    code = "TL310"
    name = "zero-grad-misplaced"
    kind = "defect"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "zero_grad() between backward() and step() wipes the gradients before they are used."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        reported: set[int] = set()
        for loop in view.loops:
            events = loop.events
            for i, reset in enumerate(events):
                if reset.kind != ZERO_GRAD or id(reset.node) in reported:
                    continue
                backward = next((e for e in reversed(events[:i]) if e.kind in (BACKWARD, OPTIMIZER_STEP)), None)
                step = next((e for e in events[i + 1:] if e.kind in (BACKWARD, OPTIMIZER_STEP)), None)
                if backward is None or backward.kind != BACKWARD or step is None or step.kind != OPTIMIZER_STEP:
                    continue
                if not _runs_whenever(reset, step) or not self._same_optimizer(view, reset, step):
                    continue
                reported.add(id(reset.node))
                ctx.report(reset.node, "zero_grad() between backward() and step() wipes the gradients the step "
                           "was about to apply; reset after step() (or before the forward pass)",
                           fix=fixes.move_fix(ctx.index, reset.node, step.node))
            self._module_reset_under_accumulate(ctx, view, loop, reported)

    @staticmethod
    def _module_reset_under_accumulate(ctx: FileContext, view: TrainingView, loop, reported: set[int]) -> None:
        if not loop.has(BACKWARD):
            return
        for reset in loop.events:
            if reset.kind != ZERO_GRAD or id(reset.node) in reported or type(reset.node) is not cst.Call:
                continue
            receiver = view.receiver(reset.node)
            if receiver is None or view.role(receiver) == "optimizer":
                continue
            accumulated = [
                arg.value for item in reset.contexts if type(item) is cst.Call
                and type(item.func) is cst.Attribute and item.func.attr.value == "accumulate"
                and _accelerator(view, item.func.value) for arg in item.args
            ]
            if not any(dotted_name(a) == dotted_name(receiver) for a in accumulated) \
                    and view.role(receiver) != "model":
                continue
            if any(type(n) is cst.Name and n.value == "sync_gradients"
                   for c in reset.conditions for n in walk(c.test)):
                continue
            reported.add(id(reset.node))
            ctx.report(reset.node, "under accelerator.accumulate() the prepared optimiser skips step() and "
                       "zero_grad() until the sync step, but this module reset runs on every micro-batch and "
                       "wipes the gradients accumulated so far; call optimizer.zero_grad() instead")

    @staticmethod
    def _same_optimizer(view: TrainingView, reset, step) -> bool:
        """Unless both name an optimiser and the names differ (`opt_d.zero_grad()` before
        `opt_g.step()`), or the reset is of a model the stepped optimiser is known not to
        train (`netD.zero_grad()` before `opt_g.step()`, `opt_g` over `netG.parameters()`),
        the reset touches the stepped parameters."""
        reset_target, step_target = view.optimizer_of(reset), view.optimizer_of(step)
        if reset_target is None or step_target is None:
            return True
        if view.role(step_target) == "optimizer" and view.is_module(reset_target):
            name, modules = dotted_name(reset_target), view.optimized_modules(step_target)
            if name is not None and modules and not covers(name, modules):
                return False
        if view.role(reset_target) != "optimizer" or view.role(step_target) != "optimizer":
            return True
        return dotted_name(reset_target) == dotted_name(step_target)


def _accelerator(view: TrainingView, expr: cst.BaseExpression) -> bool:
    return view.role(expr) == "accelerator" or "accelerator" in snake_parts(last_name(expr) or "")


def _runs_whenever(reset, step) -> bool:
    """Whenever the step runs, the reset ran: its conditions are among the step's."""
    return all(any(c is d for d in step.conditions) for c in reset.conditions)
