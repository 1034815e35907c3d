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


KEYS = """
    import math

    import torch


    def attention(q, k, v, pad_mask, attention_mask, flag=False):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        {prepare}
        s = s.masked_fill({mask}, float("-inf")){marker}
        return torch.softmax(s, dim=-1) @ v
"""


@pytest.mark.parametrize(
    ("prepare", "mask", "flagged"),
    [
        # over the keys only, nothing else masks the scores: silent
        ("pass", "pad_mask[:, None, None, :]", False),
        ("pass", "pad_mask[:, None, None]", False),
        ("pass", "pad_mask[:, None, :]", False),
        ("pass", "pad_mask.unsqueeze(1).unsqueeze(2)", False),
        ("pass", "pad_mask.unsqueeze(-2)", False),
        ("pass", "(attention_mask == 0).view(attention_mask.size(0), 1, 1, -1)", False),
        ("m = ~attention_mask.bool()", "m[:, None, None, :]", False),
        ("m = attention_mask[:, None, None, :] == 0", "m", False),
        ("if flag:\n            s = s + torch.triu(torch.full_like(s, -math.inf), 1)", "pad_mask[:, None, :]", False),
        # over query rows too, or of unknown layout: reported
        ("pass", "pad_mask[:, None, :, None]", True),
        ("pass", "pad_mask.unsqueeze(-1)", True),
        ("pass", "pad_mask", True),
        ("pass", "pad_mask[:, :, None] | pad_mask[:, None, :]", True),
        ("pass", "(attention_mask == 0).view(attention_mask.size(0), 1, -1, 1)", True),
        ("m = pad_mask[:, None, :] | torch.ones(4, 4).triu(1).bool()", "m", True),
        # combined with a causal mask that applies by default: left padding empties rows
        ("s = s + torch.triu(torch.full_like(s, -math.inf), 1)", "pad_mask[:, None, :]", True),
        ("s = s.masked_fill(torch.ones_like(s).triu(1).bool(), -1e9)", "pad_mask[:, None, :]", True),
        ("if not flag:\n            s = s + torch.triu(torch.full_like(s, -math.inf), 1)", "pad_mask[:, None, :]", True),
    ],
)
def test_key_only_padding_masks(tmp_path, prepare, mask, flagged):
    marker = "  # expect: TL210" if flagged else ""
    files = {"m.py": KEYS.format(prepare=prepare, mask=mask, marker=marker)}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_key_only_mask_in_a_causal_model_is_reported(tmp_path):
    files = {"m.py": """
        import math

        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class CausalSelfAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x, pad_mask):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                s = q @ k.transpose(-2, -1) / math.sqrt(x.size(-1))
                s = s.masked_fill(pad_mask[:, None, :], float("-inf"))  # expect: TL210
                return F.softmax(s, dim=-1) @ v


        class Encoder(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = nn.Linear(d, d)

            def attend(self, q, k, v, key_padding_mask):
                s = q @ k.transpose(-2, -1)
                s = s.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
                return F.softmax(s, dim=-1) @ v
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
