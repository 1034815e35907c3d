"""TL209's fix (unsafe): softmax over the key axis, `dim=-1`."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix

CODE = "TL209"

HEADS = """\
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def attention(x, n_heads, qkv):
        B, T, C = x.shape
        q, k, v = qkv(x).split(C, dim=-1)
        q = q.view(B, T, n_heads, C // n_heads).transpose(1, 2)
        k = k.view(B, T, n_heads, C // n_heads).transpose(1, 2)
        v = v.view(B, T, n_heads, C // n_heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        weights = {softmax}
        return weights @ v
"""


@pytest.mark.parametrize(("softmax", "fixed"), [
    ("F.softmax(scores, dim=2)", "F.softmax(scores, dim=-1)"),
    ("nn.functional.softmax(scores, dim = -2)", "nn.functional.softmax(scores, dim = -1)"),
    ("torch.softmax(scores, 1)", "torch.softmax(scores, -1)"),
    ("scores.softmax(-2)", "scores.softmax(-1)"),
    ("F.softmax(scores, dim=(2), dtype=torch.float32)", "F.softmax(scores, dim=(-1), dtype=torch.float32)"),
])
def test_wrong_axis_replaced(tmp_path, softmax, fixed):
    assert_fix(tmp_path, CODE, HEADS.format(softmax=softmax), HEADS.format(softmax=fixed), unsafe=True)


def test_wrong_axis_of_an_nn_softmax_sub_module_is_fixed_in_its_constructor(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.query = nn.Linear(d, d)
            self.key = nn.Linear(d, d)
            self.value = nn.Linear(d, d)
            self.softmax = nn.Softmax(dim=1)

        def forward(self, x):
            q, k, v = self.query(x), self.key(x), self.value(x)
            w = self.softmax(torch.bmm(q, k.transpose(1, 2)) / x.size(-1) ** 0.5)
            return torch.bmm(w, v)
""", """\
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.query = nn.Linear(d, d)
            self.key = nn.Linear(d, d)
            self.value = nn.Linear(d, d)
            self.softmax = nn.Softmax(dim=-1)

        def forward(self, x):
            q, k, v = self.query(x), self.key(x), self.value(x)
            w = self.softmax(torch.bmm(q, k.transpose(1, 2)) / x.size(-1) ** 0.5)
            return torch.bmm(w, v)
""", unsafe=True)


def test_implicit_dim_gets_dim_minus_one(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import math

    from torch import bmm, nn
    from torch.nn.functional import softmax


    def attend(q, k, v):
        scores = bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))
        return bmm(softmax(scores), v)


    def pool(x, score):
        w = softmax(
            score(x).squeeze(-1),
        )
        return (w.unsqueeze(-1) * x).sum(1)


    class Pooler(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.softmax = nn.Softmax()
""", """\
    import math

    from torch import bmm, nn
    from torch.nn.functional import softmax


    def attend(q, k, v):
        scores = bmm(q, k.transpose(1, 2)) / math.sqrt(q.size(-1))
        return bmm(softmax(scores, dim=-1), v)


    def pool(x, score):
        w = softmax(
            score(x).squeeze(-1),
            dim=-1,
        )
        return (w.unsqueeze(-1) * x).sum(1)


    class Pooler(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.softmax = nn.Softmax(dim=-1)
""", unsafe=True)
