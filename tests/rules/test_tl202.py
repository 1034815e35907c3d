"""TL202 missing-final-norm: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL202"


def test_norm_keyword_none_is_missing(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        def build(d):
            layer = nn.TransformerDecoderLayer(d, 4, norm_first=True)
            return nn.TransformerDecoder(layer, 2, norm=None)  # expect: TL202
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_norm_first_unknown_is_trusted(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        def build(d, pre):
            layer = nn.TransformerEncoderLayer(d, 4, norm_first=pre)
            return nn.TransformerEncoder(layer, 2)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_post_norm_blocks_need_no_final_norm(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.mlp = nn.Linear(d, d)

            def forward(self, x):
                x = self.norm(x + self.mlp(x))
                return x


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.blocks = nn.ModuleList([Block(d) for _ in range(3)])

            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return x
    """}
    assert lint(tmp_path, files, [CODE]) == []
