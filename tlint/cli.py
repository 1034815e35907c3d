"""The `tlint` command line: `check` (the default), `rule`, `verify`, `scan-data`, `lsp`, `clean`,
`diagnose`, `doctor`, `trace`.

Exit codes (README "What tlint guarantees"): 0 nothing at or above `--fail-on`; 1 findings at or above it;
2 usage, configuration or internal error (any TL003 too, whatever `--exit-zero` says).
This module imports only the standard library at start-up; the engine, rich and the
reporters load when a subcommand needs them (and torch never does).

Over 800 lines: one parser holds every subcommand's arguments, and it is built on each
`tlint check`, so the arguments of a subcommand whose package must not load for `check`
(diagnose) are defined here rather than in that package.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from tlint import __version__

SUBCOMMANDS = ("check", "rule", "verify", "scan-data", "lsp", "clean", "diagnose", "doctor", "trace")
CHECK_FORMATS = ("text", "concise", "json", "github", "lsp", "sarif", "junit")  # tlint.reporters.FORMATS
RULE_FORMATS = ("text", "json")
VERIFY_FORMATS = ("text", "json", "sarif", "lsp")
SCAN_DATA_FORMATS = ("text", "json")
DIAGNOSE_FORMATS = ("text", "json")
DOCTOR_FORMATS = ("text", "json")
TRACE_FORMATS = ("text", "json", "concise", "github", "sarif", "junit", "lsp")  # tlint.trace.command.FORMATS
COMMAND_FORMATS = {"check": CHECK_FORMATS, "rule": RULE_FORMATS, "verify": VERIFY_FORMATS,
                   "scan-data": SCAN_DATA_FORMATS, "diagnose": DIAGNOSE_FORMATS, "doctor": DOCTOR_FORMATS,
                   "trace": TRACE_FORMATS}
FORMAT_ENV = "TLINT_OUTPUT_FORMAT"
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


def _add_format(parser: argparse.ArgumentParser, choices: tuple[str, ...]) -> None:
    """`--output-format` (Ruff's name; `--format` is the same option). Its default is
    TLINT_OUTPUT_FORMAT, else `text`, whatever the terminal (`_default_format`)."""
    parser.add_argument("--output-format", "--format", dest="format", choices=choices, default=None,
                        help=f"output format (default: ${FORMAT_ENV}, else text)")


def _default_format(args: argparse.Namespace) -> None:
    """Set `args.format` where no flag gave it: TLINT_OUTPUT_FORMAT when the subcommand has
    that format (for `check`, which has them all, any other value is a usage error), else text."""
    if getattr(args, "format", "") is not None:
        return
    value = os.environ.get(FORMAT_ENV, "").strip()
    choices = COMMAND_FORMATS.get(args.command, ("text",))
    if value and value not in choices and args.command == "check":
        raise UsageError(f"{FORMAT_ENV}={value!r} is not an output format of tlint check "
                         f"(one of: {', '.join(choices)})")
    args.format = value if value in choices else "text"


def build_parser() -> _Parser:
    parser = _Parser(prog="tlint", description="A linter for PyTorch transformer training code.")
    parser.add_argument("--version", action="version", version=f"tlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint files and folders (the default command)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin")
    for flag, what in (("--select", "enable only these"), ("--ignore", "disable these"),
                       ("--extend-select", "enable these too")):
        check.add_argument(flag, action="append", type=_selectors, default=[], metavar="CODES",
                           help=f"{what}: comma-separated codes, prefixes (TL3), names, kinds "
                                f"(defect, likely-defect, practice) or ALL")
    _add_format(check, CHECK_FORMATS)
    check.add_argument("-o", "--output-file", type=Path, metavar="FILE", help="write the report to FILE, not stdout")
    check.add_argument("-q", "--quiet", action="store_true", help="print the findings and nothing else")
    check.add_argument("-s", "--silent", action="store_true",
                       help="print nothing but errors (the exit code still tells)")
    check.add_argument("--exclude", action="append", type=_selectors, default=None, metavar="PATTERNS",
                       help="comma-separated globs never linted when walking folders, relative to each project "
                       "root; replaces the configured exclude and extend-exclude")
    check.add_argument("--extend-exclude", action="append", type=_selectors, default=[], metavar="PATTERNS",
                       help="more such globs, on top of the configured ones")
    check.add_argument("--force-exclude", action=argparse.BooleanOptionalAction, default=None,
                       help="skip excluded files even when named on the command line (pre-commit names every "
                       "staged file; default: the config's force-exclude, else off)")
    check.add_argument("--show-settings", action="store_true",
                       help="print the settings the first path is linted with, and exit")
    check.add_argument("--show-files", action="store_true", help="print the files that would be linted, and exit")
    check.add_argument("--show-config-schema", choices=("tlint", "pyproject"), nargs="?", const="tlint",
                       help="print the JSON Schema of a tlint.toml / [tool.tlint] (or of a pyproject.toml), and exit")
    check.add_argument("--show-fixes", action="store_true",
                       help="list the fixes applied (with --fix) or that --fix would apply, per file and code")
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
    check.add_argument("--fix-only", action="store_true",
                       help="apply the safe fixes and report nothing else (exit 0 whatever is left)")
    check.add_argument("--exit-non-zero-on-fix", action="store_true",
                       help="exit 1 when a fix was applied, even if nothing is left")
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
    rule.add_argument("--all", action="store_true", help="every rule's document")
    rule.add_argument("--list", action="store_true", help="every rule, one line each: code, name, severity, "
                      "on or off by default, summary")
    _add_format(rule, RULE_FORMATS)
    rule.set_defaults(handler=_rule)

    _add_verify_parser(sub)
    _add_trace_parser(sub)

    clean = sub.add_parser("clean", help="remove tlint's cache folders")
    clean.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="the projects' cache and any cache folder below these (default: .)")
    clean.add_argument("--config", type=Path, metavar="FILE", help="use this config file (its cache-dir)")
    clean.set_defaults(handler=_clean)

    from tlint.verify.data import add_arguments

    scan = sub.add_parser("scan-data", help="scan a data loader's first batches: NaN/Inf, padding, labels")
    add_arguments(scan)
    scan.set_defaults(handler=_scan_data)
    lsp = sub.add_parser("lsp", help="serve diagnostics and fixes to an editor over stdio (needs the lsp extra)")
    lsp.add_argument("--stdio", action="store_true", help="accepted for clients that pass it (stdio is the transport)")
    lsp.set_defaults(handler=_lsp)
    diagnose = sub.add_parser("diagnose", help="read a training run's logs: spikes, NaN, stuck loss, schedule; "
                              "compare two runs")
    diagnose.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                          help="a run folder or log file (trainer_state.json, metrics.csv, TensorBoard events, "
                          "tlint-watch.jsonl); a second RUN compares the two")
    diagnose.add_argument("--artifacts", type=Path, metavar="DIR",
                          help="write PNG plots (loss, learning rate, gradient norm, pad share) here")
    _add_format(diagnose, DIAGNOSE_FORMATS)
    diagnose.set_defaults(handler=_diagnose)
    _add_doctor_parser(sub)
    return parser


def _add_doctor_parser(sub) -> None:
    doctor = sub.add_parser("doctor", help="the whole procedure in one report: check, scan-data, verify, diagnose, "
                            "ranked by likely impact")
    doctor.add_argument("path", nargs="?", type=Path, default=Path("."), metavar="PATH",
                        help="the project (default: .); its config says which model and loaders to run")
    doctor.add_argument("--run", action="append", type=Path, default=[], metavar="DIR",
                        help="a training run's folder or log file to diagnose (repeatable; default: the run "
                        "folders found under PATH)")
    doctor.add_argument("--no-run", action="store_true",
                        help="run no user code: skip scan-data and verify (check and diagnose only read files)")
    doctor.add_argument("--html", type=Path, metavar="FILE", help="also write the report as one self-contained HTML "
                        "file (images embedded)")
    doctor.add_argument("--config", type=Path, metavar="FILE", help="use this config file")
    doctor.add_argument("--no-cache", action="store_true", help="the check step reads and writes no cache")
    doctor.add_argument("--verbose", "-v", action="store_true", help="show the output of the processes running "
                        "your code")
    _add_format(doctor, DOCTOR_FORMATS)
    doctor.set_defaults(handler=_doctor)


def _add_trace_parser(sub) -> None:
    trace = sub.add_parser("trace", help="run a training script for a few optimizer steps and check what the "
                           "training step does (tlint trace -- python train.py ARGS)",
                           usage="tlint trace [-h] [--steps N] [-o FILE] [--no-check] [--format FORMAT] "
                                 "-- python SCRIPT ARGS | -- python -m MODULE ARGS | -- torchrun ARGS | "
                                 "-- accelerate launch ARGS")
    trace.add_argument("--steps", type=int, metavar="N",
                       help="stop after N optimizer steps (default 5; 0: run the script to its end)")
    trace.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the report to FILE")
    trace.add_argument("--no-check", action="store_true",
                       help="do not run tlint check on the files the run went through (no pairing)")
    _add_format(trace, TRACE_FORMATS)
    trace.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    trace.set_defaults(handler=_trace, target=None)


def _trace(args: argparse.Namespace) -> int:
    from tlint.trace.command import run_command

    return run_command(args)


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
                        '"input_ids,attention_mask", "src,src_key_padding_mask", "ids", "input_ids,decoder_input_ids", '
                        '"src,tgt" or an adapter pkg.mod:call (default: bound by forward\'s parameter names)')
    verify.add_argument("--device", metavar="DEVICE", help="cpu (default) or cuda")
    verify.add_argument("--timeout", type=float, metavar="SECONDS", help="limit for the whole run (default 600)")
    verify.add_argument("--probe-timeout", type=float, metavar="SECONDS",
                        help="limit for loading the model and for each probe (default 120)")
    verify.add_argument("--memory-limit", type=float, metavar="MIB",
                        help="refuse a larger model before allocating it (default: half the machine's "
                             "memory); the child's cap is this plus 1 GiB per process: each DataLoader "
                             "worker has its own, so N workers can take N+1 times it")
    verify.add_argument("--optimizer", metavar="PKG.MOD:FACTORY",
                        help="callable(model) returning the optimiser (warmup-ab, data-ab, optimizer-coverage)")
    verify.add_argument("--lr", type=float, metavar="LR",
                        help="learning rate for warmup-ab and data-ab (overrides the optimiser's)")
    verify.add_argument("--max-seconds", type=float, metavar="SECONDS",
                        help="time budget of each training probe (default 30); its runs stop early")
    verify.add_argument("--data-ab-model", metavar="PKG.MOD:FACTORY",
                        help="the model data-ab trains instead of the verified one (e.g. a small reference LM)")
    verify.add_argument("--data-ab-model-kwargs", metavar="JSON", help="keyword arguments of --data-ab-model's "
                        "factory, a JSON object")
    verify.add_argument("--artifacts", type=Path, metavar="DIR",
                        help="folder for the files verify writes (attention-map PNGs); none are written without it")
    verify.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="with no model configured: files or folders whose flagged classes are built directly")
    _add_format(verify, VERIFY_FORMATS)
    verify.add_argument("--version", action=_TorchVersion, help="show tlint's version and the torch build it finds")
    verify.add_argument("--probe", action="append", metavar="NAME",
                        help="run only this probe (repeatable); the training probes run only when named "
                        "(`--probe training`: overfit-batch, warmup-ab, optimizer-coverage; `--probe data-ab`: "
                        "the data A/B)")
    verify.add_argument("--list-probes", action="store_true", help="list the probes and exit")
    verify.add_argument("--config", type=Path, metavar="FILE", help="use this config file")
    verify.add_argument("--verbose", "-v", action="store_true", help="show the model process's output")
    verify.add_argument("--data", action="store_true", help="also scan the configured data loader(s)")
    verify.add_argument("--strict", action="store_true",
                        help="exit 1 when a key probe was skipped (one a finding needs, or one that could not run)")
    from tlint.verify.data import add_arguments

    add_arguments(verify, verify=True)
    verify.set_defaults(handler=_verify)


DISTRIBUTION = "tlint-pytorch"  # the name on the Python Package Index (the command and the import stay `tlint`)


_TORCH_BUILDS = (("cuda", "CUDA"), ("hip", "ROCm"), ("xpu", "XPU"))


def torch_build() -> str:
    """One line on the torch that `tlint verify` would run: its version and build (CPU-only,
    CUDA, ROCm, XPU) and where it lies, read from its `version.py` without importing torch."""
    import ast
    from importlib.util import find_spec

    try:
        spec = find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return f"torch: not installed (pip install '{DISTRIBUTION}[verify]')"
    folder = Path(next(iter(spec.submodule_search_locations)))
    values: dict[str, object] = {}
    try:
        from tlint import bounded

        tree = ast.parse(bounded.read_text(folder / "version.py", 1 << 20))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:  # `name = "literal"` and `name: type = literal`
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    version = values.get("__version__")
    if not isinstance(version, str):
        from importlib import metadata

        try:
            version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            version = "of unknown version"
        return f"torch {version} (build unknown: no readable torch/version.py) at {folder}"
    build = next((f"{label} {values[key]} build" for key, label in _TORCH_BUILDS if isinstance(values.get(key), str)),
                 "CPU-only build")
    return f"torch {version} ({build}) at {folder}"


class _TorchVersion(argparse.Action):
    """`tlint verify --version`: tlint's version, then the torch build found."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"tlint {__version__}\n{torch_build()}")
        parser.exit(0)


def _torch_missing(command: str, fmt: str) -> int | None:
    """Exit 2 with one line saying how to install torch, when `command` needs it and it is
    not installed; None when it is (found without importing it: the parent side never does)."""
    from importlib.util import find_spec

    try:
        if find_spec("torch") is not None:
            return None
    except (ImportError, ValueError):
        pass
    from tlint.verify.command import _fail

    what = "runs the model" if command == "verify" else "loads batches of tensors"
    return _fail(fmt, "no-torch", f"tlint {command} {what} and needs PyTorch, which is not installed: "
                 f"pip install torch (or pip install '{DISTRIBUTION}[verify]')")


def _scan_data(args: argparse.Namespace) -> int:
    missing = _torch_missing("scan-data", args.format)
    if missing is not None:
        return missing
    from tlint.verify.data import run_command

    return run_command(args)


def _lsp(args: argparse.Namespace) -> int:
    try:
        import lsprotocol.types  # noqa: F401
        import pygls.lsp.server  # noqa: F401  (pygls 2.x)
    except ImportError:
        return _error(f"tlint lsp needs pygls 2.x: pip install '{DISTRIBUTION}[lsp]'")
    from tlint.lsp_server import serve

    return serve()


def _diagnose(args: argparse.Namespace) -> int:
    if len(args.runs) > 2:
        raise UsageError("tlint diagnose takes one run, or two to compare")
    from tlint.diagnose.command import run_command

    return run_command(args)


def _doctor(args: argparse.Namespace) -> int:
    from tlint.doctor.command import run_command

    return run_command(args)


def _verify(args: argparse.Namespace) -> int:
    if not args.list_probes:
        missing = _torch_missing("verify", args.format)
        if missing is not None:
            return missing
    from tlint.verify.command import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "check")
    target = None
    if argv and argv[0] == "trace" and "--" in argv:  # `tlint trace [OPTIONS] -- python train.py ARGS`
        cut = argv.index("--")
        argv, target = argv[:cut], argv[cut + 1:]
    verbose = "--verbose" in argv or "-v" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if target is not None:
            args.target = target
        if args.command is None:
            parser.print_usage(sys.stderr)
            return _error("give a command or a path, e.g. `tlint check src/` (see tlint --help)")
        _default_format(args)
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

    if args.show_config_schema:  # for editors (tlint/config_schema.py)
        from tlint.config_schema import schema_text

        sys.stdout.write(schema_text(args.show_config_schema))
        return 0
    if args.statistics and args.format not in STATISTICS_FORMATS:
        raise UsageError(f"--statistics works with --output-format {', '.join(STATISTICS_FORMATS)}")
    if args.fix_only and (args.diff or args.add_suppressions is not None):
        raise UsageError("--fix-only cannot be combined with --diff or --add-suppressions")
    if args.show_settings and args.show_files:
        raise UsageError("give --show-settings or --show-files, not both")
    args.quiet = args.quiet or args.silent
    memo_args = None if args.profile or args.no_prefilter or _shows(args) else _memo_args(args)
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
    if args.add_suppressions is not None and (stdin is not None or _fixing(args) or args.diff):
        raise UsageError("--add-suppressions works on files, without --fix, --unsafe-fixes or --diff")

    from tlint.engine import Linter

    started = time.perf_counter()
    try:
        resolver = ConfigResolver(forced=args.config, exclude=_flattened(args.exclude),
                                  extend_exclude=_flattened(args.extend_exclude), force_exclude=args.force_exclude)
        linter = Linter(resolver, jobs=args.jobs,
                        select=selections["select"] if args.select else None,
                        extend_select=selections["extend_select"], ignore=selections["ignore"],
                        cache=not args.no_cache, profile=args.profile,
                        prefilter=not args.no_prefilter and os.environ.get("TLINT_NO_PREFILTER", "") in ("", "0"))
        if args.show_settings or args.show_files:
            return _show(args, linter, paths, stdin)
        if _fixing(args) or args.diff:
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
    _notices(args, linter)
    if linter.profile is not None:
        _print_profile(linter, len(result.files), time.perf_counter() - started)
    return _report_result(args, result, stdin, time.perf_counter() - started, linter.jobs)


