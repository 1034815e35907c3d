"""TL302 clip-misordered: gradients clipped before `backward()` or after the step.

In one iteration's event sequence, a clipping call with no backward before it (it clips
the previous iteration's gradients, or nothing) or with the optimiser step already taken
and none after it (the update is done unclipped). A call that only measures the norm
(`clip_grad_norm_(params, float("inf"))`) clips nothing and is not judged.
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
    severity = "error"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
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

    @staticmethod
    def _measures_only(view: TrainingView, clip) -> bool:
        call = clip.node
        arg = get_arg(call, "max_norm", 1) if type(call) is cst.Call else None
        value = view.literal(arg.value) if arg is not None else None
        return isinstance(value, float) and math.isinf(value)
