"""TL107 eos-masked-as-pad: the pad token is the EOS token while labels are masked by pad
id, so every EOS label is ignored too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.rules.base import ProjectCondition, Rule
from tlint.views.facts import pad_is_eos_sites

if TYPE_CHECKING:
    from tlint.context import FileContext


class EosMaskedAsPad(Rule):
    code = "TL107"
    name = "eos-masked-as-pad"
    kind = "likely-defect"
    tokens = frozenset({"pad_token"})  # pre-filter: `pad_token`/`pad_token_id` set to the EOS token
    summary = "pad_token = eos_token while labels are masked by pad id: the model never learns to stop."
    verify_site = "data"
    data_check = "eos-masked"

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        for node in pad_is_eos_sites(ctx.data):
            ctx.report(
                node,
                "the pad token is the EOS token and labels are masked by pad id (`DataCollatorForLanguageModeling"
                "(mlm=False)`, `labels == pad_token_id`, `ignore_index=pad_token_id`): every EOS label becomes "
                "-100 and the model never learns to stop; add a distinct pad token "
                "(`add_special_tokens({\"pad_token\": \"[PAD]\"})`) or mask by `attention_mask`",
                when=ProjectCondition(any_of=("pad-labels-by-id",), none_of=("distinct-pad",), scope="imports"),
            )