def _fixing(args: argparse.Namespace) -> bool:
    return bool(args.fix or args.fix_only or args.unsafe_fixes)


def _shows(args: argparse.Namespace) -> bool:
    return bool(args.show_settings or args.show_files or args.show_fixes)


def _flattened(groups: list[list[str]] | None) -> list[str] | None:
    return None if groups is None else [item for group in groups for item in group]


def _notices(args: argparse.Namespace, linter) -> None:
    if not args.quiet:
        for notice in linter.notices:
            sys.stderr.write(f"tlint: note: {notice}\n")


class _Output:
    """Where the report goes: stdout, `-o FILE`, or nowhere (--silent; -o still writes its
    file). A file that cannot be written is a usage error (exit 2)."""

    def __init__(self, args: argparse.Namespace, default=None) -> None:
        self.path = args.output_file
        self.file = None
        self.stream: Any
        if self.path is not None:
            try:
                from tlint.bounded import open_output

                self.file = open_output(self.path, newline="")
            except OSError as exc:
                raise UsageError(f"cannot write {self.path} (--output-file): {exc.strerror or exc}") from None
            self.stream = self.file
        elif args.silent:
            self.stream = _Discard()
        else:
            self.stream = default or sys.stdout

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc_info) -> None:
        if self.file is not None:
            self.file.close()
        else:
            self.stream.flush()


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _show(args: argparse.Namespace, linter, paths, stdin) -> int:
    """--show-files: the files a run would lint, one a line (after exclude, .gitignore and
    force-exclude). --show-settings: the settings of the first path's project."""
    if stdin is not None:
        raise UsageError("--show-settings and --show-files work on paths, not standard input")
    from tlint.discovery import discover
    from tlint.encoding import terminal_safe
    from tlint.engine import display_path

    if args.show_files:
        files, errors = discover(paths, linter.settings_for, linter.named_roots(paths))
        with _Output(args) as out:
            for file, _ in files:  # a name's control characters escaped, as `git ls-files` quotes them
                out.write(terminal_safe(display_path(file)) + "\n")
        for message in errors:
            sys.stderr.write(f"tlint: error: {message}\n")
        return 2 if errors else 0
    first = paths[0] if paths else Path(".")
    if not first.exists():
        raise UsageError(f"{first}: no such file or folder")
    folder = first if first.is_dir() else first.parent
    settings = linter.settings_for(folder, linter.named_roots(list(paths)).get(first, folder))
    with _Output(args) as out:
        out.write(_settings_text(first, settings))
    return 0


