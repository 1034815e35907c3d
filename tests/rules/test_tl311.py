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


# --- issue 20: the shapes accumulation takes, k through the bindings -------------------


@pytest.mark.parametrize(("scaling", "flagged"), [("", True), ("loss = loss / micro_steps", False),
                                                  ("loss = loss / 2", True)])
def test_inner_micro_batch_loop(tmp_path, scaling, flagged):
    marker = "  # expect: TL311" if flagged else ""
    check(tmp_path, {"train.py": f"""
        micro_steps = 4
        ddp = False
        if ddp:
            micro_steps *= 8


        def train(model, get_batch, optimizer):
            while True:
                for micro in range(micro_steps):
                    x, y = get_batch()
                    _, loss = model(x, y)
                    {scaling}
                    loss.backward(){marker}
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """})


def test_inner_loop_of_one_or_unknown_count(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, get_batch, optimizer, chunks):
            for it in range(100):
                for micro in range(1):
                    model(*get_batch()).backward()
                optimizer.step()
                optimizer.zero_grad()
            for it in range(100):
                for micro in range(len(chunks)):
                    model(chunks[micro]).backward()
                optimizer.step()
                optimizer.zero_grad()
    """})


def test_inner_loop_holding_the_step_is_not_accumulation(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, ppo_epochs=4):
            for batch in loader:
                for _ in range(ppo_epochs):
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("scaling", "flagged"), [("", True), ("loss = loss / self.every", False)])
def test_counter_compared_to_k_from_init(tmp_path, scaling, flagged):
    marker = "  # expect: TL311" if flagged else ""
    check(tmp_path, {"train.py": f"""
        class Trainer:
            def __init__(self, model, opt):
                self.model, self.opt = model, opt
                self.every = 4
                self.seen = 0

            def fit(self, loader):
                for batch in loader:
                    loss = self.model(**batch).loss
                    {scaling}
                    loss.backward(){marker}
                    self.seen += 1
                    if self.seen == self.every:
                        self.opt.step()
                        self.opt.zero_grad()
                        self.seen = 0
    """})


def test_comparison_with_a_name_the_loop_does_not_count(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, warm=4, epoch=0):
            for batch in loader:
                model(**batch).loss.backward()
                if epoch >= warm:
                    optimizer.step()
                    optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("sites", "flagged"), [
    ("train(m, l, o, accum=4)\ntrain(m, l, o, accum=2)", True),
    ("train(m, l, o, accum=4)\ntrain(m, l, o, accum=1)", False),  # one resolvable site gives 1
    ("train(m, l, o, accum=read())", False),  # none resolves
    ("train(m, l, o, accum=4)\ntrain(m, l, o, accum=read())", True),  # the resolvable one triggers
])
def test_k_through_call_sites(tmp_path, sites, flagged):
    marker = "  # expect: TL311" if flagged else ""
    calls = "\n".join("            " + line for line in sites.splitlines())
    check(tmp_path, {"train.py": f"""
        def train(model, loader, optimizer, accum):
            for i, batch in enumerate(loader):
                model(**batch).loss.backward(){marker}
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()


        def main(m, l, o):
{calls}
    """})


def test_k_from_a_config_class(tmp_path):
    check(tmp_path, {"train.py": """
        from dataclasses import dataclass


        @dataclass
        class Config:
            grad_accum: int = 8


        def train(model, loader, optimizer, cfg: Config):
            for i, batch in enumerate(loader):
                model(**batch).loss.backward()  # expect: TL311
                if (i + 1) % cfg.grad_accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """})


def test_enclosing_if_is_not_the_accumulation_condition(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, loader, optimizer, training=True, accum=4):
            for i, batch in enumerate(loader):
                if training:
                    model(**batch).loss.backward()  # expect: TL311
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
    """})


@pytest.mark.parametrize(("divisor", "flagged"), [
    ("n_gpus", True),  # another value
    ("accum_total", True),  # says "accum", its value differs from k
    ("world_accum", False),  # says "accum", value unknown
    ("steps_per_update", False),  # bound to the same value
])
def test_division_by_something_other_than_k(tmp_path, divisor, flagged):
    marker = "  # expect: TL311" if flagged else ""
    check(tmp_path, {"train.py": f"""
        n_gpus = 2
        accum_total = 16
        steps_per_update = 4


        def train(model, loader, optimizer, world_accum, accum=4):
            for i, batch in enumerate(loader):
                loss = model(**batch).loss / {divisor}
                loss.backward(){marker}
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """})


@pytest.mark.parametrize(
    ("chunks", "scaled", "flagged"),
    [
        ("batch.chunk(4)", "", True),
        ("torch.chunk(batch, n_micro)", "", True),
        ("batch.chunk(4)", " / 4", False),
        ("batch.chunk(1)", "", False),
        ("batch.split(8)", "", False),  # how many chunks is not known
        ("micro", "", True),  # a name bound to the chunks
    ],
)
def test_loop_over_chunks_of_the_batch(tmp_path, chunks, scaled, flagged):
    marker = "  # expect: TL311" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch


        def train(model, loader, optimizer, n_micro=4):
            for batch in loader:
                micro = batch.chunk(2)
                for part in {chunks}:
                    loss = model(part).loss{scaled}
                    loss.backward(){marker}
                optimizer.step()
                optimizer.zero_grad()
    """})
