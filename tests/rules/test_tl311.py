"""TL311 accumulation-loss-unscaled: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL311"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("scaling", "flagged"),
    [
        ("pass", True),
        ("loss /= accum", False),
        ("loss = loss.div(accum)", False),
        ("loss = loss / args.gradient_accumulation_steps", False),
        ("loss = loss / 2", True),
    ],
)
def test_scalings(tmp_path, scaling, flagged):
    marker = "  # expect: TL311" if flagged else ""
    check(tmp_path, {"train.py": f"""
        def train(model, loader, optimizer, args, accum=4):
            for i, batch in enumerate(loader):
                loss = model(**batch).loss
                {scaling}
                loss.backward(){marker}
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """})


def test_modulus_of_one(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, accum=1):
            for i, batch in enumerate(loader):
                model(**batch).loss.backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """})


def test_step_in_else_of_a_modulo_test(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, log_every=10):
            for i, batch in enumerate(loader):
                loss = model(**batch).loss
                loss.backward()
                if i % log_every == 0:
                    print(loss.item())
                else:
                    pass
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_deepspeed_engine(tmp_path):
    check(tmp_path, {"train.py": """
        import deepspeed


        def train(model, loader, config, accum=4):
            engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
            for i, batch in enumerate(loader):
                engine.backward(engine(**batch).loss)
                if (i + 1) % accum == 0:
                    engine.step()
    """})
