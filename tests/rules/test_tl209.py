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


def test_the_rank_comes_from_the_class_that_holds_the_attention_module(tmp_path):
    """`self.attention = DotAttention(...)` called with 4-D heads: `nn.Softmax(dim=2)` of
    its scores normalises over the queries; the same class called with 3-D tensors is fine."""
    dot = """
        import math

        import torch
        from torch import nn


        class DotAttention(nn.Module):
            def __init__(self, key_size):
                super(DotAttention, self).__init__()  # the class named in `super(...)` is no other use
                self.scale = math.sqrt(key_size)
                self.softmax = nn.Softmax(dim=2)

            def forward(self, q, k, v):
                scores = torch.matmul(q, k.transpose(-1, -2)) / self.scale
                return torch.matmul(self.softmax(scores), v)  # expect: TL209
    """
    heads = """

        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, n_head):
                super().__init__()
                self.n_head = n_head
                self.qkv = nn.Linear(d_model, 3 * d_model)
                self.attention = DotAttention(d_model // n_head)

            def forward(self, x):
                b, t, c = x.size()
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                return self.attention(q, k, v).transpose(1, 2).reshape(b, t, c)
    """
    single = """

        class SingleHead(nn.Module):
            def __init__(self, d_model):
                super().__init__()
                self.qkv = nn.Linear(d_model, 3 * d_model)
                self.attention = DotAttention(d_model)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                return self.attention(q, k, v)
    """
    files = {"m.py": dot + heads}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
    files = {"m.py": (dot + single).replace("  # expect: TL209", "")}
    assert lint(tmp_path, files, [CODE]) == []


def test_an_einsum_names_the_key_axis(tmp_path):
    """`bihd,bjhd->bijh`: the keys are axis 2, so `dim=2` is right and `dim=1` (the
    queries) is wrong even though neither is the last axis."""
    files = {"m.py": """
        import torch


        def wrong(q, k, v, scale):
            scores = torch.einsum("bihd,bjhd->bijh", q, k) * scale
            attn = scores.softmax(dim=1)  # expect: TL209
            return torch.einsum("bijh,bjhd->bihd", attn, v)


        def right(q, k, v, scale):
            scores = torch.einsum("bihd,bjhd->bijh", q, k) * scale
            attn = scores.softmax(dim=2)
            return torch.einsum("bijh,bjhd->bihd", attn, v)
    """}
    found = lint(tmp_path, files, [CODE])
    assert found == expected(files, CODE)


def test_an_implicit_dim_on_a_provably_2d_tensor_is_the_last_axis(tmp_path):
    """Without `dim=`, softmax picks axis 1 of a 2-D input, its last: fine. A provably 3-D
    input gets a message naming the axis the implicit choice picks; an unknown rank keeps
    the general message."""
    files = {"m.py": """
        import torch
        import torch.nn.functional as F


        def two_d(x, w):
            logits = torch.mm(x, w)
            return F.softmax(logits)


        def flattened(feats):
            return torch.softmax(feats.flatten(1))


        def three_d(b, t, v):
            logits = torch.randn(b, t, v)
            return F.softmax(logits)  # expect: TL209


        def unknown(logits):
            return F.softmax(logits)  # expect: TL209
    """}
    found = lint(tmp_path, files, [CODE])
    assert found == expected(files, CODE)
    from tests.lintutil import lint_paths
    messages = [d.message for d in lint_paths([tmp_path], select=[CODE]).diagnostics]
    assert any("for this 3-D input the implicit axis is 0" in m for m in messages)


@pytest.mark.parametrize(("spec", "dim", "flagged"), [
    # a relative-position term on the key side disagrees with the content term: the last axis
    ('"bhrd,lrd->bhlr", k, table', "-1", False),
    ('"bhrd,lrd->bhlr", k, table', "2", True),
    # terms that agree on the keys' axis keep the einsum's claim
    ('"bhld,lrd->bhlr", q, table', "2", True),
    ('"bhld,lrd->bhlr", q, table', "-1", False),
])
def test_summed_products_name_the_keys_axis_only_when_they_agree(tmp_path, spec, dim, flagged):
    mark = "  # expect: TL209" if flagged else ""
    files = {"m.py": f"""
        import torch


        def attention(q, k, v, table):
            scores = torch.einsum("bhld,bhrd->bhlr", q, k) + torch.einsum({spec})
            return torch.matmul(torch.softmax(scores, dim={dim}), v){mark}
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


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
{pad}wei = q @ k.transpose(-2, -1) * head_size ** -0.5
{pad}tril = torch.tril(torch.ones(T, T))
{pad}wei = wei.masked_fill(tril == 0, float("-inf"))
{pad}wei = F.softmax(wei, dim=1){mark}
{pad}print((wei @ value(x)).shape)
"""


@pytest.mark.parametrize(("head", "flagged"), [
    ("", False),  # a notebook cell's straight-line illustration
    ("for step in range(3):", True),  # repeated: it may be what trains
    ("def attend():", True),  # a function: something calls it
])
def test_top_level_illustration_is_not_judged(tmp_path, head, flagged):
    files = {"m.py": DEMO.format(head=head, pad="    " if head else "",
                                 mark="  # expect: TL209" if flagged else "")}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
