"""TL213 mask-fill-not-masking: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL213"

SITE = """
    import math

    import torch

    {prelude}


    def attention(q, k, v, mask{params}):
        s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        s = {fill}  # {marker}
        return torch.softmax(s, dim=-1) @ v
"""


@pytest.mark.parametrize(("prelude", "params", "fill", "flagged"), [
    ("", "", "s.masked_fill(mask == 0, 0)", True),
    ("", "", "s.masked_fill(mask == 0, 1.0)", True),
    ("", "", "s.masked_fill(mask == 0, -1e-9)", True),
    ("", "", "s.masked_fill_(mask == 0, 0.0)", True),
    ("", "", "torch.masked_fill(s, mask == 0, 0.0)", True),
    ("", "", "s.masked_fill(mask == 0, value=0.0)", True),
    ("FILL = 0.0", "", "s.masked_fill(mask == 0, FILL)", True),                 # a module constant
    ("EPS = 1e-12", "", "s.masked_fill(mask == 0, -EPS)", True),                # negated constant
    ("", ", eps=1e-12", "s.masked_fill(mask == 0, -eps)", True),                # a parameter default
    ("", "", "torch.where(mask.bool(), s, 0.0)", True),
    ("", "", "torch.where(~mask.bool(), 0.0, s)", True),                        # the fill first
    ("", "", "s + (1.0 - mask) * 10000.0", True),                               # additive, sign lost
    ("", "", "s - (1.0 - mask) * -10000.0", True),                              # subtracted negative
    ("", "", "s.masked_fill(mask == 0, -1e9)", False),
    ("", "", "s.masked_fill(mask == 0, -10000)", False),
    ("", "", 's.masked_fill(mask == 0, float("-inf"))', False),
    ("", "", "s.masked_fill(mask == 0, torch.finfo(s.dtype).min)", False),
    ("", "", "s.masked_fill(mask == 0, -100.0)", False),                        # masks (below -10)
    ("", ", fill=None", "s.masked_fill(mask == 0, fill)", False),                # not a number
    ("", "", "s + (1.0 - mask) * -10000.0", False),
    ("", "", "s - (1.0 - mask) * 10000.0", False),
    ("", "", "torch.where(mask.bool(), s, -1e4)", False),
    ("", "", "s * mask", False),                                                # multiplicative: not read
])
def test_fill_values(tmp_path, prelude, params, fill, flagged):
    marker = "expect: TL213" if flagged else "ok"
    files = {"m.py": SITE.format(prelude=prelude, params=params, fill=fill, marker=marker)}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_fill_through_self_attribute_and_config(tmp_path):
    files = {"m.py": """
        import math
        from dataclasses import dataclass

        import torch
        from torch import nn


        @dataclass
        class Config:
            d_model: int = 64
            mask_value: float = 0.0


        class Attention(nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.fill = cfg.mask_value
                self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)

            def forward(self, x, attention_mask):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
                s = s.masked_fill(attention_mask[:, None, :] == 0, self.fill)  # expect: TL213
                return torch.matmul(s.softmax(-1), v)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_callers_value_decides_a_parameter(tmp_path):
    files = {"m.py": """
        import torch


        def attend(q, k, v, mask, fill):
            s = q @ k.transpose(-2, -1)
            s = s.masked_fill(mask, fill)
            return s.softmax(-1) @ v


        def model(q, k, v, mask):
            return attend(q, k, v, mask, fill=-1e9) + attend(q, k, v, mask, fill=-1e4)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_zero_fills_that_build_an_additive_mask_or_touch_the_weights_are_not_reported(tmp_path):
    files = {"m.py": """
        import torch


        def attention(q, k, v, lengths):
            t = q.size(-2)
            allowed = torch.ones(t, t).tril()
            bias = torch.zeros(t, t).masked_fill(allowed == 0, float("-inf"))
            bias = bias.masked_fill(allowed == 1, 0.0)
            scores = q @ k.transpose(-2, -1) + bias
            weights = scores.softmax(dim=-1)
            weights = weights.masked_fill(lengths[:, None, None, :] == 0, 0.0)
            v = v.masked_fill(lengths[:, None, :, None] == 0, 0.0)
            return weights @ v
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_a_zero_fill_outside_attention_is_not_checked(tmp_path):
    files = {"m.py": """
        import torch


        def pooled(logits, mask):
            logits = logits.masked_fill(mask == 0, 0.0)
            return torch.softmax(logits, dim=-1)
    """}
    assert lint(tmp_path, files, [CODE]) == []
