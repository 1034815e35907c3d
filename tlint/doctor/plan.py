"""What `tlint doctor` will do, decided before anything runs: the config of PATH, the model
and loaders it names and the training command to trace (checked here: a wrong setting is
exit 2 before any step), the run folders to diagnose. No user code runs here, and nothing imports torch."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# files a run folder holds (tlint/diagnose/readers.py reads them)
RUN_LOGS = ("trainer_state.json", "metrics.csv", "tlint-watch.jsonl")
RUN_LOG_PREFIX = "events.out.tfevents."
FIND_DEPTH = 4          # folders below PATH searched for run logs
FIND_ENTRIES = 20_000   # entries looked at, at most
MAX_RUNS = 4            # run folders diagnosed when found (not named with --run)
_SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv", "env", ".tlint_cache"}


class DoctorError(Exception):
    """Exit 2 before any step runs: a missing path, a bad config or setting."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class TracePlan:
    """`[tool.tlint.doctor] train`: the command `tlint trace` runs, in the config's folder."""

    words: list[str]
    target: Any                                 # tlint.trace.command.Target
    steps: int
    cwd: Path


@dataclass
class Plan:
    path: Path                                  # as given (the check step lints it)
    folder: Path                                # resolved folder of PATH
    config_path: Path | None
    forced_config: Path | None                  # --config
    verify: Any = None                          # VerifyOptions when a model is configured (and it may run)
    data: Any = None                            # DataOptions when a loader is configured (and it may run)
    trace: TracePlan | None = None              # the training command to trace, when one is configured
    runs: list[Path] = field(default_factory=list)
    runs_given: bool = False
    skipped: dict[str, str] = field(default_factory=dict)   # step -> why it does not run
    notes: list[str] = field(default_factory=list)

    def user_code(self) -> list[str]:
        """What of the user's code the plan runs, for the notice printed before it does."""
        out = []
        if self.data is not None:
            loaders = [self.data.dataloader] + ([self.data.eval_dataloader] if self.data.eval_dataloader else [])
            out.append(f"the data loader{'s' if len(loaders) > 1 else ''} {', '.join(loaders)} (scan-data)")
        if self.verify is not None:
            out.append(f"the model factory {self.verify.model} (verify: probes and training probes"
                       + (f", optimiser {self.verify.optimizer}" if self.verify.optimizer else "") + ")")
            if self.verify.data_ab_model and "data-ab" in self.verify.probes:
                out.append(f"the model factory {self.verify.data_ab_model} (data-ab-model: the data A/B)")
        if self.trace is not None:
            steps = f"{self.trace.steps} optimizer steps" if self.trace.steps else "to its end"
            out.append(f"the training command `{' '.join(self.trace.words)}` (trace: {steps})")
        return out


