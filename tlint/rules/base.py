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

# The three kinds of rule (`Rule.kind`), each with one meaning, one severity and one default:
# - "defect": wrong whatever the intent (error, on by default);
# - "likely-defect": wrong unless the program means it; the message names the evidence
#   (warning, on by default);
# - "practice": advice, a recipe choice the author may make on purpose (info, off by default:
#   `--extend-select practice`, or the rule's code).
# `bench/rule_verdicts.py` gives each rule the kind its recorded verdicts give it.
KINDS = ("defect", "likely-defect", "practice")
SEVERITY_OF_KIND = {"defect": "error", "likely-defect": "warning", "practice": "info"}
KIND_TEXT = {"defect": "defect", "likely-defect": "likely defect", "practice": "practice"}
# A message names at most this many items of a list, in at most this many characters
# (always the first item), then "and N more" (`listing`).
LISTED = 3
LISTED_WIDTH = 100


class Listing:
    """A list of evidence (files, names, lines) for a message, bounded: `str(listing)` names
    the first items, at most `limit` of them in at most `width` characters (the first one
    always), and ends with "and N more"; `items` is the whole list, which the finding
    carries (`--format json`: its `evidence`). A rule passes it to `ctx.report(...,
    evidence=listing)` or yields it third from `check_project`."""

    __slots__ = ("items", "limit", "sep", "width")

    def __init__(self, items: Iterable[str], *, limit: int = LISTED, sep: str = ", ",
                 width: int = LISTED_WIDTH) -> None:
        self.items: tuple[str, ...] = tuple(items)
        self.limit = max(1, limit)
        self.sep = sep
        self.width = width

    def __str__(self) -> str:
        shown = list(self.items[:1])
        for item in self.items[1: self.limit]:
            if len(self.sep.join([*shown, item])) > self.width:
                break
            shown.append(item)
        rest = len(self.items) - len(shown)
        text = self.sep.join(shown)
        return f"{text} and {rest} more" if rest > 0 else text

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)


def listing(items: Iterable[str], *, limit: int = LISTED, sep: str = ", ", width: int = LISTED_WIDTH) -> Listing:
    """The bounded form of a list of evidence for a message (`Listing`)."""
    return Listing(items, limit=limit, sep=sep, width=width)


@dataclass
class Finding:
    """What a rule reported through `ctx.report`: positioned and filtered by the engine."""

    node: cst.CSTNode
    message: str
    fix: Fix | PendingFix | None = None  # a rule's fix is pending: anchored on nodes, resolved by the engine
    when: ProjectCondition | None = None
    evidence: tuple[str, ...] = ()  # the whole list a message names boundedly (`listing`)


ProjectFinding = tuple[Range, str] | tuple[Range, str, Listing]


class Rule:
    """A rule: a code, a kebab-case name, a severity, and a `check` over one file.

    Subclasses set the class attributes and implement `check(ctx)`, calling
    `ctx.report(node, message)` for each finding. Options declared in `options` (with
    their defaults) arrive, validated, in `self.options`.

    Every fact about a rule lives here, on its class: code, name, kind, summary, its
    options, and how `tlint verify` tests it (`probes`, `verify_site`, `data_check`). The
    kind (`KINDS`) gives the severity and whether the rule is on by default: a rule sets
    `kind`, never `severity`. A practice rule is always off by default; a defect or likely
    defect is on unless it sets `default_enabled = False` (a rule with no recorded verdict
    yet). Its document's header lines (`rules/TLNNN-name.md`: `- Kind:`, `- Severity:`,
    `- Default:`, `- Probe:`, `- Options:`) are checked against them by
    tests/test_rule_metadata.py; the registry is `tlint.rules.RULE_MODULES`.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    kind: ClassVar[str]
    severity: ClassVar[str]  # from `kind` (SEVERITY_OF_KIND), set when the class is made
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if "severity" in cls.__dict__:
            raise TypeError(f"{cls.__name__} sets `severity`: a rule sets `kind` ({', '.join(KINDS)}), "
                            "which gives the severity")
        if kind == "practice" and cls.__dict__.get("default_enabled") is True:
            raise TypeError(f"{cls.__name__}: a practice rule is off by default")
        if kind in SEVERITY_OF_KIND:
            cls.severity = SEVERITY_OF_KIND[kind]
            if kind == "practice":
                cls.default_enabled = False

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        merged = dict(type(self).options)
        merged.update(options or {})
        self.options = merged

    # Cross-file rules compare facts: `check_project(path, related)` gets the file's path
    # and {path: [Fact]} of every related file (itself included, `project_scope` decides
    # which) and yields (Range, message) findings for `path`, or (Range, message, Listing)
    # when the message names a bounded list. Facts a rule reports at must be listed in
    # `tlint.views.facts.POSITIONED` so they carry a range.
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

    def check_project(self, path: Path, related: Mapping[Path, list[Fact]]) -> Iterable[ProjectFinding]:
        """(range, message) for each finding at `path`, or (range, message, listing) when the
        message names a `listing` of evidence."""
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
