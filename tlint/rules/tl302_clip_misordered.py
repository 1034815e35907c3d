"""TL302 clip-misordered: gradients clipped before `backward()` or after the step.

In one iteration's event sequence, a clipping call with no backward before it (it clips
the previous iteration's gradients, or nothing) or with the optimiser step already taken
and none after it (the update is done unclipped). A call that only measures the norm
(`clip_grad_norm_(params, float("inf"))`) clips nothing and is not judged. A function or
method of this file that steps the optimiser and then clips, outside any loop of its own
(a wrapper `step()`, even in a file with no `backward()`), clips after the update too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg
from tlint.rules.base import Rule
from tlint.views.training import BACKWARD, CLIP, OPTIMIZER_STEP, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext


class ClipMisordered(Rule):
    code = "TL302"
    name = "clip-misordered"
    kind = "defect"
    # pre-filter: training loops (`backward`), or a wrapper that steps and clips (`clip`)
    tokens = frozenset({"backward", "clip"})
    summary = "Gradients are clipped before backward() or after optimizer.step()."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        reported: set[int] = set()
        for loop in view.loops:
            events = loop.events
            order = [i for i, e in enumerate(events) if e.kind in (BACKWARD, OPTIMIZER_STEP)]
            for i, clip in enumerate(events):
                if clip.kind != CLIP or id(clip.node) in reported or self._measures_only(view, clip):
                    continue
                # The iteration repeats: before its first event comes the last one of the
                # previous iteration (a loop that steps at its top for the last backward).
                previous = next((j for j in reversed(order) if j < i), order[-1])
                following = next((j for j in order if j > i), order[0])
                if events[previous].kind != OPTIMIZER_STEP or events[following].kind != BACKWARD:
                    continue
                reported.add(id(clip.node))
                where = ("before backward() computes them" if following > i
                         else "after optimizer.step() has applied them")
                ctx.report(clip.node, f"gradients are clipped {where}; clip between backward() and optimizer.step()")
        for function in view.wrapper_functions(CLIP, OPTIMIZER_STEP):
            own = [e for e in view.iteration(function) if not e.loops]
            if any(e.kind == BACKWARD for e in own):
                continue  # a step function: judged above as a training loop
            for i, clip in enumerate(own):
                if clip.kind != CLIP or id(clip.node) in reported or self._measures_only(view, clip):
                    continue
                before = [e.kind for e in own[:i] if e.kind == OPTIMIZER_STEP]
                if before and not any(e.kind == OPTIMIZER_STEP for e in own[i + 1:]):
                    reported.add(id(clip.node))
                    ctx.report(clip.node, "gradients are clipped after optimizer.step() has applied them; clip "
                               "before the step")

    @staticmethod
    def _measures_only(view: TrainingView, clip) -> bool:
        call = clip.node
        arg = get_arg(call, "max_norm", 1) if type(call) is cst.Call else None
        value = view.literal(arg.value) if arg is not None else None
        return isinstance(value, float) and math.isinf(value)
