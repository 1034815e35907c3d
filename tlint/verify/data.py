"""The data scan: `tlint scan-data` and `tlint verify --data` (README "tlint verify", the data scan).

Parent side (no torch): settings from `[tool.tlint.verify]` and flags, a child process
(`python -m tlint.verify.data REQUEST REPORT_FD ...`, run by tlint/verify/child.py like
verify's: a temporary working folder, bytecode writing off, a memory limit, killed at `timeout`
with every process it started) that imports the loader factories and scans their
first N batches, then `tlint check` on the user files the loaders imported: each static
finding of a data rule gets the verdict of the check that tests it. Child side (torch):
normalise each batch (a mapping such as a dict or a BatchEncoding, a tuple `(x, y)` or
`(ids, mask, labels)`, a tensor, or plain lists of ints) and compute the checks."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tlint.verify.options import OptionsError, config_root, load_config

# check -> the question it answers; the order they are reported in. Which rules a check
# confirms is declared on the rule classes (`Rule.data_check`): `checked_rules()`.
CHECKS: dict[str, str] = {
    "nan-inf": "any NaN/Inf in a field?",
    "mask-pad-agreement": "attention mask 1 on a pad token, or 0 on a real one?",
    "pad-ratio": "share of positions that are padding (warn above 50 %)",
    "label-alignment": "labels equal to the inputs, or shifted by one (causal LM)?",
    "label-pad-ignored": "pad positions in labels set to -100?",
    "eos-masked": "EOS tokens labelled -100?",
    "loader-order": "train loader: samples drawn in dataset order (not shuffled)?",
    "tokenizer-agreement": "train and eval loaders: same vocabulary, pad id, padding side?",
    "length-histogram": "sequence lengths (information)",
}


@functools.cache
def checked_rules() -> dict[str, tuple[str, ...]]:
    """check -> the codes of the rules it confirms, in order of code (from `Rule.data_check`).
    The rule registry is imported on first use, not with this module: the CLI builds its
    parser from this module, and `tlint check` must not import a rule for that."""
    from tlint.rules import ALL_RULES

    unknown = {rule.code: rule.data_check for rule in ALL_RULES if rule.data_check and rule.data_check not in CHECKS}
    if unknown:
        raise ValueError(f"data_check names no data-scan check: {unknown}")
    return {check: tuple(rule.code for rule in ALL_RULES if rule.data_check == check) for check in CHECKS}


PAD_RATIO_LIMIT = 0.5
IGNORE_INDEX = -100
DEFAULT_BATCHES = 50
FIELDS = ("ids", "mask", "labels")  # the keys of `fields` in [tool.tlint.verify]
_ID_NAMES = ("input_ids", "ids", "src", "tokens", "token_ids", "x", "inputs", "input")
_MASK_NAMES = ("attention_mask", "mask", "src_mask", "padding_mask", "src_key_padding_mask", "key_padding_mask")
_LABEL_NAMES = ("labels", "label", "targets", "target", "y", "lm_labels")


@dataclass
class DataOptions:
    """What the child needs; sent to it as JSON."""

    dataloader: str
    root: str
    eval_dataloader: str | None = None
    python_path: list[str] = field(default_factory=list)
    pad_token_id: int | None = None
    eos_token_id: int | None = None
    vocab_size: int | None = None
    causal: bool | None = None
    padding_side: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    batches: int = DEFAULT_BATCHES
    seed: int = 0
    timeout: float = 600.0
    memory_limit: float | None = None   # MiB (None: half the machine's): the child's limit, plus headroom

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class DataError(Exception):
    """Exit 2: the loader cannot be imported or iterated."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- settings --------------------------------------------------------------------------

