"""tlint.watch through the frameworks, real training on CPU: the Hugging Face Trainer with
`HFCallback`, a Lightning module with `LightningCallback` and a CSV logger, and a plain
loop under accelerate."""

from __future__ import annotations

import csv
import math

import pytest

from tests.torchutil import import_torch

# slow: trains with the Hugging Face Trainer, Lightning and accelerate
pytestmark = pytest.mark.slow

torch = import_torch()

from tests.watchutil import TinyGPT, batches, gpt2, one_thread, rows, validate  # noqa: E402,F401
from tlint.watch import Watch  # noqa: E402

STEPS = 40


def hf_trainer(tmp_path, data, callback, max_steps=STEPS):
    from transformers import Trainer, TrainingArguments, default_data_collator

    args = TrainingArguments(str(tmp_path), max_steps=max_steps, per_device_train_batch_size=8, learning_rate=1e-3,
                             lr_scheduler_type="constant", warmup_steps=0, logging_steps=10, report_to=[],
                             use_cpu=True, save_strategy="no", disable_tqdm=True, max_grad_norm=1.0,
                             dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=gpt2(), args=args, train_dataset=data, data_collator=default_data_collator,
                      callbacks=[callback])
    trainer.train()
    return trainer


def test_hf_trainer_healthy_run_logs_its_scalars_through_the_trainer(tmp_path):
    import tlint.watch

    callback = tlint.watch.HFCallback(every=10, print_summary=False)
    trainer = hf_trainer(tmp_path, rows(STEPS * 8, lengths=(16, 12)), callback)
    watch = callback.watch
    assert watch.steps == STEPS and watch.problems == [], [str(f) for f in watch.problems]
    history = trainer.state.log_history
    ours = {h["step"]: h for h in history if "tlint/grad_norm" in h}
    theirs = {h["step"]: h for h in history if "loss" in h}
    assert sorted(ours) == [1, 10, 20, 30, 40] and sorted(theirs) == [10, 20, 30, 40]
    for step in (10, 20, 30, 40):  # measured when the backward ended: the Trainer's norm before clipping
        assert ours[step]["tlint/grad_norm"] == pytest.approx(theirs[step]["grad_norm"], rel=1e-4)
        assert ours[step]["tlint/lr"] == pytest.approx(1e-3)
        assert 0 <= ours[step]["tlint/pad_share"] <= 0.25  # (the Trainer shuffles: rows of 16 and 12 tokens)
    events = validate(tmp_path)
    samples = [e for e in events if e["event"] == "sample"]
    assert [e["step"] for e in samples] == [1, 10, 20, 30, 40]
    assert samples[-1]["loss"] < samples[0]["loss"] - 0.5
    assert set(samples[-1]["attention_pad_mass"]) == {"transformer.h.0.attn", "transformer.h.1.attn"}
    assert events[0]["framework"] == "hf"


def test_hf_trainer_padding_heavy_loader(tmp_path):
    import tlint.watch

    callback = tlint.watch.HFCallback(every=5, print_summary=False)
    hf_trainer(tmp_path, rows(10 * 8, lengths=(3, 5)), callback, max_steps=10)
    (pads,) = [f for f in callback.watch.findings if f.kind == "pad-share"]
    assert pads.step == 1 and pads.severity == "warning" and pads.data["pad_share"] > 0.6


class LitGPT:
    """A LightningModule (built lazily: lightning is imported by the tests that use it)."""

    @staticmethod
    def make(model, lr=1e-3):
        import lightning as L

        class Module(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.model = model

            def training_step(self, batch, batch_idx):
                if isinstance(self.model, TinyGPT):
                    loss = self.model(batch["input_ids"], batch["attention_mask"])
                else:
                    loss = self.model(**batch).loss
                self.log("train_loss", loss)
                return loss

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=lr)

        return Module()


def lightning_fit(tmp_path, module, data, callback, max_steps=STEPS):
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    loader = torch.utils.data.DataLoader(data, batch_size=None)
    trainer = L.Trainer(max_steps=max_steps, accelerator="cpu", devices=1, logger=CSVLogger(str(tmp_path)),
                        callbacks=[callback], enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, log_every_n_steps=10, gradient_clip_val=1.0)
    trainer.fit(module, loader)
    return trainer


def test_lightning_healthy_run_writes_its_scalars_to_the_csv_logger(tmp_path):
    import tlint.watch

    callback = tlint.watch.LightningCallback(every=10, print_summary=False)
    trainer = lightning_fit(tmp_path, LitGPT.make(gpt2()), batches(STEPS, lengths=(16, 12)), callback)
    watch = callback.watch
    assert watch.steps == STEPS and watch.problems == [], [str(f) for f in watch.problems]
    with open(f"{trainer.logger.log_dir}/metrics.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    ours = {int(r["step"]): r for r in table if r.get("tlint/grad_norm")}
    assert sorted(ours) == [0, 9, 19, 29, 39]  # Lightning's numbers: the first optimizer step is 0
    module_steps = {int(r["step"]) for r in table if r.get("train_loss")}
    assert set(ours) - {0} <= module_steps  # the module's own values of those steps share the rows' step
    assert all(math.isfinite(float(r["tlint/grad_norm"])) and float(r["tlint/lr"]) == pytest.approx(1e-3)
               for r in ours.values())
    assert any(r.get("train_loss") for r in table)  # the module's own logging goes on
    events = validate(trainer.logger.log_dir)
    assert events[0]["framework"] == "lightning"
    samples = [e for e in events if e["event"] == "sample"]
    assert samples[1]["pad_share"] == pytest.approx(4 / 32)
    assert set(samples[1]["grad_norm"]["layers"]) >= {"model.transformer.h.0", "model.transformer.h.1"}


def test_lightning_nan_stops_training_and_names_the_module(tmp_path):
    import tlint.watch

    data = batches(12)
    data[6]["attention_mask"][3] = 0  # step 7: a row with no visible key
    callback = tlint.watch.LightningCallback(every=5, on_nan="stop", print_summary=False)
    trainer = lightning_fit(tmp_path, LitGPT.make(TinyGPT()), data, callback, max_steps=12)
    (finding,) = [f for f in callback.watch.findings if f.kind == "nonfinite-loss"]
    assert finding.step == 7 and finding.data["module"] == "model.blocks.0.attn" and finding.rule == "TL210"
    assert trainer.global_step == 7 and callback.watch.stopped is finding


def test_accelerate_plain_loop(tmp_path):
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(rows(STEPS * 8, lengths=(16, 12)), batch_size=8)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    logged = []
    w = Watch(model, opt, every=10, output_dir=str(tmp_path), print_summary=False,
              log=lambda scalars, step: logged.append((step, scalars)))
    norms = {}
    for step, batch in enumerate(loader, 1):
        loss = model(**batch).loss
        accelerator.backward(loss)
        w.after_backward(loss)
        norms[step] = float(accelerator.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        opt.zero_grad()
        w.after_step()
    w.close()
    assert w.steps == STEPS and w.problems == []
    assert [s for s, _ in logged] == [1, 10, 20, 30, 40]
    for step, scalars in logged:
        assert scalars["tlint/grad_norm"] == pytest.approx(norms[step], rel=1e-4)
    validate(tmp_path)
