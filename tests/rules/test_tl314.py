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
