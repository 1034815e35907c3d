"""Gradient-accumulation windows of a training loop (used through `ctx.training` and
`ctx.bindings`, never on their own): when does an optimiser step run once per k backward
passes, and which events of the same iteration run on every micro-step of that window.

An optimiser step accumulates over k backwards when it

- sits under a modulo test (`if (i + 1) % k == 0:`),
- sits under a counter compared to k (`if n == k:` / `if n >= k:` with `n += 1` in the
  loop or a helper it runs), or
- follows an inner micro-batch loop `for _ in range(k):` whose body runs `backward()`;

k is resolved through the bindings view and every resolvable value must be above 1 (none
resolving: no window). A DeepSpeed engine's `step()` and `accelerate`'s `accumulate()`
context manage the window themselves and have none here. The window's backwards are those
since the previous optimiser step that do not sit under the test itself (a GAN's
generator, trained every `n_critic` iterations, accumulates nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, last_name, walk
from tlint.views.training_common import BACKWARD, OPTIMIZER_STEP, Condition, Event, TrainingLoop

if TYPE_CHECKING:
    from tlint.views.bindings import BindingsView
    from tlint.views.training import TrainingView

_COUNTED = (cst.Equal, cst.GreaterThanEqual)  # `n == k`, `n >= k`
_COUNTED_REVERSED = (cst.Equal, cst.LessThanEqual)  # `k == n`, `k <= n`


@dataclass(frozen=True, eq=False)
class Window:
    """An accumulation window: the step runs once per `k` backwards. `condition` is the
    test that paces the step (None for an inner micro-batch loop, then `inner` is that
    loop); `backwards` the backward events the step accumulates."""

    step: Event
    k: cst.BaseExpression
    condition: Condition | None
    inner: cst.For | None
    backwards: tuple[Event, ...]


def framework_accumulates(view: TrainingView, loop: TrainingLoop) -> bool:
    """The loop's steps belong to a DeepSpeed engine, or run under `accelerate`'s `accumulate()`."""
    if any(view.is_engine_step(e) for e in loop.of(OPTIMIZER_STEP)):
        return True
    return any(type(item) is cst.Call and last_name(item.func) == "accumulate"
               for event in loop.events for item in event.contexts)


def since_last_step(view: TrainingView, loop: TrainingLoop, step: Event) -> list[Event]:
    """The events between the previous step of the same optimiser in the iteration and
    `step` (two optimisers stepped side by side share their backwards)."""
    events = list(loop.events)
    end = next(i for i, e in enumerate(events) if e is step)
    mine = dotted_name(view.optimizer_of(step)) if view.optimizer_of(step) is not None else None
    start = max((i for i, e in enumerate(events[:end]) if e.kind == OPTIMIZER_STEP and (
        mine is None or view.optimizer_of(e) is None or dotted_name(view.optimizer_of(e)) == mine)), default=-1)
    return events[start + 1:end]


def windows(view: TrainingView, bindings: BindingsView, loop: TrainingLoop) -> list[Window]:
    """The accumulation windows of `loop` (one per optimiser step that accumulates)."""
    if framework_accumulates(view, loop):
        return []
    out = []
    for step in loop.of(OPTIMIZER_STEP):
        found = _window(view, bindings, loop, step)
        if found is not None and found.backwards:
            out.append(found)
    return out


def _window(view: TrainingView, bindings: BindingsView, loop: TrainingLoop, step: Event) -> Window | None:
    feeding = [e for e in since_last_step(view, loop, step) if e.kind == BACKWARD]
    for condition in step.conditions:
        if condition.negated:
            continue
        k = _modulus(condition) or _counter_bound(view, bindings, loop, condition)
        if k is not None and above_one(bindings, k):
            return Window(step, k, condition, None, tuple(e for e in feeding if not under(e, condition)))
    for event in feeding:  # an inner micro-batch loop the step sits after
        for inner in event.loops:
            if any(inner is around for around in step.loops) or type(inner) is not cst.For:
                continue
            k = range_count(inner)
            if k is not None and above_one(bindings, k):
                return Window(step, k, None, inner, tuple(e for e in feeding if any(inner is a for a in e.loops)))
    return None


def under(event: Event, condition: Condition) -> bool:
    """`event` sits in the true branch of `condition`'s `if`."""
    return any(c.test is condition.test and not c.negated for c in event.conditions)


