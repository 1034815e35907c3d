"""The linting pipeline, one way: discover -> parse once -> views -> rules ->
project facts (cross-file) -> suppressions -> sorted diagnostics.

`analyse_file` does everything that needs the tree, for one file, and returns a small
picklable `FileResult` (diagnostics, pending cross-file findings, facts, suppression
comments), so files can be processed in worker processes and, later, cached.
"""

from __future__ import annotations

import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from stat import S_ISREG
from typing import Any

import libcst as cst

from tlint.cache import FileCache, cache_disabled_by_env
from tlint.config import ConfigResolver, Settings, named_roots
from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range
from tlint.discovery import GitIgnore, _excluded, discover
from tlint.encoding import decode_source  # noqa: F401 - re-exported
from tlint.cst import clear_caches
from tlint.fixes import FileLines, PendingFix, anchors, resolve_fix
from tlint.memo import seen_file, seen_folder
from tlint.positions import node_ranges
from tlint.project import ImportGraph, package_bases, scan_imports
from tlint.rules import ENGINE_CODES, lookup
from tlint.results import Fact, FileResult, PendingDiagnostic, RunResult  # noqa: F401 - re-exported
from tlint.context import FileContext, ViewError, view  # noqa: F401 - re-exported
from tlint.rules.base import ProjectCondition, RelatedFacts, Rule
from tlint.source import FileIndex
from tlint.suppressions import Suppression, apply_suppressions, parse_suppressions

# Python's own parser refuses more than 200 nested brackets; LibCST's native parser can
# crash the process on such input, so deeper files are checked by `compile` first.
_MAX_SAFE_NESTING = 150
# Below this much source, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 256 * 1024
# Files above this size (generated data, mostly) are reported, not parsed: LibCST takes
# about ten seconds per megabyte of dense code.
MAX_FILE_BYTES = 5 * 2**20
# LibCST's native parser overflows its stack somewhere past 3,000 to 8,000 nested nodes
# (measured with LibCST 1.9: 4,000 chained subscripts crash it, 3,000 do not; 8,000
# additions or attribute accesses crash it, 4,000 do not).
_MAX_LIBCST_DEPTH = 3000
# A file's import scan is cached only when it was last written longer ago than this
# (tlint/cache.py: "racy" files).
_IMPORT_SETTLE_NS = 2_000_000_000


# --- reading and parsing ----------------------------------------------------------------


def _max_nesting(text: str) -> int:
    depth = best = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth > best:
                best = depth
        elif ch in ")]}" and depth:
            depth -= 1
    return best


def _parse_error(display: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic("TL001", "parse-error", "error", message, display,
                      Range(Position(line, column), Position(line, column)))


def _too_large(display: str, size: int) -> Diagnostic:
    return _parse_error(display, f"file too large to lint ({size / 2**20:.1f} MiB; the limit is "
                        f"{MAX_FILE_BYTES // 2**20} MiB): exclude it in the configuration")


def _libcst_depth_risk(tree, start: int = 0) -> bool:
    """True when LibCST would nest deeper than its native parser survives: CPython keeps
    `a and b and ...` flat, LibCST nests one BooleanOperation per operator."""
    import ast

    stack = [(tree, start)]
    while stack:
        node, depth = stack.pop()
        depth += len(node.values) - 1 if isinstance(node, ast.BoolOp) else 1
        if depth > _MAX_LIBCST_DEPTH:
            return True
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))
    return False


