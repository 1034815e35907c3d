"""The `tlint` command line: `check` (the default), `rule`, `verify`, `scan-data`, `lsp`, `clean`.

Exit codes (README "What tlint guarantees"): 0 nothing at or above `--fail-on`; 1 findings at or above it;
2 usage, configuration or internal error (any TL003 too, whatever `--exit-zero` says).
This module imports only the standard library at start-up; the engine, rich and the
reporters load when a subcommand needs them (and torch never does).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from tlint import __version__

SUBCOMMANDS = ("check", "rule", "verify", "scan-data", "lsp", "clean")
CHECK_FORMATS = ("text", "json", "github", "lsp", "sarif", "junit")
STDIN_NAME = "-"


class UsageError(Exception):
    """A mistake on the command line: a one-line message, exit 2."""


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that reports instead of exiting, so `main` always returns its code."""

    def error(self, message: str):
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            sys.stderr.write(message)
        raise _Exit(status)


def _selectors(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _jobs(value: str) -> int:
    try:
        jobs = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes, got {value!r}") from None
    if jobs < 0:
        raise argparse.ArgumentTypeError("must be 0 (one per CPU) or more")
    return jobs


def build_parser() -> _Parser:
    parser = _Parser(prog="tlint", description="A linter for PyTorch transformer training code.")
    parser.add_argument("--version", action="version", version=f"tlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint files and folders (the default command)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin")
    for flag, what in (("--select", "enable only these"), ("--ignore", "disable these"),
                       ("--extend-select", "enable these too")):
        check.add_argument(flag, action="append", type=_selectors, default=[], metavar="CODES",
                           help=f"{what}: comma-separated codes, prefixes (TL3), names or ALL")
    check.add_argument("--format", choices=CHECK_FORMATS, default="text")
    check.add_argument("--stdin-filename", metavar="NAME", help="read the source from stdin, linted as NAME")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--jobs", type=_jobs, default=None, metavar="N", help="worker processes (default: one per CPU)")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    check.add_argument("--show-suppressed", action="store_true", help="also show suppressed findings")
    check.add_argument("--statistics", action="store_true", help="show counts per code instead of findings")
    check.add_argument("--fail-on", choices=("info", "warning", "error"), default="warning",
                       help="lowest severity that gives exit 1 (default: warning)")
    check.add_argument("--config", type=Path, metavar="FILE", help="use this config file for every file")
    check.add_argument("--verbose", "-v", action="store_true", help="tracebacks of internal errors, timings")
    check.add_argument("--profile", action="store_true",
                       help="print the seconds per rule, view, fact extractor and phase to stderr")
    check.add_argument("--no-prefilter", action="store_true", help=argparse.SUPPRESS)  # parse every file
    check.add_argument("--fix", action="store_true", help="apply the safe fixes, then report what is left")
    check.add_argument("--unsafe-fixes", action="store_true",
                       help="apply the unsafe fixes too (implies --fix unless --diff)")
    check.add_argument("--add-suppressions", nargs="?", const="", default=None, metavar="REASON",
                       help="suppress every current finding with a `# tlint: ignore[...]` comment on its line, "
                       "followed by REASON if given (as --add-suppressions=REASON)")
    check.add_argument("--diff", action="store_true",
                       help="print the fixes as a unified diff and write nothing (exit 1 if there are any)")
    check.set_defaults(handler=_check)

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("selector", nargs="?", metavar="CODE|NAME")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--format", choices=("text", "json"), default="text")
    rule.set_defaults(handler=_rule)

    _add_verify_parser(sub)

    clean = sub.add_parser("clean", help="remove tlint's cache folders")
    clean.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="the projects' cache and any cache folder below these (default: .)")
    clean.add_argument("--config", type=Path, metavar="FILE", help="use this config file (its cache-dir)")
    clean.set_defaults(handler=_clean)

    from tlint.verify.data import add_arguments

    scan = sub.add_parser("scan-data", help="scan a data loader's first batches: NaN/Inf, padding, labels")
    add_arguments(scan)
    scan.set_defaults(handler=_scan_data)
    lsp = sub.add_parser("lsp", help="serve diagnostics and fixes to an editor over stdio (needs tlint[lsp])")
    lsp.add_argument("--stdio", action="store_true", help="accepted for clients that pass it (stdio is the transport)")
    lsp.set_defaults(handler=_lsp)
    return parser