def _settings_text(first: Path, settings) -> str:
    """The settings a path is linted with, as `key = value` lines (values in JSON)."""
    import json

    from tlint.cache import cache_dir_for

    ruleset = settings.ruleset()
    config = settings.config_path
    rows = [
        ("path", first.as_posix()),
        ("config", None if config is None else Path(config).as_posix()),
        ("root", settings.root.as_posix()),
        ("rules", [rule.code for rule in ruleset.rules]),
        ("select", settings.select), ("extend-select", settings.extend_select), ("ignore", settings.ignore),
        ("per-file-ignores", settings.per_file_ignores),
        ("severity", settings.severity),
        ("exclude", settings.exclude),
        ("force-exclude", settings.force_exclude),
        ("causal-names", list(settings.causal_names)),
        ("cache-dir", cache_dir_for(settings).as_posix()),
    ]
    for rule in ruleset.rules:
        if rule.options:
            rows.append((f"rules.{rule.name}", {**rule.options, **settings.rule_options.get(rule.name, {})}))
    if settings.verify:
        rows.append(("verify", settings.verify))
    return "".join(f"{key} = {json.dumps(value, ensure_ascii=False, default=str)}\n" for key, value in rows)


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
    if args.no_cache or _fixing(args) or args.diff or args.stdin_filename is not None \
            or STDIN_NAME in args.paths or args.add_suppressions is not None:
        return None
    from tlint.cache import cache_disabled_by_env

    if cache_disabled_by_env():
        return None
    options: dict[str, Any] = {flag: [code for group in getattr(args, flag) for code in group]
               for flag in ("select", "ignore", "extend_select")}
    options["select_given"] = bool(args.select)
    options["config"] = os.path.abspath(args.config) if args.config else None
    if args.exclude is not None or args.extend_exclude or args.force_exclude is not None:
        options["exclude"] = [_flattened(args.exclude), _flattened(args.extend_exclude), args.force_exclude]
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
                    SourceLines({stdin[0].as_posix(): stdin[1]} if stdin else None, result.unread),
                    hidden_suppressed=len(result.diagnostics) - len(shown))
    with _Output(args) as out:
        render(args.format, report, out, statistics=args.statistics, quiet=args.quiet)
        if args.show_fixes:
            _write_fixes("Would fix", _fixable_by_file(result.diagnostics, args.unsafe_fixes), out)
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


