"""TL302 clip-misordered: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL302"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_step_at_the_top_of_the_loop_for_the_previous_backward(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer):
            for i, batch in enumerate(loader):
                if i > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()
                model(**batch).loss.backward()
    """})


def test_clip_before_backward_at_the_top_of_the_iteration(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(model, loader, optimizer):
            for batch in loader:
                torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)  # expect: TL302
                optimizer.zero_grad()
                model(**batch).loss.backward()
                optimizer.step()
    """})


def test_two_optimisers_each_clipped_before_its_step(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def train(gen, disc, loader, opt_g, opt_d):
            for real in loader:
                opt_d.zero_grad()
                disc(real).mean().backward()
                torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
                opt_d.step()
                opt_g.zero_grad()
                gen(real).mean().backward()
                torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
                opt_g.step()
    """})


def test_measuring_with_math_inf(tmp_path):
    check(tmp_path, {"train.py": """
        import math

        import torch


        def train(model, loader, optimizer):
            for batch in loader:
                model(**batch).loss.backward()
                optimizer.step()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
                optimizer.zero_grad()
    """})


def test_wrapper_step_in_a_file_without_backward(tmp_path):
    check(tmp_path, {"optim.py": """
        import torch


        class Wrapped:
            def __init__(self, optimizer, params):
                self.optimizer, self.params = optimizer, list(params)

            def step(self):
                self.optimizer.step()
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # expect: TL302

            def clip_then_step(self):
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)
                self.optimizer.step()

            def step_twice(self):
                self.optimizer.step()
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)
                self.optimizer.step()


        def loop_helper(optimizer, params, batches):
            for batch in batches:
                optimizer.step()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
    """})