def make_plan(args: argparse.Namespace, probes: list[str]) -> Plan:
    from tlint.config import ConfigError, find_config, load_settings

    path: Path = args.path
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as exc:
        raise DoctorError("usage", f"{path}: {exc.strerror or exc}") from None
    if not exists:
        raise DoctorError("usage", f"{path}: no such file or folder")
    folder = (path if is_dir else path.parent).resolve()
    forced = args.config
    if forced is not None and not forced.is_file():
        raise DoctorError("config", f"{forced}: config file not found")
    try:
        config_path = forced if forced is not None else find_config(folder)[0]
        settings = load_settings(config_path, folder) if config_path is not None else None
    except ConfigError as exc:
        raise DoctorError("config", str(exc)) from None
    plan = Plan(path=path, folder=folder, config_path=config_path, forced_config=forced)
    verify_table = settings.verify if settings is not None else {}
    where = f" in {config_path}" if config_path else " (no tlint config found)"
    has_model, has_loader = bool(verify_table.get("model")), bool(verify_table.get("dataloader"))
    doctor_table = settings.doctor if settings is not None else {}
    train = doctor_table.get("train")
    if args.no_run:
        for step, configured in (("scan-data", has_loader), ("verify", has_model)):
            plan.skipped[step] = ("--no-run: runs no user code" if configured
                                  else f"nothing to run: no `{'dataloader' if step == 'scan-data' else 'model'}`"
                                  f" in [tool.tlint.verify]{where}")
        plan.skipped["trace"] = ("--no-run: runs no user code" if train
                                 else f"nothing to run: no `train` in [tool.tlint.doctor]{where}")
    elif train:
        plan.trace = _trace_plan(train, doctor_table.get("train-steps"), config_path)
    else:
        plan.skipped["trace"] = f"no `train` in [tool.tlint.doctor]{where}"
    if not args.no_run:
        from tlint.verify.options import OptionsError

        options_args = _options_args(config_path, probes)
        try:
            if has_loader:
                from tlint.verify.data import load_data_options

                plan.data = load_data_options(options_args)
            else:
                plan.skipped["scan-data"] = f"no `dataloader` in [tool.tlint.verify]{where}"
            if has_model:
                from tlint.verify.command import load_options

                plan.verify = load_options(options_args)
            else:
                plan.skipped["verify"] = f"no `model` in [tool.tlint.verify]{where}"
        except OptionsError as exc:
            raise DoctorError(exc.kind, str(exc)) from None
    if args.run:
        plan.runs, plan.runs_given = list(args.run), True
    elif is_dir:
        plan.runs = [path / run.relative_to(folder) for run in find_runs(folder)]  # shown as PATH/...
        if len(plan.runs) > MAX_RUNS:
            plan.notes.append(f"{len(plan.runs)} run folders found; the first {MAX_RUNS} are diagnosed "
                              "(name others with --run)")
            plan.runs = plan.runs[:MAX_RUNS]
    if not plan.runs:
        plan.skipped["diagnose"] = (f"no run folder found under {path} (trainer_state.json, metrics.csv, "
                                    "TensorBoard events, tlint-watch.jsonl); name one with --run")
    return plan


def _trace_plan(words: list[str], steps: int | None, config_path: Path | None) -> TracePlan:
    """The configured training command, checked as `tlint trace` checks its own (a wrong
    one is exit 2 before any step)."""
    from tlint.trace.command import DEFAULT_STEPS, TraceUsageError, parse_target

    cwd = config_path.parent.resolve() if config_path is not None else Path.cwd()
    try:
        target = parse_target(list(words), cwd)
    except TraceUsageError as exc:
        raise DoctorError("config", f"{config_path}: [tool.tlint.doctor] train: {exc}") from None
    return TracePlan(list(words), target, DEFAULT_STEPS if steps is None else steps, cwd)


def _options_args(config_path: Path | None, probes: list[str]) -> argparse.Namespace:
    """The arguments `verify`'s and `scan-data`'s option loaders read: the config, no flags."""
    return argparse.Namespace(config=config_path, probe=probes, artifacts=None, model_kwargs=None)


def find_runs(root: Path) -> list[Path]:
    """Run folders below `root`: the folders holding a training log (a `checkpoint-N`
    folder counts as its parent's), outermost first, none inside another; hidden folders,
    environments and caches are not searched, nor links followed."""
    found: list[Path] = []
    seen = 0
    stack = [(root, 0)]
    while stack and seen < FIND_ENTRIES:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    if depth < FIND_DEPTH and not entry.name.startswith(".") and entry.name not in _SKIP_DIRS:
                        stack.append((Path(entry.path), depth + 1))
                elif entry.name in RUN_LOGS or entry.name.startswith(RUN_LOG_PREFIX):
                    run = folder.parent if folder.name.startswith("checkpoint-") and folder != root else folder
                    found.append(run)
            except OSError:
                continue
    runs: list[Path] = []
    for run in sorted(set(found), key=lambda p: (len(p.parts), str(p))):
        if not any(kept == run or kept in run.parents for kept in runs):
            runs.append(run)
    return sorted(runs)
