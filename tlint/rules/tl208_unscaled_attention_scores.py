"""TL208 unscaled-attention-scores: hand-written attention whose query-key product reaches
the softmax without the 1/sqrt(d) scaling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.rules.base import Rule
from tlint.views.attention import illustration

if TYPE_CHECKING:
    from tlint.context import FileContext


class UnscaledAttentionScores(Rule):
    code = "TL208"
    name = "unscaled-attention-scores"
    kind = "likely-defect"
    tokens = frozenset({"softmax", "logsumexp"})  # pre-filter: hand-written attention sites (softmax, logsumexp)
    summary = "Hand-written attention scores reach the softmax without 1/sqrt(d) scaling."
    probes = ("attention-entropy",)

    def check(self, ctx: FileContext) -> None:
        attention = ctx.models.attention
        seen: set[int] = set()
        for site in (*attention.sites, *attention.delegated):
            if id(site.product.node) in seen or site.is_scaled() or site.keys_are_values(ctx.index) \
                    or illustration(ctx.index, site):
                continue
            seen.add(id(site.product.node))
            ctx.report(site.product.node,
                       "attention scores `q @ k^T` reach the softmax unscaled: their variance grows with the head "
                       "dimension, the softmax saturates and its gradients vanish; multiply by `1 / math.sqrt(d_k)` "
                       "(or use `F.scaled_dot_product_attention`)")
