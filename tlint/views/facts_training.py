"""The training loop's project facts (registered in `tlint.views.facts`): functions that
leave a model in eval mode (`leaves-eval`) and the calls a training loop makes of
functions imported from other modules while it never switches back to `train()`
(`imported-call-in-training`). TL312 compares them across files: a training loop calling
`eval_net(net, val_loader)` from `eval.py`, which ends in eval mode, trains on in eval mode.

Likewise for TL303: functions (and methods) that clip gradients, with whether they unscale
first (`clips-gradients`), and the calls of another module's functions a training loop
makes between `scaler.scale(loss)` and any `unscale_` or step (`scaled-call`): a trainer
calling `clip_gradients(model, 1.0)` from `utils.py`, which clips without unscaling, clips
the scaled gradients.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from tlint.cst import last_name
from tlint.fact_data import ClipsGradientsFact, ImportedCallFact, LeavesEvalFact, ScaledCallFact
from tlint.views.training import CLIP, EVAL, OPTIMIZER_STEP, SCALE, TRAIN, UNSCALE


def leaves_eval_sites(ctx) -> Iterator[tuple[cst.CSTNode, LeavesEvalFact]]:
    """Module-level functions whose body (nested functions left out) switches a model to
    eval mode and calls no `train()` after the last switch."""
    index = ctx.index
    switches = [call for call in index.calls
                if type(call.func) is cst.Attribute and call.func.attr.value in ("eval", "train")]
    if not switches:
        return
    view = ctx.training
    last: dict[int, tuple[cst.FunctionDef, str]] = {}  # function -> (it, the kind of its last switch)
    for call in switches:  # (source order)
        kind = view.event_kind(call)
        if kind != EVAL and kind != TRAIN:
            continue
        function = index.enclosing_function(call)
        if function is None or index.enclosing_class(function) is not None \
                or index.enclosing_function(function) is not None:
            continue
        last[id(function)] = (function, kind)
    for function, kind in last.values():
        if kind == EVAL:
            yield function, LeavesEvalFact(function.name.value)


def imported_call_sites(ctx) -> Iterator[tuple[cst.CSTNode, ImportedCallFact]]:
    """Calls of functions imported by name (`from eval import eval_net`) in a training
    loop's iteration, or in the loops around it up to the first whose iteration calls
    `train()` (as TL312 judges a training loop left in eval mode)."""
    index = ctx.index
    aliases = index.imports.aliases
    if not aliases:
        return
    view = ctx.training
    seen: set[int] = set()
    for loop in view.loops:
        if loop.is_step_function:
            continue
        for node in loop.enclosing:
            if any(e.kind == TRAIN for e in view.iteration(node)):
                break
            for call in index.calls:
                func = call.func
                if id(call) in seen or type(func) is not cst.Name or func.value not in aliases \
                        or not index.is_inside(call, node):
                    continue
                qualified = aliases[func.value]
                if "." not in qualified.lstrip("."):
                    continue
                seen.add(id(call))
                yield call, ImportedCallFact(qualified.rsplit(".", 1)[1])


def clips_gradients_sites(ctx) -> Iterator[tuple[cst.CSTNode, ClipsGradientsFact]]:
    """Module-level functions and methods of module-level classes that clip gradients with
    torch's `clip_grad_*` (or FSDP's `model.clip_grad_norm_`) in their own body, with
    whether a call of them clips unscaled gradients (`TrainingView.unscaled_clip`). At the
    clip that does, else at the function."""
    if "clip_grad" not in ctx.text:
        return
    index = ctx.index
    view = ctx.training
    found: dict[int, cst.FunctionDef] = {}
    for call in index.calls:
        if view.may_be(call, (CLIP,)) and view.event_kind(call) == CLIP and view.clips_raw_gradients(call):
            function = index.enclosing_function(call)
            if function is not None:
                found.setdefault(id(function), function)
    for function in found.values():
        name = _outer_name(index, function)
        if name is None:
            continue
        clip = view.unscaled_clip(function)
        yield (clip if clip is not None else function), ClipsGradientsFact(name, clip is not None)


def unscales_sites(ctx) -> Iterator[cst.CSTNode]:
    """The file unscales gradients itself (`scaler.unscale_(optimizer)`,
    `accelerator.unscale_gradients()`): TL303 keeps a clip before a `scaler.step` whose
    scaled backward is elsewhere only when no file imported with it unscales."""
    identifiers = ctx.index.identifiers
    if "unscale_" in identifiers or "unscale_gradients" in identifiers:
        yield ctx.index.module


def _outer_name(index, function: cst.FunctionDef) -> str | None:
    """`name` of a module-level function, `Class.name` of a method of a module-level
    class; None for a nested function."""
    if index.enclosing_function(function) is not None:
        return None
    cls = index.enclosing_class(function)
    if cls is None:
        return function.name.value
    if index.enclosing_class(cls) is not None or index.enclosing_function(cls) is not None:
        return None
    return f"{cls.name.value}.{function.name.value}"


def scaled_call_sites(ctx) -> Iterator[tuple[cst.CSTNode, ScaledCallFact]]:
    """Calls of another module's functions (`imported_callee`) in a training loop's
    iteration after `scaler.scale(loss)` and before any `unscale_` (or a call named
    `unscale*`) or optimiser step that can run in the same pass."""
    index = ctx.index
    if "scale" not in index.identifiers or not index.imports.aliases:
        return
    view = ctx.training
    seen: set[int] = set()
    for loop in view.loops:
        if not any(event.kind == SCALE for event in loop.events):
            continue
        scales, stops = [], []
        for event in view.calls_in(loop):
            call = event.node
            if type(call) is not cst.Call:
                continue
            kind = view.event_kind(call)
            if kind == SCALE:
                scales.append(event)
            elif kind == UNSCALE or kind == OPTIMIZER_STEP or (last_name(call.func) or "").startswith("unscale"):
                stops.append(event)  # (`wrapper.unscale_grads()`: a helper that unscales, by its name)
            elif id(call) not in seen and any(not event.excludes(scale) for scale in scales) \
                    and not any(not event.excludes(stop) for stop in stops):
                target = view.imported_callee(call)
                if target is not None:
                    seen.add(id(call))
                    yield call, ScaledCallFact(*target)
