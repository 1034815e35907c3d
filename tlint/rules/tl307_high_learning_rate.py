"""TL307 high-learning-rate: an Adam-family optimiser on a transformer with a literal
learning rate above a threshold.

The rate is what runs by default (`TrainingView.literal`: literals, constants, parameter
defaults, argparse/click/dataclass defaults); values read at run time are not judged.
The threshold depends on what is trained: adapters only (`peft`, or a file that freezes
the rest: `mark_only_*`/`freeze*` calls, `requires_grad_(False)`, `requires_grad =
False`), a model loaded with `from_pretrained` in the file (fine-tuning), or a model
trained from scratch. A `LambdaLR`
whose lambda carries the scale itself (Noam: `d_model ** -0.5 * ...`), or through a function
of this file it calls, makes the optimiser's `lr` a multiplier, not a rate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, walk
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.training import TrainingView, is_adam_name

if TYPE_CHECKING:
    from tlint.context import FileContext

_TRANSFORMER = ProjectCondition(any_of=("transformer",), scope="imports")


class HighLearningRate(Rule):
    code = "TL307"
    name = "high-learning-rate"
    kind = "practice"
    # pre-filter: Adam-family optimisers, TrainingArguments/trl configs
    tokens = frozenset({"adam", "trainingarguments", "trl"})
    summary = "An Adam-family optimiser trains a transformer at a learning rate above the usual range."
    probes = ("warmup-ab",)
    verify_site = "training"
    options = {"max-lr-scratch": 1e-3, "max-lr-pretrained": 1e-4, "max-lr-adapter": 1e-2}

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        view: TrainingView = ctx.training
        limit, what = self._threshold(ctx, view)
        for site in view.optimizers:
            if not site.adam_family or self._lambda_scales(view):
                continue
            self._judge(ctx, view, get_arg(site.call, "lr", 1), limit, what)
        for call in view.training_arguments:
            optim = get_arg(call, "optim")
            value = view.literal(optim.value) if optim is not None else "adamw_torch"
            if isinstance(value, str) and is_adam_name(value):
                self._judge(ctx, view, get_arg(call, "learning_rate"), limit, what)

    def _judge(self, ctx, view: TrainingView, arg: cst.Arg | None, limit: float, what: str) -> None:
        if arg is None:
            return
        value = view.literal(arg.value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
            ctx.report(arg, f"learning rate {value:g} is above {limit:g}, the usual ceiling for Adam on {what}; "
                       "transformers trained this hot diverge or lose their pretrained features",
                       when=_TRANSFORMER)

    def _threshold(self, ctx, view: TrainingView) -> tuple[float, str]:
        index = ctx.index
        if index.imports.imports_module("peft") or any(
            (index.qualify(call.func) or "").startswith("peft.") for call in index.calls
        ) or _freezes(index):
            return float(self.options["max-lr-adapter"]), "adapters trained on a frozen model"
        if view.calls_of("model"):
            return float(self.options["max-lr-pretrained"]), "a pretrained transformer"
        return float(self.options["max-lr-scratch"]), "a transformer trained from scratch"

    @staticmethod
    def _lambda_scales(view: TrainingView) -> bool:
        """A LambdaLR whose lambda multiplies by an inverse power (`d_model ** -0.5`),
        itself or in a function of this file it calls (`lambda step: rate(step, 512)`)."""
        for site in view.schedulers:
            if not site.name.endswith("LambdaLR"):
                continue
            arg = get_arg(site.call, "lr_lambda", 1)
            body: cst.CSTNode | None = arg.value if arg is not None else None
            if type(body) is cst.Name:
                body = view.local_function(body)
            if body is not None and _scales(view, body, set(), 0):
                return True
        return False


def _freezes(index) -> bool:
    """The file freezes what it does not train: `mark_only_lora_as_trainable(model)`,
    `freeze_backbone(model)`, `model.requires_grad_(False)`, `p.requires_grad = False`."""
    if not index.identifiers & {"requires_grad", "requires_grad_"} and not any(
            name.startswith(("mark_only", "freeze")) for name in index.identifiers):
        return False
    for call in index.calls:
        name = last_name(call.func) or ""
        if name.startswith(("mark_only", "freeze")) and call.args:
            return True
        if name == "requires_grad_" and call.args and literal_value(call.args[0].value, None) is False:
            return True
    for node in index.assignments:
        if type(node) is cst.Assign and literal_value(node.value, None) is False and any(
                last_name(target.target) == "requires_grad" for target in node.targets):
            return True
    return False


def _scales(view: TrainingView, body: cst.CSTNode, seen: set[int], depth: int) -> bool:
    seen.add(id(body))
    for node in walk(body):
        if _inverse_power(node):
            return True
        if type(node) is cst.Call and type(node.func) is cst.Name and depth < 3:
            helper = view.local_function(node.func)
            if helper is not None and id(helper) not in seen and _scales(view, helper, seen, depth + 1):
                return True
    return False


def _inverse_power(node: cst.CSTNode) -> bool:
    if not (type(node) is cst.BinaryOperation and type(node.operator) is cst.Power):
        return False
    exponent = node.right
    return type(exponent) is cst.UnaryOperation and type(exponent.operator) is cst.Minus
