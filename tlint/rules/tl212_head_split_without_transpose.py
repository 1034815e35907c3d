"""TL212 head-split-without-transpose: `x.view(B, n_heads, T, d)` straight from a
`(B, T, C)` tensor on the way to attention."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.rules.base import Rule
from tlint.views.attention import head_splits_before_time

if TYPE_CHECKING:
    from tlint.context import FileContext


class HeadSplitWithoutTranspose(Rule):
    code = "TL212"
    name = "head-split-without-transpose"
    kind = "defect"
    # pre-filter: the operands of an attention
    tokens = frozenset({"softmax", "logsumexp", "scaled_dot_product_attention"})
    summary = "Heads split by viewing (B, T, C) as (B, heads, T, d) without a transpose."
    probes = ("causal-leak", "batch-coupling")

    def check(self, ctx: FileContext) -> None:
        for call in head_splits_before_time(ctx.models.attention):
            ctx.report(call, "heads split with the head axis before the time axis directly from a (B, T, C) "
                             "tensor: `view` keeps memory order, so each \"head\" row mixes features of several "
                             "positions; split as `view(B, T, n_heads, d).transpose(1, 2)`")