def resolve_data(config: dict[str, Any], config_path: Path | None, root: Path,
                 flags: dict[str, Any]) -> DataOptions:
    """`[tool.tlint.verify]`'s data keys merged with flags (config key -> value, None when absent)."""
    from tlint.verify.options import resolve

    where = f"{config_path}: " if config_path else ""
    shared = {k: v for k, v in flags.items() if k in ("pad-token-id", "vocab-size", "causal", "padding-side",
                                                        "timeout", "seed", "memory-limit")}
    base = resolve(config, config_path, root, shared, require_model=False)
    values: dict[str, Any] = {}
    for key in ("dataloader", "eval-dataloader"):
        value = flags.get(key) if flags.get(key) is not None else config.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or ":" not in value or not all(value.partition(":")[::2]):
            raise OptionsError(f"{where}`{key}` must be a dotted path `package.module:name` (a callable returning "
                               f"an iterable of batches, or the iterable itself), got {value!r}", kind="usage")
        values[key.replace("-", "_")] = value
    if "dataloader" not in values:
        raise OptionsError("no data loader to scan: give `--dataloader pkg.module:factory` or set `dataloader = "
                           "\"pkg.module:factory\"` in [tool.tlint.verify] (a callable returning an iterable of "
                           "batches, e.g. a DataLoader)", kind="usage")
    eos = flags.get("eos-token-id") if flags.get("eos-token-id") is not None else config.get("eos-token-id")
    if eos is not None and (not isinstance(eos, int) or isinstance(eos, bool)):
        raise OptionsError(f"{where}`eos-token-id` in [tool.tlint.verify] must be an integer, got {eos!r}")
    fields_ = config.get("fields", {})
    if not isinstance(fields_, dict) or not all(isinstance(v, str) for v in fields_.values()) \
            or set(fields_) - set(FIELDS):
        raise OptionsError(f"{where}`fields` in [tool.tlint.verify] must be a table with string values for "
                           f"`ids`, `mask` and/or `labels`, e.g. {{ ids = \"src\", mask = \"src_mask\" }}; "
                           f"got {fields_!r}")
    batches = flags.get("batches")
    if batches is not None and batches < 1:
        raise OptionsError(f"--batches must be a positive integer, got {batches}", kind="usage")
    pad = flags.get("pad-token-id") if flags.get("pad-token-id") is not None else config.get("pad-token-id")
    return DataOptions(root=base.root, python_path=base.python_path, pad_token_id=pad, eos_token_id=eos,
                       vocab_size=base.vocab_size, causal=base.causal,
                       padding_side=flags.get("padding-side") or config.get("padding-side"),
                       fields=dict(fields_), batches=batches or DEFAULT_BATCHES, seed=base.seed,
                       timeout=base.timeout, memory_limit=base.memory_limit, **values)


def data_flags(args) -> dict[str, Any]:
    """The data-scan settings given as flags (config key -> value, None when absent)."""
    return {key: getattr(args, key.replace("-", "_"), None)
            for key in ("dataloader", "eval-dataloader", "pad-token-id", "eos-token-id", "vocab-size", "causal",
                        "padding-side", "timeout", "seed", "batches", "memory-limit")}


def load_data_options(args) -> DataOptions:
    settings, config_path = load_config(args)
    return resolve_data(settings.verify, config_path, config_root(config_path), data_flags(args))


