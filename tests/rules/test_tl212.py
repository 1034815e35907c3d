"""TL212 head-split-without-transpose: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL212"


@pytest.mark.parametrize("shape", ["B, self.n_head, T, C // self.n_head", "B, self.n_head, x.size(1), -1",
                                   "(B, self.n_head, seq_len, self.head_dim)", "B, nh, -1, head_dim"])
def test_head_before_time_spellings(tmp_path, shape):
    files = {"m.py": f"""
        import torch.nn.functional as F


        def attend(self, x, nh, head_dim, seq_len):
            B, T, C = x.shape
            q = x.view({shape})  # expect: TL212
            return F.scaled_dot_product_attention(q, q, q)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_permute_before_the_view_is_trusted(tmp_path):
    files = {"m.py": """
        import torch.nn.functional as F


        def attend(x, n_head):
            B, T, C = x.shape
            y = x.permute(0, 2, 1)
            q = y.reshape(B, n_head, T, C // n_head)
            return F.scaled_dot_product_attention(q, q, q)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_a_head_split_feeding_no_attention_is_not_checked(tmp_path):
    files = {"m.py": """
        def split(x, n_head):
            B, T, C = x.shape
            return x.view(B, n_head, T, C // n_head)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_heads_folded_into_the_batch_straight_from_b_t_c(tmp_path):
    """`x.view(B * n_heads, -1, d)` of a `(B, T, C)` projection; splitting into
    `(B, T, h, d)`, transposing, then folding is fine, as is a sequence-first
    `(T, B * h, d)` view (fairseq)."""
    files = {"m.py": """
        import torch
        from torch import nn


        class FoldedHeads(nn.Module):
            def __init__(self, dim, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.attention_dim = dim // num_heads
                self.scale = self.attention_dim ** -0.5
                self.W_q = nn.Linear(dim, dim)
                self.W_k = nn.Linear(dim, dim)

            def forward(self, query, key, value):
                batch_size = query.size(0)
                query = self.W_q(query).view(batch_size * self.num_heads, -1, self.attention_dim)  # expect: TL212
                key = self.W_k(key).view(batch_size * self.num_heads, -1, self.attention_dim)  # expect: TL212
                scores = torch.bmm(query, key.transpose(1, 2)) * self.scale
                return scores.softmax(dim=-1)


        class FoldedAfterTranspose(nn.Module):
            def __init__(self, dim, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = dim // num_heads
                self.scale = self.head_dim ** -0.5
                self.W_q = nn.Linear(dim, dim)

            def forward(self, x):
                B, T, _ = x.shape
                q = self.W_q(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                q = q.reshape(B * self.num_heads, T, self.head_dim)
                scores = torch.bmm(q, q.transpose(1, 2)) * self.scale
                return scores.softmax(dim=-1)


        class SequenceFirst(nn.Module):
            def __init__(self, dim, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = dim // num_heads
                self.scale = self.head_dim ** -0.5
                self.W_q = nn.Linear(dim, dim)

            def forward(self, x):
                tgt_len, bsz, _ = x.shape
                q = self.W_q(x).contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
                scores = torch.bmm(q, q.transpose(1, 2)) * self.scale
                return scores.softmax(dim=-1)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
