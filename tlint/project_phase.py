"""The cross-file phase: conditions and cross-file rules, decided on the facts of related
files (the engine's step 6).

Each file's pending findings (`ctx.report(..., when=ProjectCondition(...))`) are kept or
dropped by the fact kinds of its related files, and rules with a `check_project` compare
facts across them. A `Project` is the files of one project root: walked once (with the
discovery's walker), their imports scanned (cached by `stat`), their facts read on demand
(`analyse_facts`: through the per-file cache for unnamed files).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from stat import S_ISREG

from tlint.cache import FileCache
from tlint.config import Settings
from tlint.context import Timer
from tlint.diagnostics import Diagnostic, internal_error
from tlint.discovery import SUFFIXES, GitIgnore, _excluded, walk_folders
from tlint.memo import seen_file, seen_folder
from tlint.project import ImportGraph, package_bases, scan_imports
from tlint.project_memory import ProjectMemory
from tlint.reading import read_source
from tlint.results import Fact, FileResult, ProjectCondition
from tlint.rules.base import RelatedFacts, Rule

# A file's import scan is cached only when it was last written longer ago than this
# (tlint/cache.py: "racy" files).
IMPORT_SETTLE_NS = 2_000_000_000

# How the phase gets the facts of a file no command-line path named:
# (path, its settings, the text that replaces it or None) -> its FileResult.
AnalyseFacts = Callable[[Path, Settings, "str | None"], FileResult]


def resolve_projects(results: list[FileResult], settings_of: dict[Path, Settings], settings_for,
                     overrides: dict[Path, str], cache: FileCache | None, analyse_facts: AnalyseFacts,
                     timer: Timer | None = None, memory: ProjectMemory | None = None) -> None:
    """Decide every file's pending findings and run the cross-file rules (in place).
    `memory` (no cache): import scans kept between runs (tlint/project_memory.py)."""
    named = {r.path: r for r in results}
    projects: dict[Path, Project] = {}

    def project_of(result: FileResult) -> Project:
        root = settings_of[result.path].root
        if root not in projects:
            projects[root] = Project(root, settings_for, named, overrides, cache, analyse_facts, memory)
        return projects[root]

    for result in results:
        if result.parse_error:
            continue
        try:
            resolve_file(result, settings_of[result.path], project_of, timer)
        except Exception as exc:  # isolate the file: the other files' results stand
            result.pending = []
            result.diagnostics.append(internal_error("the cross-file phase", result.display, exc))


def resolve_file(result: FileResult, settings: Settings, project_of, timer: Timer | None = None) -> None:
    undecided = []
    own = result.fact_kinds()
    for pending in result.pending:
        verdict = decide(pending.when, own, final=False)
        if verdict is None:
            undecided.append(pending)
        elif verdict:
            result.diagnostics.append(pending.diagnostic)
    result.pending = []
    for pending in undecided:
        kinds = project_of(result).related_fact_kinds(result.path, pending.when.scope)
        if decide(pending.when, kinds, final=True):
            result.diagnostics.append(pending.diagnostic)
    for rule in settings.ruleset().rules:
        if type(rule).check_project is Rule.check_project:
            continue
        if rule.project_kinds and not own & set(rule.project_kinds):
            continue  # nothing of this file to compare: skip reading the related files
        related = project_of(result).related_facts(result.path, rule.project_scope, rule.project_facts)
        try:
            if timer is None:
                found = list(rule.check_project(result.path, related))
            else:
                found = timer(f"rule: {rule.code} {rule.name} (cross-file)",
                              lambda r=rule, related=related: list(r.check_project(result.path, related)))
        except Exception as exc:  # isolate the rule, as in phase 1
            result.diagnostics.append(internal_error(rule, result.display, exc))
            continue
        for where, message, *listed in found:
            evidence = listed[0].items if listed else ()
            result.diagnostics.append(Diagnostic(rule.code, rule.name, rule.severity, message, result.display,
                                                 where, kind=rule.kind, evidence=evidence))


def _code(path: Path, text: str) -> str:
    """The Python code of a file's text: a notebook's joined code cells (tlint/notebook.py)."""
    if path.name[-6:].lower() != ".ipynb":
        return text
    from tlint.notebook import source_for_imports

    return source_for_imports(text)


def decide(when: ProjectCondition, kinds: set[str], *, final: bool) -> bool | None:
    """Keep (True), drop (False), or None: the file's own facts cannot decide yet."""
    if any(kind in kinds for kind in when.none_of):
        return False
    if when.any_of and not any(kind in kinds for kind in when.any_of):
        return False if final else None
    if when.none_of and not final:
        return None
    return True


