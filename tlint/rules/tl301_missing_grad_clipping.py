"""TL301 missing-grad-clipping: gradients are never clipped.

Three idioms: a hand-written training loop (or step function) whose iteration clips
nothing between `backward()` and the optimiser step; Hugging Face `TrainingArguments` with
`max_grad_norm` 0 or None (the Trainer clips at 1.0 by default); a Lightning `Trainer`
without `gradient_clip_val` in a project that trains a transformer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, get_arg, has_star_kwargs, is_literal, last_name
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.training import (
    BACKWARD,
    CLIP,
    FORWARD,
    OPTIMIZER_STEP,
    SCALE,
    UNKNOWN,
    UNSCALE,
    TrainingView,
    name_matches,
)

if TYPE_CHECKING:
    from tlint.context import FileContext


def _no_clip_value(value) -> bool:
    """0, a negative threshold, or None turn clipping off (HF and Lightning alike)."""
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0


class MissingGradClipping(Rule):
    code = "TL301"
    name = "missing-grad-clipping"
    kind = "practice"
    # pre-filter: training loops (a `backward`), Lightning trainers, TrainingArguments/trl configs
    tokens = frozenset({"backward", "trainer", "trainingarguments", "trl"})
    summary = "A training loop, `TrainingArguments` or Lightning `Trainer` that never clips gradients."
    probes = ("warmup-ab",)
    verify_site = "training"
    # Extra functions (qualified, e.g. "mylib.train.clip_gradients") that clip gradients.
    options = {"clip-functions": []}

    def check(self, ctx: FileContext) -> None:
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
            if loop.has(CLIP) or view.benchmark(loop.node, ctx.path):
                continue  # clipped; or a benchmark or profiling run, not training to judge
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
                       fix=_loop_fix(ctx, view, loop, step),
                       when=ProjectCondition(any_of=("transformer",), scope="program"))

    def _check_training_arguments(self, ctx, view: TrainingView) -> None:
        for call in view.training_arguments:
            if has_star_kwargs(call) or view.arguments_only_evaluate(call):
                continue
            arg = get_arg(call, "max_grad_norm")
            if arg is None:
                continue
            value = view.literal(arg.value)
            if value is not UNKNOWN and _no_clip_value(value):
                ctx.report(arg, "max_grad_norm of 0 or None turns off the Trainer's gradient clipping; "
                           "keep the default (1.0)", fix=_set_literal(arg, "max_grad_norm"))

    def _check_lightning(self, ctx, view: TrainingView) -> None:
        if not view.lightning_trainers or self._module_clips_itself(view):
            return
        for call in view.lightning_trainers:
            if has_star_kwargs(call) or view.only_evaluates(call):
                continue  # a trainer that only tests or predicts trains nothing
            arg = get_arg(call, "gradient_clip_val")
            node: cst.CSTNode = call
            if arg is not None:
                value = view.literal(arg.value)
                if value is UNKNOWN or not _no_clip_value(value):
                    continue
                node = arg
            fix = (_set_literal(arg, "gradient_clip_val") if arg is not None
                   else _add_keyword(ctx, call, "gradient_clip_val"))
            ctx.report(node, "Lightning Trainer without gradient_clip_val never clips the transformer's "
                       "gradients; pass gradient_clip_val=1.0", fix=fix,
                       when=ProjectCondition(any_of=("transformer",), scope="program"))

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


# --- fixes ------------------------------------------------------------------------------


def _set_literal(arg: cst.Arg, keyword: str):
    """`max_grad_norm=0` -> `max_grad_norm=1.0` when the value is written there (a value
    that comes from elsewhere, `args.max_grad_norm`, is left to the user)."""
    if not is_literal(arg.value):
        return None
    return fixes.fix("unsafe", f"Set `{keyword}=1.0`", fixes.replace(arg.value, "1.0"))


def _add_keyword(ctx, call: cst.Call, keyword: str):
    """`Trainer(max_epochs=3)` -> `Trainer(max_epochs=3, gradient_clip_val=1.0)`, in the
    call's own layout (one argument a line, trailing comma, stay so)."""
    new = fixes.with_keyword(call, keyword, "1.0")
    return fixes.fix("unsafe", f"Pass `{keyword}=1.0`", fixes.replace(call, fixes.code_at(ctx.index, call, new)))


# --- the fix of a hand-written loop ------------------------------------------------------