def _fixable_by_file(diagnostics, unsafe: bool) -> dict[str, dict[tuple[str, str], int]]:
    """{path: {(code, name): findings with a fix --fix would apply}}."""
    from tlint.fixes import wanted

    out: dict[str, dict[tuple[str, str], int]] = {}
    for diag in diagnostics:
        if wanted(diag, unsafe):
            counts = out.setdefault(diag.path, {})
            counts[(diag.code, diag.name)] = counts.get((diag.code, diag.name), 0) + 1
    return out


def _fixed_by_file(first, last, unsafe: bool) -> dict[str, dict[tuple[str, str], int]]:
    """{path: {(code, name): findings fixed}}: per file and code, the findings with a wanted
    fix in the first pass that the last pass no longer has."""
    before = _fixable_by_file(first.diagnostics, unsafe)
    left: dict[tuple[str, str, str], int] = {}
    for diag in last.diagnostics:
        key = (diag.path, diag.code, diag.name)
        left[key] = left.get(key, 0) + 1
    out: dict[str, dict[tuple[str, str], int]] = {}
    for path, counts in before.items():
        for (code, name), count in counts.items():
            all_before = sum(1 for d in first.diagnostics if d.path == path and d.code == code)
            fixed = min(count, all_before - left.get((path, code, name), 0))
            if fixed > 0:
                out.setdefault(path, {})[(code, name)] = fixed
    return out


