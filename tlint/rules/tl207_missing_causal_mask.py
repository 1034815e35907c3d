"""TL207 missing-causal-mask: a causal (decoder-only) model whose self-attention runs
without a causal mask."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import (
    dotted_name,
    get_arg,
    has_star_kwargs,
    literal_value,
    snake_parts,
    walk,
)
from tlint.rules.base import Rule
from tlint.views.model import causal_evidence

if TYPE_CHECKING:
    from tlint.context import FileContext

# torch module -> (mask keywords, positional index of the self-attention mask)
_MASK_ARGS = {
    "torch.nn.MultiheadAttention": (("attn_mask",), 5),
    "torch.nn.TransformerEncoder": (("mask",), 1),
    "torch.nn.TransformerEncoderLayer": (("src_mask",), 1),
    "torch.nn.TransformerDecoder": (("tgt_mask",), 2),
    "torch.nn.TransformerDecoderLayer": (("tgt_mask",), 2),
}


def _causal_flag(ctx, call: cst.Call) -> bool:
    """`is_causal=` passed with anything but False (a literal, or a local variable bound to it)."""
    arg = get_arg(call, "is_causal")
    return arg is not None and literal_value(arg.value, default=True) is not False and not ctx.bindings.empty(arg.value)


def _given(ctx, call: cst.Call, keyword: str | None, position: int | None = None) -> bool:
    """A mask argument is passed and is not empty: `attn_mask=None` (by keyword or position),
    or a local variable bound to None, is no mask."""
    arg = get_arg(call, keyword, position)
    return arg is not None and not ctx.bindings.empty(arg.value)


def _has_causal_mask(site, index) -> bool:
    """A mask applied to the scores that is not purely a padding mask. A mask received as
    a parameter counts as causal when the file builds a causal mask for its callers to pass
    down (Hugging Face: `create_causal_mask(...)` in the model, `attention_mask` in the layer)."""
    fn = index.enclosing_function(site.softmax)
    params = {p.name.value for p in fn.params.params} if fn is not None else set()
    for use in site.masks():
        names = set()
        for node in site.flow.trace(use.mask, site.flow.order_of(use.node, index)):
            for sub in walk(node):
                if type(sub) is cst.Name:
                    names.add(sub.value)
                elif type(sub) is cst.Attribute:
                    names.add(sub.attr.value)
        padding_only = any(_padding_name(n) for n in names) and not any(_causal_word(n) for n in names)
        if not padding_only or (names & params and _builds_causal_mask(index)):
            return True
    return False


def _builds_causal_mask(index) -> bool:
    """The file names a causal-mask builder or a causal mask: `create_causal_mask(...)`,
    `mask_function = create_causal_mask if decoder else ...`, `_prepare_4d_causal_attention_mask`,
    `generate_square_subsequent_mask`, a `causal_mask` variable."""
    return any("mask" in snake_parts(name) and _causal_word(name) for name in index.identifiers)


def _padding_name(name: str) -> bool:
    return "pad" in snake_parts(name) or name in ("attention_mask", "key_padding_mask")


def _causal_word(name: str) -> bool:
    return name in ("tril", "triu", "bias") or bool(set(snake_parts(name)) & {"causal", "tril", "triu", "subsequent",
                                                                                "future", "lookahead", "look"})


class MissingCausalMask(Rule):
    code = "TL207"
    name = "missing-causal-mask"
    kind = "defect"
    # pre-filter: SDPA calls, hand-written attention (a softmax), torch.nn attention modules
    tokens = frozenset({"scaled_dot_product_attention", "softmax", "logsumexp", "transformer", "multiheadattention"})
    summary = "A causal (decoder-only) model's self-attention has no causal mask."
    probes = ("causal-leak",)

    def check(self, ctx: FileContext) -> None:
        evidence = causal_evidence(ctx)
        if not evidence:
            return
        view = ctx.models
        index = ctx.index

        def why(node):
            owner = view.class_of(node)
            return evidence.get(owner.name) if owner is not None else None

        for call in view.attention.sdpa:
            reason = why(call)
            if reason is None or _causal_flag(ctx, call) or _given(ctx, call, "attn_mask", 3) or has_star_kwargs(call):
                continue
            query, key = get_arg(call, "query", 0), get_arg(call, "key", 1)
            if query is not None and key is not None and dotted_name(query.value) != dotted_name(key.value) \
                    and _cross(query.value, key.value):
                continue
            ctx.report(call, f"`scaled_dot_product_attention` without `is_causal=True` or `attn_mask` in a causal "
                             f"model ({reason.reason}): every position attends to the tokens after it")
        for module_class in view.classes.values():
            reason = evidence.get(module_class.name)
            if reason is None:
                continue
            for fn in module_class.methods.values():
                for call in module_class.calls_of(fn):
                    sub = module_class.attribute_of(call.func)
                    if sub is None or sub.ctor not in _MASK_ARGS:
                        continue
                    keywords, position = _MASK_ARGS[sub.ctor]
                    if (any(_given(ctx, call, kw) for kw in keywords) or _causal_flag(ctx, call)
                            or has_star_kwargs(call) or _given(ctx, call, None, position)):
                        continue
                    if sub.ctor == "torch.nn.MultiheadAttention" and _is_cross_attention(call):
                        continue
                    short = sub.ctor.rsplit(".", 1)[1]
                    ctx.report(call, f"`self.{sub.name}` ({short}) runs without a causal mask (`{keywords[0]}=`) in a "
                                     f"causal model ({reason.reason}): every position attends to the tokens after it")
        for site in view.attention.sites:
            reason = why(site.softmax)
            if reason is None or _has_causal_mask(site, index):
                continue
            ctx.report(site.softmax, f"hand-written attention without a causal (`tril`) mask before the softmax in a "
                                     f"causal model ({reason.reason}): every position attends to the tokens after it")


def _cross(query, key) -> bool:
    """q and k computed from different names (encoder memory): cross-attention."""
    q, k = dotted_name(query), dotted_name(key)
    return bool(q and k and {"memory", "encoder", "context", "enc", "cross"} & set(snake_parts(k.rsplit(".", 1)[-1])))


def _is_cross_attention(call: cst.Call) -> bool:
    query, key = get_arg(call, "query", 0), get_arg(call, "key", 1)
    if query is None or key is None:
        return False
    return cst.Module([]).code_for_node(query.value) != cst.Module([]).code_for_node(key.value)
