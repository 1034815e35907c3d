"""`tlint.watch`: the verifier's probes inside a real training run.

- Hugging Face: `Trainer(..., callbacks=[tlint.watch.HFCallback()])`;
- Lightning: `Trainer(callbacks=[tlint.watch.LightningCallback()])`;
- plain loops and accelerate: `w = tlint.watch.Watch(model, optimizer, every=50)`, then
  `w.after_backward(loss)` before clipping and `w.after_step()` after `optimizer.step()`
  (or `with w.step(loss): ...`).

Needs torch. `tlint check` never imports this package, and importing it imports neither
transformers nor lightning: the callbacks are loaded on first use (module `__getattr__`).
README "Watching a training run" documents the measurements, the findings and the JSON
Lines schema (`events.schema.json`, next to this module)."""

from __future__ import annotations

from typing import Any

from tlint.watch.core import TrainingStopped, Watch
from tlint.watch.findings import Finding
from tlint.watch.output import SCHEMA_PATH

__all__ = ["Finding", "HFCallback", "LightningCallback", "SCHEMA_PATH", "TrainingStopped", "Watch"]


def __getattr__(name: str) -> Any:
    if name == "HFCallback":
        from tlint.watch.hf import HFCallback

        return HFCallback
    if name == "LightningCallback":
        from tlint.watch.lightning import LightningCallback

        return LightningCallback
    raise AttributeError(f"module 'tlint.watch' has no attribute {name!r}")
