"""What a rule is, and the one call through which it reports (Fixit-style)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from tlint.diagnostics import Fix, Range
from tlint.results import Fact, ProjectCondition  # noqa: F401 - rules import ProjectCondition from here

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.fixes import PendingFix


# The values of `Rule.verify_site` (see there).
VERIFY_SITES = ("model", "call-site", "training", "data")


@dataclass
class Finding:
    """What a rule reported through `ctx.report`: positioned and filtered by the engine."""

    node: cst.CSTNode
    message: str
    fix: Fix | PendingFix | None = None  # a rule's fix is pending: anchored on nodes, resolved by the engine
    when: ProjectCondition | None = None


class Rule:
    """A rule: a code, a kebab-case name, a severity, and a `check` over one file.

    Subclasses set the class attributes and implement `check(ctx)`, calling
    `ctx.report(node, message)` for each finding. Options declared in `options` (with
    their defaults) arrive, validated, in `self.options`.

    Every fact about a rule lives here, on its class: code, name, severity, summary,
    whether it is on by default, its options, and how `tlint verify` tests it (`probes`,
    `verify_site`, `data_check`). Its document's header lines (`rules/TLNNN-name.md`:
    `- Severity:`, `- Default:`, `- Probe:`, `- Options:`) are checked against them by
    tests/test_rule_metadata.py; the registry is `tlint.rules.RULE_MODULES`.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str]
    summary: ClassVar[str]
    default_enabled: ClassVar[bool] = True
    options: dict[str, Any] = {}  # the declared defaults; an instance holds its own, validated
    # Options of this rule that change shared analysis (other rules and the project facts
    # see them too): option name -> the `tlint.context.ViewOptions` field it sets.
    view_options: ClassVar[dict[str, str]] = {}
    # TL001-TL003: findings the engine produces itself (no `check`); `ENGINE_CODES`.
    produced_by_engine: ClassVar[bool] = False

    # What `tlint verify` knows of the rule. `tlint/verify/matching.py` and
    # `tlint/verify/data.py` build their tables from these attributes, and the document's
    # `- Probe:` line lists them (tests/test_rule_metadata.py). Names are plain strings: a
    # rule never imports `tlint.verify` (nor torch).
    #
    # `probes`: the runtime probes (`tlint.verify.options.PROBES`/`TRAINING_PROBES`) that can
    # confirm or refute a finding, in the order the verifier tries them; the first is the one
    # named when none was run. Empty: no probe can test the rule ("not-checkable").
    probes: ClassVar[tuple[str, ...]] = ()
    # `verify_site`: where `tlint verify` finds the rule's findings and how it judges them:
    # - "model": in a class the model instantiates (matched by file and line range);
    # - "call-site": where the model is called, in the files next to the model's (kept there,
    #   and kept even in a class of the model's file that the model does not use);
    # - "training": in the training scripts next to the model's files, judged with the
    #   `warmup-ab` probe's A/B figures;
    # - "data": in the data pipeline: `tlint verify` leaves it to the data scan (`tlint
    #   scan-data`, `tlint verify --data`), which lints the loaders' files for it. The
    #   document's probe line says `data-scan`.
    verify_site: ClassVar[str] = "model"
    # `data_check`: the data-scan check (`tlint.verify.data.CHECKS`) whose result is the
    # verdict of the rule's findings in the data scan; None: no check tests it there.
    data_check: ClassVar[str | None] = None

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        merged = dict(type(self).options)
        merged.update(options or {})
        self.options = merged

    # Cross-file rules compare facts: `check_project(path, related)` gets the file's path
    # and {path: [Fact]} of every related file (itself included, `project_scope` decides
    # which) and yields (Range, message) findings for `path`. Facts a rule reports at must
    # be listed in `tlint.views.facts.POSITIONED` so they carry a range.
    project_scope: ClassVar[str] = "related"
    # When set, `check_project` runs only for files that have a fact of one of these kinds
    # themselves (the ones it reports at): other files need not read their related files.
    project_kinds: ClassVar[tuple[str, ...]] = ()
    # When set, `related` holds only the facts of these kinds (and only the related files
    # that have one): the rest of the project is not copied for this rule.
    project_facts: ClassVar[tuple[str, ...]] = ()

    # The pre-filter (tlint/engine.py): words one of which a file's text must contain
    # (case-insensitively, as substrings: identifiers, attribute names, string contents)
    # for `check` to report anything there. Every way a finding can arise must keep one
    # in the text: an import alias still spells the imported name, a keyword argument its
    # keyword. None: the rule needs every file (nothing is pre-filtered while it is on).
    # Facts are the extractors' business (`tlint.views.facts.TOKENS`), not the rule's.
    tokens: ClassVar[frozenset[str] | None] = None
    # ... or one of these regular expressions must match the lower-cased text (for a
    # trigger no plain word pins down, such as a function named `eval*`).
    patterns: ClassVar[tuple[str, ...]] = ()

    def needed_tokens(self) -> frozenset[str] | None:
        """`tokens`; a rule whose options name more triggers adds them here."""
        return self.tokens

    def check(self, ctx: FileContext) -> None:
        """Per-file analysis; report through `ctx.report`."""

    def check_project(self, path: Path, related: Mapping[Path, list[Fact]]) -> Iterable[tuple[Range, str]]:
        return ()

    def project_index(self, related: Mapping[Path, list[Fact]]) -> Any:
        """What `check_project` needs from all the related facts, whatever the file (sets,
        lists by kind). The engine gives every file with the same related set one shared
        `related` mapping, so `self.indexed(related)` builds this once per set, not per file."""
        return None

    def indexed(self, related: Mapping[Path, list[Fact]]) -> Any:
        """`project_index(related)`, built once per shared related set."""
        if isinstance(related, RelatedFacts):
            return related.index_for(self)
        return self.project_index(related)


class RelatedFacts(dict[Path, list[Fact]]):
    """{path: [Fact]} of the related files, sorted by path, as `check_project` receives it.
    One instance is shared by every file whose related set (and `project_facts`) is the
    same: read it, never change it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._indexes: dict[int, tuple[Rule, Any]] = {}
        # the notebooks among them: their cell maps (tlint/notebook.py), for `place`
        self.cells: dict[Path, list[tuple[int, int, int]]] = {}

    def place(self, other: Path, rng: Range | None, start: Path) -> str:
        """Where a fact of `other` is, as a message about `start` names it: the path relative
        to `start`'s folder and the line (`data.py:12`), or the cell and line in a notebook
        (`train.ipynb:cell 4, line 2`)."""
        import os

        where = os.path.relpath(other, start.parent).replace(os.sep, "/")
        if rng is None:
            return f"{where}:1"
        cells = self.cells.get(other)
        if cells:
            from tlint.notebook import cell_position

            cell, position = cell_position(cells, rng.start)
            return f"{where}:cell {cell}, line {position.line}"
        return f"{where}:{rng.start.line}"

    def index_for(self, rule: Rule) -> Any:
        entry = self._indexes.get(id(rule))
        if entry is None or entry[0] is not rule:
            entry = self._indexes[id(rule)] = (rule, rule.project_index(self))
        return entry[1]


@dataclass
class RuleSet:
    """The enabled rules of one configuration, with their effective severities."""

    rules: list[Rule]
    severities: dict[str, str] = field(default_factory=dict)

    def severity_of(self, code: str, default: str) -> str:
        return self.severities.get(code, default)
