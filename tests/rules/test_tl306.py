"""TL306 scheduler-stepped-per-epoch: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL306"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("build", "flagged"),
    [
        ("torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_iters)", True),
        ("torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)", False),
        ("torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs * len(loader))", True),
        ("torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)", False),
        ("torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=5)", False),
    ],
)
def test_sizes(tmp_path, build, flagged):
    marker = "  # expect: TL306" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch


        def train(model, loader, optimizer, epochs=10, max_iters=20000):
            scheduler = {build}
            for epoch in range(epochs):
                for batch in loader:
                    optimizer.zero_grad()
                    model(**batch).loss.backward()
                    optimizer.step()
                scheduler.step(){marker}
    """})


def test_plateau_stepped_with_a_metric(tmp_path):
    check(tmp_path, {"train.py": """
        from transformers import get_linear_schedule_with_warmup


        def train(model, loader, optimizer, evaluate, epochs=3):
            scheduler = get_linear_schedule_with_warmup(optimizer, 10, len(loader) * epochs)
            for epoch in range(epochs):
                for batch in loader:
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                scheduler.step(evaluate(model))
    """})


@pytest.mark.parametrize(
    ("rate", "flagged"),
    [
        ("lambda step: min(1.0, (step + 1) / warmup_steps)", True),
        ("lambda epoch: 0.95 ** epoch", False),
        ("lambda step: 0.95 ** step", False),  # only its own argument: no count to size it
        ("lambda e: 1.0 if e < len(loader) else 0.1", True),
        ("warmup_then_decay", True),
    ],
)
def test_lambda_schedules(tmp_path, rate, flagged):
    marker = "  # expect: TL306" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch


        def warmup_then_decay(current_step, warmup_steps=500):
            return min(1.0, current_step / warmup_steps)


        def train(model, loader, optimizer, epochs, warmup_steps=500):
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, {rate})
            for epoch in range(epochs):
                for batch in loader:
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                scheduler.step(){marker}
    """})
