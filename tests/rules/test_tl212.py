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
