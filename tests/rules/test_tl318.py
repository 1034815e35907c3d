"""TL318 schedule-sized-in-epochs: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL318"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("size", "flagged"),
    [
        ("T_max=args.epochs", True),
        ("T_max=args.num_train_epochs - args.warmup_epochs", True),
        ("T_max=cfg['max_epochs']", True),
        ("T_max=n_epochs", True),
        ("T_max=math.ceil(n_epochs / 2)", True),
        ("T_max=args.epochs * len(loader)", False),
        ("T_max=args.epochs * args.steps_per_epoch", False),
        ("T_max=args.max_steps", False),
        ("T_max=100", False),
        ("T_max=horizon", False),  # a count of unknown unit
        ("T_max=args.epochs * horizon", False),
    ],
)
def test_sizes(tmp_path, size, flagged):
    marker = "  # expect: TL318" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import math

        import torch

        def train(model, loader, args, cfg, horizon, n_epochs=10):
            optimizer = torch.optim.AdamW(model.parameters())
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, {size})
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                scheduler.step(){marker}
                optimizer.zero_grad()
    """})


def test_the_stepped_name_must_be_the_epoch_sized_schedule(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        def make(optimizer, epochs):
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
            return scheduler

        def train(model, loader, optimizer, epochs=3):
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, epochs=epochs,
                                                            steps_per_epoch=len(loader))
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
    """})


def test_step_under_its_own_test_in_the_batch_loop(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        def train(model, loader, optimizer, epochs=3):
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=epochs)
            for i, batch in enumerate(loader):
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if (i + 1) % 1000 == 0:
                    scheduler.step()
    """})


def test_lightning_epoch_interval_is_fine(tmp_path):
    check(tmp_path, {"model.py": """
        import lightning as L
        import torch

        class LitModel(L.LightningModule):
            def configure_optimizers(self):
                opt = torch.optim.AdamW(self.parameters(), lr=1e-3)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.hparams.max_epochs)
                return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

            def training_step(self, batch, batch_idx):
                return self(batch).sum()
    """})
