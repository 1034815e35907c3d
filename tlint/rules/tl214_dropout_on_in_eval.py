"""TL214 dropout-on-in-eval: functional dropout in a module's methods that `model.eval()`
does not turn off: `F.dropout(x, p)` without `training=self.training` (its default is
`training=True`), or `scaled_dot_product_attention(..., dropout_p=p)` with a probability
that is not zeroed outside training."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, get_arg, walk
from tlint.rules.base import Rule
from tlint.views.bindings import PARAM, UNKNOWN

if TYPE_CHECKING:
    from tlint.context import FileContext

# functional dropouts: (probability keyword, its position, training keyword, its position)
_DROPOUTS = {
    "torch.nn.functional.dropout": ("p", 1, "training", 2),
    "torch.nn.functional.dropout1d": ("p", 1, "training", 2),
    "torch.nn.functional.dropout2d": ("p", 1, "training", 2),
    "torch.nn.functional.dropout3d": ("p", 1, "training", 2),
    "torch.nn.functional.alpha_dropout": ("p", 1, "training", 2),
    "torch.nn.functional.feature_alpha_dropout": ("p", 1, "training", 2),
}
# attention kernels with a dropout probability and no training flag: (keyword, position)
_ATTENTION_DROPOUT = {
    "torch.nn.functional.scaled_dot_product_attention": ("dropout_p", 4),
    "flash_attn.flash_attn_func": ("dropout_p", 3),
    "flash_attn.flash_attn_qkvpacked_func": ("dropout_p", 1),
    "flash_attn.flash_attn_kvpacked_func": ("dropout_p", 2),
    "flash_attn.flash_attn_varlen_func": ("dropout_p", 7),
    "xformers.ops.memory_efficient_attention": ("p", 4),
}


def _reads_training(expr) -> bool:
    """Does `expr` read a training flag (`self.training`, `training`, `self.is_training`)?"""
    for node in walk(expr):
        if type(node) is cst.Name and "training" in node.value.lower():
            return True
        if type(node) is cst.Attribute and "training" in node.attr.value.lower():
            return True
    return False


class DropoutOnInEval(Rule):
    code = "TL214"
    name = "dropout-on-in-eval"
    kind = "defect"
    tokens = frozenset({"dropout"})  # pre-filter: `F.dropout`, `dropout_p=`, `memory_efficient_attention(p=)`
    summary = "Functional dropout in a module (F.dropout, SDPA's dropout_p) stays on under model.eval()."
    probes = ("eval-determinism",)

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        models = ctx.models
        for call in index.calls:
            qualified = index.qualify(call.func)
            if qualified is None:
                continue
            dropout = _DROPOUTS.get(qualified)
            attention = _ATTENTION_DROPOUT.get(qualified)
            if dropout is None and attention is None:
                continue
            fn = index.enclosing_function(call)
            if fn is None or not self._has_self(fn) or not self._in_module(index, models, call):
                continue
            if "train" in fn.name.value.lower() or self._gated(index, call, fn):
                continue
            if dropout is not None:
                self._functional(ctx, call, qualified, dropout)
            else:
                self._attention(ctx, call, qualified, attention)

    @staticmethod
    def _in_module(index, models, call) -> bool:
        """In a module class of the file, or in a subclass of a class defined elsewhere (an
        attention imported from the project's model file), which may well be one."""
        if models.class_of(call) is not None:
            return True
        owner = index.enclosing_class(call)
        return owner is not None and models.has_opaque_base(owner)

    @staticmethod
    def _has_self(fn: cst.FunctionDef) -> bool:
        params = fn.params.params
        return bool(params) and params[0].name.value == "self"

    @staticmethod
    def _gated(index, call, fn) -> bool:
        """Inside `if self.training:` (or a conditional expression on it) within its function."""
        node = index.parent(call)
        while node is not None and node is not fn:
            if type(node) in (cst.If, cst.IfExp, cst.While) and _reads_training(node.test):
                return True
            node = index.parent(node)
        return False

    def _zero(self, ctx, expr) -> bool:
        """The probability is off outside training, or may be: known to be 0 on every
        resolvable path, computed from a training flag (`p = self.p if self.training else
        0.0`) or bound under a test of one (`if self.training: p = 0.1`), or a parameter of
        the method whose callers' values are not all known to be non-zero (they may pass
        `self.p if self.training else 0`)."""
        if _reads_training(expr):
            return True
        bindings = ctx.bindings
        if type(expr) is cst.Name:
            reaching = bindings.reaching(expr)
            if any(b.value is not None and _reads_training(b.value) for b in reaching):
                return True
            fn = ctx.index.enclosing_function(expr)
            if fn is not None and any(self._gated(ctx.index, b.node, fn) for b in reaching):
                return True  # `if self.training: p = 0.1` / `else: p = 0.0`
            if any(b.kind == PARAM for b in reaching):
                values = bindings.values(expr)
                return not values or any(v is UNKNOWN or not isinstance(v, (int, float)) or not v for v in values)
        values = [v for v in bindings.values(expr) if v is not UNKNOWN]
        return bool(values) and all(isinstance(v, (int, float)) and not v for v in values)

    def _functional(self, ctx, call, qualified, spec) -> None:
        p_key, p_pos, train_key, train_pos = spec
        training = get_arg(call, train_key, train_pos)
        if training is not None:
            return  # passed on purpose: `self.training`, a flag, or an explicit `True` (Monte Carlo dropout)
        if any(arg.star for arg in call.args):
            return
        p = get_arg(call, p_key, p_pos)
        if p is not None and self._zero(ctx, p.value):
            return
        short = qualified.rsplit(".", 1)[-1]
        new = fixes.with_keyword(call, "training", "self.training")
        fix = fixes.fix("safe", "Pass `training=self.training`",
                        fixes.replace(call, fixes.code_at(ctx.index, call, new)))
        ctx.report(call, f"`{short}` without `training=`: its default is `training=True`, so this dropout stays on "
                         "after `model.eval()` and evaluation and inference outputs are random (scores drop, two "
                         "runs disagree); pass `training=self.training`, or use an `nn.Dropout` sub-module",
                   fix=fix)

    def _attention(self, ctx, call, qualified, spec) -> None:
        key, position = spec
        p = get_arg(call, key, position)
        if p is None or p.star or self._zero(ctx, p.value):
            return
        short = qualified.rsplit(".", 1)[-1]
        value = fixes.short_code(ctx.module, p.value)
        fix = None
        if type(p.value) in (cst.Name, cst.Attribute, cst.Float, cst.Integer) and dotted_name(p.value) != "self":
            fix = fixes.fix("safe", f"Use `{value} if self.training else 0.0`",
                            fixes.replace(p.value, f"{value} if self.training else 0.0"))
        ctx.report(p.value, f"`{short}` is given `{key}={value}` whatever the mode: the kernel has no training "
                            "flag, so attention dropout stays on after `model.eval()` and evaluation outputs are "
                            f"random; pass `{key}={value} if self.training else 0.0`", fix=fix)
