"""TL308 adam-eps-underflow: Adam's epsilon below fp16's range over fp16 parameters.

An Adam-family optimiser whose `eps` (the default 1e-8 included) is below 1e-7, built in a
scope that casts the model to fp16 (`model.half()`, `.to(torch.float16)`,
`from_pretrained(..., torch_dtype=torch.float16)`) and uses neither `autocast` nor a
`GradScaler` there (mixed precision keeps fp32 master weights, where 1e-8 is fine).
Files using DeepSpeed or apex (fp32 master weights) or `peft` (trainable adapters are
upcast to fp32) are not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, snake_parts
from tlint.rules.base import Rule
from tlint.views.training import UNKNOWN, TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_FP16 = frozenset({"torch.float16", "torch.half"})
_DEFAULT_EPS = 1e-8
_SMALLEST_SAFE_EPS = 1e-7


class AdamEpsUnderflow(Rule):
    code = "TL308"
    name = "adam-eps-underflow"
    kind = "likely-defect"
    tokens = frozenset({"adam"})  # pre-filter: Adam-family optimisers
    summary = "Adam's eps (1e-8 by default) rounds to zero over fp16 parameters."

    def check(self, ctx: FileContext) -> None:
        view: TrainingView = ctx.training
        casts = [call for call in ctx.index.calls if self._casts_model_to_fp16(view, call)]
        # DeepSpeed and apex keep fp32 master weights; peft upcasts the trainable adapters to fp32.
        if not casts or any(ctx.index.imports.imports_module(m) for m in ("deepspeed", "apex", "peft")):
            return
        scopes = {ctx.index.enclosing_function(call) for call in casts}
        mixed = {ctx.index.enclosing_function(call) for call in ctx.index.calls if self._mixed_precision(view, call)}
        for site in view.optimizers:
            if not site.adam_family or site.function not in scopes or site.function in mixed or None in mixed:
                continue
            arg = get_arg(site.call, "eps", 3)
            eps = view.literal(arg.value) if arg is not None else _DEFAULT_EPS
            if eps is UNKNOWN or not isinstance(eps, (int, float)) or eps >= _SMALLEST_SAFE_EPS:
                continue
            ctx.report(arg if arg is not None else site.call,
                       f"Adam's eps={eps:g} rounds to 0 in fp16 (smallest subnormal ~6e-8): over fp16 parameters "
                       "the update divides by ~0 when a gradient's second moment vanishes; use eps=1e-6 or keep "
                       "fp32 master weights (autocast + GradScaler)")

    @staticmethod
    def _casts_model_to_fp16(view: TrainingView, call: cst.Call) -> bool:
        func = call.func
        name = view.index.qualify(func) or ""
        if name.endswith(".from_pretrained"):
            dtype = get_arg(call, "torch_dtype") or get_arg(call, "dtype")
            return dtype is not None and (
                view.index.qualify(dtype.value) in _FP16 or literal_value(dtype.value, None) == "float16"
            )
        if type(func) is not cst.Attribute or func.attr.value not in ("half", "to"):
            return False
        owner = last_name(func.value) or ""
        if not (view.role(func.value) == "model" or "model" in snake_parts(owner) or owner in ("net", "module")):
            return False
        if func.attr.value == "half":
            return True
        dtype = get_arg(call, "dtype", None) or next((a for a in call.args if a.keyword is None), None)
        return dtype is not None and view.index.qualify(dtype.value) in _FP16

    @staticmethod
    def _mixed_precision(view: TrainingView, call: cst.Call) -> bool:
        name = view.index.qualify(call.func) or ""
        return name.startswith("torch.") and (name.endswith("autocast") or name.endswith("GradScaler"))
