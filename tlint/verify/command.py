"""`tlint verify`, parent side: settings → child process (load the model, run the probes)
→ lint the model's files → verdicts → report. No torch here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tlint.verify.options import (
    PROBES,
    OptionsError,
    VerifyOptions,
    resolve,
    select_probes,
)

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
# command-line flag (argparse dest) -> config key
FLAG_KEYS = {
    "model": "model", "seq_len": "seq-len", "batch_size": "batch-size", "vocab_size": "vocab-size",
    "pad_token_id": "pad-token-id", "causal": "causal", "padding_side": "padding-side", "call": "call",
    "device": "device", "seed": "seed", "timeout": "timeout",
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
        return 0
    try:
        options = load_options(args)
        result = run_worker(options, verbose=args.verbose)
        findings = match_findings(result, options)
    except (OptionsError, VerifyError) as exc:
        return _fail(args.format, exc.kind, str(exc))
    from tlint.verify import output

    probes = result["probes"]
    if args.format == "json":
        output.render_json(result["model"], probes, findings, sys.stdout)
    else:
        output.render_text(result["model"], probes, findings, sys.stdout)
    return output.exit_code(probes, findings)


def _fail(fmt: str, kind: str, message: str) -> int:
    if fmt == "json":
        from tlint.verify.output import error_json

        sys.stdout.write(error_json(kind, message))
    else:
        sys.stderr.write(f"tlint: error: {message}\n")
    return 2


def load_options(args) -> VerifyOptions:
    from tlint.config import ConfigError, default_settings, find_config, load_settings

    try:
        if args.config is not None:
            if not args.config.is_file():
                raise OptionsError(f"{args.config}: config file not found")
            config_path = args.config
        else:
            config_path, _ = find_config(Path.cwd().resolve())
        settings = (load_settings(config_path, Path.cwd()) if config_path
                    else default_settings(Path.cwd().resolve()))
    except ConfigError as exc:
        raise OptionsError(str(exc)) from None
    flags = {key: getattr(args, dest) for dest, key in FLAG_KEYS.items()}
    if args.model_kwargs is not None:
        try:
            flags["model-kwargs"] = json.loads(args.model_kwargs)
        except json.JSONDecodeError as exc:
            raise OptionsError(f"--model-kwargs must be a JSON object, e.g. '{{\"d_model\": 64}}': {exc}",
                               kind="usage") from None
    root = config_path.parent.resolve() if config_path else Path.cwd().resolve()
    options = resolve(settings.verify, config_path, root, flags, settings.causal_names)
    options.probes = select_probes(args.probe)
    return options


def run_worker(options: VerifyOptions, verbose: bool = False) -> dict[str, Any]:
    """Run the probes in a child process (working directory: a temporary folder, bytecode
    writing off) and return its result; a timeout or a crash is a VerifyError."""
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="tlint-verify-") as tmp:
        request, result_path = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(options.to_json(), encoding="utf-8")
        command = [sys.executable, "-m", "tlint.verify.worker", str(request), str(result_path)]
        try:
            proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True,
                                  timeout=options.timeout, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise VerifyError("timeout", f"the model did not finish the probes within {options.timeout:g} s and "
                              "was stopped (a hang in forward, or a model too large for this machine): raise "
                              "`timeout`, or lower `seq-len`, `batch-size` or the sizes in `model-kwargs`") from None
        if verbose and proc.stderr:
            sys.stderr.write(proc.stderr)
        if not result_path.is_file():
            how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
                   else f"exited with code {proc.returncode}")
            tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
            raise VerifyError("crash", f"the process running the model {how} before reporting"
                              + (f"; its last words:\n{tail}" if tail else ""))
        result = json.loads(result_path.read_text(encoding="utf-8"))
    if "error" in result:
        raise VerifyError(result["error"]["kind"], result["error"]["message"])
    return result


def match_findings(result: dict[str, Any], options: VerifyOptions) -> list[dict[str, Any]]:
    from tlint.verify.matching import lint, model_classes, source_files, verdicts

    classes = model_classes(result)
    roots = [Path(options.root), *(Path(p) for p in options.python_path)]
    files = source_files(classes, roots)
    if not files:
        return []
    return verdicts(lint(files, classes), classes, result["probes"])
