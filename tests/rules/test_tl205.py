"""TL205 positional-encoding-unused: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.lintutil import lint_paths
from tests.rules.conftest import expected, lint

CODE = "TL205"


def test_table_used_only_in_init_weights_is_still_unused(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class Embed(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.tok = nn.Embedding(n, d)
                self.pos_embed = nn.Parameter(torch.zeros(1, 64, d))  # expect: TL205

            def _init_weights(self):
                nn.init.trunc_normal_(self.pos_embed, std=0.02)

            def forward(self, x):
                return self.tok(x)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_dropout_and_flags_named_pos_are_not_tables(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Embed(nn.Module):
            def __init__(self, d, pos_type):
                super().__init__()
                self.pos_drop = nn.Dropout(0.1)
                self.pos_type = str(pos_type)
                self.proj = nn.Linear(d, d)

            def forward(self, x):
                return self.proj(x)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_position_blind_needs_attention(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class BagOfWords(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.embed = nn.Embedding(n, d)
                self.out = nn.Linear(d, 2)

            def forward(self, x):
                return self.out(self.embed(x).mean(1))
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_positional_module_imported_from_another_file(tmp_path):
    files = {"m.py": """
        import torch.nn as nn

        from pos import PositionalEncoding


        class Encoder(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.embed = nn.Embedding(n, d)
                self.add_pos = PositionalEncoding(d)
                self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4), 2)

            def forward(self, x):
                return self.enc(self.add_pos(self.embed(x)))
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_table_read_by_a_function_the_module_hands_itself_to(tmp_path):
    """Hugging Face's conformer attention: `eager_attention_forward(self, ...)` reads
    `module.pos_bias_u`; a function that reads the same name but is never given the module,
    or only initialises it, does not count."""
    files = {"m.py": """
        import torch
        import torch.nn as nn


        def eager_attention_forward(module, query, key, value):
            query = query + module.pos_bias_u[None, :, None, :]
            scores = torch.matmul(query, key.transpose(-1, -2))
            return torch.matmul(scores.softmax(dim=-1), value)


        def init_weights(module):
            nn.init.zeros_(module.pos_table)


        class ConformerSelfAttention(nn.Module):
            def __init__(self, heads, d):
                super().__init__()
                self.pos_bias_u = nn.Parameter(torch.zeros(heads, d))
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                return eager_attention_forward(self, q, k, v)


        class Unused(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.pos_table = nn.Parameter(torch.zeros(64, d))  # expect: TL205
                self.proj = nn.Linear(d, d)

            def forward(self, x):
                init_weights(self)
                return self.proj(x)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


# --- issue 9 transformers triage: tables used where this class cannot see it -----------------


def test_position_index_buffer_is_not_a_table(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class Embeddings(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
                self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)
                self.register_buffer("position_ids", torch.arange(config.max_positions).expand((1, -1)))
                self.token_ids = nn.Buffer(torch.arange(config.max_positions)[None], persistent=False)

            def forward(self, input_ids, position_ids):
                return self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_unused_index_buffer_does_not_hide_the_unused_table(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class Embeddings(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
                self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)  # expect: TL205
                self.register_buffer("position_ids", torch.arange(config.max_positions))

            def forward(self, input_ids):
                return self.word_embeddings(input_ids)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_table_read_by_the_parent_through_the_child_is_used(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Embeddings(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
                self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)

            def forward(self, input_ids):
                return self.word_embeddings(input_ids)


        class Model(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.embeddings = Embeddings(config)

            def forward(self, input_ids, position_ids):
                return self.embeddings(input_ids) + self.embeddings.position_embeddings(position_ids)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_subclass_of_an_imported_model_that_only_swaps_init(tmp_path):
    # a modular/template file: forward, which reads the table, is inherited from the other file
    files = {"modular_m.py": """
        import torch.nn as nn

        from .modeling_base import BaseVisionPreTrainedModel


        class VisionModel(BaseVisionPreTrainedModel):
            def __init__(self, config):
                super().__init__(config)
                self.query_position_embeddings = nn.Embedding(config.num_queries, config.d_model)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_module_handed_to_an_imported_attention_function(tmp_path):
    files = {"modular_m.py": """
        import torch
        import torch.nn as nn

        from .modeling_base import relative_attention_forward


        class ConformerSelfAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.pos_bias_u = nn.Parameter(torch.zeros(d))
                self.pos_bias_v = nn.Parameter(torch.zeros(d))

            def forward(self, hidden_states, relative_position_embeddings):
                return relative_attention_forward(self, hidden_states, relative_position_embeddings)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_module_handed_to_an_unrelated_imported_helper_keeps_the_finding(tmp_path):
    files = {"m.py": """
        import torch.nn as nn

        from .utils import is_fsdp_managed_module


        class PositionalConvEmbedding(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.conv = nn.Conv1d(config.d, config.d, 128, padding=64, groups=16)

            def forward(self, hidden_states):
                return self.conv(hidden_states)


        class Encoder(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.pos_conv_embed = PositionalConvEmbedding(config)  # expect: TL205
                self.layers = nn.ModuleList([nn.Linear(config.d, config.d) for _ in range(2)])

            def forward(self, hidden_states):
                synced = is_fsdp_managed_module(self)
                for layer in self.layers:
                    hidden_states = layer(hidden_states)
                return hidden_states, synced
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_single_vector_is_not_a_table_and_an_unused_table_beside_an_applied_one_says_so(tmp_path):
    # an unused (1, 1, d) vector carries no order either way; an unused table beside an
    # applied one (row/column grid embeddings) is still reported, as dead weight
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class GridEmbeddings(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)  # expect: TL205
                self.row_position_embeddings = nn.Embedding(config.rows, config.hidden_size)
                self.no_memory_pos_enc = nn.Parameter(torch.zeros(1, 1, config.hidden_size))

            def forward(self, grid):
                rows = self.row_position_embeddings(torch.arange(grid.shape[1], device=grid.device))
                return grid + rows[None, :, None]


        class Encoder(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.pos_table = nn.Parameter(torch.zeros(64, config.hidden_size))  # expect: TL205
                self.register_buffer("position_ids", torch.arange(64))

            def forward(self, x):
                return x + self.position_ids[: x.shape[1], None]
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
    messages = sorted(d.message for d in lint_paths([tmp_path], select=[CODE]).diagnostics)
    assert [("while `self.row_position_embeddings` gives the positions" in m, "unordered set" in m)
            for m in messages] == [(False, True), (True, False)]  # pos_table, then position_embeddings


def test_tables_inside_containers(tmp_path):
    """Issue 21: a table declared as a member of a container (`nn.ModuleDict`, a helper
    factory's `nn.Sequential(OrderedDict(...))`) is a table of the class; read through the
    container, by key, or by another class of the file it is used."""
    files = {"m.py": """
        from collections import OrderedDict

        import torch
        import torch.nn as nn


        def embeddings(vocab, n, d):
            return nn.Sequential(OrderedDict([("tok", nn.Embedding(vocab, d)), ("pos_emb", nn.Embedding(n, d))]))


        class Dead(nn.Module):
            def __init__(self, vocab, n, d):
                super().__init__()
                self.emb = embeddings(vocab, n, d)
                self.t = nn.ModuleDict(dict(wpe=nn.Embedding(n, d)))  # expect: TL205
                self.attn = nn.MultiheadAttention(d, 2, batch_first=True)

            def forward(self, idx):
                x = self.emb.tok(idx) + self.emb["pos_emb"](torch.arange(idx.size(1)))
                return self.attn(x, x, x)[0]


        class Inner(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.t = nn.ModuleDict({"pos_table": nn.Embedding(n, d)})


        class Outer(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.inner = Inner(n, d)

            def forward(self, pos):
                return self.inner.t.pos_table(pos)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_positional_result_bound_anew_before_it_is_read(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Sinusoidal(nn.Module):
            def __init__(self, max_len, d):
                super().__init__()
                self.register_buffer("pe", torch.zeros(max_len, d))

            def forward(self, x):
                return x + self.pe[: x.size(1)]


        class Decoder(nn.Module):
            def __init__(self, vocab, d, max_len):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.embed_positions = Sinusoidal(max_len, d)
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, tokens):
                e = self.embed(tokens)
                x = self.embed_positions(e)  # expect: TL205
                x = F.dropout(e, p=0.1, training=self.training)
                return self.attn(x, x, x)[0]


        class Encoder(nn.Module):
            def __init__(self, vocab, d, max_len):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.embed_positions = Sinusoidal(max_len, d)
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, tokens):
                x = self.embed_positions(self.embed(tokens))
                x = F.dropout(x, p=0.1, training=self.training)
                return self.attn(x, x, x)[0]
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_table_built_through_a_class_held_in_an_attribute(tmp_path):
    """`self.embedding_module = nn.Embedding` then `self.embedding_module(n, d)`: the table
    is built by the class the attribute holds; applied, nothing is reported; a class bound
    from a call's result is not known (no table)."""
    template = """
        import torch.nn as nn


        class Embedding(nn.Module):
            def __init__(self, vocab, d, n):
                super().__init__()
                self.embedding_module = {held}
                self.word_embeddings = self.embedding_module(vocab, d)
                self.position_embeddings = self.embedding_module(n, d)

            def forward(self, ids, position_ids):
                words = self.word_embeddings(ids)
                positions = self.position_embeddings(position_ids){mark}
                return {result}
    """
    dropped = {"m.py": template.format(held="nn.Embedding", mark="  # expect: TL205", result="words")}
    assert lint(tmp_path, dropped, [CODE]) == expected(dropped, CODE) != set()
    added = {"m.py": template.format(held="nn.Embedding", mark="", result="words + positions")}
    assert not lint(tmp_path, added, [CODE])
    unknown = {"m.py": template.format(held="pick_embedding_class()", mark="", result="words")}
    assert not lint(tmp_path, unknown, [CODE])



@pytest.mark.parametrize("layer, reported", [
    ("nn.GRU(d, d, batch_first=True)", False),  # the recurrence sees the order
    ("nn.LSTM(d, d, batch_first=True)", False),
    ("nn.Conv1d(d, d, 3, padding=1)", False),  # so does a convolution's kernel
    ("nn.Linear(d, d)", True),  # a position-wise layer does not
])
def test_an_order_aware_layer_in_the_model(tmp_path, layer, reported):
    marker = "  # expect: TL205" if reported else ""
    files = {"m.py": f"""
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self, vocab, d=64):
                super().__init__()
                self.embedding = nn.Embedding(vocab, d){marker}
                self.mix = {layer}
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, ids):
                x = self.embedding(ids)
                return self.attn(x, x, x)[0]
    """}
    assert lint(tmp_path, files, ["TL205"]) == expected(files, "TL205")


@pytest.mark.parametrize("value, reported", [
    ("torch.zeros(n, dtype=torch.long)", False),  # position counters
    ("torch.zeros(n).long()", False),
    ("nn.Parameter(torch.zeros(1, n, d))", True),  # a learned table never added
])
def test_an_integer_tensor_is_not_a_table(tmp_path, value, reported):
    marker = "  # expect: TL205" if reported else ""
    files = {"m.py": f"""
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, vocab, n=128, d=64):
                super().__init__()
                self.tok = nn.Embedding(vocab, d)
                self.pos = {value}{marker}
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, ids):
                x = self.tok(ids)
                return self.attn(x, x, x)[0]
    """}
    assert lint(tmp_path, files, ["TL205"]) == expected(files, "TL205")