class Project:
    """The files of one project root, their import graph, and their facts on demand."""

    def __init__(self, root: Path, settings_for, named: dict[Path, FileResult], overrides: dict[Path, str],
                 cache: FileCache | None, analyse_facts: AnalyseFacts, memory: ProjectMemory | None = None) -> None:
        self.root = root
        self.memory = memory
        self.analyse_facts = analyse_facts
        self.settings_for = settings_for
        self.named = named
        self.overrides = overrides
        self.cache = cache
        files: dict[Path, os.stat_result] = {}
        gitignore = GitIgnore()
        folders = walk_folders(root, settings_for, root, gitignore,
                               keep_folder=lambda sub: not self._other_project(sub))
        for folder_path, real_folder, folder_settings, filenames in folders:
            for name in filenames:
                if not name.endswith(SUFFIXES):
                    continue
                try:
                    file = (folder_path / name).resolve() if os.path.islink(folder_path / name) else real_folder / name
                except (OSError, RuntimeError):  # a symlink loop
                    continue
                if name.endswith(".ipynb") and _excluded(file, folder_settings, file):
                    continue  # `extend-exclude = ["*.ipynb"]` keeps notebooks out of projects too
                if file not in files and not gitignore.ignored(file, False):
                    self._add(files, file)
        for path in named:
            if path not in files and path not in overrides:
                self._add(files, path)
        extra = package_bases(root)
        for base in extra:  # what decides them, for the run memo
            seen_folder(base)
        self.graph = ImportGraph(root, imports=self._scan_imports(files), extra_bases=extra)
        self._facts: dict[Path, list[Fact]] = {}
        self._cells: dict[Path, list[tuple[int, int, int]]] = {}  # the notebooks' cell maps
        # Bit sets over `self.graph.order`: the files whose facts are read, and per fact
        # kind the files that have one, so a related set's kinds are a few integer ANDs.
        self._read = 0
        self._kind_files: dict[str, int] = {}
        self._shared: dict[tuple, RelatedFacts] = {}  # related sets handed to check_project

    @staticmethod
    def _add(files: dict[Path, os.stat_result], file: Path) -> None:
        try:
            stat = file.stat()
        except OSError:
            return
        if S_ISREG(stat.st_mode):
            files[file] = stat
            seen_file(file)

    def _scan_imports(self, files: dict[Path, os.stat_result]) -> dict[Path, list[str]]:
        """Each file's imported module names: from the cache's table while the file's stat
        key is unchanged (see tlint/cache.py), else read and scanned (and stored)."""
        imports: dict[Path, list[str]] = {}
        cache = self.cache
        settings = self.settings_for(self.root, self.root) if cache is not None else None
        if cache is not None:
            stored = cache.load_imports(settings)  # type: ignore[arg-type]  # set with cache
        else:
            stored = self.memory.imports if self.memory is not None else {}
        table: dict[str, tuple[tuple[int, ...], list[str]]] = {}
        settled = time.time_ns() - IMPORT_SETTLE_NS  # older than this: not "racy"
        for file, stat in files.items():
            if file in self.overrides:
                continue
            key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            entry = stored.get(str(file))
            if entry is not None and entry[0] == key:
                imports[file] = entry[1]
            else:
                data = read_source(file, "")  # at most the size limit, never a FIFO
                if not isinstance(data, bytes):
                    continue
                imports[file] = scan_imports(_code(file, data.decode("utf-8", errors="replace")))
            if stat.st_mtime_ns < settled and stat.st_ctime_ns < settled:
                table[str(file)] = (key, imports[file])
        for path, text in self.overrides.items():
            imports[path] = scan_imports(_code(path, text))
        if cache is not None and table != stored:
            cache.store_imports(settings, table)  # type: ignore[arg-type]  # set with cache
        elif self.memory is not None:
            self.memory.store_imports(table)
        return imports

    def _other_project(self, folder: Path) -> bool:
        return self.settings_for(folder, self.root).root != self.root

    def facts_of(self, path: Path) -> list[Fact]:
        facts = self._facts.get(path)
        if facts is None:
            result = self.named.get(path)
            if result is None:
                settings = self.settings_for(path.parent, self.root)
                result = self.analyse_facts(path, settings, self.overrides.get(path))
            facts = self._facts[path] = result.facts
            if result.cells:
                self._cells[path] = result.cells
            bit = self.graph.bit.get(path)
            if bit is not None:
                self._read |= 1 << bit
                for kind in {fact.kind for fact in facts}:
                    self._kind_files[kind] = self._kind_files.get(kind, 0) | (1 << bit)
        return facts

    def _related_mask(self, path: Path, scope: str) -> int:
        """The related set of `path` as a bit set, every file of it read."""
        mask = self.graph.mask(path, scope)
        unread = mask & ~self._read
        if unread:
            for other in self.graph.paths(unread):
                self.facts_of(other)
        return mask

    def related(self, path: Path, scope: str) -> set[Path]:
        if path not in self.graph.bit:
            return {path}
        return set(self.graph.paths(self.graph.mask(path, scope)))

    def related_fact_kinds(self, path: Path, scope: str) -> set[str]:
        if path not in self.graph.bit:
            return {fact.kind for fact in self.facts_of(path)}
        mask = self._related_mask(path, scope)
        return {kind for kind, files in self._kind_files.items() if files & mask}

    def related_facts(self, path: Path, scope: str, kinds: tuple[str, ...] = ()) -> RelatedFacts:
        """{path: [Fact]} of the files related to `path`, sorted by path; with `kinds`, only
        facts of these kinds, of the files that have one. Files with the same set share
        one mapping (and so the rules' `project_index` of it)."""
        if path not in self.graph.bit:
            facts = self.facts_of(path)
            alone = RelatedFacts({path: [f for f in facts if f.kind in kinds] if kinds else facts})
            if path in self._cells:
                alone.cells[path] = self._cells[path]
            return alone
        mask = self._related_mask(path, scope)
        if kinds:
            having = 0
            for kind in kinds:
                having |= self._kind_files.get(kind, 0)
            mask &= having
        key = (mask, kinds)
        related = self._shared.get(key)
        if related is None:
            wanted = set(kinds)
            related = RelatedFacts()
            for other in self.graph.paths(mask):
                facts = self.facts_of(other)
                related[other] = [f for f in facts if f.kind in wanted] if kinds else facts
                if other in self._cells:
                    related.cells[other] = self._cells[other]
            if len(self._shared) >= 64:  # unfiltered sets can be large: keep the recent ones
                del self._shared[next(iter(self._shared))]
            self._shared[key] = related
        return related
