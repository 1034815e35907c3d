"""TL310 zero-grad-misplaced: gradients reset between `backward()` and the step.

In one iteration's event sequence, a `zero_grad` that follows a backward and precedes the
optimiser step that would use that backward's gradients wipes them: the step applies
nothing (or only momentum). A reset under a condition the step does not share (skipping a
non-finite batch: `if not torch.isfinite(loss): optimizer.zero_grad(); continue`) is a
different branch, not a wipe; a reset of another optimiser (GANs) is not one either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint import fixes
from tlint.cst import dotted_name
from tlint.rules.base import Rule
from tlint.views.training import BACKWARD, OPTIMIZER_STEP, ZERO_GRAD, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext


class ZeroGradMisplaced(Rule):
    code = "TL310"
    name = "zero-grad-misplaced"
    severity = "error"
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

    @staticmethod
    def _same_optimizer(view: TrainingView, reset, step) -> bool:
        """Unless both name an optimiser and the names differ (`opt_d.zero_grad()` before
        `opt_g.step()`), the reset touches the stepped parameters."""
        reset_target, step_target = view.optimizer_of(reset), view.optimizer_of(step)
        if reset_target is None or step_target is None:
            return True
        if view.role(reset_target) != "optimizer" or view.role(step_target) != "optimizer":
            return True
        return dotted_name(reset_target) == dotted_name(step_target)


def _runs_whenever(reset, step) -> bool:
    """Whenever the step runs, the reset ran: its conditions are among the step's."""
    return all(any(c is d for d in step.conditions) for c in reset.conditions)