def _deep_expression_risk(tree, text: str) -> bool:
    """`_libcst_depth_risk`, walked only where it can be true: statements are followed
    (their nesting counts), and an expression is measured only when its source spans at
    least `_MAX_LIBCST_DEPTH // 2` characters (every nesting level takes one or more). Python
    3.11 and 3.12 refuse deep chains themselves, but 3.10 compiles `a + a + ...` or
    `y[0][0]...` of any length and 3.13 several thousand levels, which crash LibCST's
    native parser (a segfault, fatal to a single-process run)."""
    import ast

    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    last = len(starts) - 1

    def span(node) -> int | None:
        line, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if line is None or end is None:
            return None
        first = starts[min(line, last) - 1] + node.col_offset
        return starts[min(end, last) - 1] + (node.end_col_offset or 0) - first

    containers = (ast.stmt, ast.excepthandler) + ((ast.match_case,) if hasattr(ast, "match_case") else ())
    threshold = _MAX_LIBCST_DEPTH // 2
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and depth + 1 < threshold:
            length = span(node)  # a simple statement: nothing in it is longer than itself
            if length is not None and length < threshold:
                continue
        depth += 1
        if depth > _MAX_LIBCST_DEPTH:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            # a dotted module name is one string for CPython, a chain of Attribute nodes for LibCST
            dots = [alias.name.count(".") for alias in node.names] + [(getattr(node, "module", None) or "").count(".")]
            if depth + max(dots) > _MAX_LIBCST_DEPTH:
                return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, containers):
                stack.append((child, depth))
                continue
            length = span(child)
            if length is None:  # no position (`arguments`, `withitem`): measure its parts
                stack.append((child, depth))
                continue
            if length >= threshold and _libcst_depth_risk(child, depth):
                return True
    return False


def parse_source(text: str, display: str, *, syntax_only: bool = False,
                 statement_lines: list | None = None) -> cst.Module | Diagnostic | Any:
    """The LibCST module, or a TL001 diagnostic saying why the file cannot be parsed.
    With `syntax_only`, a file Python compiles gives Python's own `ast.Module` instead
    (LibCST is not run); one it refuses still goes to LibCST, as below. A `statement_lines`
    list receives, from Python's tree, the first line of each top-level statement (its
    first decorator's), which `positions.node_ranges` places nodes from.

    CPython's own parser looks first: it is fast, it refuses what Python cannot compile
    (nesting beyond its limits, NUL bytes) before LibCST spends minutes on it or crashes,
    and its messages and positions are the clearer. A file it calls a syntax error still
    goes to LibCST, which may know newer syntax than the running Python."""
    if len(text) > MAX_FILE_BYTES:
        return _too_large(display, len(text.encode("utf-8", "surrogatepass")))
    if "\x00" in text:  # CPython refuses them (a ValueError before 3.12); LibCST does not
        line = text.count("\n", 0, text.index("\x00")) + 1
        return _parse_error(display, "syntax error: source code cannot contain null bytes", line)
    py_error: SyntaxError | None = None
    try:
        tree = compile(text, display, "exec", flags=0x400, dont_inherit=True)  # ast only
    except SyntaxError as exc:
        py_error = exc
    except (RecursionError, MemoryError):
        return _parse_error(display, "file too deeply nested to parse (beyond what Python itself can compile)")
    except ValueError as exc:  # pragma: no cover - NUL bytes are handled above
        return _parse_error(display, f"syntax error: {exc}")
    else:
        if len(text) >= _MAX_LIBCST_DEPTH // 2 and _deep_expression_risk(tree, text):
            return _parse_error(display, "expression too deeply nested to parse (more than "
                                f"{_MAX_LIBCST_DEPTH} levels, as in a chain of that many operators)")
    if py_error is not None and (("(" in text or "[" in text or "{" in text)
                                 and _max_nesting(text) > _MAX_SAFE_NESTING):
        return _parse_error(display, f"syntax error: {py_error.msg}", py_error.lineno or 1, py_error.offset or 1)
    if syntax_only and py_error is None:
        return tree  # pre-filtered (see `prefilter_skips`): Python's tree, LibCST not run
    if statement_lines is not None and py_error is None:
        statement_lines.extend(min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
                               for stmt in tree.body)
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        # LibCST's native parser leaves raw_column at 0 (and raw_line often on the line
        # before); CPython's own parser gives the real position and a clearer message.
        if py_error is not None:
            return _parse_error(display, f"syntax error: {py_error.msg}", py_error.lineno or 1, py_error.offset or 1)
        message = exc.message.strip().splitlines()[0] if exc.message.strip() else "invalid syntax"
        return _parse_error(display, f"LibCST cannot parse this file, although Python accepts it: {message}",
                            max(exc.raw_line, 1), exc.raw_column + 1)
    except RecursionError:
        return _parse_error(display, "file too deeply nested to parse (recursion limit)")
    except Exception as exc:  # the native parser reports some failures as other types
        return _parse_error(display, f"cannot parse: {type(exc).__name__}: {exc}")