def _write_fixes(title: str, by_file: dict[str, dict[tuple[str, str], int]], out) -> None:
    """--show-fixes: "Fixed 2 findings:" (or "Would fix"), then `- path:` and
    `    1 × TL305 (scheduler-before-optimizer)` lines."""
    from tlint.encoding import terminal_safe
    from tlint.reporters import plural

    total = sum(sum(counts.values()) for counts in by_file.values())
    if not total:
        out.write(f"{title}: nothing.\n" if title == "Would fix" else "No fixes applied.\n")
        return
    out.write(f"{title} {plural(total, 'finding')}:\n")
    for path in sorted(by_file):
        out.write(f"- {terminal_safe(path)}:\n")
        for (code, name), count in sorted(by_file[path].items()):
            out.write(f"    {count} \u00d7 {code} ({name})\n")


def _fix(args: argparse.Namespace, linter, paths, stdin) -> int:
    """--fix / --fix-only / --unsafe-fixes / --diff: apply fixes until stable
    (tlint/fixes.py), then write the changed files (or print the diff, or the fixed standard
    input) and report what is left (nothing with --fix-only). The exit code reflects what is
    left (with --diff: 1 if anything would change; with --fix-only: 0; with
    --exit-non-zero-on-fix: at least 1 when a fix was applied)."""
    from tlint.fixes import fix_run, skipped_messages, unified_diff, write_fixes
    from tlint.reporters import OutputReport, SourceLines, plural, render

    outcome = fix_run(linter, paths, unsafe=args.unsafe_fixes, stdin=stdin)
    _notices(args, linter)
    result = outcome.result
    assert result is not None  # (set by fix_run)
    displays = {path: display for display, path in result.paths.items()}
    total, changed = outcome.total, outcome.changed
    if args.diff:
        with _Output(args) as out:
            for path in changed:
                out.write(unified_diff(displays.get(path, path.as_posix()), outcome.originals[path],
                                       outcome.texts[path]))
        for message in skipped_messages(outcome, displays):
            sys.stderr.write(f"tlint: warning: {message}\n")
        if not args.quiet:
            sys.stderr.write(f"tlint: would fix {plural(total, 'finding')} in {plural(len(changed), 'file')}\n")
        for message in result.errors:
            sys.stderr.write(f"tlint: error: {message}\n")
        if result.internal_errors or result.errors:
            return 2
        return 1 if changed else 0
    if stdin is not None:  # editors: the fixed source on stdout, what is left on stderr (or -o)
        stdin_path = stdin[0].absolute()
        sys.stdout.write(outcome.texts.get(stdin_path, stdin[1]))
        sys.stdout.flush()
        default, sources = sys.stderr, {stdin[0].as_posix(): outcome.texts.get(stdin_path, stdin[1])}
    else:  # what is never written, and why: tlint/fixes.py `write_fixed`
        skipped, failed = write_fixes(outcome, paths, displays)
        if skipped:  # those files keep their findings: lint what is on disk now
            result = linter.run(paths)
        for message in skipped:
            sys.stderr.write(f"tlint: warning: {message}\n")
        result.errors.extend(failed)
        total = outcome.total
        default, sources = sys.stdout, None
    shown = [d for d in result.diagnostics if args.show_suppressed or not d.suppressed]
    report = OutputReport(shown, result.files, result.parse_errors, SourceLines(sources, result.unread),
                    hidden_suppressed=len(result.diagnostics) - len(shown))
    with _Output(args, default) as out:
        if not args.fix_only:
            render(args.format, report, out, statistics=args.statistics, quiet=args.quiet)
        if args.show_fixes and outcome.first is not None:
            _write_fixes("Fixed", _fixed_by_file(outcome.first, result, args.unsafe_fixes), out)
    left = sum(1 for d in result.diagnostics if not d.suppressed)
    if not args.quiet:
        fixed = f"tlint: fixed {plural(total, 'finding')} in {plural(len(outcome.applied), 'file')}"
        sys.stderr.write(fixed + ("\n" if args.fix_only else f", {left} left\n"))
    for message in result.errors:
        sys.stderr.write(f"tlint: error: {message}\n")
    from tlint.results import exit_code

    code = exit_code(result, fail_on=args.fail_on, exit_zero=args.exit_zero or args.fix_only)
    if code == 0 and total and args.exit_non_zero_on_fix:
        return 1
    return code


