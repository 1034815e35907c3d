"""TL303 clip-without-unscale: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL303"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("clip", "flagged"),
    [
        ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", True),
        ("model.clip_grad_norm_(1.0)", True),  # FSDP
        ("accelerator.clip_grad_norm_(model.parameters(), 1.0)", False),
        ("fabric.clip_gradients(model, optimizer, max_norm=1.0)", False),
    ],
)
def test_which_clips_are_judged(tmp_path, clip, flagged):
    marker = "  # expect: TL303" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch

        scaler = torch.amp.GradScaler()


        def train(model, loader, optimizer, accelerator, fabric):
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                {clip}{marker}
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """})


def test_no_scaler_no_finding(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_unscale_in_a_helper(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def prepare_clip(scaler, optimizer):
            scaler.unscale_(optimizer)


        def train(model, loader, optimizer, scaler):
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                prepare_clip(scaler, optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """})


def test_unscale_only_under_accumulation_boundary(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer, scaler, accum=4):
            for i, batch in enumerate(loader):
                scaler.scale(model(**batch).loss / accum).backward()
                if (i + 1) % accum == 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
    """})
