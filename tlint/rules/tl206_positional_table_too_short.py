"""TL206 positional-table-too-short: a positional table of a literal size smaller than the
literal sequence length the project's data is built with (cross-file, on the
`positional-table` and `sequence-length` facts of the files loaded together)."""

from __future__ import annotations

from tlint.rules.base import Rule


class PositionalTableTooShort(Rule):
    code = "TL206"
    name = "positional-table-too-short"
    kind = "defect"
    tokens = frozenset()  # pre-filter: cross-file only, on the `positional-table` facts (their extractor's tokens)
    summary = "A positional table is smaller than the sequence length the data is built with."
    verify_site = "data"
    # The files some entry point loads together with the table's file: a training script,
    # the model and the data modules it imports. Two independent scripts of one folder
    # (a classifier and a language model) are not compared.
    project_scope = "program"
    project_kinds = ("positional-table",)
    project_facts = ("positional-table", "sequence-length", "call-args", "size-override")

    def project_index(self, related):
        facts = [(other, fact) for other, fs in sorted(related.items()) for fact in fs]
        calls: dict[str, list] = {}
        overridden = set()
        for _, fact in facts:
            if fact.kind == "call-args":
                calls.setdefault(fact.data.callee, []).append(fact.data)
            elif fact.kind == "size-override":
                overridden.add(fact.data.name)
        lengths = [(other, fact) for other, fact in facts if fact.kind == "sequence-length"
                   and self._runs_with_default(fact.data.via, calls, overridden)]
        return calls, overridden, lengths

    def check_project(self, path, related):
        calls, overridden, lengths = self.indexed(related)
        reported = set()
        for fact in related.get(path, []):
            if fact.kind != "positional-table" or not self._runs_with_default(fact.data.via, calls, overridden):
                continue
            size = fact.data.size
            longer = [(other, data) for other, data in lengths if data.data.length > size
                      and not (other == path and set(data.data.origins) & set(fact.data.origins))]
            if not longer or fact.range in reported:
                continue
            reported.add(fact.range)
            other, data = max(longer, key=lambda item: (item[1].data.length, str(item[0])))
            where = related.place(other, data.range, path)
            length = data.data.length
            yield fact.range, (
                f"positional table of {size} positions ({fact.data.what}) is shorter than the sequence length "
                f"{length} the data is built with ({data.data.what} at {where}): "
                f"positions {size}..{length - 1} "
                "index past the table (an IndexError or a CUDA device-side assert), or the model never learned them; "
                "size the table and the data from one config value")

    @staticmethod
    def _runs_with_default(via, calls: dict[str, list], overridden: set) -> bool:
        """A value read from a parameter (or config field) default counts only when the
        project calls its function/class and no call gives the parameter (nor sets the
        field afterwards); a default of something never called here is unknown."""
        if via is None:
            return True
        callee, param, position = via.callee, via.param, via.index
        if callee is None or param in overridden or not calls.get(callee):
            return False
        for call in calls[callee]:
            if call.star or param in call.keywords or (position is not None and call.positional > position):
                return False
        return True
