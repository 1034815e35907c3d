"""TL305 scheduler-before-optimizer: `scheduler.step()` runs before `optimizer.step()`.

In one iteration's event sequence, a scheduler step (no argument) that comes before every
optimiser step of the iteration, in a loop that steps an optimiser after it. PyTorch's
schedulers set the rate for the *next* optimiser step; stepping them first skips the first
value of the schedule (the start of the warmup) and PyTorch only warns at run time.
Schedulers stepped with an argument (`ReduceLROnPlateau.step(val_loss)`,
`scheduler.step(epoch)`) set their state explicitly and are not judged; neither are
schedulers built from a class of this file, which may be written to step first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint import fixes
from tlint.rules.base import Rule
from tlint.views.training import OPTIMIZER_STEP, SCHEDULER_STEP, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext


class SchedulerBeforeOptimizer(Rule):
    code = "TL305"
    name = "scheduler-before-optimizer"
    severity = "error"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "scheduler.step() is called before optimizer.step() in the same iteration."

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:  # tests of schedulers step them in whatever order they probe
            return
        view: TrainingView = ctx.training
        reported: set[int] = set()
        for loop in view.loops:
            first_step = next((i for i, e in enumerate(loop.events) if e.kind == OPTIMIZER_STEP), None)
            if first_step is None:
                continue
            for event in loop.events[:first_step]:
                if event.kind != SCHEDULER_STEP or id(event.node) in reported:
                    continue
                if event.node.args or not self._library_scheduler(view, event):  # type: ignore[attr-defined]  # a call
                    continue
                reported.add(id(event.node))
                ctx.report(event.node, "scheduler.step() before optimizer.step() skips the first value of the "
                           "schedule (the start of the warmup); step the scheduler after the optimiser",
                           fix=fixes.move_fix(ctx.index, event.node, loop.events[first_step].node))

    @staticmethod
    def _library_scheduler(view: TrainingView, event) -> bool:
        """The scheduler comes from a library (or from outside the file), not from a
        scheduler class or function written in this file."""
        origin = view.origin(view.receiver(event.node))
        if origin is None:
            return True
        head = origin.split(".", 1)[0]
        return head not in view.index.classes_by_name and head not in view.index.functions_by_name
