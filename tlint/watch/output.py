"""Where the watch's results go: the JSON Lines event file (schema `events.schema.json`,
next to this module; one JSON object per line, written by rank 0 only) and the end-of-run
summary (plain text from `summary_text`, printed with rich by `print_summary`).

Events, each with `event`, `step` (the optimizer step, 1-based; null where none applies),
`time` (Unix seconds) and `schema` (the schema version, 1):
- `start`: the run (framework, every, world size, model class, parameter count, groups);
- `sample`: the measurements of one sampled step (loss, gradient norms total and per layer
  before clipping, learning rates applied, update-to-weight ratios, AMP scale and skipped
  steps, pad share, per-sub-layer activation ranges, attention mass on pad keys);
- `window`: the per-step losses read from the device since the previous window;
- `finding`: one finding (`kind`, `severity`, `rule`, `message`, `next`, `rank`, `data`);
- `end`: the totals (steps, findings by severity, whether the watch stopped the run).
Non-finite numbers are written as null (JSON has no NaN): a window lists its non-finite
steps in `nonfinite_steps`."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, TextIO

from tlint.bounded import Refused, open_output

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("events.schema.json")
FILE_NAME = "tlint-watch.jsonl"


def finite(value: Any) -> Any:
    """JSON-safe: non-finite floats become null, containers are walked."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


class JsonLines:
    """Appends one event per line; flushed at each window read and on close."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        self.path = Path(folder) / FILE_NAME
        # not through a link, never a FIFO or a device: a cloned repository may ship one
        # under this name in the default output folder (`tlint.bounded.open_output`)
        try:
            self.file: TextIO | None = open_output(self.path)  # type: ignore[assignment]  # (text mode)
        except Refused as exc:
            raise Refused(f"tlint.watch cannot write its events to {self.path}: {exc.strerror} (remove it, or "
                          "pass another output_dir)", exc.kind, mode=exc.mode) from None

    def write(self, event: str, step: int | None, **fields: Any) -> None:
        if self.file is None:
            return
        record = {"event": event, "step": step, "time": round(time.time(), 3), "schema": SCHEMA_VERSION,
                  **finite(fields)}
        self.file.write(json.dumps(record, allow_nan=False) + "\n")

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def summary_text(steps: int, findings: list[Any], last: dict[str, Any] | None, stopped: str | None,
                 path: Path | None) -> str:
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    lines = [f"tlint watch: {steps} steps, {counts['error']} errors, {counts['warning']} warnings, "
             f"{counts['info']} notes"]
    if stopped:
        lines.append(f"  training stopped: {stopped}")
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(findings, key=lambda f: (order[f.severity], f.step or 0))[:12]:
        seen = f" (×{f.count}, last at step {f.last_step})" if f.count > 1 else ""
        lines.append(f"  {f}{seen}")
        if f.severity != "info" and f.next:
            lines.append(f"      next: {f.next}")
    if last:
        grad = last.get("grad_norm") or {}
        parts = [f"step {last.get('step')}", f"loss {_num(last.get('loss'))}",
                 f"grad norm {_num(grad.get('total'))}", f"lr {_num((last.get('lr') or [None])[0])}"]
        if last.get("pad_share") is not None:
            parts.append(f"pad share {last['pad_share']:.0%}")
        lines.append("  last sample: " + ", ".join(parts))
    if path is not None:
        lines.append(f"  events: {path}")
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def print_summary(text: str) -> None:
    from rich.console import Console

    style = "bold red" if " 0 errors" not in text.splitlines()[0] else (
        "yellow" if " 0 warnings" not in text.splitlines()[0] else "green")
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    first, *rest = text.splitlines()
    console.print(first, style=style)
    for line in rest:
        console.print(line, markup=False)
