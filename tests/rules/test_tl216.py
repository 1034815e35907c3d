"""TL216 positional-index-not-slice: precision guards beyond the rule document, and its fix."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix
from tests.rules.conftest import expected, lint

CODE = "TL216"

MODULE = """
    import torch
    import torch.nn as nn


    class Positions(nn.Module):
        def __init__(self, max_len, d):
            super().__init__()
            {table}

        def forward(self, x{params}):
            B, T, C = x.shape
            {body}  # {marker}
            return y
"""

BUFFER = 'self.register_buffer("pe", torch.zeros(1, max_len, d))'


@pytest.mark.parametrize(("table", "params", "body", "flagged"), [
    (BUFFER, "", "y = x + self.pe[:, x.size(1)]", True),
    (BUFFER, "", "y = x + self.pe[:, x.shape[1], :]", True),
    (BUFFER, "", "y = x + self.pe[:, T]", True),
    (BUFFER, "", "n = x.size(1)\n            y = x + self.pe[:, n]", True),
    (BUFFER, ", seq_len=None", "y = x + self.pe[:, seq_len]", True),            # a length by its name
    ("self.pos_embedding = nn.Parameter(torch.zeros(1, max_len, d))", "", "y = x + self.pos_embedding[:, T]", True),
    ("self.pe = torch.zeros(max_len, d)", "", "y = x + self.pe[len(x)]", True),
    ("self.wpe = nn.Embedding(max_len, d)", "", "y = x + self.wpe.weight[T]", True),
    (BUFFER, "", "y = x + self.pe[:, :T]", False),
    (BUFFER, "", "y = x + self.pe[:, T - 1]", False),
    (BUFFER, ", start=0", "y = x + self.pe[:, start]", False),
    (BUFFER, ", past_kv=None", "y = x + self.pe[:, past_kv.size(2)]", False),      # the next position
    (BUFFER, ", step=0", "y = x + self.pe[:, step]", False),
    ("self.pos_layers = nn.ModuleList([nn.Linear(d, d)])", "", "y = self.pos_layers[T](x)", False),
    ("self.pos_cache = {}", "", "y = x + self.pos_cache[T]", False),               # not a tensor
    ("self.wpe = nn.Embedding(max_len, d)", "", "y = x + self.wpe(torch.arange(T))", False),
    (BUFFER, ", i=0", "y = x + self.pe[:, i]", False),
])
def test_indices(tmp_path, table, params, body, flagged):
    files = {"m.py": MODULE.format(table=table, params=params, body=body,
                                   marker="expect: TL216" if flagged else "ok")}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_fix_slices_up_to_the_length(tmp_path):
    assert_fix(tmp_path, CODE, """
        import torch
        import torch.nn as nn


        class Positions(nn.Module):
            def __init__(self, max_len, d):
                super().__init__()
                self.register_buffer("pe", torch.zeros(1, max_len, d))

            def forward(self, x):
                return x + self.pe[:, x.size(1)]
    """, """
        import torch
        import torch.nn as nn


        class Positions(nn.Module):
            def __init__(self, max_len, d):
                super().__init__()
                self.register_buffer("pe", torch.zeros(1, max_len, d))

            def forward(self, x):
                return x + self.pe[:, :x.size(1)]
    """, unsafe=True, select=[CODE])
