"""TL110 nan-unchecked-input: numeric data read with pandas/numpy reaches a tensor in a
module that never looks for NaN, in this file or through a function or `Dataset` of an
imported one (cross-file, on the `nan-source` and `tensorizes` facts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.cst import dotted_name
from tlint.rules.base import Rule
from tlint.views.nan_flow import READER_TOKENS

if TYPE_CHECKING:
    from tlint.context import FileContext


class NanUncheckedInput(Rule):
    code = "TL110"
    name = "nan-unchecked-input"
    kind = "likely-defect"
    tokens = READER_TOKENS  # pre-filter: the pandas/numpy readers
    summary = "Data read with pandas/numpy reaches a tensor with no NaN handling in the module."
    verify_site = "data"
    data_check = "nan-inf"

    # Cross-file: a read passed to an imported callable that turns it into a tensor.
    project_scope = "imports"
    project_kinds = ("nan-source",)
    project_facts = ("nan-source", "tensorizes")

    def check(self, ctx: FileContext) -> None:
        flow = ctx.data.nan_flow
        if not flow.reads or flow.handles_nan or not flow.sinks:
            return
        for read in flow.reads:
            if flow.reached_sink(flow.tainted(read), read) is None:
                continue
            reader = dotted_name(read.func) or "read"
            ctx.report(read, f"data read by `{reader}(...)` becomes a tensor with no NaN handling in this module "
                             "(no `fillna`/`dropna`/`isnan`/`nan_to_num`): one missing value makes the loss NaN; "
                             "drop or fill missing values, or assert there are none")

    def project_index(self, related):
        by_callee: dict[str, list] = {}
        for other, facts in sorted(related.items()):
            for fact in facts:
                if fact.kind == "tensorizes":
                    by_callee.setdefault(fact.data.callee, []).append((other, fact))
        return by_callee

    def check_project(self, path, related):
        by_callee = self.indexed(related)
        reported = set()
        for fact in related.get(path, []):
            if fact.kind != "nan-source" or fact.range in reported:
                continue
            source = fact.data
            for other, target in by_callee.get(source.callee, ()):
                if other == path:
                    continue
                takes = (source.keyword in target.data.params if source.keyword is not None
                         else source.position in target.data.positions)
                if not takes:
                    continue
                reported.add(fact.range)
                place = related.place(other, target.range, path)
                yield fact.range, (
                    f"data read by `{source.reader}(...)` is passed to `{source.callee}` ({place}), which turns it "
                    "into a tensor; neither module handles NaN (no `fillna`/`dropna`/`isnan`/`nan_to_num`): one "
                    "missing value makes the loss NaN; drop or fill missing values, or assert there are none")
                break
