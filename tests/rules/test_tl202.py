"""TL202 missing-final-norm: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

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


# --- blocks defined in another file (issue 21) --------------------------------------------

BLOCK_FILE = """
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Linear(d, d)

        def forward(self, x):
            {BODY}
            return x
"""

STACK_FILE = """
    import torch.nn as nn

    from blocks import Block


    class Stack(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
            self.out = nn.Linear(d, 2)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return {RETURN}
"""


@pytest.mark.parametrize("body, ret, reported", [
    ("x = x + self.ff(self.norm(x))", "self.out(x)", True),  # pre-norm blocks, no final norm
    ("x = x + self.ff(self.norm(x))", "self.out(nn.functional.layer_norm(x, x.shape[-1:]))", False),
    ("x = self.norm(x + self.ff(x))", "self.out(x)", False),  # post-norm blocks
    ("x = self.ff(x)", "self.out(x)", False),  # no residual: not known to be pre-norm
])
def test_blocks_of_another_file(tmp_path, body, ret, reported):
    stack = textwrap.dedent(STACK_FILE.replace("{RETURN}", ret)).lstrip("\n")
    files = {"blocks.py": BLOCK_FILE.replace("{BODY}", body), "stack.py": stack}
    line = next(i for i, text in enumerate(stack.splitlines(), 1) if "for block in" in text)
    assert set(lint(tmp_path, files, [CODE])) == ({("stack.py", line, "TL202")} if reported else set())


MERGER = """
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.ff = nn.Linear(d, d)

        def forward(self, x):
            x = x + self.attn(self.norm1(x), self.norm1(x), self.norm1(x))[0]
            x = x + self.ff(self.norm2(x))
            return x


    class Merger(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.proj = nn.Linear(d, d)

        def forward(self, hidden):
            {BODY}


    class Tower(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
            self.merger = Merger(d)

        def forward(self, x):
            for block in self.blocks:  # the stack
                x = block(x)
            return self.merger(x)
"""


@pytest.mark.parametrize("body, reported", [
    ("return self.proj(self.norm(hidden))", False),  # normalises its input first: the final norm
    ("hidden = self.norm(hidden.flatten(1))\n            return self.proj(hidden)", False),
    ("return self.norm(self.proj(hidden))", True),  # projects the un-normalised stream first
    ("return self.proj(hidden)", True),  # no norm at all
])
def test_a_following_module_that_normalises_its_input(tmp_path, body, reported):
    src = textwrap.dedent(MERGER.replace("{BODY}", body)).lstrip("\n")
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "# the stack" in text)
    assert set(lint(tmp_path, {"m.py": src}, [CODE])) == ({("m.py", line, "TL202")} if reported else set())
