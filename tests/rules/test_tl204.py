"""TL204 positional-slice-wrong-axis: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL204"


def test_sequence_first_unpacking_is_clean(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class PE(nn.Module):
            def forward(self, x):
                T, B, C = x.shape
                return x + self.pe[:T]
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_unpacked_batch_of_another_slice_position(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class PE(nn.Module):
            def forward(self, x):
                b, t, c = x.size()
                return x + self.pos_table[:b]  # expect: TL204
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_non_positional_tables_are_not_checked(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Cache(nn.Module):
            def forward(self, x):
                B, T, C = x.shape
                return self.kv_cache[:B]
    """}
    assert lint(tmp_path, files, [CODE]) == []
