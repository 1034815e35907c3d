"""The values one file's analysis and one run produce: what the cache stores, the
cross-file phase reads and the reporters print. Plain data (see `tlint/signed.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlint.diagnostics import Diagnostic, Range
from tlint.suppressions import Suppression

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    class Outcome(Protocol):
        """What `exit_code` reads of a run: a `RunResult`, or a memo's `StoredResult`."""

        @property
        def diagnostics(self) -> Sequence[Diagnostic]: ...
        @property
        def errors(self) -> Sequence[str]: ...
        @property
        def internal_errors(self) -> int: ...


@dataclass(frozen=True)
class ProjectCondition:
    """Keep a finding only if the project facts of related files say so.

    `any_of`: at least one related file (the file itself included) has a fact of one of
    these kinds. `none_of`: no related file has a fact of these kinds. `scope` is
    "related" (same folder or import-connected, as README "How tlint works" says) or "imports"
    (import-connected only, the file itself included) or "program" (the files some entry
    point loads together with this one: its importers, transitively, and all they import).
    """

    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    scope: str = "related"


@dataclass
class Fact:
    """A small, serialisable statement about a file, for cross-file rules. `range` is
    only computed for kinds listed in `tlint.views.facts.POSITIONED` (the ones a
    cross-file rule reports at); positions cost a code-generation pass. `data`: the
    values the kind carries, one of the dataclasses of `tlint.fact_data` (None for a kind
    that carries none)."""

    kind: str
    range: Range | None
    data: Any = None


@dataclass
class PendingDiagnostic:
    diagnostic: Diagnostic
    when: ProjectCondition


@dataclass
class FileResult:
    path: Path
    display: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    pending: list[PendingDiagnostic] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)
    parse_error: bool = False
    prefiltered: bool = False  # not parsed by LibCST: no rule or extractor needed it
    # Other files the analysis read (DeepSpeed JSON configs), with the digest of the bytes
    # it used (None: absent): the cache checks them too.
    inputs: dict[Path, str | None] = field(default_factory=dict)
    unreadable: bool = False  # the file itself could not be read (TL001): never cached
    # A notebook's cell map (tlint/notebook.py `CellMap`): its positions above are in its
    # joined code cells until `Linter._finish_file` places them in the cells.
    cells: list[tuple[int, int, int]] | None = None
    # The digest of the bytes the analysis read (`tlint.cache.digest_bytes`), when the run
    # asked for it (`--fix`: the bytes a fix edits must be those its positions were computed
    # on). Not stored in the cache.
    digest: str | None = field(default=None, init=False)

    def fact_kinds(self) -> set[str]:
        return {fact.kind for fact in self.facts}


@dataclass
class RunResult:
    diagnostics: list[Diagnostic]
    files: list[str]
    parse_errors: int = 0
    errors: list[str] = field(default_factory=list)  # usage problems (missing paths)
    paths: dict[str, Path] = field(default_factory=dict)  # display path -> the file's path
    # the display paths of the files the analysis could not read (TL001: not a regular file,
    # too large): the reporters never open them
    unread: list[str] = field(default_factory=list)
    # the digest of the bytes each file read from disk was analysed from (absolute path ->
    # digest), when the run asked for them (`Linter(digests=True)`)
    digests: dict[Path, str] = field(default_factory=dict)

    def path_of(self, display: str) -> Path | None:
        return self.paths.get(display)

    @property
    def internal_errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.code == "TL003")


def exit_code(result: Outcome, *, fail_on: str = "warning", exit_zero: bool = False) -> int:
    """The exit code of a run (`RunResult` or a memo's stored result): 2 for usage
    problems or any TL003, else 0 with `exit_zero`, else 1 when an unsuppressed finding is
    at or above `fail_on`."""
    from tlint.diagnostics import SEVERITY_RANK

    if result.internal_errors or result.errors:
        return 2
    if exit_zero:
        return 0
    threshold = SEVERITY_RANK[fail_on]
    failing = any(SEVERITY_RANK[d.severity] >= threshold for d in result.diagnostics if not d.suppressed)
    return 1 if failing else 0