def data_settings(config: dict[str, Any], config_path: Path | None, root: Path,
                  flags: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What `verify --probe data-ab` sends its child (`VerifyOptions.data`): the data scan's
    settings as a dict, or None when no `dataloader` is configured (the probe then skips). A
    wrong data setting is an OptionsError, as for `scan-data`."""
    flags = flags or {}
    if flags.get("dataloader") is None and config.get("dataloader") is None:
        return None
    return asdict(resolve_data(config, config_path, root, flags))


# --- parent: the command ---------------------------------------------------------------

def add_arguments(parser, verify: bool = False) -> None:
    """The data-scan flags (on `scan-data`, and on `verify` next to `--data`)."""
    parser.add_argument("--dataloader", metavar="PKG.MOD:FACTORY", help="callable returning the training batches")
    parser.add_argument("--eval-dataloader", metavar="PKG.MOD:FACTORY", help="the evaluation batches (TL104)")
    parser.add_argument("--eos-token-id", type=int, metavar="N", help="the EOS token id (eos-masked check)")
    parser.add_argument("--batches", type=int, metavar="N",
                        help=f"batches scanned per loader (default {DEFAULT_BATCHES})")
    if verify:
        return
    for flag, what in (("--pad-token-id", "the pad token id (default: the loader's tokenizer's)"),
                       ("--vocab-size", "vocabulary size"), ("--seed", "seed")):
        parser.add_argument(flag, type=int, metavar="N", help=what)
    parser.add_argument("--causal", action=argparse.BooleanOptionalAction, default=None,
                        help="the model is a causal LM (label-alignment is skipped with --no-causal)")
    parser.add_argument("--padding-side", choices=("right", "left"), help="the expected padding side")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="limit for the whole scan (default 600)")
    parser.add_argument("--output-format", "--format", dest="format", choices=("text", "json"), default=None,
                        help="output format (default: $TLINT_OUTPUT_FORMAT when text or json, else text)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="use this config file")
    parser.add_argument("--verbose", "-v", action="store_true", help="show the loader process's output")


def run_command(args) -> int:
    """`tlint scan-data`."""
    try:
        options = load_data_options(args)
        report = scan(options, verbose=args.verbose)
    except (OptionsError, DataError) as exc:
        return _fail(args.format, exc.kind, str(exc))
    if args.format == "json":
        sys.stdout.write(json.dumps(report_json(report), indent=2, ensure_ascii=False) + "\n")
    else:
        render_text(report, sys.stdout)
    return exit_code(report)


def _fail(fmt: str, kind: str, message: str) -> int:
    if fmt == "json":
        from tlint.verify.output import error_json

        sys.stdout.write(error_json(kind, message))
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2


def scan(options: DataOptions, verbose: bool = False) -> dict[str, Any]:
    """Scan in a child process, then give the static findings of the loaders' files a verdict."""
    result = _run_child(options, verbose)
    result["findings"] = match_findings(result, options)
    return result


def exit_code(report: dict[str, Any]) -> int:
    return 1 if any(c["status"] == "fail" for c in report["checks"]) else 0


# `rules`, `findings` and `extra` (per-batch pad ratios, histogram bins, per-field NaN counts,
# the match rate at each label shift) extend the verifier's JSON schema.
_CHECK_KEYS = ("check", "loader", "status", "rule", "rules", "figure", "unit", "field", "detail", "extra")


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    from tlint import __version__

    checks = [{**{k: c.get(k) for k in _CHECK_KEYS}, "extra": c.get("extra") or {}, "findings": c.get("findings", [])}
              for c in report["checks"]]
    return {"tool": "tlint", "version": __version__, "scan": report["scan"], "checks": checks,
            "findings": report.get("findings", []),
            "summary": {"checks": len(checks), "failed": sum(c["status"] == "fail" for c in checks)}}


def data_section(report: dict[str, Any]) -> dict[str, Any]:
    """The scan inside `tlint verify --data --format json` (its `data` key)."""
    document = report_json(report)
    return {k: document[k] for k in ("scan", "checks", "findings", "summary")}


def render_with_verify(fmt: str, report: dict[str, Any], model: dict, probes: list[dict],
                       findings: list[dict]) -> int:
    """`tlint verify --data`: the verify report, then the scan (JSON: under `data`; SARIF and
    LSP carry the static findings of both). Exit 1 when a probe or a check failed or a
    finding was confirmed."""
    import io

    from tlint.verify import output

    data_findings = [{**f, "probe": f.get("check")} for f in report.get("findings", [])]
    code = max(output.exit_code(probes, findings), exit_code(report))
    if fmt == "json":
        document = output.report_json(model, probes, findings)
        document["data"] = data_section(report)
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    elif fmt in ("sarif", "lsp"):
        buffer = io.StringIO()
        getattr(output, f"render_{fmt}")(model, probes, findings + data_findings, buffer)
        sys.stdout.write(buffer.getvalue())
    else:
        output.render_text(model, probes, findings, sys.stdout)
        render_text(report, sys.stdout)
    return code


_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow",
          "confirmed": "bold red", "not-reproduced": "green", "not-checkable": "yellow"}


def render_text(report: dict[str, Any], stream) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    color = stream.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=stream, force_terminal=color, no_color=not color, highlight=False, emoji=False,
                      markup=False, width=None if color else 160)
    info = report["scan"]
    loaders = info["loader"] + (f" and {info['eval_loader']} (eval)" if info.get("eval_loader") else "")
    console.print(f"data scan of {loaders}: {info['batches']} batches, {info['samples']} samples")
    table = Table(title="data checks", title_justify="left")
    for column in ("check", "loader", "status", "rule", "figure", "unit", "field", "detail"):
        table.add_column(column, overflow="fold")
    for c in report["checks"]:
        figure = "" if c["figure"] is None else f"{c['figure']:.4g}"
        detail = c["detail"] + "".join(f"; matches {m}" for m in c.get("findings", []))
        table.add_row(c["check"], c["loader"], Text(c["status"], style=_STYLE[c["status"]]), ", ".join(c["rules"]),
                      figure, c["unit"], c["field"] or "", detail)
    console.print(table)
    for c in report["checks"]:
        if c["check"] == "length-histogram" and c.get("extra", {}).get("bins"):
            console.print(f"sequence lengths ({c['loader']} loader, real tokens per sample):")
            console.print(histogram_text(c["extra"]["bins"]))
    findings = report.get("findings", [])
    if findings:
        table = Table(title="static findings", title_justify="left")
        for column in ("finding", "location", "verdict", "check", "reason"):
            table.add_column(column, overflow="fold")
        for f in findings:
            where = f"{f['path']}:{f['range']['start']['line']}:{f['range']['start']['column']}"
            table.add_row(f["code"], where, Text(f["verdict"], style=_STYLE[f["verdict"]]), f["check"] or "",
                          f["reason"])
        console.print(table)
    document = report_json(report)
    from tlint.reporters import plural

    console.print(f"{plural(document['summary']['checks'], 'check')}, {document['summary']['failed']} failed; "
                  f"{plural(len(findings), 'static finding')}, "
                  f"{sum(f['verdict'] == 'confirmed' for f in findings)} confirmed")