def read_source(path: Path, display: str) -> bytes | Diagnostic:
    """A source file's bytes (one read: the cache key and the analysis use the same
    bytes), or TL001 when it cannot be read or is too large."""
    try:
        if path.is_symlink() and not path.exists():
            return _parse_error(display, "cannot read file: broken symbolic link "
                                f"(or a symlink loop) to {os.readlink(path)}")
        data = path.read_bytes()
    except OSError as exc:
        return _parse_error(display, f"cannot read file: {exc.strerror or exc}")
    if len(data) > MAX_FILE_BYTES:
        return _too_large(display, len(data))
    return data


def decode_data(data: bytes, display: str) -> str | Diagnostic:
    """The text of a source file's bytes, decoded as Python does (BOM, PEP 263), or TL001."""
    try:
        return decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            line_start = data.rfind(b"\n", 0, exc.start) + 1
            line = data.count(b"\n", 0, exc.start) + 1
            column = len(data[line_start:exc.start].decode(exc.encoding, "replace")) + 1
            return _parse_error(display, f"cannot decode file as {exc.encoding}: {exc.reason} "
                                f"(byte 0x{data[exc.start]:02x})", line, column)
        return _parse_error(display, f"cannot decode file: {exc}")


def read_text(path: Path, display: str) -> str | Diagnostic:
    data = read_source(path, display)
    return data if isinstance(data, Diagnostic) else decode_data(data, display)


# --- the pre-filter ---------------------------------------------------------------------
# A file that contains none of the tokens of the enabled rules (`Rule.tokens`) and of the
# fact extractors (`tlint.views.facts.TOKENS`) cannot give a finding or a fact: it is
# syntax-checked by Python's own compiler (TL001 as ever) and its suppression comments are
# read (TL002 as ever), but LibCST never parses it; its `call-args` facts come from
# Python's tree. `TLINT_NO_PREFILTER=1` (or `tlint check --no-prefilter`) turns it off.


def prefilter_enabled() -> bool:
    return os.environ.get("TLINT_NO_PREFILTER", "") in ("", "0")


_TOKENS: dict[int, tuple[Settings, Any]] = {}


def needed_tokens(settings: Settings, facts_only: bool = False) -> tuple[str, ...] | None:
    """The lower-case tokens one of which a file must contain (or one of the rules'
    `patterns` match) to be parsed under `settings` (`facts_only`: for its facts alone),
    or None when every file is needed."""
    spec = _prefilter_spec(settings, facts_only)
    return None if spec is None else spec[0]


def _prefilter_spec(settings: Settings, facts_only: bool):
    cached = _TOKENS.get(id(settings) * 2 + facts_only)
    if cached is not None and cached[0] is settings:
        return cached[1]
    import re

    from tlint.views import facts as facts_view

    tokens = facts_view.prefilter_tokens(settings)
    patterns: set[str] = set()
    if tokens is not None and not facts_only:
        for rule in settings.ruleset().rules:
            if rule.code in ENGINE_CODES:
                continue
            needed = rule.needed_tokens()
            if needed is None:
                tokens = None
                break
            tokens |= needed
            patterns.update(rule.patterns)
    spec = None
    if tokens is not None:
        # the words most training code has first: they decide most parsed files at once
        common = ("torch", "forward", "transformer", "mask", "pad")
        ordered = tuple(sorted({t.lower() for t in tokens},
                               key=lambda t: (common.index(t) if t in common else len(common), len(t), t)))
        spec = (ordered, re.compile("|".join(f"(?:{p})" for p in sorted(patterns))) if patterns else None)
    _TOKENS[id(settings) * 2 + facts_only] = (settings, spec)
    return spec


def prefilter_skips(text: str, settings: Settings, facts_only: bool = False) -> bool:
    """True when no enabled rule or fact extractor needs this file's tree."""
    spec = _prefilter_spec(settings, facts_only)
    if spec is None:
        return False
    tokens, pattern = spec
    lowered = text.lower()
    for token in tokens:
        if token in lowered:
            return False
    if pattern is not None and pattern.search(lowered):
        return False
    from tlint.views.facts import ast_facts_exact

    return ast_facts_exact(text)


# --- one file ---------------------------------------------------------------------------


