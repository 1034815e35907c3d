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


PRE_NORM_BLOCK = """
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
"""

MERGER = PRE_NORM_BLOCK + """


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


ENDINGS = PRE_NORM_BLOCK + """


    class Final(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.modulation = nn.Linear(d, 2 * d)
            self.norm_final = nn.LayerNorm(d)
            self.linear = nn.Linear(d, d)

        def forward(self, x, c):
            {FINAL}


    class Stack(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
            self.proj_in, self.proj_out = nn.Linear(d, d), nn.Linear(d, d)
            self.final = Final(d)

        def forward(self, x, c):
            {BEFORE}
            for i, block in enumerate(self.blocks):  # the stack
                h = block(h)
                {INSIDE}
            {AFTER}
"""


@pytest.mark.parametrize("final, before, inside, after, reported", [
    # DiT: the final layer maps the condition, then normalises the stream
    ("shift, scale = self.modulation(c).chunk(2, dim=-1)\n        "
     "return self.linear(self.norm_final(x) * (1 + scale) + shift)", "h = x", "pass", "return self.final(h, c)",
     False),
    # ... but a final layer whose first learned layer reads the stream is not a final norm
    ("return self.norm_final(self.linear(x))", "h = x", "pass", "return self.final(h, c)", True),
    # a residual branch of the module: the output added back to the input
    ("return x", "x_in = x\n        h = self.proj_in(x)", "pass", "return self.proj_out(h) + x_in", False),
    ("return x", "h = self.proj_in(x)", "pass", "return self.proj_out(h) + x", False),
    # a sum with something else than the module's input is not a residual branch
    ("return x", "h = self.proj_in(x)\n        x = c", "pass", "return self.proj_out(h) + x", True),
    # per-depth features returned as a list
    ("return x", "h = x\n        feats = []", "feats.append(h)", "return feats", False),
    # the list holds the attention maps, or the last stream is returned beside it
    ("return x", "h = x\n        maps = []", "maps.append(c)", "return h, maps", True),
    ("return x", "h = x\n        feats = []", "feats.append(h)", "return self.proj_out(h), feats", True),
])
def test_stacks_whose_output_is_not_the_models(tmp_path, final, before, inside, after, reported):
    src = textwrap.dedent(ENDINGS).lstrip("\n")
    for key, text in (("{FINAL}", final), ("{BEFORE}", before), ("{INSIDE}", inside), ("{AFTER}", after)):
        src = src.replace(key, text)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "# the stack" in text)
    assert set(lint(tmp_path, {"m.py": src}, [CODE])) == ({("m.py", line, "TL202")} if reported else set())