def _inputs(args: argparse.Namespace):
    """(paths, stdin) for `Linter.run`: stdin is (display name, text) or None."""
    reads_stdin = args.stdin_filename is not None or STDIN_NAME in args.paths
    if not reads_stdin:
        return [Path(p) for p in args.paths or ["."]], None
    if any(p != STDIN_NAME for p in args.paths):
        raise UsageError("paths cannot be combined with standard input (--stdin-filename or -)")
    from tlint.bounded import limit_words, source_limit
    from tlint.engine import decode_source

    name = args.stdin_filename or "stdin.py"
    limit = source_limit(name)
    data = sys.stdin.buffer.read(limit + 1)  # never more than a file of that name may hold
    if len(data) > limit:
        raise UsageError(f"standard input is too large to lint (over the {limit_words(limit)} limit)")
    try:
        text = decode_source(data)
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
    """`tlint rule CODE` (its document), `--all` (every document), `--list` (one line a
    rule). The documents are printed as the Markdown they are, on a terminal too."""
    from tlint.docs import rule_doc
    from tlint.rules import ALL_RULES, lookup

    if sum((args.all, args.list, bool(args.selector))) != 1:
        raise UsageError("give one rule code or name (tlint rule TL101), --all or --list")
    if args.all or args.list:
        rules = list(ALL_RULES)
    else:
        found = lookup(args.selector)
        if found is None:
            raise UsageError(f"unknown rule `{args.selector}` (tlint rule --list lists them)")
        rules = [found]
    if args.format == "json":
        import json

        entries = [{"code": r.code, "name": r.name, "kind": r.kind, "severity": r.severity,
                    "default_enabled": r.default_enabled,
                    "summary": r.summary, **({} if args.list else {"doc": rule_doc(r.code)})} for r in rules]
        sys.stdout.write(json.dumps(entries if args.all or args.list else entries[0], indent=2,
                                    ensure_ascii=False) + "\n")
        return 0
    if args.list:
        width = max(len(r.name) for r in rules)
        kinds = max(len(r.kind) for r in rules)
        for r in rules:
            state = "on " if r.default_enabled else "off"
            sys.stdout.write(f"{r.code}  {r.name:<{width}}  {r.kind:<{kinds}}  {r.severity:<7}  {state}  {r.summary}\n")
        return 0
    texts = [rule_doc(r.code) or _undocumented(r) for r in rules]
    sys.stdout.write("\n\n".join(text.rstrip("\n") for text in texts) + "\n")
    return 0


def _undocumented(rule) -> str:
    state = "on" if rule.default_enabled else "off"
    return (f"# {rule.code} {rule.name}\n\n{rule.summary}\n\nKind: {rule.kind}; severity: {rule.severity}; "
            f"{state} by default.\n")