def _internal_error(what: Rule | str, display: str, exc: BaseException, consequence: str = "") -> Diagnostic:
    """TL003 for a rule (or a view, an extractor, a phase: `what` in words) that raised."""
    if isinstance(what, Rule) or (isinstance(what, type) and issubclass(what, Rule)):
        what = f"rule {what.code} ({what.name})"
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return Diagnostic(
        "TL003", "internal-error", "error",
        f"{what} failed on this file with {type(exc).__name__}: {first_line}{consequence}. "
        "This is a bug in tlint; please report it (--verbose shows the traceback).",
        display, Range(Position(1, 1), Position(1, 1)),
        detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


def analyse_file(path: Path, display: str, settings: Settings, *, text: str | None = None,
                 data: bytes | Diagnostic | None = None, facts_only: bool = False) -> FileResult:
    """Parse one file once, run the enabled rules over its views, extract its facts.
    `text` replaces the file's contents; `data` is what `read_source` already read of it
    (else it is read here). Never raises: what fails inside tlint becomes a TL003 finding
    for the file."""
    try:
        result = _analyse_file(path, display, settings, text, data, facts_only)
    except Exception as exc:
        result = FileResult(path, display)
        result.diagnostics.append(_internal_error("tlint", display, exc, " (the file was not checked)"))
    finally:
        clear_caches()
    return result


def _analyse_file(path: Path, display: str, settings: Settings, text: str | None,
                  data: bytes | Diagnostic | None, facts_only: bool) -> FileResult:
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
    result.suppressions = parse_suppressions(text)
    skip = prefilter_enabled() and prefilter_skips(text, settings, facts_only)
    statement_lines: list[int] = []
    module = parse_source(text, display, syntax_only=skip, statement_lines=statement_lines)
    if isinstance(module, Diagnostic):
        result.diagnostics.append(module)
        result.parse_error = True
        return result
    if type(module) is not cst.Module:  # pre-filtered: Python compiled it, nothing needs LibCST's tree
        from tlint.views.facts import ast_facts

        found = ast_facts(module)
        if found is not None:
            result.facts = [Fact(kind, None, data) for kind, data in found]
            result.prefiltered = True
            return result
        # Python's tree shows a fact only LibCST's can place
        module = parse_source(text, display, statement_lines=statement_lines)
        if isinstance(module, Diagnostic):
            result.diagnostics.append(module)
            result.parse_error = True
            return result
    try:
        index = FileIndex(module)
        ctx = FileContext(path, text, index, settings)
        result.inputs = ctx.inputs  # filled as the views read other files
        facts = ctx.facts
    except RecursionError:
        result.diagnostics.append(_parse_error(display, "file too deeply nested to analyse (recursion limit)"))
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
                rule.check(ctx)
            except ViewError as exc:  # reported once per view, below
                del ctx.reports[before:]
                skipped.setdefault(exc.view, []).append(rule.code)
            except Exception as exc:  # isolate the rule: the others' results stand
                del ctx.reports[before:]
                result.diagnostics.append(_internal_error(rule, display, exc))
        ctx._rule = None
        for name, exc in ctx.failed_views.items():
            rules = skipped.get(name)
            consequence = f" (rules skipped here: {', '.join(rules)})" if rules else ""
            result.diagnostics.append(_internal_error(f"the `{name}` view", display, exc, consequence))
        for kind, exc in ctx.failed_extractors.items():
            result.diagnostics.append(_internal_error(
                f"the `{kind}` fact extractor", display, exc, " (cross-file rules may miss findings)"))
    from tlint.views.facts import POSITIONED

    nodes = [report.node for _, report in ctx.reports] + [node for kind, node, _ in facts if kind in POSITIONED]
    nodes += [node for _, report in ctx.reports if isinstance(report.fix, PendingFix) for node in anchors(report.fix)]
    try:
        ranges = node_ranges(module, nodes, text=text, statement_lines=statement_lines, index=index)
    except RecursionError:
        result.diagnostics.append(_parse_error(display, "file too deeply nested to analyse (recursion limit)"))
        result.parse_error = True
        return result
    for kind, node, data in facts:
        result.facts.append(Fact(kind, ranges.get(node, Range.point(1)) if kind in POSITIONED else None, data))
    if facts_only:
        return result
    lines = None
    for rule, report in ctx.reports:  # `severity` overrides are applied in Linter._finish_file
        found = report.fix
        if isinstance(found, PendingFix):
            lines = lines or FileLines(text)
            found = resolve_fix(found, module, lines, ranges)
        diag = Diagnostic(rule.code, rule.name, rule.severity, report.message, display,
                          ranges.get(report.node, Range.point(1)), found)
        if report.when is None:
            result.diagnostics.append(diag)
        else:
            result.pending.append(PendingDiagnostic(diag, report.when))
    return result


def analyse_cached(cache: FileCache | None, path: Path, display: str, settings: Settings, *,
                   facts_only: bool = False) -> FileResult:
    """`analyse_file` of a file on disk through the cache (when there is one): the stored
    result if the file, its settings and tlint are unchanged, else a fresh one, stored.
    The key and the analysis come from one read of the file. For the project phase's
    unnamed files (`facts_only`): a full entry answers too."""
    data = read_source(path, display)
    if cache is None or isinstance(data, Diagnostic):
        return analyse_file(path, display, settings, data=data, facts_only=facts_only)
    key = cache.key(path, display, settings, data)
    result = cache.load(path, key, settings, facts_only=facts_only)
    if result is None:
        result = analyse_file(path, display, settings, data=data, facts_only=facts_only)
        cache.store(path, key, settings, result, facts_only=facts_only)
    return result


def _analyse_task(task):
    """A task: (path, display, settings, source); `source` is the text that replaces the
    file (str), the bytes already read of it, a TL001 of that read, or None."""
    path, display, settings, source = task
    if type(source) is str:
        return analyse_file(path, display, settings, text=source)
    return analyse_file(path, display, settings, data=source)


# --- the run ----------------------------------------------------------------------------


def _total_size(tasks) -> int:
    total = 0
    for path, _, _, source in tasks:
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
    def __init__(self, resolver: ConfigResolver, *, jobs: int | None = None,
                 select: list[str] | None = None, extend_select: list[str] | None = None,
                 ignore: list[str] | None = None, cache: bool = False, profile: bool = False,
                 prefilter: bool = True) -> None:
        self.resolver = resolver
        # `--profile`: seconds per rule/view/extractor/phase, summed over files and workers
        # (tlint/profile.py); `prefilter=False` parses every file (`--no-prefilter`).
        self.profile = None
        if profile:
            from tlint.profile import Profile

            self.profile = Profile()
        self.prefilter = prefilter
        self.prefiltered = 0  # files of the last run(s) LibCST did not parse
        self._in_mode = False
        # The per-file result cache (`tlint check` turns it on unless --no-cache).
        self.cache = FileCache(prefilter and prefilter_enabled()) if cache and not cache_disabled_by_env() else None
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
            roots, notices = named_roots(paths)
            self._roots = (key, roots)
            self.notices = notices
        return self._roots[1]

    def run(self, paths: list[Path], *, stdin: tuple[Path, str] | None = None,
            overrides: dict[Path, str] | None = None) -> RunResult:
        """Lint `paths` (or the one `stdin` text). `overrides` maps absolute paths of files
        on disk to texts that replace their contents for this run (`--fix --diff` passes);
        a run with overrides neither reads nor writes the cache."""
        if (self.profile is not None or not self.prefilter) and not self._in_mode:
            with _run_mode(self):
                return self.run(paths, stdin=stdin, overrides=overrides)
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
                          overrides.get(file)))
        results = self._analyse_cached(tasks) if self.cache is not None and not overrides else self._analyse_all(tasks)
        for result in results:  # what the run depends on, for the run memo (tlint/memo.py)
            seen_file(result.path)
            for path in result.inputs:
                seen_file(path)
        self._resolve_projects(results, {t[0]: t[2] for t in tasks}, overrides)
        diagnostics: list[Diagnostic] = []
        for result, (_, _, settings, _) in zip(results, tasks):
            diagnostics.extend(self._finish_file(result, settings))
        diagnostics.sort(key=Diagnostic.sort_key)
        return RunResult(diagnostics, [t[1] for t in tasks], sum(r.parse_error for r in results), errors,
                         {t[1]: t[0] for t in tasks})

    def _analyse_cached(self, tasks) -> list[FileResult]:
        """Phase 1 through the cache: stored results for unchanged files, a fresh analysis
        (then stored) for the others. Each file is read once: its key and its analysis
        come from the same bytes. Stored before phase 2, which changes the results."""
        cache = self.cache
        results: list[FileResult | None] = [None] * len(tasks)
        keys: list[str | None] = [None] * len(tasks)
        read = list(tasks)
        for i, (path, display, settings, _) in enumerate(tasks):
            data = read_source(path, display)
            read[i] = (path, display, settings, data)
            if isinstance(data, Diagnostic):
                continue  # analysed (and reported) afresh, never cached
            keys[i] = cache.key(path, display, settings, data)
            results[i] = cache.load(path, keys[i], settings)
        missing = [i for i, result in enumerate(results) if result is None]
        for i, result in zip(missing, self._analyse_all([read[i] for i in missing])):
            results[i] = result
            if keys[i] is not None:
                cache.store(tasks[i][0], keys[i], tasks[i][2], result)
        return results

    # phase 1: per file, possibly in worker processes
    def _analyse_all(self, tasks) -> list[FileResult]:
        if self.profile is not None:
            results = self._analyse_profiled(tasks)
        else:
            results = self._analyse_parallel(tasks)
        self.prefiltered += sum(1 for r in results if r.prefiltered)
        return results

    def _analyse_profiled(self, tasks) -> list[FileResult]:
        """`_analyse_parallel` with every file's timings returned by the process that ran it."""
        from tlint.profile import profiled_task, worker_init

        if self.jobs <= 1 or len(tasks) < 2 or _total_size(tasks) < _PARALLEL_MIN_BYTES:
            out = [profiled_task(task) for task in tasks]
        else:
            workers = min(self.jobs, len(tasks))
            try:
                with ProcessPoolExecutor(max_workers=workers, initializer=worker_init) as pool:
                    out = list(pool.map(profiled_task, tasks, chunksize=max(1, len(tasks) // (workers * 4))))
            except BrokenProcessPool:
                out = [(self._isolated(task), {}, {}) for task in tasks]
        for _, seconds, calls in out:
            self.profile.add(seconds, calls)
        return [result for result, _, _ in out]

    def _analyse_parallel(self, tasks) -> list[FileResult]:
        if self.jobs <= 1 or len(tasks) < 2 or _total_size(tasks) < _PARALLEL_MIN_BYTES:
            return [_analyse_task(task) for task in tasks]
        workers = min(self.jobs, len(tasks))
        chunk = max(1, len(tasks) // (workers * 4))
        try:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(_analyse_task, tasks, chunksize=chunk))
        except BrokenProcessPool:
            return [self._isolated(task) for task in tasks]

    @staticmethod
    def _isolated(task) -> FileResult:
        """Re-run one file in its own process: a native crash becomes TL001 for that file."""
        try:
            with ProcessPoolExecutor(max_workers=1) as pool:
                return pool.submit(_analyse_task, task).result()
        except BrokenProcessPool:
            result = FileResult(task[0], task[1], parse_error=True)
            result.diagnostics.append(_parse_error(task[1], "the parser crashed on this file"))
            return result

    # phase 2: cross-file conditions and cross-file rules, on the facts of related files
    def _resolve_projects(self, results: list[FileResult], settings_of: dict[Path, Settings],
                          overrides: dict[Path, str]) -> None:
        named = {r.path: r for r in results}
        projects: dict[Path, _Project] = {}
        cache = self.cache if not overrides else None  # `--stdin-filename` runs write no cache

        def project_of(result: FileResult) -> _Project:
            root = settings_of[result.path].root
            if root not in projects:
                projects[root] = _Project(root, self.settings_for, named, overrides, cache)
            return projects[root]

        for result in results:
            if result.parse_error:
                continue
            try:
                self._resolve_file(result, settings_of[result.path], project_of)
            except Exception as exc:  # isolate the file: the other files' results stand
                result.pending = []
                result.diagnostics.append(_internal_error("the cross-file phase", result.display, exc))

    @staticmethod
    def _resolve_file(result: FileResult, settings: Settings, project_of) -> None:
        undecided = []
        own = result.fact_kinds()
        for pending in result.pending:
            verdict = _decide(pending.when, own, final=False)
            if verdict is None:
                undecided.append(pending)
            elif verdict:
                result.diagnostics.append(pending.diagnostic)
        result.pending = []
        for pending in undecided:
            kinds = project_of(result).related_fact_kinds(result.path, pending.when.scope)
            if _decide(pending.when, kinds, final=True):
                result.diagnostics.append(pending.diagnostic)
        for rule in settings.ruleset().rules:
            if type(rule).check_project is Rule.check_project:
                continue
            if rule.project_kinds and not own & set(rule.project_kinds):
                continue  # nothing of this file to compare: skip reading the related files
            related = project_of(result).related_facts(result.path, rule.project_scope, rule.project_facts)
            try:
                found = list(rule.check_project(result.path, related))
            except Exception as exc:  # isolate the rule, as in phase 1
                result.diagnostics.append(_internal_error(rule, result.display, exc))
                continue
            for where, message in found:
                result.diagnostics.append(
                    Diagnostic(rule.code, rule.name, rule.severity, message, result.display, where))

    def _finish_file(self, result: FileResult, settings: Settings) -> list[Diagnostic]:
        try:
            rel = result.path.relative_to(settings.root).as_posix()
        except ValueError:
            rel = result.path.name
        ignored = settings.ignored_for(rel)
        enabled = settings.enabled_codes()
        diagnostics = [d for d in result.diagnostics if d.code not in ignored and (d.code in enabled or d.code == "TL003")]
        apply_suppressions(diagnostics, result.suppressions)
        if "TL002" in enabled and "TL002" not in ignored:
            diagnostics.extend(_unused_suppressions(result, enabled))
        ruleset = settings.ruleset()
        for diag in diagnostics:  # the one place `severity` overrides apply, TL001/TL002 included
            diag.severity = ruleset.severity_of(diag.code, diag.severity)
        return diagnostics


class _run_mode:
    """For one `Linter.run`: the pre-filter off (through the environment, which worker
    processes inherit), and this process instrumented while the run is profiled."""

    def __init__(self, linter: Linter) -> None:
        self.linter = linter
        self.saved = os.environ.get("TLINT_NO_PREFILTER")

    def __enter__(self):
        self.linter._in_mode = True
        if not self.linter.prefilter:
            os.environ["TLINT_NO_PREFILTER"] = "1"
        if self.linter.profile is not None:
            from tlint import profile

            profile.activate()
        return self

    def __exit__(self, *exc) -> None:
        self.linter._in_mode = False
        if not self.linter.prefilter:
            if self.saved is None:
                os.environ.pop("TLINT_NO_PREFILTER", None)
            else:
                os.environ["TLINT_NO_PREFILTER"] = self.saved
        if self.linter.profile is not None:
            from tlint import profile

            if profile.ACTIVE is not None:
                self.linter.profile.add(*profile.ACTIVE.drain())
            profile.deactivate()


def _decide(when: ProjectCondition, kinds: set[str], *, final: bool) -> bool | None:
    """Keep (True), drop (False), or None: the file's own facts cannot decide yet."""
    if any(kind in kinds for kind in when.none_of):
        return False
    if when.any_of and not any(kind in kinds for kind in when.any_of):
        return False if final else None
    if when.none_of and not final:
        return None
    return True


class _Project:
    """The files of one project root, their import graph, and their facts on demand."""

    def __init__(self, root: Path, settings_for, named: dict[Path, FileResult], overrides: dict[Path, str],
                 cache: FileCache | None = None) -> None:
        self.root = root
        self.settings_for = settings_for
        self.named = named
        self.overrides = overrides
        self.cache = cache
        files: dict[Path, os.stat_result] = {}
        gitignore = GitIgnore()
        for folder, dirnames, filenames in os.walk(root):
            folder_path = Path(folder)
            real_folder = folder_path.resolve()  # once per folder: entries that are not links sit in it
            settings = settings_for(folder_path, root)
            kept = []
            for d in dirnames:
                sub = folder_path / d
                real = sub.resolve() if os.path.islink(sub) else real_folder / d
                if not _excluded(sub, settings, real) and not gitignore.ignored(real, True) \
                        and not self._other_project(sub):
                    kept.append(d)
            dirnames[:] = sorted(kept)
            seen_folder(real_folder)
            for name in filenames:
                if not name.endswith(".py"):
                    continue
                try:
                    file = (folder_path / name).resolve() if os.path.islink(folder_path / name) else real_folder / name
                except (OSError, RuntimeError):  # a symlink loop
                    continue
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
        stored = cache.load_imports(settings) if cache is not None else {}
        table: dict[str, tuple[tuple[int, ...], list[str]]] = {}
        settled = time.time_ns() - _IMPORT_SETTLE_NS  # older than this: not "racy"
        for file, stat in files.items():
            if file in self.overrides:
                continue
            key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            entry = stored.get(str(file))
            if entry is not None and entry[0] == key:
                imports[file] = entry[1]
            else:
                try:
                    text = file.read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    continue
                imports[file] = scan_imports(text)
            if stat.st_mtime_ns < settled and stat.st_ctime_ns < settled:
                table[str(file)] = (key, imports[file])
        for path, text in self.overrides.items():
            imports[path] = scan_imports(text)
        if cache is not None and table != stored:
            cache.store_imports(settings, table)
        return imports

    def _other_project(self, folder: Path) -> bool:
        return self.settings_for(folder, self.root).root != self.root

    def facts_of(self, path: Path) -> list[Fact]:
        facts = self._facts.get(path)
        if facts is None:
            result = self.named.get(path)
            if result is None:
                settings = self.settings_for(path.parent, self.root)
                if path in self.overrides:
                    result = analyse_file(path, display_path(path), settings, text=self.overrides[path],
                                          facts_only=True)
                else:  # as a named file is read (decoded like Python does), through the cache
                    result = analyse_cached(self.cache, path, display_path(path), settings, facts_only=True)
            facts = self._facts[path] = result.facts
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
            return RelatedFacts({path: [f for f in facts if f.kind in kinds] if kinds else facts})
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
            if len(self._shared) >= 64:  # unfiltered sets can be large: keep the recent ones
                del self._shared[next(iter(self._shared))]
            self._shared[key] = related
        return related


def _unused_suppressions(result: FileResult, enabled: set[str]) -> list[Diagnostic]:
    out = []

    def report(sup: Suppression, message: str, fix: Fix | None = None) -> None:
        where = Range(Position(sup.line, sup.column), Position(sup.line, sup.end_column))
        out.append(Diagnostic("TL002", "unused-suppression", "info", message, result.display, where, fix))

    for sup in result.suppressions:
        if sup.kind != "tlint":
            continue
        if not sup.selectors:
            if not sup.used:
                report(sup, "suppression comment suppresses nothing", _remove_suppression(sup))
            continue
        rules = {s: lookup(s) for s in sup.selectors}
        unknown = [s for s, rule in rules.items() if rule is None]
        unused = [s for s, rule in rules.items() if rule is not None and rule.code in enabled
                  and rule.code not in sup.used]
        if unknown:
            report(sup, f"suppression names unknown rule(s): {', '.join(unknown)}")
        if unused:
            kept = [s for s in sup.selectors if s not in unused]
            report(sup, f"unused suppression of {', '.join(unused)}",
                   _keep_selectors(sup, kept) if kept else _remove_suppression(sup))
    return out


def _remove_suppression(sup: Suppression) -> Fix | None:
    """Delete the comment (its whole line when it stands alone). Text after it on the line
    is its reason (`# tlint: ignore[TL101] padded upstream`) and goes too, unless it is
    another comment (`# tlint: ignore  # type: ignore`), which stays."""
    line = sup.text
    if not line or line[sup.column - 1:sup.end_column - 1].lstrip()[:1] != "#":
        return None
    message = "Remove the unused suppression"
    if sup.standalone:
        return Fix("safe", (Edit(Range(Position(sup.line, 1), Position(sup.line + 1, 1)), ""),), message)
    start = len(line[:sup.column - 1].rstrip()) + 1
    rest = line[sup.end_column - 1:]
    if rest.strip().startswith("#"):
        end = sup.end_column + (len(rest) - len(rest.lstrip()))
        replacement = "  "
    else:
        end = len(line) + 1
        replacement = ""
    return Fix("safe", (Edit(Range(Position(sup.line, start), Position(sup.line, end)), replacement),), message)


def _keep_selectors(sup: Suppression, kept: list[str]) -> Fix | None:
    if sup.bracket is None:
        return None
    start, end = sup.bracket
    return Fix("safe", (Edit(Range(Position(sup.line, start), Position(sup.line, end)), ", ".join(kept)),),
               "Remove the unused codes from the suppression")
