"""TL303 clip-without-unscale: AMP-scaled gradients clipped before `scaler.unscale_`.

A training loop whose iteration scales the loss with a `GradScaler`
(`scaler.scale(loss).backward()`) and clips with `torch.nn.utils.clip_grad_*` (or FSDP's
`model.clip_grad_norm_`) with no `scaler.unscale_(optimizer)` before the clip. Clipping
functions that unscale themselves (`accelerator.clip_grad_norm_`, `fabric.clip_gradients`,
Lightning's `self.clip_gradients`) are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, last_name
from tlint.rules.base import Rule
from tlint.views.training import CLIP, CLIP_FUNCTIONS, OPTIMIZER_STEP, SCALE, UNSCALE, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_SELF_UNSCALING = frozenset({"accelerator", "fabric"})


class ClipWithoutUnscale(Rule):
    code = "TL303"
    name = "clip-without-unscale"
    severity = "error"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "AMP-scaled gradients are clipped without scaler.unscale_(optimizer) first."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        reported: set[int] = set()
        for loop in view.loops:
            scales = loop.of(SCALE)
            unscales = []
            for event in loop.events:
                if event.kind == UNSCALE:
                    unscales.append(event)
                elif event.kind == CLIP and id(event.node) not in reported:
                    if not any(not event.excludes(scale) for scale in scales):
                        continue  # the `else` branch of `if use_amp:` clips unscaled gradients
                    if any(not event.excludes(unscale) for unscale in unscales):
                        continue
                    if self._clips_raw_gradients(view, event.node):
                        reported.add(id(event.node))
                        ctx.report(event.node, "the GradScaler-scaled gradients are clipped before "
                                   "scaler.unscale_(optimizer): the threshold applies to gradients multiplied "
                                   "by the loss scale; call scaler.unscale_(optimizer) before clipping",
                                   fix=self._fix(ctx, view, loop, event))

    @staticmethod
    def _fix(ctx, view: TrainingView, loop, clip):
        """Insert `scaler.unscale_(optimizer)` before the clip, naming the scaler and the
        optimiser of the `scaler.step(optimizer)` that follows it in the same function."""
        index = ctx.index
        stmt = fixes.own_statement(index, clip.node)
        if stmt is None or any(e.kind == UNSCALE and not clip.excludes(e) for e in loop.events):
            return None  # an unscale after the clip: a second one would raise
        later = loop.events[loop.events.index(clip) + 1:]
        step = next((e for e in later if e.kind == OPTIMIZER_STEP and not clip.excludes(e)), None)
        if step is None or index.enclosing_function(step.node) is not index.enclosing_function(clip.node):
            return None
        scaler, optimizer = view.receiver(step.node), view.optimizer_of(step)
        if scaler is None or view.role(scaler) != "scaler":
            return None
        scaler_text, optimizer_text = dotted_name(scaler), dotted_name(optimizer)
        if scaler_text is None or optimizer_text is None or optimizer is scaler:
            return None
        scaled = {dotted_name(view.receiver(e.node)) for e in loop.of(SCALE) if not clip.excludes(e)}
        if scaled != {scaler_text}:
            return None  # the loss is scaled by another scaler (or one not named plainly)
        code = f"{scaler_text}.unscale_({optimizer_text})"
        return fixes.fix("safe", f"Insert `{code}` before the clip", fixes.insert_before(stmt, code))

    @staticmethod
    def _clips_raw_gradients(view: TrainingView, call) -> bool:
        if type(call) is not cst.Call:
            return False
        if view.index.qualify(call.func) in CLIP_FUNCTIONS:
            return True
        receiver = view.receiver(call)
        if receiver is None or last_name(call.func) not in ("clip_grad_norm_", "clip_grad_value_"):
            return False
        if view.index.qualify(receiver) is not None:
            return False
        name = (last_name(receiver) or "").lower()
        return view.role(receiver) not in _SELF_UNSCALING and name not in ("self", *_SELF_UNSCALING)
