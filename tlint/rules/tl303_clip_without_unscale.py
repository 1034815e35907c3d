"""TL303 clip-without-unscale: AMP-scaled gradients clipped before `scaler.unscale_`.

A training loop whose iteration scales the loss with a `GradScaler`
(`scaler.scale(loss).backward()`) and clips with `torch.nn.utils.clip_grad_*` (or FSDP's
`model.clip_grad_norm_`) with no `scaler.unscale_(optimizer)` before the clip, directly
or through a clipping helper (`clip_gradients(model, 1.0)`) of the same file or, across
files, of another module (the `clips-gradients` and `scaled-call` facts) that clips
without unscaling first; wherever the loss is scaled, a function that clips before
its own `scaler.unscale_(...)` (an AMP optimiser wrapper's `clip_grad_norm`); and a
function handed the scaler (a parameter or an attribute: an updater's or trainer's `step`)
that clips and then calls `scaler.step(optimizer)`, its scaled backward elsewhere, when no
file imported with it unscales (the `unscales` fact). Clipping
functions that unscale themselves (`accelerator.clip_grad_norm_`, `fabric.clip_gradients`,
Lightning's `self.clip_gradients`) are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name
from tlint.results import ProjectCondition
from tlint.rules.base import Rule
from tlint.views.training import CLIP, OPTIMIZER_STEP, SCALE, UNSCALE, TrainingView

if TYPE_CHECKING:
    from pathlib import Path

    from tlint.context import FileContext

# A clip before `scaler.step` in a function that does not scale: kept only where no file
# imported with it unscales (the caller may unscale before it calls the step).
_NO_UNSCALE_NEARBY = ProjectCondition(none_of=("unscales",), scope="imports")

_WHY = ("the threshold applies to gradients multiplied by the loss scale; call scaler.unscale_(optimizer) "
        "before clipping")


class ClipWithoutUnscale(Rule):
    code = "TL303"
    name = "clip-without-unscale"
    kind = "defect"
    # pre-filter: training loops (a file without `backward` has none); a clip before an `unscale_`
    tokens = frozenset({"backward", "unscale", "clip_grad"})
    summary = "AMP-scaled gradients are clipped without scaler.unscale_(optimizer) first."
    # across files: a loop that scales its loss calling another module's function
    # (`scaled-call` here) that clips without unscaling (`clips-gradients` there)
    project_scope = "imports"
    project_kinds = ("scaled-call",)
    project_facts = ("clips-gradients", "scaled-call")

    def project_index(self, related):
        """function -> [(its file, the clip's range, whether it clips unscaled gradients)]."""
        out: dict[str, list] = {}
        for path, facts in related.items():
            for fact in facts:
                if fact.kind == "clips-gradients":
                    out.setdefault(fact.data.function, []).append((path, fact.range, fact.data.unscaled))
        return out

    def check_project(self, path: Path, related):
        """A call, after the loss was scaled, of a function of another module that clips
        without unscaling first: every function of that name in the module the call names
        (or a module of that package), among the modules imported with this one, clips so."""
        helpers = self.indexed(related)
        for fact in related.get(path, []):
            if fact.kind != "scaled-call" or fact.range is None:
                continue
            found = [entry for entry in helpers.get(fact.data.function, ())
                     if entry[0] != path and _names_module(entry[0], fact.data.module)]
            if not found or not all(unscaled for _, _, unscaled in found):
                continue
            where = related.place(found[0][0], found[0][1], path)
            yield fact.range, (f"`{fact.data.function}` ({where}) clips the gradients without "
                               "scaler.unscale_(optimizer), and it runs here on GradScaler-scaled gradients: "
                               + _WHY)

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
                    if view.clips_raw_gradients(event.node):
                        message = "the GradScaler-scaled gradients are clipped before scaler.unscale_(optimizer): "
                    else:  # a clipping helper of this file (`clip_gradients(model)`): look inside
                        helper = view.callee(event.node) if type(event.node) is cst.Call else None
                        if helper is None or view.unscaled_clip(helper) is None:
                            continue
                        message = (f"`{helper.name.value}` of this file clips the gradients without "
                                   "scaler.unscale_(optimizer), and it runs here on GradScaler-scaled gradients: ")
                    reported.add(id(event.node))
                    ctx.report(event.node, message + _WHY, fix=self._fix(ctx, view, loop, event))
        for clip, function in view.clips_before_unscale():  # wherever the loss is scaled
            if id(clip) not in reported:
                reported.add(id(clip))
                ctx.report(clip, f"the gradients are clipped before the scaler.unscale_ that follows in "
                           f"`{function.name.value}`: under AMP they are still multiplied by the loss scale "
                           "here; move the unscale before the clip")
        for clip, function in view.clips_before_scaler_step():  # the scaled backward is elsewhere
            if id(clip) not in reported:
                reported.add(id(clip))
                ctx.report(clip, f"`{function.name.value}` clips the gradients and then steps through the "
                           "GradScaler (scaler.step) with no scaler.unscale_(optimizer) first: the clip sees "
                           "gradients still multiplied by the loss scale; " + _WHY.split("; ", 1)[1],
                           when=_NO_UNSCALE_NEARBY)

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


def _names_module(path: Path, module: str) -> bool:
    """`path` is the file of `module` as an import names it (`utils.clip` ->
    `.../utils/clip.py` or `.../utils/clip/__init__.py`; `.train_utils` -> `train_utils.py`),
    or a module of that package (`from utils import clip_gradients`, re-exported by
    `utils/__init__.py` from `utils/grad.py`)."""
    parts = [part for part in module.split(".") if part]
    if not parts:
        return False
    have = list(path.with_suffix("").parts)
    if have and have[-1] == "__init__":
        have.pop()
    return have[-len(parts):] == parts or have[-len(parts) - 1:-1] == parts