def _add_verify_parser(sub) -> None:
    verify = sub.add_parser("verify", help="run the model on real tensors: probes, and verdicts on findings")
    verify.add_argument("--model", metavar="PKG.MOD:FACTORY", help="callable returning the nn.Module (or the class)")
    verify.add_argument("--model-kwargs", metavar="JSON", help="keyword arguments of the factory, a JSON object")
    for flag, what in (("--seq-len", "tokens per sequence"), ("--batch-size", "sequences per batch"),
                       ("--vocab-size", "vocabulary size (default: the first nn.Embedding's)"),
                       ("--pad-token-id", "the pad token id (default 0)"), ("--seed", "seed of every probe")):
        verify.add_argument(flag, type=int, metavar="N", help=what)
    verify.add_argument("--causal", action=argparse.BooleanOptionalAction, default=None,
                        help="the model is causal (default: the linter's causal evidence, as TL207 decides)")
    verify.add_argument("--padding-side", choices=("right", "left"), help="where probes put padding")
    verify.add_argument("--call", metavar="STYLE", help='how forward is called: "ids,mask", '
                        '"input_ids,attention_mask", "src,src_key_padding_mask", "ids" or an adapter pkg.mod:call')
    verify.add_argument("--device", metavar="DEVICE", help="cpu (default) or cuda")
    verify.add_argument("--timeout", type=float, metavar="SECONDS", help="limit for the whole run (default 600)")
    verify.add_argument("--probe-timeout", type=float, metavar="SECONDS",
                        help="limit for loading the model and for each probe (default 120)")
    verify.add_argument("--memory-limit", type=float, metavar="MIB",
                        help="refuse a larger model before allocating it (default: half the machine's memory)")
    verify.add_argument("--optimizer", metavar="PKG.MOD:FACTORY",
                        help="callable(model) returning the optimiser (warmup-ab, optimizer-coverage)")
    verify.add_argument("--lr", type=float, metavar="LR",
                        help="learning rate for warmup-ab (overrides the optimiser's)")
    verify.add_argument("--max-seconds", type=float, metavar="SECONDS",
                        help="time budget of each training probe (default 30); its runs stop early")
    verify.add_argument("--artifacts", type=Path, metavar="DIR",
                        help="folder for the files verify writes (attention-map PNGs); none are written without it")
    verify.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="with no model configured: files or folders whose flagged classes are built directly")
    verify.add_argument("--format", choices=("text", "json", "sarif", "lsp"), default="text")
    verify.add_argument("--probe", action="append", metavar="NAME",
                        help="run only this probe (repeatable); the training probes run only when named "
                        "(`--probe training`: all three)")
    verify.add_argument("--list-probes", action="store_true", help="list the probes and exit")
    verify.add_argument("--config", type=Path, metavar="FILE", help="use this config file")
    verify.add_argument("--verbose", "-v", action="store_true", help="show the model process's output")
    verify.add_argument("--data", action="store_true", help="also scan the configured data loader(s)")
    from tlint.verify.data import add_arguments

    add_arguments(verify, verify=True)
    verify.set_defaults(handler=_verify)


def _scan_data(args: argparse.Namespace) -> int:
    from tlint.verify.data import run_command

    return run_command(args)


def _lsp(args: argparse.Namespace) -> int:
    try:
        import lsprotocol.types  # noqa: F401
        import pygls.lsp.server  # noqa: F401  (pygls 2.x)
    except ImportError:
        return _error("tlint lsp needs pygls 2.x: pip install 'tlint[lsp]'")
    from tlint.lsp_server import serve

    return serve()


