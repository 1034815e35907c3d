"""TL316 grad-norm-not-monitored: a training loop that never looks at its gradient norm.

The loop's iteration (helpers of the same file inlined) neither keeps the value returned by
a clipping call (`norm = clip_grad_norm_(...)`) nor computes a norm (`p.grad.norm()`,
`torch.linalg.vector_norm`, a helper named like `grad_norm`). Hugging Face `Trainer` and
Lightning log it themselves and have no hand-written loop to judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import last_name, snake_parts
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.training import CLIP, OPTIMIZER_STEP, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

# Where TL301 reports a loop that does not clip (the complement of its condition).
_NOT_TL301 = ProjectCondition(none_of=("transformer",), scope="program")


class GradNormNotMonitored(Rule):
    code = "TL316"
    name = "grad-norm-not-monitored"
    kind = "practice"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "A training loop never logs its gradient norm."

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        view: TrainingView = ctx.training
        for loop in view.loops:
            step = loop.first(OPTIMIZER_STEP)
            if step is None or view.is_engine_step(step) or view.benchmark(loop.node, ctx.path):
                continue
            clips = loop.of(CLIP)
            if any(type(ctx.index.parent(clip.node)) is not cst.Expr for clip in clips):
                continue  # the returned norm is kept
            if any("norm" in snake_parts(last_name(e.node.func) or "") for e in view.calls_in(loop)
                   if type(e.node) is cst.Call and e.kind != CLIP and view.event_kind(e.node) != CLIP):
                continue
            if clips:
                ctx.report(clips[0].node, "the gradient norm is never looked at in this training loop; keep the "
                           "value clip_grad_norm_ returns and log it: spikes announce divergence early")
            else:
                # A loop that does not clip is TL301's finding where TL301 judges it (a
                # project that trains a transformer, unless a hook clips): one finding, not two.
                ctx.report(step.node, "the gradient norm is never looked at in this training loop; compute it "
                           "before the step (torch.nn.utils.get_total_norm of the gradients) and log it: "
                           "spikes announce divergence early",
                           when=None if view.clips_by_hook else _NOT_TL301)
