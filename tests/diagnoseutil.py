"""Real training runs for `tlint diagnose`'s tests: a tiny GPT-2 built from a config (no hub
download) trained for a few dozen steps by the Hugging Face Trainer (trainer_state.json,
TensorBoard events, config.json and the pickled training_args.bin, as `save_state` and
`save_model` write them), and a helper that runs `tlint diagnose` in-process."""

from __future__ import annotations

import json
from pathlib import Path

from tests.torchutil import import_torch

torch = import_torch()

V, S, D = 100, 16, 32  # vocabulary, sequence length, width
STEPS = 40


def gpt2(seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=V, n_positions=S, n_embd=D, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def progressions(n: int, seed: int) -> list[dict]:
    """Learnable sequences: arithmetic progressions mod V-1 (tokens 1..V-1)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        start = int(torch.randint(1, V, (1,), generator=gen))
        inc = int(torch.randint(1, 4, (1,), generator=gen))
        ids = torch.tensor([(start + k * inc) % (V - 1) + 1 for k in range(S)])
        out.append({"input_ids": ids, "attention_mask": torch.ones(S, dtype=torch.long), "labels": ids.clone()})
    return out


def pairs_shifted_twice(n: int, seed: int) -> list[dict]:
    """Question/answer pairs (a random token, then a fixed function of it), with the labels
    shifted by the data pipeline although the model shifts them again: each position is
    then trained to predict the token two ahead, which is random: nothing to learn."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        qs = torch.randint(1, V, (S // 2,), generator=gen)
        answers = (qs * 7 + 3) % (V - 1) + 1
        ids = torch.stack([qs, answers], dim=1).reshape(-1)
        labels = torch.cat([ids[1:], torch.tensor([-100])])  # the bug: shifted here, and again in the model
        out.append({"input_ids": ids, "attention_mask": torch.ones(S, dtype=torch.long), "labels": labels})
    return out


def hf_run(out: Path, *, lr: float = 3e-3, warmup: int = 8, data=None, steps: int = STEPS) -> Path:
    """Train with the real Trainer (TensorBoard logging, evaluation every 10 steps) and save
    what a user's run folder holds."""
    from transformers import Trainer, TrainingArguments, default_data_collator

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train = data(steps * 8, 0) if data else progressions(steps * 8, 0)
        evals = data(32, 1) if data else progressions(32, 1)
        args = TrainingArguments(str(out), max_steps=steps, per_device_train_batch_size=8, learning_rate=lr,
                                 lr_scheduler_type="linear", warmup_steps=warmup, logging_steps=1,
                                 eval_strategy="steps", eval_steps=10, report_to=["tensorboard"], use_cpu=True,
                                 save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=0)
        trainer = Trainer(model=gpt2(), args=args, train_dataset=train, eval_dataset=evals,
                          data_collator=default_data_collator)
        trainer.train()
        trainer.save_state()  # trainer_state.json
        trainer.save_model()  # config.json, model.safetensors, training_args.bin (a pickle: never read)
    finally:
        torch.set_num_threads(threads)
    return out


def losses(run: Path) -> dict[int, float]:
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    return {h["step"]: h["loss"] for h in history if "loss" in h}


def diagnose_json(capsys, *args: str) -> tuple[int, dict]:
    from tlint.cli import main

    code = main(["diagnose", *map(str, args), "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def kinds(document: dict, run: int = 0) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in document["runs"][run]["findings"]:
        out.setdefault(f["kind"], []).append(f)
    return out


def lightning_run(out: Path, *, lr: float = 3e-3, warmup: int = 8, steps: int = STEPS, watch: bool = False,
                  data=None) -> Path:
    """Train with Lightning (CSVLogger writing metrics.csv and hparams.yaml, the learning rate
    through LearningRateMonitor, a linear warmup then linear decay); with `watch`,
    tlint.watch's LightningCallback writes tlint-watch.jsonl next to them. `data(n, seed)`
    makes the rows (default: learnable progressions). The module's hyperparameters (so
    hparams.yaml) include the vocabulary size. The run folder (the logger's version folder)
    is returned."""
    import lightning as L
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger

    class Module(L.LightningModule):
        def __init__(self, lr: float, warmup: int, steps: int, vocab_size: int = V):
            super().__init__()
            self.save_hyperparameters()
            self.model = gpt2()

        def training_step(self, batch, batch_idx):
            loss = self.model(**batch).loss
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self.model(**batch).loss)

        def configure_optimizers(self):
            optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)

            def factor(step: int) -> float:
                if step < self.hparams.warmup:
                    return (step + 1) / self.hparams.warmup
                return max(0.0, (self.hparams.steps - step) / max(1, self.hparams.steps - self.hparams.warmup))

            schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def loader(data):
        stacked = [{k: torch.stack([r[k] for r in data[i:i + 8]]) for k in data[0]} for i in range(0, len(data), 8)]
        return torch.utils.data.DataLoader(stacked, batch_size=None)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        callbacks: list = [LearningRateMonitor(logging_interval="step")]
        if watch:
            import tlint.watch

            callbacks.append(tlint.watch.LightningCallback(every=5, print_summary=False))
        trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=CSVLogger(str(out), name="lit"),
                            callbacks=callbacks, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, log_every_n_steps=1, val_check_interval=10,
                            check_val_every_n_epoch=None, num_sanity_val_steps=0, deterministic=True)
        L.seed_everything(0, verbose=False)
        make = data or progressions
        trainer.fit(Module(lr, warmup, steps), loader(make(steps * 8, 0)), loader(make(32, 1)))
        return Path(trainer.logger.log_dir)
    finally:
        torch.set_num_threads(threads)
