"""TL309 missing-zero-grad: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL309"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


LOOP = """
    import torch


    def train(model, loader, optimizer):
        for x, y in loader:
            {reset}
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()  {marker}
"""


@pytest.mark.parametrize(
    ("reset", "flagged"),
    [
        ("pass", True),
        ("optimizer.zero_grad()", False),
        ("model.zero_grad(set_to_none=True)", False),
        ("[p.grad.zero_() for p in model.parameters() if p.grad is not None]", False),
        ("torch._foreach_zero_([p.grad for p in model.parameters()])", False),
        ("if x.size(0) > 0: optimizer.zero_grad()", False),
    ],
)
def test_resets(tmp_path, reset, flagged):
    source = LOOP.replace("{reset}", reset).replace("{marker}", "# expect: TL309" if flagged else "")
    check(tmp_path, {"train.py": source})


def test_reset_in_a_helper_of_the_same_file(tmp_path):
    check(tmp_path, {"train.py": """
        def reset(optimizer):
            optimizer.zero_grad()


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                reset(optimizer)
    """})


def test_step_function_whose_loop_is_elsewhere_is_not_judged(tmp_path):
    check(tmp_path, {"step.py": """
        def train_step(model, batch, optimizer):
            model(**batch).loss.backward()
            optimizer.step()
    """})


def test_lightning_manual_optimisation_without_reset(tmp_path):
    check(tmp_path, {"lit.py": """
        import lightning.pytorch as pl


        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                self.manual_backward(self.model(**batch).loss)
                opt.step()  # expect: TL309
    """})


def test_lbfgs_closure_resets(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, x, y, steps=20):
            optimizer = torch.optim.LBFGS(model.parameters())
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    return loss
                optimizer.step(closure)
    """})


def test_test_files_are_not_judged(tmp_path):
    check(tmp_path, {"tests/test_optim.py": """
        def test_step(model, batches, optimizer):
            for batch in batches:
                model(batch).sum().backward()
                optimizer.step()
    """})


# --- issue 20: a reset counts for its own optimiser -------------------------------------


@pytest.mark.parametrize(("resets", "flagged"), [
    ("opt_d.zero_grad()", True),  # only the critic's optimiser is reset
    ("opt_d.zero_grad(); opt_g.zero_grad()", False),
    ("disc.zero_grad(); gen.zero_grad()", False),  # each module's reset covers its optimiser
    ("disc.zero_grad()", True),
    ("model_zero_grad(gen, disc)", False),  # a reset tlint cannot attribute: all count
])
def test_two_optimisers_need_two_resets(tmp_path, resets, flagged):
    marker = "  # expect: TL309" if flagged else ""
    check(tmp_path, {"gan.py": f"""
        import torch


        def model_zero_grad(*models):
            for m in models:
                for p in m.parameters():
                    p.grad = None


        def train(gen, disc, loader):
            opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
            opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
            for real in loader:
                {resets}
                (disc(gen(real)).mean() - disc(real).mean()).backward()
                opt_d.step()
                (-disc(gen(real)).mean()).backward()
                opt_g.step(){marker}
    """})
