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


def test_a_table_laid_out_for_the_other_orientation(tmp_path):
    """A `(max_len, 1, d)` table sliced by `x.size(1)` (batch-first input), a `(1, max_len, d)`
    table sliced by `x.shape[0]` (sequence-first input), and the length axis picked by a
    `batch_first` flag the table does not follow; the tutorial's two consistent layouts
    and a table built per branch of the flag are fine."""
    files = {"m.py": """
        import torch
        from torch import nn


        class SeqFirstTable(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                pe = torch.zeros(max_len, d_model)
                self.register_buffer("pe", pe.unsqueeze(1))

            def forward(self, x):
                return x + self.pe[: x.size(1)]  # expect: TL204


        class BatchFirstTable(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.pos_table = nn.Parameter(torch.zeros(1, max_len, d_model))

            def forward(self, x):
                x += self.pos_table[:, : x.shape[0]]  # expect: TL204
                return x


        class FlagSlicedTable(nn.Module):
            def __init__(self, d_model, max_len=512, batch_first=False):
                super().__init__()
                self.x_dim = 1 if batch_first else 0
                self.register_buffer("pe", torch.zeros(max_len, 1, d_model))

            def forward(self, x):
                return x + self.pe[: x.size(self.x_dim)]  # expect: TL204


        class Tutorial(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                pe = torch.zeros(max_len, d_model)
                pe = pe.unsqueeze(0).transpose(0, 1)
                self.register_buffer("pe", pe)

            def forward(self, x):
                return x + self.pe[: x.size(0), :]


        class TutorialBatchFirst(nn.Module):
            def __init__(self, d_model, max_len=512):
                super().__init__()
                self.register_buffer("pe", torch.zeros(max_len, d_model).unsqueeze(0))

            def forward(self, x):
                return x + self.pe[:, : x.size(1)]


        class PerBranch(nn.Module):
            def __init__(self, d_model, max_len=512, batch_first=False):
                super().__init__()
                self.batch_first = batch_first
                if batch_first:
                    pe = torch.zeros(1, max_len, d_model)
                else:
                    pe = torch.zeros(max_len, 1, d_model)
                self.register_buffer("pe", pe)

            def forward(self, x):
                if self.batch_first:
                    return x + self.pe[:, : x.size(1)]
                return x + self.pe[: x.size(0)]
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
