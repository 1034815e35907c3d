"""TL101 missing-attention-mask: a model gets input ids but no attention mask in a project
that pads its sequences."""

from __future__ import annotations

import libcst as cst

from tlint.cst import (dotted_name, get_arg, has_star_kwargs, is_literal, last_name, literal_value,
                       positional_count, snake_parts, walk)
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.facts import tokenizer_like

_MODEL_WORDS = {"model", "net", "network", "lm", "encoder", "transformer", "gpt", "bert", "backbone"}
_MODEL_METHODS = {"forward", "generate", "__call__"}


def _ids_expression(expr: cst.BaseExpression, ids_names: set[str]) -> bool:
    """`batch["input_ids"]`, `enc.input_ids`, or a name holding input ids."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return index.value.evaluated_value == "input_ids"
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "input_ids"
    if isinstance(expr, cst.Name):
        return expr.value in ids_names or expr.value == "input_ids"
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("to", "cuda"):
        return _ids_expression(expr.func.value, ids_names)
    return False


_TENSOR_METHODS = {"to", "cuda", "cpu", "long", "int", "unsqueeze", "view", "reshape", "clone", "detach"}
_TOKENIZER_METHODS = {"__call__", "encode", "encode_plus", "batch_encode_plus", "apply_chat_template"}
_NO_PADDING = (False, None, "do_not_pad")
# torch constructors whose ids can hold no padding when built from literals or at random
_LITERAL_TENSORS = {"torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor"}
_SYNTHETIC_TENSORS = {"torch.randint", "torch.arange"}


def _literal_data(expr: cst.BaseExpression) -> bool:
    """A (nested) list/tuple of literal numbers: `[[0, 2, 3, 1]]`."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(_literal_data(el.value) for el in expr.elements if not isinstance(el, cst.StarredElement))
    return is_literal(expr)


def _unpadded_source(index, expr: cst.BaseExpression, scope, depth: int = 0) -> bool:
    """Is `expr` provably unpadded ids: a tokenizer call without (truthy) padding, synthetic
    ids (`torch.randint`, a literal `torch.tensor([[...]])`), or a local variable every
    assignment of which is one of those? (Taken from it by `["input_ids"]`/`.input_ids`,
    moved with `.to(device)`, … .)"""
    if depth > 4:
        return False
    while True:
        func = expr.func if isinstance(expr, cst.Call) else None
        if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS:
            expr = func.value
        elif isinstance(expr, cst.Subscript) or (isinstance(expr, cst.Attribute) and expr.attr.value == "input_ids"):
            expr = expr.value
        else:
            break
    if isinstance(expr, cst.Call):
        qualified = index.qualify(expr.func)
        if qualified in _SYNTHETIC_TENSORS:
            return True
        if qualified in _LITERAL_TENSORS:
            return bool(expr.args) and _literal_data(expr.args[0].value)
        func = expr.func
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value in _TOKENIZER_METHODS else func
        if not tokenizer_like(index, receiver) or _enables_padding(index):
            return False
        padding = get_arg(expr, "padding")
        return padding is None or literal_value(padding.value, default=Ellipsis) in _NO_PADDING
    if isinstance(expr, cst.Name):
        return _unpadded_name(index, expr.value, scope, depth)
    return False


def _enables_padding(index) -> bool:
    """`tok.enable_padding(...)` (the `tokenizers` library): later encodes pad by default."""
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "enable_padding" for c in index.calls)


def _unpadded_name(index, name: str, scope, depth: int) -> bool:
    """Every binding of `name` in `scope` is an unpadded source (and there is one)."""
    if isinstance(scope, cst.FunctionDef):
        params = scope.params
        if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
            return False
    values = []
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    for node in walk(body, into_functions=False):
        if isinstance(node, (cst.For, cst.CompFor)):
            if any(isinstance(n, cst.Name) and n.value == name for n in walk(node.target)):
                return False
        elif isinstance(node, (cst.WithItem, cst.NamedExpr)):
            if isinstance(node, cst.WithItem):
                target = node.asname.name if node.asname else None
            else:
                target = node.target
            if target is not None and any(isinstance(n, cst.Name) and n.value == name for n in walk(target)):
                return False
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Name) and target.value == name:
                    if isinstance(node, cst.AugAssign) or node.value is None:
                        return False
                    values.append(node.value)
                elif any(isinstance(n, cst.Name) and n.value == name for n in walk(target)):
                    return False  # unpacked: origin unknown
    return bool(values) and all(_unpadded_source(index, value, scope, depth + 1) for value in values)


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
        ids_names = self._ids_variables(index)
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
                if first is None or not _ids_expression(first.value, ids_names):
                    continue
            if has_star_kwargs(call) or positional_count(call) >= 2:
                continue
            if any(arg.keyword is not None and "mask" in arg.keyword.value for arg in call.args):
                continue
            ids_value = ids_arg.value if ids_arg is not None else first.value
            if _unpadded_source(index, ids_value, index.enclosing_function(call) or index.module):
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

    @staticmethod
    def _ids_variables(index) -> set[str]:
        out = set()
        for node in index.assignments:
            if isinstance(node, cst.Assign) and _ids_expression(node.value, set()):
                out.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        return out
