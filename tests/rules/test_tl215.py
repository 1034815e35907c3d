"""TL215 partial-pre-norm: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL215"

BLOCK = """
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

        def forward(self, x, memory=None):
            h = self.norm1(x)
            {line}  # {marker}
            return x + y
"""


@pytest.mark.parametrize(("line", "flagged"), [
    ("y = self.attn(h, x, x)[0]", True),
    ("y = self.attn(x, h, h)[0]", True),                                         # the reverse
    ("y = self.attn(self.norm1(x), x, x)[0]", True),
    ("y = self.attn(query=h, key=x, value=x)[0]", True),
    ("y = self.attn(h, h, x)[0]", True),                                         # the values only
    ("y = self.attn(h, h, h)[0]", False),
    ("y = self.attn(x, x, x)[0]", False),                                        # post-norm elsewhere
    ("y = self.attn(h, memory, memory)[0]", False),                              # cross-attention
    ("y = self.attn(h, self.norm1(memory), self.norm1(memory))[0]", False),      # memory normalised too
    ("y = self.attn(h, self.norm1(memory), memory)[0]", True),                    # its keys only
])
def test_multihead_attention_inputs(tmp_path, line, flagged):
    files = {"m.py": BLOCK.format(line=line, marker="expect: TL215" if flagged else "ok")}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_the_stream_rebound_between_norm_and_attention_is_another_stream(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, x):
                h = self.norm(x)
                x = x * 2
                return self.attn(h, x, x)[0]
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_inline_projections(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Partial(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ln = nn.LayerNorm(d)
                self.q_proj = nn.Linear(d, d)
                self.k_proj = nn.Linear(d, d)
                self.v_proj = nn.Linear(d, d)

            def forward(self, x):
                h = self.ln(x)
                q, k = self.q_proj(h), self.k_proj(h)
                v = self.v_proj(x)  # expect: TL215
                return x + F.scaled_dot_product_attention(q, k, v)


        class Full(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ln = nn.LayerNorm(d)
                self.q_proj = nn.Linear(d, d)
                self.k_proj = nn.Linear(d, d)
                self.v_proj = nn.Linear(d, d)

            def forward(self, x, context):
                h = self.ln(x)
                q, k, v = self.q_proj(h), self.k_proj(context), self.v_proj(context)
                return x + F.scaled_dot_product_attention(q, k, v)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_an_attention_class_with_its_own_norm_is_a_block(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class PreNormAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x, source):
                q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
                return F.scaled_dot_product_attention(q, k, v)


        class Wrapper(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.attn = PreNormAttention(d)

            def forward(self, x):
                return self.attn(self.norm(x), x)
    """}
    assert lint(tmp_path, files, [CODE]) == []
