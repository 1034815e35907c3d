"""TL111 pad-to-max-length: every example padded to the maximum length for training, where
dynamic padding would do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.cst import dotted_name, get_arg, literal_value
from tlint.rules.base import ProjectCondition, Rule

if TYPE_CHECKING:
    from tlint.context import FileContext


class PadToMaxLength(Rule):
    code = "TL111"
    name = "pad-to-max-length"
    kind = "practice"
    tokens = frozenset({"pad"})  # pre-filter: `padding="max_length"`/`pad_to_max_length=True`
    summary = "Training data is padded to the maximum length instead of dynamically."
    verify_site = "data"
    data_check = "pad-ratio"

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        for call in ctx.data.tokenizer_encode_calls:
            padding = get_arg(call, "padding")
            legacy = get_arg(call, "pad_to_max_length")
            if padding is not None and literal_value(padding.value, default=None) == "max_length":
                site = padding
            elif legacy is not None and literal_value(legacy.value, default=None) is True:
                site = legacy
            else:
                continue
            spelled = dotted_name(call.func) or "tokenizer"
            ctx.report(
                site,  # at the argument that asks for it (a long call spans many lines)
                f"`{spelled}(...)` pads every example to `max_length` for training: most of each batch is "
                "padding the model still computes; pad per batch instead (`DataCollatorWithPadding`, "
                "`padding=True` in the collate function) and group by length (`group_by_length=True`)",
                when=ProjectCondition(any_of=("feeds-training",), none_of=("static-shapes",), scope="imports"),
            )
