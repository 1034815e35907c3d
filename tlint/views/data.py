"""The data view (`ctx.data`): the data-pipeline questions several rules and project facts
ask of one file, answered once per file: which names hold a tokenizer
(`tokenizer_variables`), which calls encode text with one (`tokenizer_encode_calls`),
which names hold input ids (`ids_variables`), where the file pads (`padding`), where data
read with pandas/numpy flows (`nan_flow`, `views/nan_flow.py`), where pad positions are
kept out of the loss (`label_masking`), and the value of a checkpoint name or a pad id as the program runs
by default (`constant`, through `ctx.bindings`).

The helpers that take it (`tokenizer_like(data, expr)`, `unpadded_ids(data, ...)`, ...)
live in `tlint.views.facts_data` beside the extractors that use them. Built under the
view's failure isolation (`ViewError`) and timed by `--profile`, like every view.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.context import register_view

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex
    from tlint.views.bindings import BindingsView
    from tlint.views.facts_data import LabelMasking
    from tlint.views.nan_flow import NanFlow


class DataView:
    """One file's data-pipeline helpers, computed lazily from its index and bindings."""

    def __init__(self, index: FileIndex, bindings: BindingsView) -> None:
        self.index = index
        self.bindings = bindings

    @cached_property
    def tokenizer_variables(self) -> set[str]:
        """Names (last parts) assigned a `*Tokenizer*`/`*Processor*` construction."""
        from tlint.views.facts_data import tokenizer_variables

        return tokenizer_variables(self.index)

    @cached_property
    def tokenizer_encode_calls(self) -> list[cst.Call]:
        """Calls that encode text with a tokenizer (`tokenizer(texts, ...)`, `tok.encode_plus(...)`)."""
        from tlint.views.facts_data import tokenizer_encode_calls

        return tokenizer_encode_calls(self)

    @cached_property
    def ids_variables(self) -> set[str]:
        """Local names assigned input ids (`ids = batch["input_ids"]`)."""
        from tlint.views.facts_data import ids_variables

        return ids_variables(self.index)

    @cached_property
    def label_masking(self) -> LabelMasking:
        """Where the file keeps pad positions out of the loss."""
        from tlint.views.facts_data import LabelMasking

        return LabelMasking(self.index)

    @cached_property
    def nan_flow(self) -> NanFlow:
        """Where data read with pandas/numpy flows (`views/nan_flow.py`)."""
        from tlint.views.nan_flow import NanFlow

        return NanFlow(self.index, self.bindings.calls)

    def padding(self, ctx: FileContext) -> list[cst.CSTNode]:
        """The file's padding sites (`facts_data.padding_sites`), found once for the `pads`
        and `pads-unsided` facts."""
        found = self.__dict__.get("_padding")
        if found is None:
            from tlint.views.facts_data import padding_sites

            found = self.__dict__["_padding"] = list(padding_sites(ctx))
        return found

    def constant(self, expr: cst.BaseExpression | None) -> Any:
        """A literal, or the value a name has as the program runs by default; Ellipsis
        when it cannot be known."""
        from tlint.views.facts_data import module_constant

        return module_constant(self, expr)


@register_view("data")
def data(ctx: FileContext) -> DataView:
    """The file's data-pipeline helpers (`ctx.data`)."""
    return DataView(ctx.index, ctx.bindings)
