"""TL203 missing-residual: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

from tests.rules.conftest import expected
from tests.rules.conftest import lines_of as shared_lines_of
from tests.rules.conftest import lint as lint_project

CODE = "TL203"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def lint(tmp_path, files):
    # TL003 is kept: a rule that crashes must not pass a "no finding" test
    return set(lint_project(tmp_path, files, [CODE]))


def lines_of(src: str, *needles: str) -> set[tuple[str, int, str]]:
    return shared_lines_of(src, CODE, *needles)


HEADER = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
"""


def test_class_token_stream_in_second_parameter(tmp_path):
    # CaiT: `forward(self, x, x_cls)` updates the class token, the patches only feed it
    src = HEADER + """

    class ClassAttnBlock(nn.Module):
        def __init__(self, dim, attn_block, mlp_block):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = attn_block(dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = mlp_block(dim)
            self.gamma_1 = nn.Parameter(torch.ones(dim))

        def forward(self, x, x_cls):
            u = torch.cat((x_cls, x), dim=1)
            x_cls = x_cls + self.gamma_1 * self.attn(self.norm1(u))
            x_cls = x_cls + self.mlp(self.norm2(x_cls))
            return x_cls
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_norm_through_a_helper_method_and_saved_residual(tmp_path):
    # fairseq's `self.maybe_layer_norm(self.ln, x, before=True)`
    src = HEADER + """

    class EncoderLayer(nn.Module):
        def __init__(self, d, heads, ffn, normalize_before=False):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(d, heads)
            self.self_attn_layer_norm = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ffn)
            self.fc2 = nn.Linear(ffn, d)
            self.final_layer_norm = nn.LayerNorm(d)
            self.normalize_before = normalize_before

        def maybe_layer_norm(self, layer_norm, x, before=False, after=False):
            if after ^ self.normalize_before:
                return layer_norm(x)
            return x

        def forward(self, x, mask):
            residual = x
            x = self.maybe_layer_norm(self.self_attn_layer_norm, x, before=True)
            x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=mask)
            x = residual + x
            x = self.maybe_layer_norm(self.self_attn_layer_norm, x, after=True)
            residual = x
            x = self.maybe_layer_norm(self.final_layer_norm, x, before=True)
            x = F.relu(self.fc1(x))
            x = self.fc2(x)
            x = residual + x
            return self.maybe_layer_norm(self.final_layer_norm, x, after=True)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_projected_shortcut_when_the_width_changes(tmp_path):
    # Hiera / SAM2: the shortcut is a projection of the normed input
    src = HEADER + """

    class MultiScaleBlock(nn.Module):
        def __init__(self, dim, dim_out, attn_layer, mlp_layer):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.proj = nn.Linear(dim, dim_out)
            self.attn = attn_layer(dim, dim_out)
            self.norm2 = nn.LayerNorm(dim_out)
            self.mlp = mlp_layer(dim_out)

        def forward(self, x):
            shortcut = x
            x = self.norm1(x)
            if self.proj is not None:
                shortcut = self.proj(x)
            x = self.attn(x)
            x = shortcut + x
            x = x + self.mlp(self.norm2(x))
            return x
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_chained_assignment_is_one_finding(tmp_path):
    # data2vec 2.0's pre-norm branch: the MLP output is added to itself
    src = HEADER + """

    class AltBlock(nn.Module):
        def __init__(self, dim, attn_layer, mlp_layer, layer_norm_first=True):
            super().__init__()
            self.layer_norm_first = layer_norm_first
            self.norm1 = nn.LayerNorm(dim)
            self.attn = attn_layer(dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = mlp_layer(dim)
            self.post_mlp_dropout = nn.Dropout(0.1)

        def forward(self, x, padding_mask=None):
            if self.layer_norm_first:
                x = x + self.attn(self.norm1(x), padding_mask)
                r = x = self.mlp(self.norm2(x))
                x = r + self.post_mlp_dropout(x)
            else:
                x = x + self.attn(x, padding_mask)
                r = x = self.norm1(x)
                x = self.mlp(x)
                x = self.norm2(r + self.post_mlp_dropout(x))
            return x
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "r = x = self.mlp")


