"""The run, one way: discover -> parse once -> views -> rules -> project facts
(cross-file) -> suppressions -> sorted diagnostics.

`analyse_file` does everything that needs the tree, for one file, and returns a small
`FileResult` (diagnostics, pending cross-file findings, facts, suppression comments), so
files can be processed in worker processes and cached. Reading and parsing live in
`reading.py`, the cross-file phase in `project_phase.py`, the per-file context rules see
in `context.py`, the result types in `results.py`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from tlint.cache import FileCache, cache_disabled_by_env, digest_bytes
from tlint.config import ConfigResolver, Settings, named_roots
from tlint.context import FileContext, Timer, ViewError, view  # noqa: F401 - re-exported
from tlint.cst import clear_caches
from tlint.diagnostics import Diagnostic, Range, internal_error
from tlint.discovery import discover
from tlint.elide import drop_touching
from tlint.fixes import FileLines, PendingFix, anchors, resolve_fix
from tlint.memo import seen_file
from tlint.positions import node_ranges
from tlint.project_memory import ProjectMemory
from tlint.project_phase import resolve_projects
from tlint.reading import (  # noqa: F401 - some re-exported
    MAX_FILE_BYTES,
    PARSE_TIME_LIMIT,
    NeedsGuard,
    decode_data,
    decode_source,
    needed_tokens,
    parse_error,
    parse_source,
    prefilter_skips,
    read_source,
    read_text,
)
from tlint.results import Fact, FileResult, PendingDiagnostic, RunResult  # noqa: F401 - re-exported
from tlint.rules import ENGINE_CODES
from tlint.source import FileIndex
from tlint.suppressions import apply_suppressions, parse_suppressions, unused_suppressions

# Below this much source, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 256 * 1024


# --- one file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskOptions:
    """How one file is analysed (part of every task, and of the cache key)."""

    prefilter: bool = True  # `--no-prefilter`: False parses every file with LibCST
    profile: bool = False  # `--profile`: time the analysis (tlint/profile.py)
    parse_time_limit: float = PARSE_TIME_LIMIT  # seconds for a guarded parse (tlint/guard.py)
    digests: bool = False  # keep the digest of the bytes each file was analysed from (`--fix`)


def _timed(hook: Timer | None, name: str, fn, /, *args, **kwargs):
    """`fn(*args, **kwargs)`, its time charged to `name` when the run is profiled."""
    return fn(*args, **kwargs) if hook is None else hook(name, fn, *args, **kwargs)


def analyse_file(path: Path, display: str, settings: Settings, *, text: str | None = None,
                 data: bytes | Diagnostic | None = None, facts_only: bool = False, prefilter: bool = True,
                 timer: Timer | None = None, time_limit: float | None = PARSE_TIME_LIMIT) -> FileResult:
    """Parse one file once, run the enabled rules over its views, extract its facts.
    `text` replaces the file's contents; `data` is what `read_source` already read of it
    (else it is read here). `prefilter`: spare LibCST a file no rule needs; `timer`: the
    profile's timing hook. Never raises: what fails inside tlint becomes a TL003 finding
    for the file. A file LibCST might crash on or spend minutes on (`reading.NeedsGuard`)
    is analysed in a child process under `time_limit` seconds (tlint/guard.py): a crash or
    a timeout is TL001 for it; `time_limit=None` analyses it here (the guard's child)."""
    collecting = gc.isenabled()
    if collecting:  # see `_collect_after_file`
        gc.disable()
    try:
        result = _analyse_file(path, display, settings, text, data, facts_only, prefilter, timer,
                               time_limit is not None)
    except NeedsGuard as risk:
        clear_caches()
        assert time_limit is not None  # (raised only with a guard)
        if risk.reason != "large":
            result = _analyse_guarded(path, display, settings, text, data, facts_only, prefilter, time_limit)
        else:  # a large file: one at a time in the run, its time limit grown with its size
            with _big_file_lane():
                result = _analyse_guarded(path, display, settings, text, data, facts_only, prefilter,
                                          time_limit + LARGE_FILE_SECONDS_PER_MIB * risk.size / 2**20)
    except Exception as exc:
        result = FileResult(path, display)
        result.diagnostics.append(internal_error("tlint", display, exc, " (the file was not checked)"))
    finally:
        clear_caches()
        if collecting:
            _collect_after_file()
            gc.enable()
    return result


# The cycle collector is paused while one file is analysed, and run once after it. A tree
# of LibCST nodes is a million objects that all survive while the file is analysed: left
# on, the collector ran gen-2 collections over them again and again (a quarter of the CPU
# time of `check` on transformers' models, against a tenth for LibCST's parse alone). The
# tree and the views are freed by reference counting when the file is done (the context
# releases its views), so the young generation examined after the file is small; what
# cycles survive it are collected by a full collection every `_FULL_COLLECTION_EVERY`
# files (the process's memory stays as it was: measured on hf100k, 87 MiB against 93).
_FULL_COLLECTION_EVERY = 32
_files_since_full = 0


def _collect_after_file() -> None:
    global _files_since_full
    _files_since_full += 1
    if _files_since_full >= _FULL_COLLECTION_EVERY:
        _files_since_full = 0
        gc.collect()
    else:
        gc.collect(0)


# A large file's guarded analysis may take this much longer per MiB, on top of the parse
# time limit. Its parse time is linear in its size (it is in a child for its memory, not
# for fear of a hang), about 20 s per MiB of dense code on an idle machine; the limit is a
# wall-clock one, and on a machine loaded twentyfold a 300 KiB file took over 37 s, so the
# margin is wide: a file that is slow only because the machine is busy is not TL001.
LARGE_FILE_SECONDS_PER_MIB = 600.0
# Shared by the workers of one run (`Linter._in_workers`): large files, whose trees cost
# hundreds of MiB, are analysed one at a time; None in a process of its own.
_BIG_FILE_LOCK: Any = None


def _set_big_file_lock(lock: Any, then: Callable[[], Any] | None = None) -> None:
    """A worker's initializer: keep the run's large-file lock (and run `then`)."""
    global _BIG_FILE_LOCK
    _BIG_FILE_LOCK = lock
    if then is not None:
        then()


@contextmanager
def _big_file_lane() -> Iterator[None]:
    lock = _BIG_FILE_LOCK
    if lock is None:
        yield
        return
    with lock:
        yield


def _analyse_guarded(path: Path, display: str, settings: Settings, text: str | None,
                     data: bytes | Diagnostic | None, facts_only: bool, prefilter: bool,
                     time_limit: float) -> FileResult:
    """`analyse_file` in a child process under `time_limit` seconds: its result, or TL001
    "parser crashed" / "parse took longer than N s" (never cached: `unreadable`)."""
    from functools import partial

    from tlint.guard import GuardFailed, run_guarded

    call = partial(analyse_file, path, display, settings, text=text, data=data, facts_only=facts_only,
                   prefilter=prefilter, time_limit=None)
    try:
        return run_guarded(call, (), time_limit)
    except GuardFailed as failure:
        result = FileResult(path, display, parse_error=True, unreadable=True)
        message = (f"parser crashed on this file ({failure.detail}): the file was not checked" if failure.crashed
                   else f"parse took longer than {time_limit:g} s: the file was not checked")
        result.diagnostics.append(parse_error(display, message))
        return result


def _analyse_file(path: Path, display: str, settings: Settings, text: str | None,
                  data: bytes | Diagnostic | None, facts_only: bool, prefilter: bool,
                  timer: Timer | None, guard: bool = False) -> FileResult:
    result = FileResult(path, display)
    if text is None:
        if data is None:
            data = read_source(path, display)
        if isinstance(data, Diagnostic):
            result.diagnostics.append(data)
            result.parse_error = result.unreadable = True
            return result
        loaded = decode_data(data, display)
        if isinstance(loaded, Diagnostic):
            result.diagnostics.append(loaded)
            result.parse_error = True
            return result
        text = loaded
    if path.name[-6:].lower() == ".ipynb":  # its code cells, joined (tlint/notebook.py); see _finish_file
        from tlint.notebook import load_diagnostic

        notebook = load_diagnostic(text, display)
        if isinstance(notebook, Diagnostic):
            result.diagnostics.append(notebook)
            result.parse_error = True
            return result
        text, result.cells = notebook.source, notebook.cell_map
    result.suppressions = _timed(timer, "phase: suppression comments", parse_suppressions, text)
    skip = prefilter and _timed(timer, "phase: pre-filter (token check)", prefilter_skips, text, settings, facts_only)
    statement_lines: list[int] = []
    elided: list[tuple[int, int, int, int]] = []  # constant tables not built as trees (tlint/elide.py)
    module = _timed(timer, "phase: syntax check (Python compile)", parse_source, text, display, syntax_only=skip,
                    statement_lines=statement_lines, timer=timer, guard=guard, elided=elided)
    if isinstance(module, Diagnostic):
        result.diagnostics.append(module)
        result.parse_error = True
        return result
    if type(module) is not cst.Module:  # pre-filtered: Python compiled it, nothing needs LibCST's tree
        from tlint.views.facts import ast_facts

        found = _timed(timer, "phase: facts of pre-filtered files (ast)", ast_facts, module)
        if found is not None:
            result.facts = [Fact(kind, None, data) for kind, data in found]
            result.prefiltered = True
            return result
        # Python's tree shows a fact only LibCST's can place
        module = _timed(timer, "phase: syntax check (Python compile)", parse_source, text, display,
                        statement_lines=statement_lines, timer=timer, guard=guard, elided=elided)
        if isinstance(module, Diagnostic):
            result.diagnostics.append(module)
            result.parse_error = True
            return result
    try:
        index = _timed(timer, "phase: FileIndex traversal", FileIndex, module)
    except RecursionError:
        result.diagnostics.append(parse_error(display, "file too deeply nested to analyse (recursion limit)"))
        result.parse_error = True
        return result
    ctx = FileContext(path, text, index, settings, timer=timer)
    try:
        return _analyse_tree(result, ctx, display, statement_lines, elided, facts_only)
    finally:
        ctx.release()  # its views refer back to it: without this, the tree waits for the cycle collector


def _analyse_tree(result: FileResult, ctx: FileContext, display: str, statement_lines: list[int],
                  elided: list[tuple[int, int, int, int]], facts_only: bool) -> FileResult:
    """The rules, the facts and the positions of one parsed file (`_analyse_file`)."""
    module, text, index, settings, timer = ctx.module, ctx.text, ctx.index, ctx.settings, ctx.timer
    result.inputs = ctx.inputs  # filled as the views read other files
    try:
        facts = ctx.facts
    except RecursionError:
        result.diagnostics.append(parse_error(display, "file too deeply nested to analyse (recursion limit)"))
        result.parse_error = True
        return result
    skipped: dict[str, list[str]] = {}  # view -> the rules that needed it
    if not facts_only:
        ruleset = settings.ruleset()
        for rule in ruleset.rules:
            if rule.code in ENGINE_CODES:
                continue
            ctx._rule = rule
            before = len(ctx.reports)
            try:
                if timer is None:
                    rule.check(ctx)
                else:
                    timer(f"rule: {rule.code} {rule.name}", rule.check, ctx)
            except ViewError as exc:  # reported once per view, below
                del ctx.reports[before:]
                skipped.setdefault(exc.view, []).append(rule.code)
            except Exception as exc:  # isolate the rule: the others' results stand
                del ctx.reports[before:]
                result.diagnostics.append(internal_error(rule, display, exc))
        ctx._rule = None
        for name, error in ctx.failed_views.items():
            rules = skipped.get(name)
            consequence = f" (rules skipped here: {', '.join(rules)})" if rules else ""
            result.diagnostics.append(internal_error(f"the `{name}` view", display, error, consequence))
        for kind, error in ctx.failed_extractors.items():
            result.diagnostics.append(internal_error(
                f"the `{kind}` fact extractor", display, error, " (cross-file rules may miss findings)"))
    from tlint.views.facts import POSITIONED

    nodes = [report.node for _, report in ctx.reports] + [node for kind, node, _ in facts if kind in POSITIONED]
    nodes += [node for _, report in ctx.reports if isinstance(report.fix, PendingFix) for node in anchors(report.fix)]
    try:
        ranges = _timed(timer, "phase: positions", node_ranges, module, nodes, text=text,
                        statement_lines=statement_lines, index=index)
    except RecursionError:
        result.diagnostics.append(parse_error(display, "file too deeply nested to analyse (recursion limit)"))
        result.parse_error = True
        return result
    for kind, node, fact_data in facts:
        result.facts.append(Fact(kind, ranges.get(node, Range.point(1)) if kind in POSITIONED else None, fact_data))
    if facts_only:
        return result
    lines = None
    for rule, report in ctx.reports:  # `severity` overrides are applied in Linter._finish_file
        found = report.fix
        if isinstance(found, PendingFix):
            lines = lines or FileLines(text)
            found = drop_touching(resolve_fix(found, module, lines, ranges), elided)
        diag = Diagnostic(rule.code, rule.name, rule.severity, report.message, display,
                          ranges.get(report.node, Range.point(1)), found, kind=rule.kind, evidence=report.evidence)
        if report.when is None:
            result.diagnostics.append(diag)
        else:
            result.pending.append(PendingDiagnostic(diag, report.when))
    return result


def analyse_cached(cache: FileCache | None, path: Path, display: str, settings: Settings, *,
                   facts_only: bool = False, prefilter: bool = True, timer: Timer | None = None,
                   time_limit: float | None = PARSE_TIME_LIMIT) -> FileResult:
    """`analyse_file` of a file on disk through the cache (when there is one): the stored
    result if the file, its settings and tlint are unchanged, else a fresh one, stored.
    The key and the analysis come from one read of the file. For the project phase's
    unnamed files (`facts_only`): a full entry answers too."""
    data = read_source(path, display)
    if cache is None or isinstance(data, Diagnostic):
        return analyse_file(path, display, settings, data=data, facts_only=facts_only, prefilter=prefilter,
                            timer=timer, time_limit=time_limit)
    key = cache.key(path, display, settings, data)
    result = cache.load(path, key, settings, facts_only=facts_only)
    if result is None:
        result = analyse_file(path, display, settings, data=data, facts_only=facts_only, prefilter=prefilter,
                              timer=timer, time_limit=time_limit)
        cache.store(path, key, settings, result, facts_only=facts_only)
    return result


def analyse_task(task) -> FileResult:
    """One file of phase 1, in this process or a worker: (path, display, settings, source,
    options); `source` is the text that replaces the file (str), the bytes already read of
    it, a TL001 of that read, or None (read it here)."""
    path, display, settings, source, options = task
    timer = None
    if options.profile:
        from tlint.profile import active_timer

        timer = active_timer()
    if type(source) is str:
        return analyse_file(path, display, settings, text=source, prefilter=options.prefilter, timer=timer,
                            time_limit=options.parse_time_limit)
    if source is None and options.digests:
        source = read_source(path, display)
    result = analyse_file(path, display, settings, data=source, prefilter=options.prefilter, timer=timer,
                          time_limit=options.parse_time_limit)
    if options.digests and type(source) is bytes:
        result.digest = digest_bytes(source)
    return result


# --- the run ----------------------------------------------------------------------------


def _total_size(tasks) -> int:
    total = 0
    for path, _, _, source, _ in tasks:
        if type(source) in (str, bytes):
            total += len(source)
            continue
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def display_path(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


class Linter:
    """One `tlint check` run: discover -> phase 1 per file (through the cache, possibly in
    worker processes) -> phase 2 across files -> suppressions, ignores, severities ->
    sorted diagnostics."""

    def __init__(self, resolver: ConfigResolver, *, jobs: int | None = None,
                 select: list[str] | None = None, extend_select: list[str] | None = None,
                 ignore: list[str] | None = None, cache: bool = False, profile: bool = False,
                 prefilter: bool = True, parse_time_limit: float = PARSE_TIME_LIMIT,
                 memory: ProjectMemory | None = None, digests: bool = False) -> None:
        self.resolver = resolver
        # What a long-lived process (the language server) keeps of the project's files
        # between runs (tlint/project_memory.py); None: nothing is kept.
        self.memory = memory
        # `--profile`: seconds per rule/view/extractor/phase, summed over files and workers
        # (tlint/profile.py); `prefilter=False` parses every file (`--no-prefilter`).
        self.profile = None
        if profile:
            from tlint.profile import Profile

            self.profile = Profile()
        self.prefilter = prefilter
        # `digests`: each result carries the digest of the bytes it was analysed from (`--fix`)
        self.options = TaskOptions(prefilter=prefilter, profile=profile, parse_time_limit=parse_time_limit,
                                   digests=digests)
        self.prefiltered = 0  # files of the last run(s) LibCST did not parse
        # The per-file result cache (`tlint check` turns it on unless --no-cache).
        self.cache = FileCache(prefilter) if cache and not cache_disabled_by_env() else None
        self.jobs = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
        self.cli_select, self.cli_extend, self.cli_ignore = select, extend_select or [], ignore or []
        self._overridden: dict[int, Settings] = {}
        self._roots: tuple[tuple[Path, ...], dict[Path, Path]] | None = None
        self.notices: list[str] = []

    def settings_for(self, folder: Path, cli_root: Path | None = None) -> Settings:
        base = self.resolver.for_folder(folder, cli_root)
        if self.cli_select is None and not self.cli_extend and not self.cli_ignore:
            return base
        key = id(base)
        settings = self._overridden.get(key)
        if settings is None:
            from dataclasses import replace

            # As in Ruff, a `--select` on the command line starts a new selection: the
            # config's select/extend-select/ignore no longer apply; otherwise CLI flags extend.
            fresh = self.cli_select is not None
            settings = replace(
                base,
                select=self.cli_select if fresh else base.select,
                extend_select=([] if fresh else list(base.extend_select)) + list(self.cli_extend),
                ignore=([] if fresh else list(base.ignore)) + list(self.cli_ignore),
                _ruleset=None,
            )
            self._overridden[key] = settings
        return settings

    def named_roots(self, paths: list[Path]) -> dict[Path, Path]:
        """`config.named_roots` of these paths, once per run (its notices are kept in
        `self.notices` for the CLI to print)."""
        key = tuple(paths)
        if self._roots is None or self._roots[0] != key:
            # `--config` decides every file's settings and root: no project is looked for
            roots, notices = named_roots(paths, self.resolver.find_config) if self.resolver.forced is None \
                else ({}, [])
            self._roots = (key, roots)
            self.notices = notices
        return self._roots[1]

    def run(self, paths: list[Path], *, stdin: tuple[Path, str] | None = None,
            overrides: dict[Path, str] | None = None) -> RunResult:
        """Lint `paths` (or the one `stdin` text). `overrides` maps absolute paths of files
        on disk to texts that replace their contents for this run (`--fix --diff` passes);
        a run with overrides neither reads nor writes the cache."""
        errors: list[str] = []
        overrides = dict(overrides or {})
        if stdin is not None:
            stdin_path = stdin[0].absolute()
            files = [(stdin_path, stdin_path.parent)]
            overrides = {stdin_path: stdin[1]}
        else:
            files, errors = discover(paths, self.settings_for, self.named_roots(paths))
        tasks = []
        for file, cli_root in files:
            settings = self.settings_for(file.parent, cli_root)
            tasks.append((file, display_path(file) if stdin is None else stdin[0].as_posix(), settings,
                          overrides.get(file), self.options))
        with self._profiling() as timer:
            results = (self._analyse_cached(tasks) if self.cache is not None and not overrides
                       else self._analyse_all(tasks))
            for result in results:  # what the run depends on, for the run memo (tlint/memo.py)
                seen_file(result.path)
                for path in result.inputs:
                    seen_file(path)
            cache = self.cache if not overrides else None  # `--stdin-filename` runs write no cache

            def analyse_facts(path: Path, settings: Settings, text: str | None) -> FileResult:
                if text is not None:
                    return analyse_file(path, display_path(path), settings, text=text, facts_only=True,
                                        prefilter=self.prefilter, timer=timer,
                                        time_limit=self.options.parse_time_limit)
                # as a named file is read (decoded like Python does), through the cache
                def analyse() -> FileResult:
                    return analyse_cached(cache, path, display_path(path), settings, facts_only=True,
                                          prefilter=self.prefilter, timer=timer,
                                          time_limit=self.options.parse_time_limit)

                if cache is None and self.memory is not None:
                    return self.memory.facts_of(path, settings, self.prefilter, analyse)
                return analyse()

            _timed(timer, "phase: cross-file (project graph, conditions)", resolve_projects, results,
                   {t[0]: t[2] for t in tasks}, self.settings_for, overrides, cache, analyse_facts, timer,
                   self.memory if cache is None else None)
        diagnostics: list[Diagnostic] = []
        for result, task in zip(results, tasks):
            diagnostics.extend(self._finish_file(result, task[2]))
        diagnostics.sort(key=Diagnostic.sort_key)
        return RunResult(diagnostics, [t[1] for t in tasks], sum(r.parse_error for r in results), errors,
                         {t[1]: t[0] for t in tasks}, [r.display for r in results if r.unreadable],
                         {r.path: r.digest for r in results if r.digest is not None})

    @contextmanager
    def _profiling(self) -> Iterator[Timer | None]:
        """This process's timing hook while a profiled run lasts (None otherwise); its
        timings are added to the run's profile at the end."""
        if self.profile is None:
            yield None
            return
        from tlint import profile

        active = profile.activate()
        try:
            yield active.call
        finally:
            self.profile.add(*active.drain())
            profile.deactivate()

    def _analyse_cached(self, tasks) -> list[FileResult]:
        """Phase 1 through the cache: stored results for unchanged files, a fresh analysis
        (then stored) for the others. Each file is read once: its key and its analysis
        come from the same bytes. Stored before phase 2, which changes the results."""
        cache = self.cache
        assert cache is not None  # (called only with one)
        results: list[FileResult | None] = [None] * len(tasks)
        keys: list[str | None] = [None] * len(tasks)
        read = list(tasks)
        for i, (path, display, settings, _, options) in enumerate(tasks):
            data = read_source(path, display)
            read[i] = (path, display, settings, data, options)
            if isinstance(data, Diagnostic):
                continue  # analysed (and reported) afresh, never cached
            key = keys[i] = cache.key(path, display, settings, data)
            results[i] = cache.load(path, key, settings)
        missing = [i for i, result in enumerate(results) if result is None]
        for i, result in zip(missing, self._analyse_all([read[i] for i in missing])):
            results[i] = result
            stored_key = keys[i]
            if stored_key is not None:
                cache.store(tasks[i][0], stored_key, tasks[i][2], result)
        if self.options.digests:
            for done, (_, _, _, data, _) in zip(results, read):
                if done is not None and done.digest is None and type(data) is bytes:
                    done.digest = digest_bytes(data)
        return results  # type: ignore[return-value]  # every slot is filled by now

    def _analyse_all(self, tasks) -> list[FileResult]:
        """Phase 1 for these tasks: in this process when the input is small, else in
        worker processes (a crashed worker: each file again in a process of its own)."""
        if self.jobs <= 1 or len(tasks) < 2 or _total_size(tasks) < _PARALLEL_MIN_BYTES:
            results = [analyse_task(task) for task in tasks]
        else:
            results = self._in_workers(tasks)
        self.prefiltered += sum(1 for r in results if r.prefiltered)
        return results

    def _in_workers(self, tasks) -> list[FileResult]:
        from tlint import profile

        workers = min(self.jobs, len(tasks))
        chunk = max(1, len(tasks) // (workers * 4))
        work, initializer = ((profile.profiled_task, profile.activate) if self.profile is not None
                             else (analyse_task, None))
        try:
            import multiprocessing

            context = multiprocessing.get_context()
            with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_set_big_file_lock,
                                     initargs=(context.Lock(), initializer)) as pool:
                out = list(pool.map(work, tasks, chunksize=chunk))
        except BrokenProcessPool:
            return [self._isolated(task) for task in tasks]
        if self.profile is None:
            return out
        for _, seconds, calls in out:
            self.profile.add(seconds, calls)
        return [result for result, _, _ in out]

    @staticmethod
    def _isolated(task) -> FileResult:
        """Re-run one file in its own process, under the time limit: a native crash becomes
        TL001 for that file."""
        path, display, settings, source, options = task
        return _analyse_guarded(path, display, settings, source if type(source) is str else None,
                                None if type(source) is str else source, False, options.prefilter,
                                options.parse_time_limit)

    def _finish_file(self, result: FileResult, settings: Settings) -> list[Diagnostic]:
        try:
            rel = result.path.relative_to(settings.root).as_posix()
        except ValueError:
            rel = result.path.name
        ignored = settings.ignored_for(rel)
        enabled = settings.enabled_codes()
        diagnostics = [d for d in result.diagnostics
                       if d.code not in ignored and (d.code in enabled or d.code == "TL003")]
        apply_suppressions(diagnostics, result.suppressions)
        if "TL002" in enabled and "TL002" not in ignored:
            diagnostics.extend(unused_suppressions(result.suppressions, result.display, enabled))
        if result.cells:  # a notebook: from the joined source to its cells
            from tlint.notebook import to_cells

            diagnostics = to_cells(diagnostics, result.cells)
        ruleset = settings.ruleset()
        for diag in diagnostics:  # the one place `severity` overrides apply, TL001/TL002 included
            diag.severity = ruleset.severity_of(diag.code, diag.severity)
        return diagnostics
