"""TL305 scheduler-before-optimizer: `scheduler.step()` runs before `optimizer.step()`.

In one iteration's event sequence, a scheduler step (no argument) that comes before every
optimiser step of the iteration, in a loop that steps an optimiser after it. PyTorch's
schedulers set the rate for the *next* optimiser step; stepping them first skips the first
value of the schedule (the start of the warmup) and PyTorch only warns at run time.
The loops judged: each training loop, the loops around it (a scheduler stepped at the top
of the update or epoch loop, before the inner loop that steps the optimiser), the function that
holds a training loop no loop of its own repeats (an epoch's body, `train_epoch()` or a
trainer's `on_train()`, called once per epoch from elsewhere: a scheduler stepped
unconditionally at its top, outside any loop, before the loop's optimiser steps), and a
function or method of this file that steps both outside any loop of its own (a wrapper
`step()` that advances the schedule, then the optimiser; a file with no `backward()`).
Schedulers stepped with an argument (`ReduceLROnPlateau.step(val_loss)`,
`scheduler.step(epoch)`) set their state explicitly and are not judged; neither are
schedulers built from a class of this file, which may be written to step first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import walk
from tlint.rules.base import Rule
from tlint.views.training import OPTIMIZER_STEP, SCHEDULER_STEP, Event, TrainingView, construction_family

if TYPE_CHECKING:
    from tlint.context import FileContext


class SchedulerBeforeOptimizer(Rule):
    code = "TL305"
    name = "scheduler-before-optimizer"
    kind = "defect"
    # pre-filter: training loops (`backward`), or a wrapper stepping a scheduler (`sched`)
    tokens = frozenset({"backward", "sched"})
    summary = "scheduler.step() is called before optimizer.step() in the same iteration."

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:  # tests of schedulers step them in whatever order they probe
            return
        view: TrainingView = ctx.training
        reported: set[int] = set()
        seen: set[int] = set()
        for loop in view.loops:
            self._judge(ctx, view, list(loop.events), reported, fix=True)
            around = [*loop.outer]
            if loop.epoch_loop is not None and loop.epoch_loop not in around:
                around.append(loop.epoch_loop)
            for outer in around:  # the update or epoch loop around it
                if id(outer) not in seen:
                    seen.add(id(outer))
                    self._judge(ctx, view, view.iteration(outer), reported, fix=False)
        for loop in view.loops:  # the function that holds a loop repeated elsewhere: an epoch's body
            function = loop.function
            if loop.is_step_function or loop.outer or loop.epoch_loop is not None or function is None \
                    or id(function) in seen:
                continue
            seen.add(id(function))
            events = [e for e in view.iteration(function)
                      if e.kind == OPTIMIZER_STEP or (not e.loops and not e.conditions)]
            self._judge(ctx, view, events, reported, fix=False)
        for function in view.wrapper_functions(SCHEDULER_STEP, OPTIMIZER_STEP):
            events = [e for e in view.iteration(function) if not e.loops]
            self._judge(ctx, view, events, reported, fix=True)

    def _judge(self, ctx: FileContext, view: TrainingView, events: list[Event], reported: set[int],
               fix: bool) -> None:
        first_step = next((i for i, e in enumerate(events) if e.kind == OPTIMIZER_STEP), None)
        if first_step is None:
            return
        for event in events[:first_step]:
            if event.kind != SCHEDULER_STEP or id(event.node) in reported:
                continue
            if event.node.args or not self._library_scheduler(view, event):  # type: ignore[attr-defined]  # a call
                continue
            reported.add(id(event.node))
            ctx.report(event.node, "scheduler.step() before optimizer.step() skips the first value of the "
                       "schedule (the start of the warmup); step the scheduler after the optimiser",
                       fix=fixes.move_fix(ctx.index, event.node, events[first_step].node) if fix else None)

    @staticmethod
    def _library_scheduler(view: TrainingView, event) -> bool:
        """The scheduler comes from a library (or from outside the file), not from a
        scheduler class or function written in this file."""
        origin = view.origin(view.receiver(event.node))
        if origin is None:
            return True
        head = origin.split(".", 1)[0]
        if head in view.index.classes_by_name:
            return False
        functions = view.index.functions_by_name.get(head)
        return not functions or all(_returns_library_scheduler(view, f) for f in functions)


def _returns_library_scheduler(view: TrainingView, function: cst.FunctionDef) -> bool:
    """A helper of this file that builds and returns a library scheduler
    (`return get_linear_schedule_with_warmup(...)`, `sched = LambdaLR(...); return sched`)."""
    returns = [n.value for n in walk(function.body, into_functions=False) if type(n) is cst.Return]
    if not returns:
        return False
    for value in returns:
        if value is None:
            return False
        built = [value] if type(value) is cst.Call else (view.sources(value) or [])
        if not built or not all(type(b) is cst.Call and _library_scheduler_call(view, b) for b in built):
            return False
    return True


def _library_scheduler_call(view: TrainingView, call: cst.Call) -> bool:
    name = view.index.qualify(call.func) or ""
    return construction_family(name) == "scheduler" and name.split(".", 1)[0] not in view.index.classes_by_name
