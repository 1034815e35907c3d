"""TL311 accumulation-loss-unscaled: gradients accumulated over k steps, loss not divided.

Gradient accumulation in a training loop, in any of its three shapes: the optimiser step
under a modulo test (`if (i + 1) % k == 0:`), under a counter compared to k (`if n == k:`
with `n += 1` in the loop), or after an inner micro-batch loop (`for _ in range(k):` that
runs `backward()`, or over `batch.chunk(k)` chunks). k is resolved through the bindings view (defaults, `self.<attr>`,
config fields, option defaults, call sites): reported only when every resolvable value is
above 1, silent when none resolves. Unless the loss is divided by k — a division (`/`,
`/=`, `.div`) by k itself, by a name bound to the same value, or by a name that says
"accum" whose value is not known to differ, in the loop or the helpers it runs — the
update is k times too large. `accelerate`'s `accumulate()` context and DeepSpeed engines
scale the loss themselves; a backward under the accumulation test itself is not
accumulated (a GAN's generator trained every `n_critic` iterations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import get_arg, last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.accumulation import above_one, range_count, under
from tlint.views.training import BACKWARD, OPTIMIZER_STEP, TrainingView
from tlint.views.training_common import Condition, Event, TrainingLoop

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.views.bindings import BindingsView

_COUNTED = (cst.Equal, cst.GreaterThanEqual)  # `n == k`, `n >= k`
_COUNTED_REVERSED = (cst.Equal, cst.LessThanEqual)  # `k == n`, `k <= n`


class AccumulationLossUnscaled(Rule):
    code = "TL311"
    name = "accumulation-loss-unscaled"
    kind = "likely-defect"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "The optimiser steps every k iterations but the loss is not divided by k."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        bindings = ctx.bindings
        for loop in view.loops:
            if self._framework_accumulates(view, loop):
                continue
            for step in loop.of(OPTIMIZER_STEP):
                feeding = [e for e in self._since_last_step(loop, step) if e.kind == BACKWARD]
                found = self._accumulation(ctx, loop, step, feeding)
                if found is None:
                    continue
                k, backwards = found
                if not backwards or self._divided(bindings, loop, k):
                    continue
                ctx.report(backwards[0].node, "the optimiser steps every k iterations but the loss is not divided "
                           "by k: the accumulated gradients are k times too large; backward on loss / k")
                break

    @staticmethod
    def _since_last_step(loop: TrainingLoop, step: Event) -> list[Event]:
        """The events between the previous optimiser step and this one (the backwards that
        feed it; with two optimisers, not the other one's)."""
        events = list(loop.events)
        end = next(i for i, e in enumerate(events) if e is step)
        start = max((i for i, e in enumerate(events[:end]) if e.kind == OPTIMIZER_STEP), default=-1)
        return events[start + 1:end]

    @staticmethod
    def _framework_accumulates(view: TrainingView, loop: TrainingLoop) -> bool:
        if any(view.is_engine_step(e) for e in loop.of(OPTIMIZER_STEP)):
            return True
        return any(type(item) is cst.Call and last_name(item.func) == "accumulate"
                   for event in loop.events for item in event.contexts)

    def _accumulation(self, ctx: FileContext, loop: TrainingLoop, step: Event,
                      feeding: list[Event]) -> tuple[cst.BaseExpression, list[Event]] | None:
        """k and the backwards it accumulates, when `step` runs once per k of them."""
        bindings = ctx.bindings
        for condition in step.conditions:
            if condition.negated:
                continue
            k = self._modulus(condition) or self._counter_bound(ctx, loop, condition)
            if k is not None and above_one(bindings, k):
                return k, [e for e in feeding if not under(e, condition)]
        for event in feeding:  # an inner micro-batch loop the step sits after
            for inner in event.loops:
                if any(inner is around for around in step.loops) or type(inner) is not cst.For:
                    continue
                k = range_count(inner) or _chunk_count(bindings, inner)
                if k is not None and above_one(bindings, k):
                    return k, [e for e in feeding if any(inner is around for around in e.loops)]
        return None

    @staticmethod
    def _modulus(condition: Condition) -> cst.BaseExpression | None:
        """`k` of a `... % k ...` test."""
        for node in walk(condition.test):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
                return node.right
        return None

    @staticmethod
    def _counter_bound(ctx: FileContext, loop: TrainingLoop, condition: Condition) -> cst.BaseExpression | None:
        """`k` of `n == k` / `n >= k` where the loop counts `n += 1`."""
        for node in walk(condition.test):
            if type(node) is not cst.Comparison or len(node.comparisons) != 1:
                continue
            operator = node.comparisons[0].operator
            right = node.comparisons[0].comparator
            if type(operator) in _COUNTED and _counts(ctx, loop, node.left):
                return right
            if type(operator) in _COUNTED_REVERSED and _counts(ctx, loop, right):
                return node.left
        return None

    @staticmethod
    def _divided(bindings: BindingsView, loop: TrainingLoop, k: cst.BaseExpression) -> bool:
        wanted = bindings.values(k)
        for root in (loop.node, *loop.helpers):
            for node in walk(root):
                divisor = None
                if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
                    divisor = node.right
                elif type(node) is cst.AugAssign and type(node.operator) is cst.DivideAssign:
                    divisor = node.value
                elif type(node) is cst.Call and last_name(node.func) in ("div", "div_") and node.args:
                    divisor = node.args[0].value
                if divisor is not None and _divides_by_k(bindings, divisor, k, wanted):
                    return True
        return False


def _chunk_count(bindings: BindingsView, loop: cst.For) -> cst.BaseExpression | None:
    """k of a loop over k chunks of the batch: `for micro in batch.chunk(k)`,
    `torch.chunk(batch, k)`, or a name bound to one (`micro = x.chunk(4)`)."""
    call: cst.BaseExpression | None = loop.iter
    if type(call) is cst.Name:
        call = bindings.expression(call)
    if type(call) is not cst.Call:
        return None
    name = bindings.index.qualify(call.func)
    if name in ("torch.chunk", "torch.tensor_split"):
        arg = get_arg(call, "chunks" if name == "torch.chunk" else "indices_or_sections", 1)
    elif name is None and type(call.func) is cst.Attribute and call.func.attr.value in ("chunk", "tensor_split"):
        arg = get_arg(call, "chunks" if call.func.attr.value == "chunk" else "indices_or_sections", 0)
    else:
        return None
    return arg.value if arg is not None and type(arg.value) is not cst.List else None


def _counts(ctx: FileContext, loop: TrainingLoop, expr: cst.BaseExpression) -> bool:
    """`expr` is a counter the loop increments (`n += 1`, `self.n += 1`)."""
    if type(expr) is cst.Name:
        bound = ctx.bindings.reaching(expr)
    elif type(expr) is cst.Attribute:
        bound = ctx.bindings.attribute(expr)
    else:
        return False
    index = ctx.index
    roots = (loop.node, *loop.helpers)
    return any(type(b.node) is cst.AugAssign and type(b.node.operator) is cst.AddAssign
               and any(index.is_inside(b.node, root) for root in roots) for b in bound)


def _divides_by_k(bindings: BindingsView, divisor: cst.BaseExpression, k: cst.BaseExpression,
                  wanted: list[Any]) -> bool:
    """`divisor` is k: the same expression, a value every way equal to k's, or a name that
    says "accum" not known to differ from k."""
    if divisor.deep_equals(k):
        return True
    known = [v for v in wanted if not _unknown(v)]
    got = [v for v in bindings.values(divisor) if not _unknown(v)]
    if known and got:
        return set(got) <= set(known)
    return any(type(node) is cst.Name and any(part.startswith("accum") for part in snake_parts(node.value))
               for node in walk(divisor))


def _unknown(value: Any) -> bool:
    return not isinstance(value, (int, float)) or isinstance(value, bool)