def test_stacks_wrappers_and_heads_are_not_blocks(tmp_path):
    src = HEADER + """

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.ln = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU())

        def forward(self, x):
            x = x + self.attn(self.ln(x), x, x)[0]
            return x + self.mlp(self.ln(x))


    class ViTWrapper(nn.Module):
        def __init__(self, dim, attn_layers, num_classes):
            super().__init__()
            self.patch_to_embedding = nn.Linear(48, dim)
            self.post_emb_norm = nn.LayerNorm(dim)
            self.attn_layers = attn_layers
            self.blocks = nn.ModuleList([Block(dim) for _ in range(4)])
            self.mlp_head = nn.Linear(dim, num_classes)

        def forward(self, img):
            x = self.post_emb_norm(self.patch_to_embedding(img))
            for block in self.blocks:
                x = block(x)
            embed = self.attn_layers(x)
            return self.mlp_head(embed.mean(dim=-2))
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_residual_wrappers_keep_the_stream(tmp_path):
    src = HEADER + """
    from mylib.layers import ResidualAttention


    class PreNormResidual(nn.Module):
        def __init__(self, dim, fn):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fn = fn

        def forward(self, x):
            return self.fn(self.norm(x)) + x


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.attn = ResidualAttention(dim)
            self.ffn = PreNormResidual(dim, nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)))
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            x = self.attn(x)
            x = self.ffn(x)
            return self.norm(x)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_block_without_norm_or_without_mlp_is_not_a_block(tmp_path):
    src = HEADER + """

    class AttentionPool(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x, query):
            x = self.norm(x)
            x = self.attn(query, x, x)[0]
            return self.proj(x)


    class NoNormMixer(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU())

        def forward(self, x):
            x = self.attn(x, x, x)[0]
            return self.mlp(x)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_overwrite_in_one_side_of_an_if(tmp_path):
    src = HEADER + """

    class Block(nn.Module):
        def __init__(self, dim, use_cross=False):
            super().__init__()
            self.use_cross = use_cross
            self.norm1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.cross_attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x, memory=None):
            h = self.norm1(x)
            x = x + self.attn(h, h, h)[0]
            if self.use_cross:
                x = self.cross_attn(self.norm1(x), memory, memory)[0]
            x = x + self.mlp(self.norm2(x))
            return x
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = self.cross_attn(")


def test_lambda_mlp_and_tuple_return(tmp_path):
    # minGPT builds its MLP as a lambda over a ModuleDict (`self.mlpf`)
    src = HEADER + """

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln_2 = nn.LayerNorm(dim)
            self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(dim, 4 * dim), c_proj=nn.Linear(4 * dim, dim)))
            m = self.mlp
            self.mlpf = lambda x: m.c_proj(F.gelu(m.c_fc(x)))

        def forward(self, x):
            h = self.ln_1(x)
            x, weights = self.attn(h, h, h)
            x = x + self.mlpf(self.ln_2(x))
            return x, weights
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x, weights = self.attn(")


def test_projection_pieces_named_after_attention_are_not_attention(tmp_path):
    src = HEADER + """

    class FusedBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.in_proj = nn.Linear(dim, 3 * dim + 4 * dim)
            self.attn_out_proj = nn.Linear(dim, dim)
            self.mlp_out_proj = nn.Linear(4 * dim, dim)

        def forward(self, x):
            y = self.in_proj(self.norm(x))
            q, k, v, h = y.split([x.shape[-1]] * 3 + [4 * x.shape[-1]], dim=-1)
            a = F.scaled_dot_product_attention(q, k, v)
            return x + self.attn_out_proj(a) + self.mlp_out_proj(F.gelu(h))
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_attention_from_a_learned_query_starts_a_new_stream(tmp_path):
    # SigLIP's attention-pooling head and a perceiver's latents: the query is not the input
    src = HEADER + """

    class PoolingHead(nn.Module):
        def __init__(self, dim, heads, mlp):
            super().__init__()
            self.probe = nn.Parameter(torch.randn(1, 1, dim))
            self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.layernorm = nn.LayerNorm(dim)
            self.mlp = mlp

        def forward(self, hidden_state):
            probe = self.probe.repeat(hidden_state.shape[0], 1, 1)
            hidden_state = self.attention(probe, hidden_state, hidden_state)[0]
            residual = hidden_state
            hidden_state = self.layernorm(hidden_state)
            hidden_state = residual + self.mlp(hidden_state)
            return hidden_state[:, 0]


    class PerceiverBlock(nn.Module):
        def __init__(self, dim, n_latents):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(n_latents, dim))
            self.norm = nn.LayerNorm(dim)
            self.cross_attn = nn.MultiheadAttention(dim, 4, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(dim, dim), nn.GELU())

        def forward(self, x):
            kv = self.norm(x)
            x = self.cross_attn(self.latents.expand(x.shape[0], -1, -1), kv, kv)[0]
            return x + self.ff(x)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_a_flag_that_drops_the_residual_of_the_first_layer(tmp_path):
    # SAM's two-way block: `skip_first_layer_pe` replaces the queries in the first layer
    src = HEADER + """

    class TwoWayAttentionBlock(nn.Module):
        def __init__(self, dim, heads, skip_first_layer_pe=False):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.layer_norm1 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.ReLU(), nn.Linear(4 * dim, dim))
            self.layer_norm2 = nn.LayerNorm(dim)
            self.skip_first_layer_pe = skip_first_layer_pe

        def forward(self, queries, query_pe):
            if self.skip_first_layer_pe:
                queries, _ = self.self_attn(query=queries, key=queries, value=queries)
            else:
                query = queries + query_pe
                attn_out, _ = self.self_attn(query=query, key=query, value=queries)
                queries = queries + attn_out
            queries = self.layer_norm1(queries)
            queries = self.layer_norm2(queries + self.mlp(queries))
            return queries
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_local_cross_attention_that_takes_the_query_second(tmp_path):
    # Aria's projector: learned queries attend to the image features, then an MLP
    src = HEADER + """

    class CrossAttention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.q_proj = nn.Linear(dim, dim)
            self.kv_proj = nn.Linear(dim, 2 * dim)
            self.out = nn.Linear(dim, dim)

        def forward(self, key_value_states, hidden_states, attn_mask=None):
            q = self.q_proj(hidden_states)
            k, v = self.kv_proj(key_value_states).chunk(2, dim=-1)
            return self.out(F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask))


    class Projector(nn.Module):
        def __init__(self, dim, n_queries):
            super().__init__()
            self.query = nn.Parameter(torch.zeros(n_queries, dim))
            self.cross_attn = CrossAttention(dim)
            self.layer_norm = nn.LayerNorm(dim)
            self.feed_forward = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

        def forward(self, key_value_states):
            queries = self.query.unsqueeze(0).repeat(key_value_states.shape[0], 1, 1)
            attention_out = self.cross_attn(key_value_states, queries)
            return self.feed_forward(self.layer_norm(attention_out))
    """
    assert lint(tmp_path, {"m.py": src}) == set()