def _loop_fix(ctx, view: TrainingView, loop, step):
    """Clip at 1.0 just before the optimiser step (unsafe: it changes the training). The
    model is the one the iteration's forward pass calls in the step's function; a plain
    `loss.backward()` gets `torch.nn.utils.clip_grad_norm_` (after `scaler.unscale_` under a
    GradScaler), `accelerator.backward(loss)` gets `accelerator.clip_grad_norm_`. No fix for
    other back-ends (Fabric, DeepSpeed, Lightning's manual backward)."""
    index = ctx.index
    stmt = fixes.own_statement(index, step.node)
    if stmt is None or view.is_engine_step(step):
        return None
    function = index.enclosing_function(step.node)
    at = loop.events.index(step)
    backwards = [e for e in loop.events[:at] if e.kind == BACKWARD and step.node not in e.via
                 and not step.excludes(e)]
    model = _model_text(view, loop, step, function)
    if not backwards or model is None:
        return None
    backward = backwards[-1].node
    receiver = view.receiver(backward)
    if type(backward) is not cst.Call or receiver is None:
        return None
    if last_name(backward.func) != "backward":
        return None  # `self.manual_backward(loss)`: Lightning clips with self.clip_gradients
    if any(a.keyword is None for a in backward.args):  # `accelerator.backward(loss)`, `fabric.backward(loss)`
        accelerator = dotted_name(receiver)
        if view.role(receiver) != "accelerator" and last_name(receiver) != "accelerator" or accelerator is None:
            return None
        if index.enclosing_function(backward) is not function:
            return None
        code = f"{accelerator}.clip_grad_norm_({model}.parameters(), 1.0)"
        if any(type(c) is cst.Call and last_name(c.func) == "accumulate"
               and dotted_name(view.receiver(c)) == accelerator for c in step.contexts):
            code = f"if {accelerator}.sync_gradients:\n    {code}"
        return fixes.fix("unsafe", f"Insert `{code.splitlines()[-1].strip()}` before the step",
                         fixes.insert_before(stmt, code))
    edits = []
    clip = fixes.local_name_for(index, "torch", step.node)
    if clip is not None:
        clip += ".nn.utils.clip_grad_norm_"
    else:
        clip = fixes.local_name_for(index, "torch.nn.utils.clip_grad_norm_", step.node)
    if clip is None:
        added = fixes.add_import(ctx.module, "import torch")
        if added is None:
            return None
        edits.append(added)
        clip = "torch.nn.utils.clip_grad_norm_"
    lines = []
    unscale = _unscale_text(view, loop, step)
    if unscale is False:
        return None
    if unscale:
        lines.append(unscale)
    lines.append(f"{clip}({model}.parameters(), 1.0)")
    edits.insert(0, fixes.insert_before(stmt, "\n".join(lines)))
    message = f"Insert `{lines[-1]}` before the step" + (f", after `{unscale}`" if unscale else "")
    if len(edits) > 1:
        message += ", and `import torch`"
    return fixes.fix("unsafe", message, *edits)


def _model_text(view: TrainingView, loop, step, function) -> str | None:
    """The model the iteration's forward passes call (`model` of `model(x)`, `self.model`
    of `self.model(**batch)`), in the step's function and with gradients on; None when
    there is none or several."""
    index = view.index
    found = set()
    for event in loop.of(FORWARD):
        call = event.node
        if type(call) is not cst.Call or step.excludes(event) or view.grad_disabled(call):
            continue
        if index.enclosing_function(call) is not function:
            continue
        func = call.func
        target = func.value if type(func) is cst.Attribute and func.attr.value == "forward" else func
        found.add(dotted_name(target))
    if len(found) != 1 or None in found:
        return None
    return found.pop()


def _unscale_text(view: TrainingView, loop, step) -> str | Literal[False] | None:
    """Under a GradScaler, `scaler.unscale_(optimizer)` to run before the clip: None when
    the loop does not scale its loss or already unscales, False when the scaler or the
    optimiser cannot be named."""
    if any(e.kind == UNSCALE and not step.excludes(e) for e in loop.events):
        return None
    receiver = view.receiver(step.node)
    scales = [e for e in loop.of(SCALE) if not step.excludes(e)]
    if receiver is not None and view.role(receiver) == "scaler":
        scaler = dotted_name(receiver)
    elif scales:
        function = view.index.enclosing_function(step.node)
        names = {dotted_name(view.receiver(e.node)) if view.index.enclosing_function(e.node) is function else None
                 for e in scales}
        scaler = names.pop() if len(names) == 1 else None
    else:
        return None
    optimizer = view.optimizer_of(step)
    optimizer_text = dotted_name(optimizer) if optimizer is not None else None
    if scaler is None or optimizer_text is None:
        return False
    return f"{scaler}.unscale_({optimizer_text})"
