"""TL209 softmax-wrong-dim: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL209"


def test_two_dimensional_scores_with_dim_1_are_the_key_axis(tmp_path):
    files = {"m.py": """
        import torch


        def single_sequence_attention(q, k, v):
            return torch.softmax(q @ k.T / q.size(-1) ** 0.5, dim=1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == []


@pytest.mark.parametrize(("dim", "flagged"), [("-1", False), ("3", False), ("2", True), ("1", True), ("-2", True)])
def test_einsum_rank_decides_the_last_axis(tmp_path, dim, flagged):
    mark = "  # expect: TL209" if flagged else ""
    files = {"m.py": f"""
        import torch


        def attention(q, k, v):
            s = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5
            return torch.einsum("bhij,bhjd->bhid", s.softmax(dim={dim}), v){mark}
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_softmax_over_non_attention_values_with_a_dim_is_not_checked(tmp_path):
    files = {"m.py": """
        import torch.nn.functional as F


        def mixture(weights, experts):
            gate = F.softmax(weights @ experts, dim=0)
            return gate
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_softmax_with_dim_as_a_variable_is_trusted(tmp_path):
    files = {"m.py": """
        import math

        import torch


        def attention(q, k, axis):
            return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=axis)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_a_local_softmax_function_is_not_torch(tmp_path):
    files = {"m.py": """
        def softmax(x):
            return x


        def f(q, k):
            return softmax(q @ k.transpose(-2, -1))
    """}
    assert lint(tmp_path, files, [CODE]) == []


# --- issue 9 transformers triage: dual-softmax matching is not attention ---------------------


def test_dual_softmax_matching_confidence_is_not_attention(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class CoarseMatching(nn.Module):
            def forward(self, feats0, feats1, temperature=0.1):
                similarity = feats0 @ feats1.transpose(-1, -2) / temperature
                return nn.functional.softmax(similarity, 1) * nn.functional.softmax(similarity, 2)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_one_wrong_softmax_times_something_else_is_still_reported(tmp_path):
    files = {"m.py": """
        import torch


        def attention(q, k, v, gate):
            scores = q @ k.transpose(-2, -1)
            return (torch.softmax(scores, dim=1) * gate) @ v  # expect: TL209


        def same_axis_twice(q, k, v):
            scores = q @ k.transpose(-2, -1)
            return (torch.softmax(scores, dim=1) * torch.softmax(scores, dim=1)) @ v  # expect: TL209
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
