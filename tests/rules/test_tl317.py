"""TL317 accumulation-window-broken: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL317"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("reset", "flagged"),
    [
        ("optimizer.zero_grad()", True),
        ("model.zero_grad()", True),
        ("if args.reset:\n                    optimizer.zero_grad()", True),  # a setting does not pace it
        ("if i % accum == 0:\n                    optimizer.zero_grad()", False),  # the start of each window
        ("if batch is None:\n                    optimizer.zero_grad()", False),  # a test of the batch
        ("other_optimizer.zero_grad()", False),
    ],
)
def test_resets_before_the_backward(tmp_path, reset, flagged):
    marker = "  # expect: TL317" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch

        def train(model, loader, args, accum=4):
            optimizer = torch.optim.AdamW(model.parameters())
            other_optimizer = torch.optim.AdamW(model.head.parameters())
            for i, batch in enumerate(loader):
                {reset}{marker}
                (model(**batch).loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
    """})


def test_reset_after_the_step_outside_its_test(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, accum=4):
            for i, batch in enumerate(loader):
                (model(**batch).loss / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                optimizer.zero_grad()  # expect: TL317
    """})


def test_reset_between_backward_and_step_is_tl310s(tmp_path):
    files = {"train.py": """
        def train(model, loader, optimizer, accum=4):
            for i, batch in enumerate(loader):
                (model(**batch).loss / accum).backward()
                optimizer.zero_grad()
                if (i + 1) % accum == 0:
                    optimizer.step()
    """}
    assert lint(tmp_path, files, [CODE]) == []
    assert [f[2] for f in lint(tmp_path, files, ["TL310"])] == ["TL310"]


def test_window_of_one_or_unknown(tmp_path):
    check(tmp_path, {"train.py": """
        import os

        def train(model, loader, optimizer, accum=1):
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                model(**batch).loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()

        def train_env(model, loader, optimizer):
            accum = int(os.environ["ACCUM"])
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                model(**batch).loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
    """})


def test_counter_window_and_clip_in_a_helper(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        class Trainer:
            def __init__(self, model, accum=8):
                self.model = model
                self.accum = accum
                self.count = 0
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

            def micro_step(self, batch):
                (self.model(**batch).loss / self.accum).backward()
                torch.nn.utils.clip_grad_value_(self.model.parameters(), 1.0)  # expect: TL317
                self.count += 1

            def fit(self, loader):
                for batch in loader:
                    self.micro_step(batch)
                    if self.count == self.accum:
                        self.opt.step()
                        self.opt.zero_grad()
                        self.count = 0
    """})


def test_two_optimisers_stepped_together(tmp_path):
    check(tmp_path, {"train.py": """
        def train(loader, net, opt_a, opt_b, accumulation_steps=2):
            for i, batch in enumerate(loader):
                opt_a.zero_grad()  # expect: TL317
                opt_b.zero_grad()  # expect: TL317
                net(batch).backward()
                if (i + 1) % accumulation_steps == 0:
                    opt_a.step()
                    opt_b.step()
    """})


def test_clip_in_an_inner_micro_loop_and_after_it(tmp_path):
    check(tmp_path, {"train.py": """
        import torch

        def train(model, get_batch, optimizer, iters, micro=4):
            for it in range(iters):
                for _ in range(micro):
                    (model(get_batch()) / micro).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TL317
                optimizer.step()
                optimizer.zero_grad()

        def train_ok(model, get_batch, optimizer, iters, micro=4):
            for it in range(iters):
                optimizer.zero_grad()
                for _ in range(micro):
                    (model(get_batch()) / micro).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
    """})
