"""TL215 partial-pre-norm: in a pre-norm self-attention, the query reads the normalised
stream while the keys/values read the un-normalised one (or the reverse):
`self.attn(self.ln_1(x), x, x)`, `q = self.q_proj(h); k = self.k_proj(x)` with
`h = self.ln_1(x)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import snake_parts
from tlint.rules.base import Rule
from tlint.views.bindings import ASSIGN

if TYPE_CHECKING:
    from tlint.context import FileContext

_MHA_PARAMS = ("query", "key", "value")
# a parameter the stream may be passed to beside the attention's inputs (a residual added inside)
_NOT_INPUT_WORDS = frozenset({"residual", "res", "shortcut", "skip", "identity", "mask", "pos", "position", "bias",
                              "rope", "cache", "past", "rotary", "freqs", "cos", "sin"})
_ROLE_WORDS = {"q": {"q", "query", "wq", "queries"}, "k": {"k", "key", "wk", "keys"},
               "v": {"v", "value", "wv", "values"}, "kv": {"kv", "wkv"}}


def _role(attr: str) -> str | None:
    """`q_proj`, `to_q`, `query`, `wq` -> "q"; `k_lin` -> "k"; `to_kv` -> "kv"; else None."""
    parts = set(snake_parts(attr))
    found = [role for role, words in _ROLE_WORDS.items() if parts & words]
    return found[0] if len(found) == 1 else None


class PartialPreNorm(Rule):
    code = "TL215"
    name = "partial-pre-norm"
    kind = "defect"
    default_enabled = False  # no real case with a fix, no ecosystem finding yet (see the CHANGELOG)
    tokens = frozenset({"norm"})  # pre-filter: the norm sub-layer's class (`LayerNorm`, `RMSNorm`, `F.layer_norm`)
    summary = "A pre-norm self-attention normalises the query but not the keys/values (or the reverse)."
    probes = ("norm-scale",)

    def check(self, ctx: FileContext) -> None:
        models = ctx.models
        for module_class in models.classes.values():
            if not models.does_attention(module_class):
                continue
            for method, fn in module_class.methods.items():
                if method == "__init__":
                    continue
                calls = module_class.calls_of(fn)
                for call in calls:
                    sub = module_class.attribute_of(call.func)
                    if sub is None or not self._attention(models, module_class, sub):
                        continue
                    self._compare(ctx, module_class, call, self._inputs(models, module_class, sub, call))
                projections = []
                for call in calls:
                    if type(call.func) is not cst.Attribute or len(call.args) != 1 or call.args[0].keyword:
                        continue
                    sub = module_class.attribute_of(call.func)
                    role = _role(call.func.attr.value) if sub is not None else None
                    if role is not None and not module_class.is_norm_call(call):
                        projections.append((role, f"self.{call.func.attr.value}(...)", call.args[0].value))
                roles = {role for role, _, _ in projections}
                if "q" in roles and roles & {"k", "v", "kv"}:
                    self._compare(ctx, module_class, None, [(name, expr) for _, name, expr in projections])

    @staticmethod
    def _attention(models, module_class, sub) -> bool:
        """An attention sub-layer: `nn.MultiheadAttention`, a leaf attention, or a class of the
        file that computes attention and normalises nothing itself."""
        local = models.classes.get(sub.ctor or "")
        if local is not None and local is not module_class:
            if any(local.is_norm_call(call) for call in local.calls_of(local.forward)):
                return False  # it normalises its own input: a pre-norm block, not a bare attention
            if local.name in models.attention_classes:
                return True
        return models.sublayer_kind(module_class, sub) == "attention"

    def _inputs(self, models, module_class, sub, call) -> list[tuple[str, cst.BaseExpression]]:
        """(parameter name or "", argument) for the arguments that feed the attention."""
        names: tuple[str, ...] | None = None
        if sub.ctor == "torch.nn.MultiheadAttention":
            names = _MHA_PARAMS
        else:
            local = models.classes.get(sub.ctor or "")
            if local is not None and local.forward is not None:
                names = tuple(p.name.value for p in local.forward_params())
        out = []
        for position, arg in enumerate(call.args):
            if arg.star:
                return []
            name = arg.keyword.value if arg.keyword is not None else (
                names[position] if names is not None and position < len(names) else "")
            if set(snake_parts(name)) & _NOT_INPUT_WORDS:
                continue
            out.append((name, arg.value))
        return out

    def _compare(self, ctx, module_class, call, inputs) -> None:
        """Report when one input is `norm(x)` and another is `x` itself (the same binding)."""
        normed: dict[tuple[str, tuple[int, ...]], str] = {}
        raw: list[tuple[tuple[str, tuple[int, ...]], cst.Name, str]] = []
        for name, expr in inputs:
            stream = self._normed_stream(ctx, module_class, expr)
            if stream is not None:
                normed[stream[0]] = stream[1]
            elif type(expr) is cst.Name:
                raw.append(((expr.value, self._key(ctx, expr)), expr, name))
        for key, expr, name in raw:
            norm = normed.get(key)
            if norm is None:
                continue
            what = f"`{name}`" if name else "another input"
            ctx.report(expr, f"partial pre-norm: {what} reads the un-normalised stream `{expr.value}` while another "
                             f"input of the same attention reads `{norm}`: queries and keys/values then live at "
                             "different scales (the residual stream grows with depth), and the norm no longer "
                             f"bounds the attention logits; pass the normalised stream to every input")
            return

    @staticmethod
    def _key(ctx, name: cst.Name) -> tuple[int, ...]:
        return tuple(sorted(id(b) for b in ctx.bindings.reaching(name)))

    def _normed_stream(self, ctx, module_class, expr):
        """((stream name, its bindings), shown) when `expr` is `norm(x)` or a name bound to it."""
        shown = None
        if type(expr) is cst.Name:
            reaching = ctx.bindings.reaching(expr)
            if len(reaching) != 1 or reaching[0].kind != ASSIGN or reaching[0].value is None:
                return None
            shown = expr.value
            expr = reaching[0].value
        if type(expr) is not cst.Call or not module_class.is_norm_call(expr) or not expr.args:
            return None
        inner = expr.args[0].value
        if type(inner) is not cst.Name:
            return None
        from tlint.fixes import short_code

        text = short_code(ctx.module, expr)
        return (inner.value, self._key(ctx, inner)), (f"{shown} = {text}" if shown else text)