_GPT = """
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return (q @ k.transpose(-2, -1)).softmax(-1) @ v


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = Attention(d)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
"""


def test_subclass_of_a_block_of_another_file_is_checked_by_attribute_names(tmp_path):
    # the base's `__init__` (and so `attn`/`mlp`) lives in gpt.py: the names tell the kinds
    files = {
        "gpt.py": _GPT,
        "variants.py": """
            from gpt import Block


            class PostBlock(Block):
                def forward(self, x):
                    x = self.ln_1(x + self.attn(x))
                    return self.ln_2(x + self.mlp(x))


            class NoResidualBlock(Block):
                def forward(self, x):
                    x = self.attn(self.ln_1(x))  # expect: TL203
                    x = self.mlp(self.ln_2(x))  # expect: TL203
                    return x


            class Adapter(Block):
                def forward(self, x):
                    x = self.proj_in(x)  # an unknown sub-layer of the base: not attention/MLP
                    return x + self.mlp(self.ln_2(x + self.attn(self.ln_1(x))))
        """,
    }
    assert lint_project(tmp_path, files, [CODE]) == expected(files, CODE)


def test_subclass_of_a_block_of_the_same_file_uses_the_bases_attributes(tmp_path):
    files = {"m.py": _GPT + """

    class NoResidualBlock(Block):
        def forward(self, x):
            h = self.attn(self.ln_1(x))
            return self.mlp(self.ln_2(h))  # expect: TL203


    class MixerBlock(nn.Module):  # names that look like sub-layers, but declared as norms/projections
        def __init__(self, d):
            super().__init__()
            self.attn_norm = nn.LayerNorm(d)
            self.mlp_proj = nn.Linear(d, d)

        def forward(self, x):
            return self.mlp_proj(self.attn_norm(x))
    """}
    assert lint_project(tmp_path, files, [CODE]) == expected(files, CODE)


