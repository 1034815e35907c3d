"""`tlint verify`, parent side: settings → child process (load the model, run the probes)
→ lint the model's files → verdicts → report. No torch here."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tlint.verify import child
from tlint.verify.options import (
    PROBE_GROUPS,
    PROBES,
    TRAINING_PROBES,
    OptionsError,
    VerifyOptions,
    config_root,
    load_config,
    resolve,
    select_probes,
)

# command-line flag (argparse dest) -> config key
FLAG_KEYS = {
    "model": "model", "seq_len": "seq-len", "batch_size": "batch-size", "vocab_size": "vocab-size",
    "pad_token_id": "pad-token-id", "causal": "causal", "padding_side": "padding-side", "call": "call",
    "device": "device", "seed": "seed", "timeout": "timeout", "probe_timeout": "probe-timeout",
    "memory_limit": "memory-limit", "optimizer": "optimizer", "lr": "lr", "max_seconds": "max-seconds",
    "data_ab_model": "data-ab-model",
}


class VerifyError(Exception):
    """Exit 2: the model cannot be loaded or called, or the settings are wrong."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def run(args) -> int:
    if args.list_probes:
        for name, question in PROBES.items():
            sys.stdout.write(f"{name:16} {question}\n")
        for name, question in TRAINING_PROBES.items():
            if name not in PROBE_GROUPS["training"]:
                sys.stdout.write(f"{name:16} {question} (training: only with --probe {name})\n")
                continue
            sys.stdout.write(f"{name:16} {question} (training: only with --probe {name} or --probe training"
                             + ("; by default when `optimizer` is configured" if name == "optimizer-coverage" else "")
                             + ")\n")
        return 0
    try:
        options = load_options(args)
        data_options = _data_options(args) if getattr(args, "data", False) else None  # checked before any run
        if options.model:
            result = run_worker(options, verbose=args.verbose)
            findings = match_findings(result, options)
            model, probes = result["model"], result["probes"]
        else:  # no model configured: build the flagged classes that need no arguments
            from tlint.verify.instantiate import verify_flagged

            model, probes, findings = verify_flagged(options, getattr(args, "paths", None) or [],
                                                     verbose=args.verbose)
        data_report = _scan_data(data_options, args.verbose) if data_options is not None else None
    except (OptionsError, VerifyError) as exc:
        return _fail(args.format, exc.kind, str(exc))
    from tlint.verify import output

    if data_report is not None:  # `verify --data`: the data scan's checks after the probes
        from tlint.verify.data import render_with_verify

        return render_with_verify(args.format, data_report, model, probes, findings)

    strict = bool(getattr(args, "strict", False))
    if args.format == "sarif":
        output.render_sarif(model, probes, findings, sys.stdout, strict=strict)
    elif args.format in ("json", "lsp"):
        getattr(output, f"render_{args.format}")(model, probes, findings, sys.stdout)
    else:
        output.render_text(model, probes, findings, sys.stdout)
    return output.exit_code(probes, findings, strict)


def _data_options(args):
    from tlint.verify.data import load_data_options

    return load_data_options(args)


def _scan_data(data_options, verbose: bool) -> dict[str, Any]:
    from tlint.verify.data import DataError, scan

    try:
        return scan(data_options, verbose=verbose)
    except DataError as exc:
        raise VerifyError(exc.kind, str(exc)) from None


def _fail(fmt: str, kind: str, message: str) -> int:
    if fmt == "json":
        from tlint.verify.output import error_json

        sys.stdout.write(error_json(kind, message))
    elif fmt == "sarif":
        from tlint.verify.output import sarif_error

        sys.stdout.write(sarif_error(kind, message))
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2


def load_options(args) -> VerifyOptions:
    settings, config_path = load_config(args)
    flags = {key: getattr(args, dest, None) for dest, key in FLAG_KEYS.items()}
    if getattr(args, "artifacts", None) is not None:  # relative to the working directory, not the config
        flags["artifacts"] = str(Path(args.artifacts).resolve())
    for dest, key in (("model_kwargs", "model-kwargs"), ("data_ab_model_kwargs", "data-ab-model-kwargs")):
        given = getattr(args, dest, None)
        if given is None:
            continue
        try:
            flags[key] = json.loads(given)
        except json.JSONDecodeError as exc:
            raise OptionsError(f"--{key} must be a JSON object, e.g. '{{\"d_model\": 64}}': {exc}",
                               kind="usage") from None
    root = config_root(config_path)
    options = resolve(settings.verify, config_path, root, flags, settings.causal_names, require_model=False)
    options.probes = select_probes(args.probe, optimizer=bool(options.optimizer))
    if "data-ab" in options.probes:  # the loaders it trains on (None: not configured, the probe skips)
        from tlint.verify.data import data_flags, data_settings

        options.data = data_settings(settings.verify, config_path, root, data_flags(args))
    return options


