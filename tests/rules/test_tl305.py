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


def test_scheduler_at_the_top_of_the_update_loop(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, batches, optimizer, scheduler, updates, epochs):
            for update in range(updates):
                scheduler.step()  # expect: TL305
                rollout = next(batches)
                for epoch in range(epochs):
                    for micro in rollout:
                        model(**micro).loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
    """})


def test_scheduler_after_the_inner_loop_is_fine(tmp_path):
    check(tmp_path, {"train.py": """
        def train(model, batches, optimizer, scheduler, updates):
            for update in range(updates):
                for micro in next(batches):
                    model(**micro).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                scheduler.step()
    """})


def test_epoch_loop_in_the_caller(tmp_path):
    check(tmp_path, {"train.py": """
        def train_epoch(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()


        def fit(model, loader, optimizer, scheduler, epochs):
            for epoch in range(epochs):
                scheduler.step()  # expect: TL305
                train_epoch(model, loader, optimizer)
    """})


def test_wrapper_method_in_a_file_without_backward(tmp_path):
    check(tmp_path, {"optim.py": """
        class OptimizerAndSchedule:
            def __init__(self, optimizer, scheduler):
                self.optimizer = optimizer
                self.scheduler = scheduler

            def step(self):
                self.scheduler.step()  # expect: TL305
                self.optimizer.step()


        class Ordered:
            def __init__(self, optimizer, lr_scheduler):
                self.optimizer = optimizer
                self.lr_scheduler = lr_scheduler

            def step(self):
                self.optimizer.step()
                self.lr_scheduler.step()
    """})


def test_wrapper_around_a_scheduler_class_of_the_file_is_not_judged(tmp_path):
    check(tmp_path, {"optim.py": """
        class Warmup:
            def __init__(self, optimizer, steps):
                self.optimizer, self.steps, self.n = optimizer, steps, 0

            def step(self):
                self.n += 1
                for group in self.optimizer.param_groups:
                    group["lr"] = min(1.0, self.n / self.steps)


        class Stepper:
            def __init__(self, optimizer):
                self.optimizer = optimizer
                self.scheduler = Warmup(optimizer, 100)

            def step(self):
                self.scheduler.step()
                self.optimizer.step()
    """})


@pytest.mark.parametrize(
    ("body", "flagged"),
    [
        ("return get_linear_schedule_with_warmup(optimizer, 100, total)", True),
        ("sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, s / 100))\n    return sched", True),
        ("return Ramp(optimizer)", False),  # a hand-written scheduler of this file
    ],
)
def test_local_helper_returning_a_scheduler(tmp_path, body, flagged):
    marker = "  # expect: TL305" if flagged else ""
    check(tmp_path, {"train.py": f"""
import torch
from transformers import get_linear_schedule_with_warmup


class Ramp:
    def __init__(self, optimizer):
        self.optimizer, self.n = optimizer, 0

    def step(self):
        self.n += 1
        for group in self.optimizer.param_groups:
            group["lr"] = 1e-4 * min(1.0, self.n / 100)


def build_scheduler(optimizer, total=1000):
    {body}


def train(model, loader, optimizer):
    scheduler = build_scheduler(optimizer)
    for batch in loader:
        scheduler.step(){marker}
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""})


# A trainer's epoch method (its epoch loop in another file: `for epoch ...: trainer.on_train()`),
# the scheduler held as an attribute set from an `__init__` parameter annotated with a
# scheduler base class of another module (TakuyaShintate/tsts@d68f7c5 tsts/trainers/trainer.py:95;
# sanghyun-son/EDSR-PyTorch src/trainer.py `Trainer.train`, the EDSR trainer's idiom).
_TRAINER = """
    from mylib.schedulers import Scheduler


    class Trainer:
        def __init__(self, model, loader, optimizer, scheduler: Scheduler):
            self.model = model
            self.loader = loader
            self.optimizer = optimizer
            self.scheduler = scheduler

        def on_train(self):
            {first}
            self.model.train()
            for x, y in self.loader:
                self.optimizer.zero_grad()
                self.model(x, y).backward()
                self.optimizer.step()
            {last}
"""
_SCHEDULERS = """
    import torch


    class Scheduler(torch.optim.lr_scheduler.LambdaLR):
        pass
"""
_RUN = """
    from mylib.trainer import Trainer


    def run(trainer: Trainer, epochs):
        for _ in range(epochs):
            trainer.on_train()
"""


@pytest.mark.parametrize(
    ("first", "last", "flagged"),
    [("self.scheduler.step()", "", True), ("", "self.scheduler.step()", False),
     ("if self.epoch > 0:\n                self.scheduler.step()", "", False)],
)
def test_epoch_method_of_a_trainer(tmp_path, first, last, flagged):
    if flagged:
        first += "  # expect: TL305"
    check(tmp_path, {"mylib/__init__.py": "", "mylib/schedulers.py": _SCHEDULERS, "run.py": _RUN,
                     "mylib/trainer.py": _TRAINER.replace("{first}", first).replace("{last}", last)})


def test_epoch_function_fast_forwarding_a_resumed_schedule(tmp_path):
    """A loop that replays the schedule on resume is not the epoch's first step."""
    check(tmp_path, {"train.py": """
        def train_epoch(model, loader, optimizer, scheduler, skip):
            for _ in range(skip):
                scheduler.step()
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    """})
