"""`LightningCallback`: the watch inside a Lightning `Trainer`
(`Trainer(callbacks=[tlint.watch.LightningCallback()])`). Imports lightning (or the older
`pytorch_lightning`).

Lightning's events fit the watch: the loss comes with `on_before_backward`, the gradients
are measured in `on_before_optimizer_step` (unscaled, before clipping), a step ends with
`on_train_batch_end` once the optimizer stepped. The scalars go to the Trainer's loggers
(`logger.log_metrics`, so CSV, TensorBoard, W&B ... as configured; `LightningModule.log`
would drop values logged between `log_every_n_steps`), from rank 0, at Lightning's own step
numbers (the first optimizer step is logged as 0, as the module's `self.log` values are;
the event file keeps the watch's numbers, from 1), so `tlint/*` and the module's own
scalars line up in a logger's plots; the event file goes to
the Trainer's `log_dir`. A non-finite loss is traced by re-running the batch's
`training_step` without gradients (its `self.log` calls muted). A stop sets
`trainer.should_stop` on every rank."""

from __future__ import annotations

from typing import Any

import torch

from tlint.watch.needs import WATCH_EXTRA, absent, needs

try:
    from lightning.pytorch import Callback
except ImportError as _exc:
    if not absent(_exc, "lightning"):
        raise
    try:  # the older package name
        from pytorch_lightning import Callback  # type: ignore[assignment]
    except ImportError as _old:
        if not absent(_old, "pytorch_lightning"):
            raise
        raise needs("tlint.watch.LightningCallback (a callback of the Lightning Trainer)", "lightning",
                    f"{WATCH_EXTRA} lightning") from None

from tlint.watch.core import Watch


class LightningCallback(Callback):
    """The watch as a Lightning callback; `.watch` is the `Watch` once training has begun.
    Options are `Watch`'s (`every`, `pad_token_id`, `on_nan`, `on_problem`, `nan_check`,
    `attention`, `print_summary`, `output_dir`)."""

    def __init__(self, every: int = 50, **options: Any) -> None:
        self.every, self.options = every, options
        self.watch: Watch | None = None
        self.trainer: Any = None
        self._micro: list[torch.Tensor] = []

    def on_train_start(self, trainer, pl_module) -> None:
        self.trainer = trainer
        options = dict(self.options)
        options.setdefault("output_dir", trainer.log_dir or trainer.default_root_dir)
        plugin = getattr(trainer, "precision_plugin", None)
        options.setdefault("scaler", getattr(plugin, "scaler", None))
        self.watch = Watch(pl_module, trainer.optimizers[0], every=self.every, log=self._log,
                           framework="lightning", **options)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.watch is None:
            return
        self.watch.probe.batch = batch
        self.watch.rerun = lambda: _rerun(pl_module, batch, batch_idx)

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if isinstance(loss, torch.Tensor):
            self._micro.append(loss.detach())

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        watch = self.watch
        if watch is None:
            return
        if self._micro:
            watch.observe_loss(torch.stack([m.float().mean() for m in self._micro]).mean()
                               if len(self._micro) > 1 else self._micro[0])
        self._micro = []
        if watch.sampled() and watch._grads is None:
            watch.measure_grads()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        watch = self.watch
        if watch is None or trainer.global_step <= watch.steps:
            return  # accumulating: no optimizer step yet
        watch.finish_step()
        if watch.should_stop:
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        if self.watch is not None:
            self.watch.close()

    def _log(self, scalars: dict[str, float], step: int) -> None:
        # The watch counts optimizer steps from 1; Lightning's loggers number the first
        # optimizer step 0 (the `_batches_that_stepped` count before it), and the module's own
        # `self.log` values of that step go there.
        for logger in getattr(self.trainer, "loggers", None) or []:
            logger.log_metrics(dict(scalars), step=step - 1)


def _rerun(pl_module: Any, batch: Any, batch_idx: int) -> Any:
    muted = {name: getattr(pl_module, name) for name in ("log", "log_dict")}
    pl_module.log = pl_module.log_dict = lambda *args, **kwargs: None
    try:
        return pl_module.training_step(batch, batch_idx)
    finally:
        for name in muted:
            pl_module.__dict__.pop(name, None)
