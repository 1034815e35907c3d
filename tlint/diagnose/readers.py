"""Read a training run's logs into a `Run`: Hugging Face `trainer_state.json`, Lightning's
`metrics.csv` (and `hparams.yaml`), TensorBoard event files, tlint.watch JSON Lines, and the
recorded configuration (`config.json`, `args.json`, YAML, the Trainer's arguments that its
TensorBoard callback records as text).

Nothing is unpickled or `torch.load`ed: `training_args.bin` and checkpoints are pickles and
are never opened. Every file is read up to `MAX_BYTES` and within `FILE_SECONDS` (each
reader's loop checks its `Budget`; YAML through PyYAML's C loader where it is built, the
budget checked on each node); a folder is searched to a bounded depth and number of
entries. Every reader is linear in its file. Bad input raises `DiagnoseError` with a
one-line message.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_BYTES = 64 * 1024 * 1024  # one log file
MAX_POINTS = 2_000_000  # points per run, all series together
MAX_DEPTH = 4  # below the run folder
MAX_ENTRIES = 20_000  # directory entries looked at while searching a run folder
FILE_SECONDS = 20.0  # time to read one file: a log over it is an error, a configuration is skipped

SERIES = ("loss", "eval_loss", "grad_norm", "lr", "throughput", "pad_share")

# column or tag names (lower case, "/" and "-" read as "_") for each series
_NAMES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "train_loss", "train_loss_step", "train_loss_epoch_step", "training_loss"),
    "eval_loss": ("eval_loss", "val_loss", "validation_loss", "valid_loss", "val_loss_epoch",
                  "test_loss"),
    "grad_norm": ("grad_norm", "train_grad_norm", "grad_2.0_norm_total", "gradient_norm", "grad_norm_total",
                  "tlint_grad_norm"),
    "lr": ("lr", "learning_rate", "train_learning_rate", "train_lr", "lr_adamw", "lr_adam", "lr_sgd", "tlint_lr"),
    "throughput": ("throughput", "samples_per_second", "tokens_per_second",
                   "steps_per_second", "it_per_sec", "train_throughput"),
    "pad_share": ("pad_share", "train_pad_share", "padding_share", "tlint_pad_share"),
}
_LOOKUP = {name: series for series, names in _NAMES.items() for name in names}
_PER_RUN = ("train_runtime", "train_samples_per_second", "train_steps_per_second")  # HF end-of-run summary entries

CONFIG_FILES = ("config.json", "args.json", "training_args.json", "hparams.json", "hparams.yaml", "hparams.yml",
                "config.yaml", "config.yml", "args.yaml", "args.yml")
# keys that name the run, not how it trains (left out of a comparison of two configurations)
RUN_IDENTITY = frozenset({"output_dir", "logging_dir", "run_name", "trial_name", "best_model_checkpoint",
                          "hub_model_id", "push_to_hub_model_id", "resume_from_checkpoint", "_name_or_path",
                          "transformers_version", "log_dir", "save_dir", "version", "wandb_run_id"})


class DiagnoseError(Exception):
    """Bad input: a one-line message, exit 2."""


class OverBudget(DiagnoseError):
    """Reading one file took longer than `FILE_SECONDS`."""


class Budget:
    """The time left to read one file; `check()` raises OverBudget once it is spent
    (called in each reader's loop: a clock read is cheap next to a parsed entry)."""

    __slots__ = ("f", "deadline")

    def __init__(self, f: Path) -> None:
        self.f = f
        self.deadline = time.monotonic() + FILE_SECONDS

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise OverBudget(f"{self.f}: reading took over {FILE_SECONDS:g} s, the time budget for one file")


@dataclass
class Run:
    path: str
    sources: list[str] = field(default_factory=list)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # flattened: "section.key" -> scalar
    vocab_size: int | None = None
    watch_findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    locked: set[str] = field(default_factory=set)  # series an earlier, preferred log already gave
    points: int = 0  # logged points added, all series together

    def add(self, series: str, step: int, value: float) -> None:
        if series in self.locked:
            return
        if self.points >= MAX_POINTS:
            raise DiagnoseError(f"{self.path}: more than {MAX_POINTS:,} logged points")
        self.points += 1
        self.series.setdefault(series, []).append((step, value))

    def finish(self) -> None:
        """Sort each series by step; a step logged twice keeps its last value (a resumed run)."""
        for name, points in list(self.series.items()):
            by_step: dict[int, float] = {}
            for step, value in points:
                by_step[step] = value
            self.series[name] = sorted(by_step.items())
        self.series = {k: v for k, v in self.series.items() if v}
        if self.vocab_size is None:
            for key in ("vocab_size", "model.vocab_size", "model_config.vocab_size", "n_vocab", "ntokens"):
                vocab = self.config.get(key)
                if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 1:
                    self.vocab_size = vocab
                    break


def read_run(path: Path) -> Run:
    """A run folder (every log found below it) or one log file."""
    try:
        is_dir = path.is_dir()
        exists = path.exists()
    except OSError as exc:
        raise DiagnoseError(f"{path}: {exc.strerror or exc}") from None
    if not exists:
        raise DiagnoseError(f"{path}: no such file or folder")
    run = Run(str(path))
    files = _run_files(path) if is_dir else [path]
    logs = [f for f in files if _kind(f) is not None]
    if not logs:
        raise DiagnoseError(f"{path}: no training log found (trainer_state.json, metrics.csv, "
                            "events.out.tfevents.*, tlint-watch.jsonl)")
    kinds = {_kind(f) for f in logs}
    # The same scalars can reach several logs (the Trainer writes trainer_state.json and
    # TensorBoard; tlint.watch logs through the framework's loggers): a series comes from the
    # first log that has it, the framework's own first, so steps are never mixed across logs
    # that number them differently (Lightning's CSV from 0, the watch from 1). Later logs add
    # what the first lack: wall times (throughput), gradient norms, pad share, arguments.
    for f in sorted(logs, key=lambda f: ("hf", "csv", "watch", "tb").index(_kind(f) or "tb")):
        run.locked = {name for name, points in run.series.items() if points}
        kind = _kind(f)
        if kind == "hf":
            _read_trainer_state(f, run)
        elif kind == "csv":
            _read_metrics_csv(f, run)
        elif kind == "watch":
            _read_watch(f, run)
        elif kind == "tb":
            _read_tensorboard(f, run, scalars="hf" not in kinds)
        run.sources.append(str(f))
    for f in files:
        if f.name in CONFIG_FILES and f.suffix in (".json", ".yaml", ".yml"):
            _read_config(f, run)
    run.locked = set()
    run.finish()
    if not run.series.get("loss") and not run.series.get("eval_loss"):
        raise DiagnoseError(f"{path}: the logs hold no loss ({', '.join(run.sources)})")
    return run


def _kind(f: Path) -> str | None:
    name = f.name
    if name == "trainer_state.json":
        return "hf"
    if name.endswith(".csv") and ("metrics" in name or f.suffix == ".csv"):
        return "csv"
    if name.startswith("events.out.tfevents."):
        return "tb"
    if name.endswith(".jsonl"):
        return "watch"
    if name.endswith(".json") and name not in CONFIG_FILES and "state" in name:
        return "hf"
    return None


def _run_files(root: Path) -> list[Path]:
    """Files below `root` (bounded depth and count; links not followed; checkpoint folders'
    copies of trainer_state.json skipped when the top one exists)."""
    out: list[Path] = []
    seen = 0
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise DiagnoseError(f"{folder}: {exc.strerror or exc}") from None
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                raise DiagnoseError(f"{root}: more than {MAX_ENTRIES:,} entries; name the log file instead")
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir() and depth < MAX_DEPTH and not entry.name.startswith("."):
                    stack.append((Path(entry.path), depth + 1))
                elif entry.is_file():
                    out.append(Path(entry.path))
            except OSError:
                continue
    top_state = any(f.name == "trainer_state.json" and f.parent == root for f in out)
    csvs = [f for f in out if f.name == "metrics.csv"]
    kept = []
    for f in out:
        if f.name == "trainer_state.json" and f.parent != root and (top_state or "checkpoint-" in str(f.parent)):
            continue  # checkpoint-N/trainer_state.json: a prefix of the final one
        if f.suffix == ".csv" and (f.name != "metrics.csv" if csvs else not _log_like(f.name)):
            continue  # a data set's CSV is not a log
        if f.suffix == ".jsonl" and f.name != "tlint-watch.jsonl":
            continue
        kept.append(f)
    if not top_state:  # only checkpoints: the latest holds the longest history
        states = [f for f in out if f.name == "trainer_state.json" and "checkpoint-" in str(f.parent)]
        if states:
            kept.append(max(states, key=lambda f: _checkpoint_number(f.parent.name)))
    return kept


def _log_like(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ("metric", "log", "progress", "history", "loss"))


def _checkpoint_number(name: str) -> int:
    digits = name.rsplit("-", 1)[-1]
    return int(digits) if digits.isdigit() else -1


def _read_bytes(f: Path) -> bytes:
    from tlint.bounded import Refused, read_bytes

    try:
        return read_bytes(f, MAX_BYTES)  # a regular file only (no FIFO, no device), at most MAX_BYTES
    except Refused as exc:
        if exc.kind == "size":
            raise DiagnoseError(f"{f}: {exc.size:,} bytes, over the {MAX_BYTES:,}-byte limit for a log file") from None
        raise DiagnoseError(f"{f}: {exc.strerror}") from None
    except OSError as exc:
        raise DiagnoseError(f"{f}: {exc.strerror or exc}") from None


def _read_text(f: Path) -> str:
    data = _read_bytes(f)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DiagnoseError(f"{f}: not UTF-8 text (byte {exc.start})") from None


def _load_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DiagnoseError(f"{where}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None


def _number(value: Any) -> float | None:
    """A logged value as a float (NaN and Inf kept: they are findings); None when not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
            return float(text)
        try:
            return float(text) if text and len(text) < 64 else None
        except ValueError:
            return None
    return None


def _step(value: Any) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 0 or number > 1e12:
        return None
    return int(number)


def _series_of(name: str) -> str | None:
    key = name.strip().lower().replace("/", "_").replace("-", "_").replace(" ", "_")
    if key in _LOOKUP:
        return _LOOKUP[key]
    if key.startswith("lr_") and not key.startswith("lr_scheduler"):
        return "lr"  # Lightning's LearningRateMonitor: lr-<Optimizer>[/pg1]
    return None


def _columns(names: list[str]) -> dict[str, str]:
    """Column or key -> series, one column per series: the framework's own over tlint.watch's
    (`tlint/...`), then the shortest name (`lr-AdamW` over `lr-AdamW/pg1`, group 0)."""
    chosen: dict[str, str] = {}
    for name in names:
        series = _series_of(name)
        if series is None:
            continue
        rank = (name.startswith("tlint"), len(name), name)
        if series not in chosen or rank < (chosen[series].startswith("tlint"), len(chosen[series]), chosen[series]):
            chosen[series] = name
    return {name: series for series, name in chosen.items()}


def _read_trainer_state(f: Path, run: Run) -> None:
    state = _load_json(_read_text(f), str(f))
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise DiagnoseError(f"{f}: no log_history list (is this a Hugging Face trainer_state.json?)")
    entries = [e for e in history if isinstance(e, dict) and not any(k in e for k in _PER_RUN)]
    # (the end-of-run summary is left out: its train_loss is the run's mean, not a step's loss)
    columns = _columns(sorted({k for e in entries for k in e if isinstance(k, str)}))
    budget = Budget(f)
    for entry in entries:
        budget.check()
        step = _step(entry.get("step"))
        if step is None:
            continue
        for key, series in columns.items():
            number = _number(entry.get(key))
            if number is not None:
                run.add(series, step, number)
    for key in ("train_batch_size", "max_steps", "logging_steps", "eval_steps", "num_train_epochs",
                "gradient_accumulation_steps"):
        if isinstance(state, dict) and key in state and _scalar(state[key]):
            run.config.setdefault(key, state[key])


def _read_metrics_csv(f: Path, run: Run) -> None:
    text = _read_text(f)
    try:
        reader = csv.DictReader(io.StringIO(text))
        fields = reader.fieldnames or []
        step_field = next((c for c in fields if c.strip().lower() in ("step", "global_step", "iteration", "iter")),
                          None)
        if step_field is None:
            raise DiagnoseError(f"{f}: no step column (columns: {', '.join(fields[:12])})")
        columns = _columns([c for c in fields if c != step_field])
        budget = Budget(f)
        for row in reader:
            budget.check()
            step = _step(row.get(step_field))
            if step is None:
                continue
            for column, series in columns.items():
                cell = row.get(column)
                if cell is None or cell == "":
                    continue
                number = _number(cell)
                if number is not None:
                    run.add(series, step, number)
    except csv.Error as exc:
        raise DiagnoseError(f"{f}: not a valid CSV file ({exc})") from None


def _read_watch(f: Path, run: Run) -> None:
    """tlint.watch's events (tlint/watch/events.schema.json): window events give every step's
    loss and learning rate, sample events gradient norms and pad share, event times the
    throughput, finding events are carried over."""
    text = _read_text(f)
    last_time: tuple[int, float] | None = None
    budget = Budget(f)
    for number, line in enumerate(text.splitlines(), 1):
        budget.check()
        if not line.strip():
            continue
        event = _load_json(line, f"{f}, line {number}")
        if not isinstance(event, dict) or "event" not in event:
            raise DiagnoseError(f"{f}, line {number}: not a tlint.watch event (no \"event\" key)")
        kind = event.get("event")
        step = _step(event.get("step"))
        if kind == "start":
            for key in ("framework", "model", "parameters", "optimizer", "world_size", "every", "amp"):
                if key in event and _scalar(event[key]):
                    run.config[f"watch.{key}"] = event[key]
        elif kind == "window" and step is not None:
            first = _step(event.get("first_step"))
            losses = event["losses"] if isinstance(event.get("losses"), list) else []
            rates = event["lr"] if isinstance(event.get("lr"), list) else []
            nonfinite = {s for s in event.get("nonfinite_steps") or [] if isinstance(s, int)}
            if first is not None:
                for i, value in enumerate(losses):
                    loss = _number(value)
                    if first + i in nonfinite:
                        loss = math.nan  # written as null: the step was non-finite
                    if loss is not None:
                        run.add("loss", first + i, loss)
                for i, value in enumerate(rates):
                    lr = _number(value)
                    if lr is not None:
                        run.add("lr", first + i, lr)
            when = _number(event.get("time"))
            if when is not None and math.isfinite(when):
                if last_time is not None and step > last_time[0] and when > last_time[1]:
                    run.add("throughput", step, (step - last_time[0]) / (when - last_time[1]))
                last_time = (step, when)
        elif kind == "sample" and step is not None:
            grad = event.get("grad_norm")
            if isinstance(grad, dict):
                total = _number(grad.get("total"))
                run.add("grad_norm", step, math.nan if total is None and "total" in grad else (total or 0.0))
            pad = _number(event.get("pad_share"))
            if pad is not None:
                run.add("pad_share", step, pad)
        elif kind == "finding":
            run.watch_findings.append({k: event.get(k) for k in ("step", "kind", "severity", "rule", "message")})


def _read_tensorboard(f: Path, run: Run, scalars: bool) -> None:
    """Scalars (unless trainer_state.json already gave them), wall times (throughput) and the
    Trainer's recorded arguments and model config (text summaries)."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        raise DiagnoseError("reading TensorBoard event files needs the tensorboard package: "
                            "pip install 'tlint-pytorch[diagnose]'") from None
    size = _size(f)
    if size > MAX_BYTES:
        raise DiagnoseError(f"{f}: {size:,} bytes, over the {MAX_BYTES:,}-byte limit for a log file")
    first_time: dict[int, float] = {}
    events = 0
    budget = Budget(f)
    try:
        for event in EventFileLoader(str(f)).Load():
            budget.check()
            events += 1
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                tag = value.tag
                if tag.endswith("/text_summary") and value.tensor.string_val:
                    _read_text_config(tag.split("/")[0], value.tensor.string_val[0], run)
                    continue
                number: float | None = None
                if value.HasField("simple_value"):
                    number = float(value.simple_value)
                elif value.HasField("tensor") and value.tensor.float_val:
                    number = float(value.tensor.float_val[0])
                elif value.HasField("tensor") and value.tensor.double_val:
                    number = float(value.tensor.double_val[0])
                if number is None:
                    continue
                step = int(event.step)
                first_time.setdefault(step, float(event.wall_time))
                series = _series_of(tag)
                if scalars and series is not None:
                    run.add(series, step, number)
    except DiagnoseError:
        raise
    except Exception as exc:  # a corrupt or truncated record: the reader's own error types vary
        raise DiagnoseError(f"{f}: not a readable TensorBoard event file ({type(exc).__name__})") from None
    if not events and size:
        raise DiagnoseError(f"{f}: not a readable TensorBoard event file (no whole record)")
    if "throughput" not in run.series and len(first_time) > 2:
        steps = sorted(first_time)
        for before, step in zip(steps, steps[1:]):
            elapsed = first_time[step] - first_time[before]
            if elapsed > 0:
                run.add("throughput", step, (step - before) / elapsed)


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError as exc:
        raise DiagnoseError(f"{f}: {exc.strerror or exc}") from None


def _read_text_config(section: str, raw: bytes, run: Run) -> None:
    if len(raw) > 4 * 1024 * 1024:
        return
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return  # a free-text summary, not a configuration
    if isinstance(data, dict):
        prefix = "" if section == "args" else f"{section}."
        _flatten(data, prefix, run.config)
        if section == "model_config" and isinstance(data.get("vocab_size"), int):
            run.vocab_size = run.vocab_size or data["vocab_size"]


def _yaml_loader(yaml: Any, budget: Budget) -> Any:
    """PyYAML's safe loader (the C one where PyYAML was built with it), with `budget`
    checked on each node it resolves and each object it builds."""
    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class Loader(base):  # type: ignore[misc, valid-type]
        def resolve(self, kind, value, implicit):
            budget.check()
            return super().resolve(kind, value, implicit)

        def construct_object(self, node, deep=False):
            budget.check()
            return super().construct_object(node, deep)

    return Loader


def _read_config(f: Path, run: Run) -> None:
    text = _read_text(f)
    if f.suffix == ".json":
        data = _load_json(text, str(f))
    else:
        try:
            import yaml
        except ImportError:
            run.notes.append(f"{f.name} not read: reading YAML needs PyYAML (pip install pyyaml)")
            return
        try:
            data = yaml.load(text, Loader=_yaml_loader(yaml, Budget(f)))  # a safe loader
        except OverBudget:
            run.notes.append(f"{f.name} not read: reading it took over {FILE_SECONDS:g} s")
            return
        except (yaml.YAMLError, RecursionError) as exc:
            raise DiagnoseError(f"{f}: not valid YAML ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict):
        raise DiagnoseError(f"{f}: expected a mapping of settings")
    prefix = "model." if f.name == "config.json" else ""
    _flatten(data, prefix, run.config)
    vocab = data.get("vocab_size")
    if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 1:
        run.vocab_size = vocab


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _flatten(data: dict[Any, Any], prefix: str, out: dict[str, Any], depth: int = 0) -> None:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < 4:
            _flatten(value, f"{name}.", out, depth + 1)
        elif _scalar(value):
            out[name] = value
        elif isinstance(value, list) and len(value) <= 16 and all(_scalar(v) for v in value):
            out[name] = list(value)
        if len(out) > 5000:
            return