def runs_every_micro_step(view: TrainingView, bindings: BindingsView, loop: TrainingLoop, window: Window,
                          event: Event) -> bool:
    """`event` runs on every micro-step of the window, not once per window: it sits in the
    inner micro-batch loop, or outside the pacing test with no other test that changes from
    one iteration to the next (a test of a setting, `if args.max_grad_norm > 0:`, does not
    pace it; `if i % k == 0:` or `if not torch.isfinite(loss):` does)."""
    if window.inner is not None:
        return any(window.inner is a for a in event.loops) and not any(
            not _invariant(view, bindings, loop, c.test) for c in event.conditions if not _shared(c, window.step))
    condition = window.condition
    assert condition is not None  # (a window has a pacing test or an inner loop)
    if under(event, condition) or any(c.test is condition.test for c in event.conditions):
        return False
    if any(a is not None and not any(a is b for b in window.step.loops) for a in event.loops):
        return False  # inside a loop of its own (a loop over parameter groups is fine, but rare: be silent)
    return all(_shared(c, window.step) or _invariant(view, bindings, loop, c.test) for c in event.conditions)


def _shared(condition: Condition, step: Event) -> bool:
    return any(c.test is condition.test and c.negated == condition.negated for c in step.conditions)


def _invariant(view: TrainingView, bindings: BindingsView, loop: TrainingLoop, test: cst.BaseExpression) -> bool:
    """No name read by `test` is bound inside the loop (or the helpers it runs)."""
    index = view.index
    roots = (loop.node, *loop.helpers)
    for node in walk(test):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
            return False
        if type(node) is not cst.Name:
            continue
        for binding in bindings.reaching(node):
            if any(binding.node is root or index.is_inside(binding.node, root) for root in roots):
                return False
        if type(loop.node) is cst.For and any(type(n) is cst.Name and n.value == node.value
                                              for n in walk(loop.node.target)):
            return False
    return True


def _modulus(condition: Condition) -> cst.BaseExpression | None:
    """`k` of a `... % k ...` test."""
    for node in walk(condition.test):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
            return node.right
    return None


def _counter_bound(view: TrainingView, bindings: BindingsView, loop: TrainingLoop,
                   condition: Condition) -> cst.BaseExpression | None:
    """`k` of `n == k` / `n >= k` where the loop counts `n += 1`."""
    for node in walk(condition.test):
        if type(node) is not cst.Comparison or len(node.comparisons) != 1:
            continue
        operator = node.comparisons[0].operator
        right = node.comparisons[0].comparator
        if type(operator) in _COUNTED and _counts(view, bindings, loop, node.left):
            return right
        if type(operator) in _COUNTED_REVERSED and _counts(view, bindings, loop, right):
            return node.left
    return None


def _counts(view: TrainingView, bindings: BindingsView, loop: TrainingLoop, expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Name:
        bound = bindings.reaching(expr)
    elif type(expr) is cst.Attribute:
        bound = bindings.attribute(expr)
    else:
        return False
    index = view.index
    roots = (loop.node, *loop.helpers)
    return any(type(b.node) is cst.AugAssign and type(b.node.operator) is cst.AddAssign
               and any(index.is_inside(b.node, root) for root in roots) for b in bound)


def above_one(bindings: BindingsView, k: cst.BaseExpression) -> bool:
    return bindings.all_values(k, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 1)


def range_count(loop: cst.For) -> cst.BaseExpression | None:
    """k of `for _ in range(k)` (or `range(0, k)`)."""
    call = loop.iter
    if type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != "range":
        return None
    if len(call.args) == 1:
        return call.args[0].value
    if len(call.args) == 2 and type(call.args[0].value) is cst.Integer and call.args[0].value.value == "0":
        return call.args[1].value
    return None
