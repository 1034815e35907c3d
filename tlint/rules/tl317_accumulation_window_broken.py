"""TL317 accumulation-window-broken: the optimiser steps once per k micro-steps, but the
gradients are reset, or clipped, on every micro-step.

The window comes from `tlint.views.accumulation` (a modulo test, a counter compared to k,
or an inner `for _ in range(k)` micro-batch loop; k resolved through the bindings view and
every resolvable value above 1). Within the iteration, a `zero_grad()` of the stepped
optimiser (or of the model) that runs on every micro-step throws away the gradients of the
micro-steps before it, so each step applies one micro-batch (accumulation silently off);
a clip (`clip_grad_norm_`, `clip_grad_value_`) that runs on every micro-step clips partial
sums, so what the step applies is neither the accumulated gradient nor a clipped one.
"Every micro-step": outside the pacing test, under no test that changes between iterations
(a settings test such as `if args.max_grad_norm > 0:` does not pace it; `if i % k == 0:`
does); inside the inner micro-batch loop. A reset between the backward and the step is
TL310's (zero-grad-misplaced), not reported here. DeepSpeed engines and `accelerate`'s
`accumulate()` own their window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.cst import dotted_name
from tlint.rules.base import Rule
from tlint.views.accumulation import runs_every_micro_step, windows
from tlint.views.training import BACKWARD, CLIP, OPTIMIZER_STEP, ZERO_GRAD, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.views.training_common import Event, TrainingLoop


class AccumulationWindowBroken(Rule):
    code = "TL317"
    name = "accumulation-window-broken"
    kind = "defect"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "zero_grad() or gradient clipping runs on every micro-step while the optimiser steps every k."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        bindings = ctx.bindings
        reported: set[int] = set()
        for loop in view.loops:
            for window in windows(view, bindings, loop):
                for event in loop.of(ZERO_GRAD, CLIP):
                    if id(event.node) in reported or event.excludes(window.step):
                        continue
                    if event.kind == ZERO_GRAD and (_between_backward_and_step(loop, event)
                                                    or not _same_optimizer(view, event, window.step)):
                        continue
                    if not runs_every_micro_step(view, bindings, loop, window, event):
                        continue
                    reported.add(id(event.node))
                    if event.kind == ZERO_GRAD:
                        ctx.report(event.node, "zero_grad() runs on every micro-step but the optimiser steps once "
                                   "per accumulation window: the gradients of the earlier micro-steps are thrown "
                                   "away and accumulation is off; reset only after optimizer.step(), under the "
                                   "same test")
                    else:
                        ctx.report(event.node, "gradients are clipped on every micro-step but the optimiser steps "
                                   "once per accumulation window: each clip cuts a partial sum; clip once, just "
                                   "before optimizer.step(), under the same test")


def _between_backward_and_step(loop: TrainingLoop, reset: Event) -> bool:
    """TL310's case: the nearest backward/step before the reset is a backward and the next one a step."""
    events = loop.events
    i = next(n for n, e in enumerate(events) if e is reset)
    before = next((e for e in reversed(events[:i]) if e.kind in (BACKWARD, OPTIMIZER_STEP)), None)
    after = next((e for e in events[i + 1:] if e.kind in (BACKWARD, OPTIMIZER_STEP)), None)
    return before is not None and before.kind == BACKWARD and after is not None and after.kind == OPTIMIZER_STEP


def _same_optimizer(view: TrainingView, reset: Event, step: Event) -> bool:
    """Unless both name an optimiser and the names differ, the reset touches the stepped parameters."""
    reset_target, step_target = view.optimizer_of(reset), view.optimizer_of(step)
    if reset_target is None or step_target is None:
        return True
    if view.role(reset_target) != "optimizer" or view.role(step_target) != "optimizer":
        return True
    return dotted_name(reset_target) == dotted_name(step_target)
