"""TL214 dropout-on-in-eval: precision guards beyond the rule document, and its fixes."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix
from tests.rules.conftest import expected, lint

CODE = "TL214"

MODULE = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    {imports}


    class Attention(nn.Module):
        def __init__(self, dim, p=0.1):
            super().__init__()
            self.p = p
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x{params}):
            q, k, v = self.qkv(x).unsqueeze(1).chunk(3, dim=-1)
            {body}  # {marker}
            return y
"""


@pytest.mark.parametrize(("imports", "params", "body", "flagged"), [
    ("", "", "y = F.dropout(q, self.p)", True),
    ("", "", "y = F.dropout(q, p=self.p)", True),
    ("", "", "y = F.dropout2d(q, 0.2)", True),
    ("", "", "y = F.alpha_dropout(q, 0.2)", True),
    ("", "", "y = torch.nn.functional.dropout(q)", True),                       # p defaults to 0.5
    ("from torch.nn.functional import dropout as drop", "", "y = drop(q, 0.1)", True),
    ("", "", "y = F.scaled_dot_product_attention(q, k, v, None, self.p)", True),  # positional dropout_p
    ("", "", "y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)", True),
    ("", "", "y = F.dropout(q, self.p, self.training)", False),                  # positional flag
    ("", "", "y = F.dropout(q, self.p, training=True)", False),                  # explicit: on purpose
    ("", ", training=False", "y = F.dropout(q, self.p, training=training)", False),
    ("", "", "y = F.dropout(q, 0.0)", False),
    ("", "", "y = F.scaled_dot_product_attention(q, k, v)", False),             # no dropout
    ("", "", "y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)", False),
    ("", "", "y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p * self.training)", False),
    ("", "", "y = F.dropout(q, self.p) if self.training else q", False),
    ("", "", "y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if not self.training else 0.)", False),
    ("", "", "y = F.dropout(q, *self.args)", False),
])
def test_calls(tmp_path, imports, params, body, flagged):
    marker = "expect: TL214" if flagged else "ok"
    files = {"m.py": MODULE.format(imports=imports, params=params, body=body, marker=marker)}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_probability_from_the_callers(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p

            def attend(self, q, k, v, dropout_p):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)

            def forward(self, q, k, v):
                return self.attend(q, k, v, self.p if self.training else 0.0)


        class AlwaysOn(nn.Module):
            def attend(self, q, k, v, dropout_p):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)  # expect: TL214

            def forward(self, q, k, v):
                return self.attend(q, k, v, 0.1)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_probability_bound_under_a_training_test(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def forward(self, q, k, v):
                if self.training:
                    att_dropout = 0.1
                else:
                    att_dropout = 0.0
                return F.scaled_dot_product_attention(q, k, v, dropout_p=att_dropout)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_guarded_blocks_and_non_modules(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def forward(self, x):
                if self.training:
                    x = F.dropout(x, 0.5)
                return x

            def train_step(self, x):
                return F.dropout(x, 0.5)


        class Helper:
            def apply(self, x):
                return F.dropout(x, 0.5)


        def augment(x):
            return F.dropout(x, 0.1)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_fix_passes_the_training_flag(tmp_path):
    assert_fix(tmp_path, CODE, """
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, p=0.1)
    """, """
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def forward(self, x):
                return F.dropout(x, p=0.1, training=self.training)
    """)


def test_fix_zeroes_the_kernel_probability_outside_training(tmp_path):
    assert_fix(tmp_path, CODE, """
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p

            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p, is_causal=True)
    """, """
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.p = p

            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
    """)
