"""TL210 neg-inf-mask-fill: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL210"


@pytest.mark.parametrize("value", ['float("-inf")', "-math.inf", '-float("inf")', "-np.inf"])
def test_negative_infinity_spellings(tmp_path, value):
    files = {"m.py": f"""
        import math

        import numpy as np
        import torch


        def attention(q, k, v, pad_mask):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
            s = s.masked_fill(pad_mask, {value})  # expect: TL210
            return torch.softmax(s, dim=-1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_neutral_mask_argument_is_not_assumed_padding(tmp_path):
    files = {"m.py": """
        import math

        import torch


        def attention(q, k, v, mask):
            s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
            s = s.masked_fill(mask == 0, float("-inf"))
            return torch.softmax(s, dim=-1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_neg_inf_outside_attention_is_not_checked(tmp_path):
    files = {"m.py": """
        import torch


        def top_k_logits(logits, k, padding_mask):
            v, _ = torch.topk(logits, k)
            return logits.masked_fill(padding_mask, float("-inf"))
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_an_input_mask_in_a_softmax_spelled_with_logsumexp(tmp_path):
    """`exp(dots - logsumexp(dots, dim=-1))` is a softmax over the keys; `input_mask` (which
    positions hold tokens) is a padding mask; the dtype's finite minimum is clean."""
    src = """
        import torch


        def attend(q, k, v, input_mask):
            dots = torch.einsum("bie,bje->bij", q, k) * q.shape[-1] ** -0.5
            mask = input_mask[:, :, None] * input_mask[:, None, :]
            dots.masked_fill_(~mask, {fill})
            weights = torch.exp(dots - torch.logsumexp(dots, dim=-1, keepdim=True))
            return torch.einsum("bij,bje->bie", weights, v)
    """
    files = {"m.py": src.replace("{fill}", "float('-inf')")}
    assert lint(tmp_path / "a", files, [CODE]) == [("m.py", 7, CODE)]
    files = {"m.py": src.replace("{fill}", "torch.finfo(dots.dtype).min")}
    assert lint(tmp_path / "b", files, [CODE]) == []
