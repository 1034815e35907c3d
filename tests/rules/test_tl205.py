"""TL205 positional-encoding-unused: precision guards beyond the rule document."""

from __future__ import annotations

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
