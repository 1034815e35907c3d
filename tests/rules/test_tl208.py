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


def test_scores_soft_maxed_in_a_helper_method_are_judged_in_each_caller(tmp_path):
    """The helper takes the softmax in two branches (one finding per product), and the
    subclass's caller that scales is left alone."""
    files = {"m.py": """
        import math

        import torch
        from torch import nn


        class Attention(nn.Module):
            def attend(self, value, scores, mask=None):
                if mask is not None:
                    weights = torch.softmax(scores.masked_fill(mask, -1e4), dim=-1)
                else:
                    weights = torch.softmax(scores, dim=-1)
                return torch.matmul(weights, value)

            def forward(self, q, k, v, mask=None):
                scores = torch.matmul(q, k.transpose(-2, -1))  # expect: TL208
                return self.attend(v, scores, mask)


        class ScaledAttention(Attention):
            def forward(self, q, k, v, mask=None):
                scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
                return self.attend(v, scores, mask)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_module_level_softmax_utility_is_not_followed_into_its_callers(tmp_path):
    """ESIM-style similarity soft-maxed by a generic `masked_softmax(tensor, mask)` function:
    not every caller's similarity is attention that needs the 1/sqrt(d) scale."""
    files = {"m.py": """
        import torch
        from torch import nn


        def masked_softmax(tensor, mask):
            return torch.softmax(tensor.masked_fill(~mask[:, None], -1e4), dim=-1)


        class BiAttention(nn.Module):
            def forward(self, premise, premise_mask, hypothesis, hypothesis_mask):
                similarity = premise.bmm(hypothesis.transpose(2, 1))
                attn = masked_softmax(similarity, hypothesis_mask)
                return attn.bmm(hypothesis)
    """}
    assert lint(tmp_path, files, [CODE]) == []


@pytest.mark.parametrize("shape", ["qkv.view(b, -1, self.heads, 3 * self.d_k)",
                                   "qkv.reshape(b, -1, self.heads, self.d_k * 3)"])
def test_size_arithmetic_of_a_reshape_is_not_scaling(tmp_path, shape):
    files = {"m.py": f"""
        import torch
        from torch import nn


        class Attention(nn.Module):
            def forward(self, qkv):
                b = qkv.shape[0]
                q, k, v = torch.chunk({shape}, 3, dim=-1)
                attn = torch.einsum("bihd,bjhd->bijh", q, k)  # expect: TL208
                return torch.einsum("bijh,bjhd->bihd", attn.softmax(dim=2), v)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize("keys, values, reported", [
    ("memory.transpose(1, 2)", "memory", False),  # RNN attention over a memory: keys are the values
    ("memory.transpose(1, 2).contiguous()", "memory", False),
    ("self.key(memory).transpose(1, 2)", "memory", True),  # projected keys: transformer attention
    ("memory.transpose(1, 2)", "self.value(memory)", True),  # projected values
    ("keys.transpose(1, 2)", "memory", True),  # keys and values apart
])
def test_keys_that_are_the_values(tmp_path, keys, values, reported):
    marker = "  # expect: TL208" if reported else ""
    files = {"m.py": f"""
        import torch
        from torch import nn


        class MemoryAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.key, self.value = nn.Linear(d, d), nn.Linear(d, d)

            def forward(self, query, memory, keys=None):
                scores = torch.bmm(query, {keys}){marker}
                weights = torch.softmax(scores, dim=-1)
                return torch.bmm(weights, {values})
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize("ctor, reported", [
    ("FusedScaleMaskSoftmax(mask_func=mask_fn, scale=None)", True),
    ("FusedScaleMaskSoftmax(mask_func=mask_fn, scale=self.head_dim ** -0.5)", False),
    ("FusedScaleMaskSoftmax(mask_func=mask_fn, softmax_scale=coeff)", False),
    # torch's own modules keep their meaning: not a softmax of the scores
    ("nn.LogSoftmax(dim=-1)", False),
])
def test_a_project_softmax_module_held_in_an_attribute(tmp_path, ctor, reported):
    mark = "  # expect: TL208" if reported else ""
    files = {"m.py": f"""
        import torch
        import torch.nn as nn
        from megatron.model.fused_softmax import FusedScaleMaskSoftmax


        class CoreAttention(nn.Module):
            def __init__(self, head_dim, mask_fn, coeff=1.0):
                super().__init__()
                self.head_dim = head_dim
                self.scale_mask_softmax = {ctor}

            def forward(self, q, k, v, attention_mask):
                scores = torch.matmul(q, k.transpose(-1, -2)){mark}
                probs = self.scale_mask_softmax(scores, attention_mask)
                return torch.matmul(probs, v)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
    assert not lint(tmp_path, files, ["TL209"])  # a fused softmax normalises the last axis


DEMO = """
import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, C, head_size = 4, 8, 32, 16
key = nn.Linear(C, head_size, bias=False)
query = nn.Linear(C, head_size, bias=False)
value = nn.Linear(C, head_size, bias=False)
{head}
{pad}x = torch.randn(B, T, C)
{pad}k = key(x)
{pad}q = query(x)
{pad}wei = q @ k.transpose(-2, -1){mark}
{pad}tril = torch.tril(torch.ones(T, T))
{pad}wei = wei.masked_fill(tril == 0, float("-inf"))
{pad}wei = F.softmax(wei, dim=-1)
{pad}print((wei @ value(x)).shape)
"""


@pytest.mark.parametrize(("head", "flagged"), [
    ("", False),  # a notebook cell's straight-line illustration
    ("while True:", True),  # repeated: it may be what trains
    ("def attend():", True),  # a function: something calls it
])
def test_top_level_illustration_is_not_judged(tmp_path, head, flagged):
    files = {"m.py": DEMO.format(head=head, pad="    " if head else "",
                                 mark="  # expect: TL208" if flagged else "")}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
