"""TL208 unscaled-attention-scores: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL208"


@pytest.mark.parametrize("scaling", [
    "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))",
    "att = q @ k.transpose(-2, -1) * self.scale",
    "att = torch.matmul(q, k.transpose(-1, -2)).div(self.temperature)",
    "att = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)",
    "att = torch.baddbmm(bias, q, k.transpose(1, 2), beta=0.0, alpha=self.inv_scale)",
    "att = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * self.logit_scale.exp()",
])
def test_scaling_spellings(tmp_path, scaling):
    files = {"m.py": f"""
        import math

        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def forward(self, q, k, v, bias=None):
                {scaling}
                return att.softmax(dim=-1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_softmax_without_a_query_key_product_is_not_attention(tmp_path):
    files = {"m.py": """
        import torch.nn.functional as F


        def classify(x, w):
            return F.softmax(x @ w, dim=-1)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_pre_transposed_key_is_followed(tmp_path):
    files = {"m.py": """
        import torch


        def attend(q, k, v):
            kt = k.permute(0, 1, 3, 2)
            scores = torch.matmul(q, kt)  # expect: TL208
            return torch.softmax(scores, dim=-1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_sdpa_is_not_reported(tmp_path):
    files = {"m.py": """
        import torch.nn.functional as F


        def attend(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_a_key_only_normalisation_is_not_scaling(tmp_path):
    """Normalising the keys alone leaves the query's norm, and the logits' scale, free;
    cosine attention normalises both."""
    files = {"m.py": """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class SharedQKAttention(nn.Module):
            def forward(self, qk, v):
                q = qk
                k = F.normalize(qk, 2, dim=-1)
                dots = torch.einsum("bie,bje->bij", q, k)  # expect: TL208
                return torch.einsum("bij,bje->bie", dots.softmax(dim=-1), v)


        class CosineAttention(nn.Module):
            def forward(self, q, k, v):
                q = F.normalize(q, dim=-1)
                k = F.normalize(k, dim=-1)
                dots = torch.einsum("bie,bje->bij", q, k)
                return torch.einsum("bij,bje->bie", dots.softmax(dim=-1), v)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
