"""TL210's fix: fill padded attention scores with `torch.finfo(scores.dtype).min`."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix, findings, source

CODE = "TL210"

ATTENTION = """\
    import math

    {imports}


    def attention(q, k, v, attention_mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores = {fill}
        return scores.softmax(dim=-1) @ v
"""


@pytest.mark.parametrize(("imports", "fill", "fixed"), [
    ("import torch", 'scores.masked_fill(attention_mask[:, None, :, None] == 0, float("-inf"))',
     "scores.masked_fill(attention_mask[:, None, :, None] == 0, torch.finfo(scores.dtype).min)"),
    ("import torch", "scores.masked_fill(mask=attention_mask == 0, value=-float('inf'))",
     "scores.masked_fill(mask=attention_mask == 0, value=torch.finfo(scores.dtype).min)"),
    ("import torch as th", "scores.masked_fill(attention_mask == 0, -th.inf)",
     "scores.masked_fill(attention_mask == 0, th.finfo(scores.dtype).min)"),
    ("import numpy as np\n    import torch.nn.functional as F\n    import torch.nn", "scores.masked_fill(attention_mask == 0, -np.inf)",
     "scores.masked_fill(attention_mask == 0, torch.finfo(scores.dtype).min)"),
    ("import torch", "torch.masked_fill(scores, attention_mask == 0, -math.inf)",
     "torch.masked_fill(scores, attention_mask == 0, torch.finfo(scores.dtype).min)"),
])
def test_fill_value_replaced(tmp_path, imports, fill, fixed):
    assert_fix(tmp_path, CODE, ATTENTION.format(imports=imports, fill=fill),
               ATTENTION.format(imports=imports, fill=fixed))


def test_in_place_fill_in_a_module_class(tmp_path):
    assert_fix(tmp_path, CODE, """\
    import math

    import torch
    from torch import nn


    class Attention(nn.Module):
        def forward(self, q, k, v, key_padding_mask):
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
            scores.masked_fill_(key_padding_mask[:, None, :, None], (float("-inf")))  # pads
            return torch.matmul(scores.softmax(dim=-1), v)
""", """\
    import math

    import torch
    from torch import nn


    class Attention(nn.Module):
        def forward(self, q, k, v, key_padding_mask):
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.size(-1))
            scores.masked_fill_(key_padding_mask[:, None, :, None], (torch.finfo(scores.dtype).min))  # pads
            return torch.matmul(scores.softmax(dim=-1), v)
""")


def test_import_torch_added_when_torch_is_not_imported(tmp_path):
    assert_fix(tmp_path, CODE, '''\
    """Attention without a plain `import torch`."""
    from __future__ import annotations

    import math

    from torch import nn


    def attend(q, k, v, padding_mask):
        w = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        w = w.masked_fill(padding_mask, -math.inf)
        return nn.functional.softmax(w, dim=-1) @ v


    def attend_again(q, k, v, padding_mask):
        w = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        w = w.masked_fill(padding_mask, -math.inf)
        return nn.functional.softmax(w, dim=-1) @ v
''', '''\
    """Attention without a plain `import torch`."""
    from __future__ import annotations

    import torch
    import math

    from torch import nn


    def attend(q, k, v, padding_mask):
        w = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        w = w.masked_fill(padding_mask, torch.finfo(w.dtype).min)
        return nn.functional.softmax(w, dim=-1) @ v


    def attend_again(q, k, v, padding_mask):
        w = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        w = w.masked_fill(padding_mask, torch.finfo(w.dtype).min)
        return nn.functional.softmax(w, dim=-1) @ v
''')


def test_no_fix_for_a_computed_receiver(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "m.py").write_text(source("""\
    import math

    import torch


    def attention(q, k, v, attention_mask):
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(attention_mask == 0, -math.inf)
        return scores.softmax(dim=-1) @ v
"""), encoding="utf-8")
    found = [d for d in findings(root, [CODE]) if d.code == CODE]
    assert len(found) == 1 and found[0].fix is None
