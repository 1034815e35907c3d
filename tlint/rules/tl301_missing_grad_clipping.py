"""TL301 missing-grad-clipping: gradients are never clipped.

Three idioms: a hand-written training loop (or step function) whose iteration clips
nothing between `backward()` and the optimiser step; Hugging Face `TrainingArguments` with
`max_grad_norm` 0 or None (the Trainer clips at 1.0 by default); a Lightning `Trainer`
without `gradient_clip_val` in a project that trains a transformer.
"""

from __future__ import annotations

import libcst as cst

from tlint.cst import get_arg, has_star_kwargs
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.training import CLIP, OPTIMIZER_STEP, UNKNOWN, TrainingView, name_matches


def _no_clip_value(value) -> bool:
    """0, a negative threshold, or None turn clipping off (HF and Lightning alike)."""
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0


class MissingGradClipping(Rule):
    code = "TL301"
    name = "missing-grad-clipping"
    severity = "warning"
    summary = "A training loop, `TrainingArguments` or Lightning `Trainer` that never clips gradients."
    # Extra functions (qualified, e.g. "mylib.train.clip_gradients") that clip gradients.
    options = {"clip-functions": []}

    def check(self, ctx) -> None:
        view: TrainingView = ctx.training
        configs, unresolved = view.deepspeed_configs(ctx.path.parent)
        # DeepSpeed clips from its config; when the config is not visible, assume it does.
        clipped_elsewhere = any(c.clips() for c in configs) or unresolved or view.clips_by_hook
        # Test files run a few optimiser steps on toy losses: not training to be clipped.
        if not clipped_elsewhere and not ctx.is_test_file:
            self._check_loops(ctx, view, deepspeed_visible=bool(configs))
            self._check_lightning(ctx, view)
        self._check_training_arguments(ctx, view)

    def _check_loops(self, ctx, view: TrainingView, *, deepspeed_visible: bool) -> None:
        extra = self.options["clip-functions"]
        reported: set[int] = set()
        for loop in view.loops:
            if loop.has(CLIP):
                continue
            if extra and any(name_matches(ctx.index.call_name(e.node), extra) for e in view.calls_in(loop)):
                continue
            step = loop.first(OPTIMIZER_STEP)
            if step is None or id(step.node) in reported:
                continue
            if view.is_engine_step(step) and not deepspeed_visible:
                continue  # a DeepSpeed engine configured elsewhere
            reported.add(id(step.node))
            # tlint is about transformer training: a CNN or RL loop that never clips is
            # not this rule's business, so the project must build or load a transformer.
            ctx.report(step.node, "the optimiser steps without gradient clipping in this training loop; "
                       "clip between backward() and step(), e.g. "
                       "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
                       when=ProjectCondition(any_of=("transformer",), scope="imports"))

    def _check_training_arguments(self, ctx, view: TrainingView) -> None:
        for call in view.training_arguments:
            if has_star_kwargs(call):
                continue
            arg = get_arg(call, "max_grad_norm")
            if arg is None:
                continue
            value = view.literal(arg.value)
            if value is not UNKNOWN and _no_clip_value(value):
                ctx.report(arg, "max_grad_norm of 0 or None turns off the Trainer's gradient clipping; "
                           "keep the default (1.0)")

    def _check_lightning(self, ctx, view: TrainingView) -> None:
        if not view.lightning_trainers or self._module_clips_itself(view):
            return
        for call in view.lightning_trainers:
            if has_star_kwargs(call):
                continue
            arg = get_arg(call, "gradient_clip_val")
            node: cst.CSTNode = call
            if arg is not None:
                value = view.literal(arg.value)
                if value is UNKNOWN or not _no_clip_value(value):
                    continue
                node = arg
            ctx.report(node, "Lightning Trainer without gradient_clip_val never clips the transformer's "
                       "gradients; pass gradient_clip_val=1.0",
                       when=ProjectCondition(any_of=("transformer",), scope="imports"))

    @staticmethod
    def _module_clips_itself(view: TrainingView) -> bool:
        """A LightningModule of this file optimises by hand or clips in a hook
        (`configure_gradient_clipping`, `on_before_optimizer_step`)."""
        for module in view.lightning_modules:
            if module.manual_optimization or "configure_gradient_clipping" in module.methods:
                return True
            if any(view.index.is_inside(call, module.node) for call in view.clip_calls):
                return True
        return False
