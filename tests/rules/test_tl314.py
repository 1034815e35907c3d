"""TL314 loss-on-probabilities: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL314"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("expr", "flagged"),
    [
        ("F.cross_entropy(x.softmax(-1), y)", True),
        ("F.cross_entropy(torch.softmax(x, -1)[:, :10], y)", True),
        ("F.cross_entropy(input=F.softmax(x, -1).view(-1, 10), target=y)", True),
        ("nn.CrossEntropyLoss()(F.softmax(x, -1), y)", True),
        ("F.nll_loss(F.softmax(x, -1), y)", True),
        ("F.nll_loss(x.log_softmax(-1), y)", False),
        ("F.nll_loss(F.softmax(x, -1).log(), y)", False),
        ("F.cross_entropy(x, y.softmax(-1))", False),
        ("F.mse_loss(F.softmax(x, -1), y)", False),
    ],
)
def test_inputs(tmp_path, expr, flagged):
    marker = "  # expect: TL314" if flagged else ""
    check(tmp_path, {"loss.py": f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        def loss(x, y):
            return {expr}{marker}
    """})


def test_name_bound_several_times_is_not_followed(tmp_path):
    check(tmp_path, {"loss.py": """
        import torch.nn.functional as F


        def loss(x, y, normalise):
            out = x
            if normalise:
                out = F.softmax(x, -1)
            return F.cross_entropy(out, y)
    """})


def test_rebound_to_probabilities_before_a_criterion_attribute(tmp_path):
    check(tmp_path, {"model.py": """
        import torch
        from torch import nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(16, 4)
                self.criterion = nn.CrossEntropyLoss()

            def evaluate(self, x, y):
                scores = self.head(x)
                scores = scores.softmax(dim=-1)
                return self.criterion(scores, y)  # expect: TL314

            def train_loss(self, x, y):
                scores = self.head(x)
                return self.criterion(scores, y)
    """})


def test_attribute_assigned_different_losses_in_one_class_is_not_judged(tmp_path):
    check(tmp_path, {"model.py": """
        import torch
        from torch import nn


        class Head(nn.Module):
            def __init__(self, binary):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss()
                if binary:
                    self.criterion = nn.BCELoss()

            def forward(self, x, y):
                return self.criterion(torch.sigmoid(x), y)
    """})


@pytest.mark.parametrize(
    ("expr", "flagged"),
    [
        ("torch.exp(F.log_softmax(x, -1))", True),
        ("x.log_softmax(-1).exp()", True),
        ("torch.exp(x)", False),
        ("torch.sigmoid(x)", True),
        ("x.sigmoid().clamp(1e-6, 1.0)", True),
        ("torch.sigmoid(x) * mask", False),
    ],
)
def test_exp_of_log_softmax_and_sigmoid(tmp_path, expr, flagged):
    marker = "  # expect: TL314" if flagged else ""
    check(tmp_path, {"loss.py": f"""
        import torch
        import torch.nn.functional as F


        def loss(x, y, mask):
            return F.cross_entropy({expr}, y){marker}
    """})


def test_sigmoid_to_a_binary_loss_is_fine(tmp_path):
    check(tmp_path, {"loss.py": """
        import torch
        import torch.nn.functional as F


        def loss(x, y):
            return F.binary_cross_entropy(torch.sigmoid(x), y)
    """})


def test_loss_passed_by_position_to_a_parameter(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        import torch.nn.functional as F


        def step(model, batch, criterion):
            probs = torch.softmax(model(batch["x"]), dim=-1)
            return criterion(probs, batch["y"])  # expect: TL314


        def fit(model, loader):
            for batch in loader:
                step(model, batch, F.cross_entropy).backward()
    """})


def test_parameter_whose_callers_pass_other_losses_is_not_judged(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        import torch.nn.functional as F


        def step(model, batch, criterion):
            probs = torch.softmax(model(batch["x"]), dim=-1)
            return criterion(probs, batch["y"])


        def fit(model, loader):
            for batch in loader:
                step(model, batch, F.cross_entropy)
                step(model, batch, F.kl_div)
    """})


def test_helper_returns(tmp_path):
    check(tmp_path, {"train.py": """
        import torch.nn.functional as F


        def probabilities(model, x):
            return F.softmax(model(x), dim=-1)


        def maybe(model, x, soft):
            if soft:
                return F.softmax(model(x), dim=-1)
            return model(x)


        def losses(model, x, y):
            a = F.cross_entropy(probabilities(model, x), y)  # expect: TL314
            b = F.cross_entropy(maybe(model, x, False), y)
            return a + b
    """})