def run_worker(options: VerifyOptions, verbose: bool = False, deadline: float | None = None,
               bar: Any = None) -> dict[str, Any]:
    """Run the probes in a child process (working directory: a temporary folder, bytecode
    writing off) and return `{"model", "probes", "classes"}`.

    The child reports each stage (model loaded, probe started, probe done) in a progress
    file that this process watches. Loading and each probe get `probe-timeout` seconds, the
    whole run `timeout` (until `deadline`, a `time.monotonic()` value, when given): a probe
    that runs past its limit or crashes the child (a hang or a crash in C code included) is
    stopped by killing the child, reported as `skip` with the reason, and the remaining
    probes run in a fresh child. Loading that fails, hangs or crashes is a VerifyError.
    `bar` (a `progress.ProgressBar`, by default one on stderr) is shown the child's events."""
    deadline = time.monotonic() + options.timeout if deadline is None else deadline
    pending = list(options.probes)
    done: dict[str, dict[str, Any]] = {}
    loaded: dict[str, Any] | None = None
    while True:
        run = child.run_probes(replace(options, probes=pending), deadline, verbose, bar=bar)
        loaded = loaded or run.loaded
        for entry in run.done:
            done[entry["probe"]] = entry
            pending.remove(entry["probe"])
        if run.error is not None:
            raise VerifyError(*run.error)
        if run.ended or not pending:
            break
        if run.loaded is None:
            raise VerifyError(*_loading_failure(run, options))
        if run.running is None:  # between two probes: treat the next one as the culprit
            run.running, run.template = pending[0], _template(pending[0])
        name = run.running
        if run.stopped == "timeout":
            done[name] = _skipped(run.template, f"stopped: the run's `timeout` of {options.timeout:g} s was reached "
                                  "during this probe", run.elapsed)
        elif run.stopped == "probe-timeout":
            done[name] = _skipped(run.template, f"stopped after {options.probe_timeout:g} s (`probe-timeout`): a hang "
                                  "in forward or in C code it calls, or a model too slow at this size; the other "
                                  "probes ran in a fresh process. Raise `probe-timeout`, or lower `seq-len`, "
                                  "`batch-size` or the sizes in `model-kwargs`", run.elapsed)
        else:
            done[name] = _skipped(run.template, f"the process running the model {run.how} during this probe"
                                  + (f" ({' | '.join(run.last_words.splitlines()[-3:])})" if run.last_words else "")
                                  + "; the other probes ran in a fresh process", run.elapsed)
        pending.remove(name)
        if run.stopped == "timeout" or time.monotonic() >= deadline:
            for name in pending:
                done[name] = _skipped(_template(name), f"not run: the run's `timeout` of {options.timeout:g} s "
                                      "was reached", 0.0)
            break
        if not pending:
            break
    # (a run that ended without an error loaded the model)
    return {"model": loaded["model"], "probes": [done[n] for n in options.probes if n in done],  # type: ignore[index]
            "classes": loaded["classes"]}  # type: ignore[index]


def _template(name: str) -> dict[str, Any]:
    return {"probe": name, "status": "skip", "figure": None, "tolerance": 0.0, "unit": "", "module": None,
            "detail": ""}


def _skipped(template: dict[str, Any] | None, reason: str, seconds: float) -> dict[str, Any]:
    return {**(template or {}), "status": "skip", "figure": None, "module": None, "detail": reason, "extra": {},
            "seconds": round(seconds, 3)}


def _loading_failure(run: child.ChildRun, options: VerifyOptions) -> tuple[str, str]:
    what = f"loading the model `{options.model}` (importing it and building it)"
    if run.stopped == "timeout":
        return "timeout", (f"the model did not finish the probes within {options.timeout:g} s (`timeout`, the whole "
                           f"run) and was stopped while {what}: a hang at import, in the factory or in forward, "
                           "or a model too large for this machine. Raise `timeout`, or lower `seq-len`, "
                           "`batch-size` or the sizes in `model-kwargs`")
    if run.stopped == "probe-timeout":
        return "timeout", (f"{what[0].upper()}{what[1:]} did not finish within {options.probe_timeout:g} s "
                           "(`probe-timeout`) and was stopped: a hang at import or in the factory (or in C code "
                           "they call), or a model too slow to build here. Raise `probe-timeout`, or lower the "
                           "sizes in `model-kwargs`")
    return "crash", (f"the process running the model {run.how} before reporting"
                     + (f"; its last words:\n{run.last_words}" if run.last_words else ""))


def match_findings(result: dict[str, Any], options: VerifyOptions) -> list[dict[str, Any]]:
    if not result["classes"]:  # no class of the model is defined in the user's files: nothing to lint
        return []
    from tlint.verify.matching import lint, model_classes, source_files, verdicts

    classes = model_classes(result)
    roots = [Path(options.root), *(Path(p) for p in options.python_path)]
    files = source_files(classes, roots)
    if not files:
        return []
    return verdicts(lint(files, classes, roots), classes, result["probes"])
