"""TL309 missing-zero-grad: a training loop never resets its gradients.

`backward()` adds to `.grad`; without `zero_grad()` (or `p.grad = None`) every step uses
the sum of all gradients so far. Gradient accumulation that resets every k steps resets
under a condition, which counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.cst import dotted_name
from tlint.rules.base import Rule
from tlint.views.training import BACKWARD, OPTIMIZER_STEP, ZERO_GRAD, TrainingView, covers

if TYPE_CHECKING:
    from tlint.context import FileContext


class MissingZeroGrad(Rule):
    code = "TL309"
    name = "missing-zero-grad"
    kind = "defect"
    tokens = frozenset({"backward"})  # pre-filter: training loops: a file without `backward` has none
    summary = "A training loop runs backward() and step() but never resets the gradients."

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:  # unit tests step a toy loss a few times
            return
        view: TrainingView = ctx.training
        for loop in view.loops:
            if loop.has(ZERO_GRAD) or (loop.is_step_function and not self._lightning_step(view, loop)):
                continue  # a step function's caller (another file, or Lightning) may reset
            step = loop.first(OPTIMIZER_STEP)
            if step is None or view.is_engine_step(step):
                continue  # a DeepSpeed engine's step() zeroes the gradients itself
            if self._reset_outside_iteration(view, loop) or self._distributed_autograd(view, loop):
                continue
            ctx.report(step.node, "gradients are never reset in this training loop: each step() applies the "
                       "sum of every gradient so far; call optimizer.zero_grad() once per step")
        for loop in view.loops:
            if loop.has(ZERO_GRAD) and not ctx.is_test_file:
                self._unreset_optimizers(ctx, view, loop)

    def _unreset_optimizers(self, ctx: FileContext, view: TrainingView, loop) -> None:
        """A reset counts for the optimiser it is called on, or for an optimiser over the
        parameters of the module it is called on (or of a module inside it); a reset of a
        module no optimiser of the loop trains (`discriminator.zero_grad()`, the optimiser
        over `generator.parameters()`) counts for none of them."""
        steps = [e for e in loop.of(OPTIMIZER_STEP) if not view.is_engine_step(e)]
        optimizers: dict[str, tuple] = {}
        for step in steps:
            target = view.optimizer_of(step)
            key = dotted_name(target) if target is not None else None
            if key is None:
                return  # an optimiser tlint cannot name: judge nothing
            optimizers.setdefault(key, (step, target))
        if not optimizers:
            return
        covered: set[str] = set()
        modules = {key: view.optimized_modules(target) for key, (_, target) in optimizers.items()}
        for reset in loop.of(ZERO_GRAD):
            receiver = view.optimizer_of(reset)
            name = dotted_name(receiver) if receiver is not None else None
            if name is None:
                return  # `p.grad = None`, `zero_grad(model)`: cannot tell which: all count
            if name in optimizers:
                covered.add(name)
                continue
            over = [key for key in optimizers if covers(name, modules[key])]
            if not over and (receiver is None or not view.is_module(receiver) or not all(modules.values())):
                return  # a reset on something else: unknown
            covered.update(over)
        for key, (step, _) in optimizers.items():
            if key not in covered:
                why = "the resets are for the other optimiser" if len(optimizers) > 1 else \
                    "the loop resets only modules this optimiser does not train"
                ctx.report(step.node, f"`{key}` is never reset in this training loop ({why}): each of its steps "
                           f"applies the sum of every gradient so far; call {key}.zero_grad() once per step")

    @staticmethod
    def _lightning_step(view: TrainingView, loop) -> bool:
        """`training_step` of a LightningModule under manual optimisation resets by hand."""
        return any(module.manual_optimization and view.index.is_inside(loop.node, module.node)
                   for module in view.lightning_modules)

    @staticmethod
    def _distributed_autograd(view: TrainingView, loop) -> bool:
        """`dist_autograd.backward(context_id, ...)` keeps gradients per context, not in `.grad`."""
        return any((view.index.qualify(e.node.func) or "").startswith("torch.distributed.autograd.")
                   for e in loop.of(BACKWARD))

    @staticmethod
    def _reset_outside_iteration(view: TrainingView, loop) -> bool:
        """A reset written inside the loop that the walk of one iteration does not run: in
        a closure or lambda defined there (`optimizer.step(lambda: ...)`)."""
        return any(view.event_kind(call) == ZERO_GRAD and view.index.is_inside(call, loop.node)
                   for call in view.index.calls)
