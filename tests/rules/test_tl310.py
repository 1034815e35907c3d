"""TL310 zero-grad-misplaced: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL310"


def with_body(body):
    return LOOP.replace("{body}", body.replace("\n", "\n" + " " * 12))


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


LOOP = """
    import torch


    def train(model, loader, optimizer, accum=4):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum
            loss.backward()
            {body}
"""


@pytest.mark.parametrize(
    "body",
    [
        "if (i + 1) % accum == 0:\n    optimizer.step()\n    optimizer.zero_grad()",
        "optimizer.step()\noptimizer.zero_grad()",
        "optimizer.step()\nfor p in model.parameters():\n    p.grad = None",
    ],
)
def test_reset_after_the_step(tmp_path, body):
    check(tmp_path, {"train.py": with_body(body)})


def test_reset_wiping_accumulated_gradients(tmp_path):
    source = with_body("for p in model.parameters():\n    p.grad = None  # expect: TL310\noptimizer.step()")
    check(tmp_path, {"train.py": source})


def test_reset_before_the_backward_of_the_next_micro_batch(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer):
            for batch in loader:
                optimizer.zero_grad()
                for micro in batch.split(4):
                    model(micro).loss.backward()
                optimizer.step()
    """})


def test_scaler_step(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        scaler = torch.amp.GradScaler()


        def train(model, loader, optimizer):
            for batch in loader:
                scaler.scale(model(**batch).loss).backward()
                optimizer.zero_grad()  # expect: TL310
                scaler.step(optimizer)
                scaler.update()
    """})


@pytest.mark.parametrize(
    ("reset", "flagged"),
    [
        ("model.zero_grad()", True),
        ("self_model.zero_grad()", False),  # not the accumulated module, not named a model
        ("optimizer.zero_grad()", False),
        ("if accelerator.sync_gradients:\n                    model.zero_grad()", False),
    ],
)
def test_module_reset_under_accelerate_accumulate(tmp_path, reset, flagged):
    marker = "  # expect: TL310" if flagged else ""
    check(tmp_path, {"train.py": f"""
        from accelerate import Accelerator


        def train(model, self_model, optimizer, loader):
            accelerator = Accelerator(gradient_accumulation_steps=4)
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for batch in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(model(**batch).loss)
                    optimizer.step()
                    {reset}{marker}
    """})