def test_the_stream_added_to_itself_after_a_sub_layer(tmp_path):
    """`x, _ = attn(x, x, x)` then `x = x + x` doubles the attention output: no residual
    (also inside a loop over a zip of sub-module lists)."""
    files = {"m.py": """
        from torch import nn


        def ffn(d):
            return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))


        class Stack(nn.Module):
            def __init__(self, d, depth):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(d, 4, batch_first=True) for _ in range(depth)])
                self.ffns = nn.ModuleList([ffn(d) for _ in range(depth)])

            def forward(self, x):
                for attn, ff in zip(self.layers, self.ffns):
                    x, _ = attn(x, x, x, need_weights=False)
                    x = x + x  # expect: TL203
                    x = ff(x) + x
                return x


        class StackOk(nn.Module):
            def __init__(self, d, depth):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(d, 4, batch_first=True) for _ in range(depth)])
                self.ffns = nn.ModuleList([ffn(d) for _ in range(depth)])

            def forward(self, x):
                for attn, ff in zip(self.layers, self.ffns):
                    h, _ = attn(x, x, x, need_weights=False)
                    x = h + x
                    x = ff(x) + x
                return x


        class Doubling(nn.Module):
            def forward(self, x):
                x = x + x
                return x
    """}
    assert sorted(lint(tmp_path, files)) == expected(files, CODE)


POOLED = HEADER + """
    from pooling import {CLASS}


    class ImageEncoder(nn.Module):
        def __init__(self, width, vocab):
            super().__init__()
            self.{NAME} = {CLASS}(width, 8)
            self.norm = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            x = self.{NAME}(self.norm(x))  # overwrites
            return x + self.mlp(self.norm(x))
"""



@pytest.mark.parametrize("cls, name, reported", [
    ("AttentionalPooler", "img_attn_pool", False),  # pooling onto learned queries: a new stream
    ("AttentionPool2d", "attnpool", False),
    ("AttentionPooling", "pooler", False),
    ("SelfAttention", "attn", True),  # a token mixer overwriting the stream
    ("CrossAttention", "attn", True),
])
def test_an_attention_pooler_is_not_a_token_mixer(tmp_path, cls, name, reported):
    src = _src(POOLED.replace("{CLASS}", cls).replace("{NAME}", name))
    assert lint(tmp_path, {"m.py": src}) == (lines_of(src, "# overwrites") if reported else set())
