"""TL311 accumulation-loss-unscaled: gradients accumulated over k steps, loss not divided.

A training loop whose optimiser step sits under a modulo test (`if (i + 1) % k == 0:`)
while its `backward()` runs every iteration: gradients of k batches are summed. Unless the
loss is divided by the accumulation count — a division (`/`, `/=`, `.div`) by the modulus
(`k`, `args.gradient_accumulation_steps`) or by a name that says it (`accum_steps`), in
the loop or the helpers it runs — the update is k times too large. `accelerate`'s
`accumulate()` context and DeepSpeed engines scale the loss themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.training import BACKWARD, OPTIMIZER_STEP, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext


class AccumulationLossUnscaled(Rule):
    code = "TL311"
    name = "accumulation-loss-unscaled"
    severity = "warning"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "The optimiser steps every k iterations but the loss is not divided by k."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        for loop in view.loops:
            if self._framework_accumulates(view, loop):
                continue
            for step in loop.of(OPTIMIZER_STEP):
                modulus = self._modulus(view, step)
                if modulus is None:
                    continue
                backwards = [e for e in self._since_last_step(loop, step) if e.kind == BACKWARD
                             and not any(c is d for c in e.conditions for d in step.conditions if not d.negated)]
                if not backwards or self._divided(loop, modulus):
                    continue
                ctx.report(backwards[0].node, "the optimiser steps every k iterations but the loss is not divided "
                           "by k: the accumulated gradients are k times too large; backward on loss / k")
                break

    @staticmethod
    def _since_last_step(loop, step) -> list:
        """The events between the previous optimiser step and this one (the backwards that
        feed it; with two optimisers, not the other one's)."""
        events = list(loop.events)
        end = next(i for i, e in enumerate(events) if e is step)
        start = max((i for i, e in enumerate(events[:end]) if e.kind == OPTIMIZER_STEP), default=-1)
        return events[start + 1:end]

    @staticmethod
    def _framework_accumulates(view: TrainingView, loop) -> bool:
        if any(view.is_engine_step(e) for e in loop.of(OPTIMIZER_STEP)):
            return True
        return any(type(item) is cst.Call and last_name(item.func) == "accumulate"
                   for event in loop.events for item in event.contexts)

    @staticmethod
    def _modulus(view: TrainingView, step) -> cst.BaseExpression | None:
        """`k` of the `... % k ...` test the step sits under (not k == 1)."""
        for condition in step.conditions:
            if condition.negated:
                continue
            for node in walk(condition.test):
                if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
                    value = view.literal(node.right)
                    if not (isinstance(value, (int, float)) and value == 1):
                        return node.right
        return None

    @staticmethod
    def _divided(loop, modulus: cst.BaseExpression) -> bool:
        wanted = last_name(modulus)
        roots = [loop.node, *loop.helpers]
        for root in roots:
            for node in walk(root):
                divisor = None
                if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
                    divisor = node.right
                elif type(node) is cst.AugAssign and type(node.operator) is cst.DivideAssign:
                    divisor = node.value
                elif type(node) is cst.Call and last_name(node.func) in ("div", "div_") and node.args:
                    divisor = node.args[0].value
                if divisor is not None and _names_accumulation(divisor, wanted):
                    return True
        return False


def _names_accumulation(expr: cst.BaseExpression, wanted: str | None) -> bool:
    for node in walk(expr):
        name = node.value if type(node) is cst.Name else None
        if name is None:
            continue
        if name == wanted or any(part.startswith("accum") for part in snake_parts(name)):
            return True
    return False
