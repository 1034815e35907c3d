"""The training loop's project facts (registered in `tlint.views.facts`): functions that
leave a model in eval mode (`leaves-eval`) and the calls a training loop makes of
functions imported from other modules while it never switches back to `train()`
(`imported-call-in-training`). TL312 compares them across files: a training loop calling
`eval_net(net, val_loader)` from `eval.py`, which ends in eval mode, trains on in eval mode.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from tlint.fact_data import ImportedCallFact, LeavesEvalFact
from tlint.views.training import EVAL, TRAIN


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
