"""TL305 scheduler-before-optimizer: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL305"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("call", "flagged"),
    [("scheduler.step()", True), ("scheduler.step(epoch)", False), ("scheduler.step(epoch=epoch)", False)],
)
def test_arguments_set_the_state(tmp_path, call, flagged):
    marker = "  # expect: TL305" if flagged else ""
    check(tmp_path, {"train.py": f"""
        def train(model, loader, optimizer, scheduler, epochs):
            for epoch in range(epochs):
                for batch in loader:
                    {call}{marker}
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
    """})


def test_scheduler_after_the_step_under_accumulation(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, scheduler, accum=8):
            for i, batch in enumerate(loader):
                (model(**batch).loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
    """})


def test_scheduler_at_the_end_of_an_epoch(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer, epochs):
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
            for epoch in range(epochs):
                for batch in loader:
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                scheduler.step()
    """})


def test_test_files_are_not_judged(tmp_path):
    check(tmp_path, {"tests/test_sched.py": """
        def test_schedule(model, batches, optimizer, scheduler):
            for batch in batches:
                scheduler.step()
                model(batch).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    """})