def histogram_text(bins: list[list[int]], width: int = 40) -> str:
    """`[[low, high, count], ...]` as lines of bars."""
    top = max((b[2] for b in bins), default=0) or 1
    names = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi, _ in bins]
    label = max(map(len, names))
    return "\n".join(f"  {name:>{label}} | {'#' * round(width * n / top):<{width}} {n}"
                     for name, (_, _, n) in zip(names, bins))


def _run_child(options: DataOptions, verbose: bool) -> dict[str, Any]:
    from tlint.verify.child import run_scan

    run = run_scan(options, verbose)
    if run.error is not None:
        raise DataError(*run.error)
    if run.timed_out:
        raise DataError("timeout", f"the data scan did not finish within {options.timeout:g} s (`timeout`) and "
                        "was stopped: a loader that hangs (e.g. worker processes, a network read), or batches "
                        "too slow to produce; lower --batches or raise `timeout`")
    if run.result is None:
        raise DataError("crash", f"the process running the data loader {run.how} before reporting"
                        + (f"; its last words:\n{run.last_words}" if run.last_words else ""))
    result = run.result
    if "error" in result:
        raise DataError(result["error"]["kind"], result["error"]["message"])
    return result


def match_findings(result: dict[str, Any], options: DataOptions) -> list[dict[str, Any]]:
    """`tlint check` on the user files the loaders imported; findings of the data rules get the
    verdict of the check testing their rule (train loader's entry first). The data rules run
    even where they are off by default (practice rules such as TL104): the checks are there
    to test them; the project's `ignore` still turns them off."""
    files = [Path(f) for f in result.get("files", [])]
    if not files:
        return []
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    rules = {rule: name for name, codes in checked_rules().items() for rule in codes}
    from tlint.verify.matching import DATA_SCAN_RULES

    tested = sorted(DATA_SCAN_RULES | set(rules))
    diagnostics = [d for d in Linter(ConfigResolver(), jobs=1, extend_select=tested).run(files).diagnostics
                   if not d.suppressed and (d.code in DATA_SCAN_RULES or d.code in rules)]
    out = []
    for diag in diagnostics:
        name = rules.get(diag.code)
        entries = [c for c in result["checks"] if c["check"] == name]
        failed = [c for c in entries if c["status"] == "fail"]
        passed = [c for c in entries if c["status"] == "pass"]
        where = f"{diag.path}:{diag.range.start.line} {diag.code}"
        if name is None:
            verdict, reason = "not-checkable", f"no data check tests {diag.code}"
        elif failed:
            verdict, reason = "confirmed", f"{name} fails on the {failed[0]['loader']} loader: {failed[0]['detail']}"
        elif passed:
            verdict, reason = "not-reproduced", f"{name} passes: {passed[0]['detail']}"
        else:
            verdict = "not-checkable"
            reason = "; ".join(f"{name} skipped: {c['detail']}" for c in entries) or f"{name} was not run"
        for entry in failed or passed:
            entry.setdefault("findings", []).append(where)
        out.append({"code": diag.code, "path": diag.path, "range": diag.range.to_json(), "verdict": verdict,
                    "check": name, "reason": reason})
    return out


# --- child -----------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """`REQUEST REPORT_FD PARENT_PID LIMIT_MIB` (tlint/verify/child.py): options in, one
    `{"event": "result", "result": {"scan", "checks", "files"} or {"error"}}` out on the report pipe."""
    from tlint.verify.child import start_child

    request, reporter = start_child(argv)
    options = DataOptions(**json.loads(request.read_text(encoding="utf-8")))
    from tlint.verify.scan_data import run_scan

    reporter.emit({"event": "result", "result": run_scan(options)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
