"""`HFCallback`: the watch inside a Hugging Face `Trainer`
(`Trainer(..., callbacks=[tlint.watch.HFCallback()])`). Imports transformers.

The Trainer clips before its `on_pre_optimizer_step` event, so on a sampled step the
gradients are measured when the backward ends (an autograd-engine callback queued behind
DDP's reduction), before clipping. The per-step loss is the training forward's `loss`
output (the mean over the micro-batches of a step), kept on the device. Scalars go through
the Trainer's own `log` (so `state.log_history`, TensorBoard, W&B ... as configured), from
rank 0; the event file goes to `args.output_dir`. A stop sets `should_training_stop`."""

from __future__ import annotations

import sys
from typing import Any

import torch

from tlint.watch.needs import WATCH_EXTRA, absent, needs

try:
    from transformers import Trainer, TrainerCallback
except ImportError as _exc:
    if not absent(_exc, "transformers"):
        raise
    raise needs("tlint.watch.HFCallback (a callback of the Hugging Face Trainer)", "transformers",
                f"{WATCH_EXTRA} transformers") from None

from tlint.watch.core import Watch


def _find_trainer() -> Trainer | None:
    """The Trainer whose callback handler is calling us (a caller's `self`)."""
    frame = sys._getframe(1)
    for _ in range(12):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner
    return None


class HFCallback(TrainerCallback):
    """The watch as a Trainer callback; `.watch` is the `Watch` once training has begun.
    Options are `Watch`'s (`every`, `pad_token_id`, `on_nan`, `on_problem`, `nan_check`,
    `attention`, `print_summary`); `output_dir` defaults to the Trainer's."""

    def __init__(self, every: int = 50, **options: Any) -> None:
        self.every, self.options = every, options
        self.watch: Watch | None = None
        self.trainer: Trainer | None = None
        self._micro: list[torch.Tensor] = []
        self._hook: Any = None

    def on_init_end(self, args, state, control, **kwargs):
        self.trainer = self.trainer or _find_trainer()

    def on_train_begin(self, args, state, control, model=None, optimizer=None, processing_class=None, **kwargs):
        self.trainer = self.trainer or _find_trainer()
        options = dict(self.options)
        if options.get("pad_token_id") is None:
            pad = getattr(processing_class, "pad_token_id", None)
            config = getattr(model, "config", None)
            options["pad_token_id"] = pad if pad is not None else getattr(config, "pad_token_id", None)
        options.setdefault("output_dir", args.output_dir)
        self.watch = Watch(model, optimizer, every=self.every, log=self._log, framework="hf", **options)
        self._hook = self.watch.inner.register_forward_hook(self._loss_of)

    def _loss_of(self, module, _args, output) -> None:
        if not module.training:
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if isinstance(loss, torch.Tensor):
            self._micro.append(loss.detach())

    def on_step_begin(self, args, state, control, **kwargs):
        self._micro = []
        if self.watch is not None and self.watch.sampled():
            self.watch.arm_backward_end()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        watch = self.watch
        if watch is None:
            return
        if self._micro:
            watch.observe_loss(torch.stack([m.float().mean() for m in self._micro]).mean()
                               if len(self._micro) > 1 else self._micro[0])
        self._micro = []
        if watch.sampled() and watch._grads is None:
            watch.measure_grads()  # no backward seen: after clipping, the best there is

    def on_step_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self.watch.finish_step()
            if self.watch.should_stop:
                control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self.watch.close()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _log(self, scalars: dict[str, float], step: int) -> None:
        trainer = self.trainer
        if trainer is None:
            return  # no Trainer found: the scalars are in the event file only
        control = trainer.control
        wanted = (control.should_log, control.should_evaluate, control.should_save)
        trainer.log(dict(scalars))  # (its on_log event clears should_log: the Trainer's own log of this step stays due)
        trainer.control.should_log, trainer.control.should_evaluate, trainer.control.should_save = wanted
