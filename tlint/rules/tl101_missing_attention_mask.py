"""TL101 missing-attention-mask: a model gets input ids but no attention mask in a project
that pads its sequences."""

from __future__ import annotations

import libcst as cst

from tlint.cst import (
    dotted_name,
    get_arg,
    has_star_kwargs,
    last_name,
    positional_count,
    snake_parts,
)
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.facts import ids_expression, ids_variables, unpadded_ids

_MODEL_WORDS = {"model", "net", "network", "lm", "encoder", "transformer", "gpt", "bert", "backbone"}
_MODEL_METHODS = {"forward", "generate", "__call__"}


class MissingAttentionMask(Rule):
    code = "TL101"
    name = "missing-attention-mask"
    severity = "error"
    summary = "A model is called with padded input ids but no attention_mask."
    # Extra identifier parts that name a model variable in this project (e.g. "policy").
    options = {"model-names": []}

    def check(self, ctx) -> None:
        index = ctx.index
        model_vars, maskless = self._model_variables(ctx)
        ids_names = ids_variables(index)
        model_words = _MODEL_WORDS | {name.lower() for name in self.options["model-names"]}
        diffusion = index.imports.imports_module("diffusers")
        for call in index.calls:
            func = call.func
            receiver = func
            if isinstance(func, cst.Attribute) and func.attr.value in _MODEL_METHODS:
                receiver = func.value
            name = last_name(receiver)
            if name is None or name in maskless:
                continue
            if diffusion and "text_encoder" in name:
                continue  # diffusion pipelines condition on CLIP's unmasked, max-length-padded text
            if name not in model_vars and not (set(snake_parts(name)) & model_words):
                continue
            if isinstance(func, cst.Attribute) and func is not receiver and func.attr.value not in _MODEL_METHODS:
                continue
            if isinstance(receiver, cst.Attribute) and receiver is func and not isinstance(receiver.value, cst.Name):
                continue
            ids_arg = get_arg(call, "input_ids")
            if ids_arg is None:
                first = get_arg(call, None, 0)
                if first is None or not ids_expression(first.value, ids_names):
                    continue
            if has_star_kwargs(call) or positional_count(call) >= 2:
                continue
            if any(arg.keyword is not None and "mask" in arg.keyword.value for arg in call.args):
                continue
            ids_value = ids_arg.value if ids_arg is not None else first.value
            if unpadded_ids(index, ids_value, index.enclosing_function(call) or index.module):
                continue  # `tokenizer("one prompt")`, `torch.randint(...)`: no pad token to mask
            spelled = dotted_name(func) or "model"
            ctx.report(
                call,
                f"`{spelled}(...)` gets input ids but no `attention_mask` while the project pads its "
                "sequences: pad tokens are attended to as if they were text",
                when=ProjectCondition(any_of=("pads",)),
            )

    @staticmethod
    def _model_variables(ctx) -> tuple[set[str], set[str]]:
        """Variables holding a model (from `from_pretrained` of a model class or a local
        nn.Module), and those holding a local module whose forward takes no mask at all."""
        index = ctx.index
        models, maskless = set(), set()
        classes = ctx.models.classes
        for node in index.assignments:
            if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
                continue
            value = node.value
            targets = [last_name(t.target) for t in node.targets]
            callee = index.call_name(value) or ""
            local = dotted_name(value.func)
            if local in classes:
                params = [p.name.value for p in classes[local].forward_params()]
                bucket = models if any("mask" in p.lower() for p in params) or not params else maskless
                bucket.update(t for t in targets if t)
            elif callee.endswith(".from_pretrained") and "Tokenizer" not in callee and "Processor" not in callee \
                    and "Config" not in callee:
                models.update(t for t in targets if t)
        return models, maskless