def _verify(args: argparse.Namespace) -> int:
    from tlint.verify.command import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "check")
    verbose = "--verbose" in argv or "-v" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_usage(sys.stderr)
            return _error("give a command or a path, e.g. `tlint check src/` (see tlint --help)")
        return args.handler(args)
    except UsageError as exc:
        return _error(str(exc))
    except _Exit as exc:
        return exc.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `tlint check . | head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the final flush
        return 2
    except Exception as exc:  # a bug in tlint: say so, exit 2
        if verbose:
            import traceback

            traceback.print_exc()
        return _error(f"internal error: {type(exc).__name__}: {exc} "
                      "(this is a bug in tlint; --verbose shows the traceback)")


def _error(message: str) -> int:
    sys.stderr.write(f"tlint: error: {message}\n")
    return 2


# --- check ------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    from tlint.reporters import STATISTICS_FORMATS

    if args.statistics and args.format not in STATISTICS_FORMATS:
        raise UsageError(f"--statistics works with --format {' or '.join(STATISTICS_FORMATS)}")
    memo_args = None if args.profile or args.no_prefilter else _memo_args(args)
    if memo_args is not None:  # a warm run with nothing changed: no LibCST, no rules (tlint/memo.py)
        from tlint import memo

        stored = memo.load(*memo_args)
        if stored is not None:
            return _report_result(args, stored, None, None, None)

    from tlint.config import ConfigError, ConfigResolver, validate_selector
    selections = {}
    for flag in ("select", "ignore", "extend_select"):
        codes = [code for group in getattr(args, flag) for code in group]
        for code in codes:
            if not validate_selector(code):
                raise UsageError(f"unknown rule code or name `{code}` in --{flag.replace('_', '-')}")
        selections[flag] = codes
    if args.add_suppressions and Path(args.add_suppressions).exists():  # `--add-suppressions src/`: a path
        args.paths, args.add_suppressions = [*args.paths, args.add_suppressions], ""
    paths, stdin = _inputs(args)
    if args.add_suppressions is not None and (stdin is not None or args.fix or args.unsafe_fixes or args.diff):
        raise UsageError("--add-suppressions works on files, without --fix, --unsafe-fixes or --diff")

    from tlint.engine import Linter

    started = time.perf_counter()
    try:
        linter = Linter(ConfigResolver(forced=args.config), jobs=args.jobs,
                        select=selections["select"] if args.select else None,
                        extend_select=selections["extend_select"], ignore=selections["ignore"],
                        cache=not args.no_cache, profile=args.profile,
                        prefilter=not args.no_prefilter and os.environ.get("TLINT_NO_PREFILTER", "") in ("", "0"))
        if args.fix or args.unsafe_fixes or args.diff:
            return _fix(args, linter, paths, stdin)
        if args.add_suppressions is not None:
            from tlint.baseline import run_command

            return run_command(args, linter, paths)
        if memo_args is not None:
            with memo.recording() as recorder:
                _prepare_cache_dir(linter, paths, recorder)
                result = linter.run(paths, stdin=stdin)
            _store_memo(memo_args, recorder, result, linter, paths)
        else:
            result = linter.run(paths, stdin=stdin)
    except ConfigError as exc:
        return _error(str(exc))
    for notice in linter.notices:
        sys.stderr.write(f"tlint: note: {notice}\n")
    if linter.profile is not None:
        _print_profile(linter, len(result.files), time.perf_counter() - started)
    return _report_result(args, result, stdin, time.perf_counter() - started, linter.jobs)


def _print_profile(linter, files: int, elapsed: float) -> None:
    """`--profile`: exclusive seconds per rule, view, fact extractor and phase, summed over
    files and worker processes (tlint/profile.py), and what the pre-filter skipped."""
    profile = linter.profile
    accounted = sum(profile.seconds.values())
    jobs = f"{linter.jobs} job{'s' if linter.jobs != 1 else ''}"
    sys.stderr.write(f"tlint: profile of {files} files ({jobs}, {elapsed:.2f} s wall; {accounted:.2f} s measured, "
                     f"summed over files and processes; cached files not analysed)\n")
    sys.stderr.write(f"tlint: pre-filter: {linter.prefiltered} of the analysed files not parsed by LibCST"
                     f"{'' if linter.prefilter else ' (pre-filter off)'}\n")
    totals: dict[str, float] = {}
    for name, seconds in profile.seconds.items():
        kind = name.split(":", 1)[0]
        totals[kind] = totals.get(kind, 0.0) + seconds
    sys.stderr.write("tlint: in all: " + ", ".join(f"{kind} {seconds:.2f} s" for kind, seconds
                                                   in sorted(totals.items(), key=lambda item: -item[1])) + "\n")
    for line in profile.table():
        sys.stderr.write(line + "\n")


def _memo_args(args: argparse.Namespace):
    """(paths, options) that key this invocation's run memo, or None when the run cannot
    use one (no cache, fixes, standard input)."""
    if args.no_cache or args.fix or args.unsafe_fixes or args.diff or args.stdin_filename is not None \
            or STDIN_NAME in args.paths or args.add_suppressions is not None:
        return None
    from tlint.cache import cache_disabled_by_env

    if cache_disabled_by_env():
        return None
    options: dict[str, Any] = {flag: [code for group in getattr(args, flag) for code in group]
               for flag in ("select", "ignore", "extend_select")}
    options["select_given"] = bool(args.select)
    options["config"] = os.path.abspath(args.config) if args.config else None
    return list(args.paths), options


def _first_cache_dir(linter, paths):
    """(the first path's project settings, their cache folder): where the run memo lives."""
    from tlint.cache import cache_dir_for

    first = Path(paths[0]) if paths else Path(".")
    folder = (first if first.is_dir() else first.parent).resolve()
    settings = linter.settings_for(folder, linter.named_roots(list(paths)).get(first, folder))
    return settings, cache_dir_for(settings)


def _prepare_cache_dir(linter, paths, recorder) -> None:
    """Create the first path's cache folder before the run, and tell the run memo that the
    change of its parent folder is tlint's own (else the memo is only written a run later)."""
    if linter.cache is None:
        return
    try:
        _, cache_dir = _first_cache_dir(linter, paths)
        existed = cache_dir.is_dir()
        linter.cache._prepare(cache_dir)
        if not existed:
            parent = cache_dir.parent
            recorder.own[os.fspath(parent)] = os.stat(parent).st_mtime_ns
    except Exception:  # a cache that cannot be written is not written (cache.py)
        pass


def _store_memo(memo_args, recorder, result, linter, paths) -> None:
    from tlint import memo
    from tlint.cache import CACHE_DIR_NAME

    settings, cache_dir = _first_cache_dir(linter, paths)
    if cache_dir != settings.root / CACHE_DIR_NAME:
        return  # a configured cache-dir: the memo lookup (which reads no config) would not find it
    if linter.cache is not None:
        memo.store(memo_args[0], memo_args[1], recorder, result, cache_dir, {cache_dir})


def _report_result(args: argparse.Namespace, result, stdin, elapsed: float | None, jobs: int | None) -> int:
    from tlint.reporters import OutputReport, SourceLines, render

    shown = [d for d in result.diagnostics if args.show_suppressed or not d.suppressed]
    report = OutputReport(shown, result.files, result.parse_errors,
                    SourceLines({stdin[0].as_posix(): stdin[1]} if stdin else None),
                    hidden_suppressed=len(result.diagnostics) - len(shown))
    render(args.format, report, sys.stdout, statistics=args.statistics)
    sys.stdout.flush()
    for message in result.errors:
        sys.stderr.write(f"tlint: error: {message}\n")
    if args.verbose:
        for diag in result.diagnostics:
            if diag.detail:
                sys.stderr.write(f"{diag.path}: {diag.code} ({diag.name}) detail:\n{diag.detail}\n")
        if jobs is None:
            sys.stderr.write(f"tlint: {len(result.files)} files unchanged since the last run (run memo)\n")
        else:
            sys.stderr.write(f"tlint: checked {len(result.files)} files in {elapsed:.3f}s "
                             f"({jobs} job{'s' if jobs != 1 else ''})\n")
    return _exit_code(result, args)


def _fix(args: argparse.Namespace, linter, paths, stdin) -> int:
    """--fix / --unsafe-fixes / --diff: apply fixes until stable (tlint/fixes.py), then
    write the changed files (or print the diff, or the fixed standard input) and report
    what is left. The exit code reflects what is left (with --diff: 1 if anything would change)."""
    from tlint.fixes import fix_run, unified_diff, write_atomic
    from tlint.reporters import OutputReport, SourceLines, render

    outcome = fix_run(linter, paths, unsafe=args.unsafe_fixes, stdin=stdin)
    result = outcome.result
    assert result is not None  # (set by fix_run)
    displays = {path: display for display, path in result.paths.items()}
    total, changed = outcome.total, outcome.changed
    plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"  # noqa: E731
    if args.diff:
        for path in changed:
            sys.stdout.write(unified_diff(displays.get(path, path.as_posix()), outcome.originals[path],
                                          outcome.texts[path]))
        sys.stdout.flush()
        sys.stderr.write(f"tlint: would fix {plural(total, 'finding')} in {plural(len(changed), 'file')}\n")
        for message in result.errors:
            sys.stderr.write(f"tlint: error: {message}\n")
        if result.internal_errors or result.errors:
            return 2
        return 1 if changed else 0
    if stdin is not None:  # editors: the fixed source on stdout, what is left on stderr
        stdin_path = stdin[0].absolute()
        sys.stdout.write(outcome.texts.get(stdin_path, stdin[1]))
        sys.stdout.flush()
        out, sources = sys.stderr, {stdin[0].as_posix(): outcome.texts.get(stdin_path, stdin[1])}
    else:
        failed = []
        for path in changed:
            try:
                write_atomic(path, outcome.texts[path])
            except OSError as exc:
                failed.append(f"cannot write the fixes to {displays.get(path, path)}: {exc.strerror or exc}")
        result.errors.extend(failed)
        out, sources = sys.stdout, None
    shown = [d for d in result.diagnostics if args.show_suppressed or not d.suppressed]
    report = OutputReport(shown, result.files, result.parse_errors, SourceLines(sources),
                    hidden_suppressed=len(result.diagnostics) - len(shown))
    render(args.format, report, out, statistics=args.statistics)
    out.flush()
    left = sum(1 for d in result.diagnostics if not d.suppressed)
    sys.stderr.write(f"tlint: fixed {plural(total, 'finding')} in {plural(len(outcome.applied), 'file')}"
                     f", {left} left\n")
    for message in result.errors:
        sys.stderr.write(f"tlint: error: {message}\n")
    return _exit_code(result, args)


def _inputs(args: argparse.Namespace):
    """(paths, stdin) for `Linter.run`: stdin is (display name, text) or None."""
    reads_stdin = args.stdin_filename is not None or STDIN_NAME in args.paths
    if not reads_stdin:
        return [Path(p) for p in args.paths or ["."]], None
    if any(p != STDIN_NAME for p in args.paths):
        raise UsageError("paths cannot be combined with standard input (--stdin-filename or -)")
    from tlint.engine import decode_source

    name = args.stdin_filename or "stdin.py"
    try:
        text = decode_source(sys.stdin.buffer.read())
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        raise UsageError(f"cannot decode standard input: {exc}") from None
    return [], (Path(name), text)


def _exit_code(result, args: argparse.Namespace) -> int:
    from tlint.results import exit_code

    return exit_code(result, fail_on=args.fail_on, exit_zero=args.exit_zero)


# --- clean ------------------------------------------------------------------------------


def _clean(args: argparse.Namespace) -> int:
    """Remove the cache folder of each named path's project, and every tlint cache folder
    found below the paths (only folders tlint created: they carry its `.gitignore`)."""
    from tlint.cache import CACHE_DIR_NAME, cache_dir_for, remove_cache_dir
    from tlint.config import DEFAULT_EXCLUDE, ConfigError, ConfigResolver, named_roots

    candidates: list[Path] = []
    try:
        resolver = ConfigResolver(forced=args.config)
        paths = args.paths or [Path(".")]
        roots, _ = named_roots(paths, resolver.find_config) if resolver.forced is None else ({}, [])
        for path in paths:
            if not path.exists():
                raise UsageError(f"{path}: no such file or folder")
            folder = path if path.is_dir() else path.parent
            candidates.append(cache_dir_for(resolver.for_folder(folder, roots.get(path, folder))))
            for current, dirnames, _ in os.walk(folder):
                if CACHE_DIR_NAME in dirnames:
                    candidates.append(Path(current) / CACHE_DIR_NAME)
                dirnames[:] = [d for d in dirnames if d not in DEFAULT_EXCLUDE]
    except ConfigError as exc:
        return _error(str(exc))
    seen = set()
    for folder in candidates:
        key = folder.resolve()
        if key not in seen:
            seen.add(key)
            if remove_cache_dir(key):
                sys.stderr.write(f"tlint: removed {folder}\n")
    return 0


# --- rule -------------------------------------------------------------------------------


def _rule(args: argparse.Namespace) -> int:
    from tlint.docs import rule_doc
    from tlint.rules import ALL_RULES, lookup

    if args.all == bool(args.selector):
        raise UsageError("give one rule code or name (tlint rule TL101), or --all")
    if args.all:
        rules = list(ALL_RULES)
    else:
        found = lookup(args.selector)
        if found is None:
            raise UsageError(f"unknown rule `{args.selector}` (tlint rule --all lists them)")
        rules = [found]
    if args.format == "json":
        import json

        entries = [{"code": r.code, "name": r.name, "severity": r.severity, "default_enabled": r.default_enabled,
                    "summary": r.summary, "doc": rule_doc(r.code)} for r in rules]
        sys.stdout.write(json.dumps(entries if args.all else entries[0], indent=2, ensure_ascii=False) + "\n")
        return 0
    texts = [rule_doc(r.code) or _undocumented(r) for r in rules]
    markdown = "\n\n".join(text.rstrip("\n") for text in texts) + "\n"
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(markdown))
    else:
        sys.stdout.write(markdown)
    return 0


def _undocumented(rule) -> str:
    state = "on" if rule.default_enabled else "off"
    return f"# {rule.code} {rule.name}\n\n{rule.summary}\n\nSeverity: {rule.severity}; {state} by default.\n"
