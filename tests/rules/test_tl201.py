"""TL201 inconsistent-norm-placement: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

from tests.rules.conftest import lines_of as shared_lines_of
from tests.rules.conftest import lint as lint_project

CODE = "TL201"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def lint(tmp_path, files):
    # TL003 is kept: a rule that crashes must not pass a "no finding" test
    return set(lint_project(tmp_path, files, [CODE]))


def lines_of(src: str, *needles: str) -> set[tuple[str, int, str]]:
    return shared_lines_of(src, CODE, *needles)


# --- torch.nn layers and norm_first -----------------------------------------------------


def test_norm_first_true_and_false_in_one_model(tmp_path):
    src = """
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.a = nn.TransformerEncoderLayer(d, 4, norm_first=True)
                self.b = nn.TransformerEncoderLayer(d, 4, norm_first=True)
                self.c = nn.TransformerEncoderLayer(d, 4, norm_first=False)
                self.d = nn.TransformerDecoderLayer(d, 4, norm_first=True)
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "self.c =")


def test_norm_first_tie_reports_the_setting_seen_second(tmp_path):
    src = """
        from torch.nn import TransformerDecoderLayer as DecLayer
        from torch.nn import TransformerEncoderLayer as EncLayer

        enc = EncLayer(64, 4)
        dec = DecLayer(64, 4, norm_first=True)
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "dec =")


def test_norm_first_across_composed_classes_of_one_model(tmp_path):
    src = """
        import torch.nn as tnn


        class Encoder(tnn.Module):
            def __init__(self, d):
                super().__init__()
                self.layer = tnn.TransformerEncoderLayer(d, 4, norm_first=True)


        class Decoder(tnn.Module):
            def __init__(self, d):
                super().__init__()
                self.layer = tnn.TransformerDecoderLayer(d, 4)


        class Seq2Seq(tnn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.encoder = Encoder(d)
                self.decoder = Decoder(d)
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "tnn.TransformerDecoderLayer(d, 4)")


def test_norm_first_in_two_unrelated_models_of_one_file(tmp_path):
    src = """
        import torch.nn as nn


        class Baseline(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4), 6)


        class Improved(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, norm_first=True), 6)


        def build_reference(d=64):
            return nn.Transformer(d, 4)


        def build_candidate(d=64):
            return nn.Transformer(d, 4, norm_first=True)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


@pytest.mark.parametrize("choice", [
    "nn.TransformerEncoderLayer(d, 4, norm_first=cfg.pre_norm)",
    "nn.TransformerEncoderLayer(d, 4, norm_first=True) if cfg.pre_norm else nn.TransformerEncoderLayer(d, 4)",
])
def test_norm_first_chosen_by_configuration(tmp_path, choice):
    src = f"""
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, cfg, d=64):
                super().__init__()
                self.first = {choice}
                self.rest = {choice}
    """
    assert lint(tmp_path, {"m.py": src}) == set()


def test_a_fixed_layer_next_to_a_configurable_one_is_flagged(tmp_path):
    src = """
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, cfg, d=64):
                super().__init__()
                self.first = nn.TransformerEncoderLayer(d, 4)
                self.rest = nn.TransformerEncoderLayer(d, 4, norm_first=True) if cfg.pre_norm else None
    """
    # post-norm is seen first; the pre-norm choice can run together with it
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "self.rest =")


def test_norm_first_in_if_else_branches(tmp_path):
    src = """
        import torch.nn as nn


        def build(pre_norm, d=64):
            if pre_norm:
                layer = nn.TransformerEncoderLayer(d, 4, norm_first=True)
            else:
                layer = nn.TransformerEncoderLayer(d, 4)
            return nn.TransformerEncoder(layer, 6)
    """
    assert lint(tmp_path, {"m.py": src}) == set()


# --- hand-written residual blocks -----------------------------------------------------------


BERT_STYLE = """
    import torch.nn as nn


    class SelfOutput(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.dense = nn.Linear(config.hidden_size, config.hidden_size)
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            self.dropout = nn.Dropout(config.hidden_dropout_prob)

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dense(hidden_states)
            hidden_states = self.dropout(hidden_states)
            hidden_states = self.LayerNorm(hidden_states + input_tensor)
            return hidden_states


    class Output(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            self.dropout = nn.Dropout(config.hidden_dropout_prob)

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dense(hidden_states)
            hidden_states = self.dropout(hidden_states)
            hidden_states = self.LayerNorm(hidden_states + input_tensor)
            return hidden_states


    class Layer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attention = SelfAttention(config)
            self.attention_output = SelfOutput(config)
            self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
            self.output = Output(config)
            self.extra = Adapter(config)

        def forward(self, hidden_states, attention_mask=None):
            attention_output = self.attention_output(self.attention(hidden_states, attention_mask), hidden_states)
            layer_output = self.output(self.intermediate(attention_output), attention_output)
            return self.extra(layer_output)
"""
ADAPTER_POST = """

    class Adapter(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.down = nn.Linear(config.hidden_size, 64)
            self.up = nn.Linear(64, config.hidden_size)
            self.norm = nn.LayerNorm(config.hidden_size)

        def forward(self, x):
            return self.norm(x + self.up(self.down(x)))
"""
ADAPTER_PRE = """

    class Adapter(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.down = nn.Linear(config.hidden_size, 64)
            self.up = nn.Linear(64, config.hidden_size)
            self.norm = nn.LayerNorm(config.hidden_size)

        def forward(self, x):
            x = x + self.up(self.down(self.norm(x)))
            return x
"""


def test_hugging_face_output_modules_consistently_post_norm_are_clean(tmp_path):
    assert lint(tmp_path, {"m.py": BERT_STYLE + ADAPTER_POST}) == set()


def test_a_pre_norm_adapter_inside_a_bert_style_model_is_flagged(tmp_path):
    src = BERT_STYLE + ADAPTER_PRE
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = x + self.up(self.down(self.norm(x)))")


def test_two_line_post_norm_counts_as_post_norm(tmp_path):
    src = """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = nn.MultiheadAttention(d, 4)
                self.mlp = nn.Linear(d, d)
                self.norm1 = nn.LayerNorm(d)
                self.norm2 = nn.LayerNorm(d)

            def forward(self, x):
                x = x + self.attn(x, x, x)[0]
                x = self.norm1(x)
                x = x + self.mlp(self.norm2(x))
                return x
    """
    # tie: post-norm (the attention residual, two lines) is seen first
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = x + self.mlp(self.norm2(x))")


@pytest.mark.parametrize(("pre", "post", "flagged"), [(3, 1, "post"), (1, 3, "pre")])
def test_the_majority_style_wins(tmp_path, pre, post, flagged):
    body = [f"        x = x + self.f{i}(self.n{i}(x))  # pre" for i in range(pre)]
    body += [f"        x = self.n{i}(x + self.f{i}(x))  # post" for i in range(pre, pre + post)]
    attrs = [f"        self.f{i}, self.n{i} = nn.Linear(d, d), nn.LayerNorm(d)" for i in range(pre + post)]
    src = "\n".join([
        "import torch.nn as nn", "", "", "class M(nn.Module):", "    def __init__(self, d):",
        "        super().__init__()", *attrs, "", "    def forward(self, x):", *body, "        return x", "",
    ])
    expected = {("m.py", i + 1, CODE) for i, line in enumerate(src.splitlines()) if line.endswith(f"# {flagged}")}
    assert lint(tmp_path, {"m.py": src}) == expected


def test_aliased_norm_and_functional_norm_are_recognised(tmp_path):
    src = """
        import torch.nn.functional as Fn
        from torch import nn as tnn
        from torch.nn import LayerNorm as LN


        class Block(tnn.Module):
            def __init__(self, d):
                super().__init__()
                self.d = d
                self.pre = LN(d)
                self.attn = tnn.MultiheadAttention(d, 4)
                self.ff = tnn.Linear(d, d)

            def forward(self, x):
                h = self.pre(x)
                x = x + self.attn(h, h, h)[0]
                x = Fn.layer_norm(x + self.ff(x), (self.d,))
                return x
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "Fn.layer_norm(x + self.ff(x)")


def test_zip_of_layers_and_norms_in_a_stack(tmp_path):
    src = """
        import torch.nn as nn


        class Stack(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
                self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(n)])
                self.attn = nn.MultiheadAttention(d, 4)
                self.attn_norm = nn.LayerNorm(d)

            def forward(self, x):
                x = self.attn_norm(x + self.attn(x, x, x)[0])
                for layer, norm in zip(self.layers, self.norms):
                    x = x + layer(norm(x))
                return x
    """
    # tie: post-norm seen first, so the pre-norm residual in the loop is reported
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = x + layer(norm(x))")


SWITCHABLE = """
    import torch.nn as nn


    class FlexBlock(nn.Module):
        def __init__(self, d, norm_first):
            super().__init__()
            self.norm_first = norm_first
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4)
            self.ff = nn.Linear(d, d)

        def forward(self, x):
            if self.norm_first:
                h = self.norm1(x)
                x = x + self.attn(h, h, h)[0]
                x = x + self.ff(self.norm2(x))
            elif self.sandwich:
                x = x + self.norm2(self.ff(self.norm1(x)))
            else:
                x = self.norm1(x + self.attn(x, x, x)[0])
                x = self.norm2(x + self.ff(x))
            return x
"""


def test_both_styles_behind_a_flag_are_clean(tmp_path):
    assert lint(tmp_path, {"m.py": SWITCHABLE}) == set()


def test_flag_block_next_to_an_always_pre_norm_block_is_flagged_on_its_post_branch(tmp_path):
    src = SWITCHABLE + """

    class PreBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Linear(d, d)

        def forward(self, x):
            return x + self.ff(self.norm(x))


    class Model(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.blocks = nn.ModuleList([FlexBlock(d, False), PreBlock(d), PreBlock(d)])
            self.head = PreBlock(d)
    """
    # `return x + ...` is not a statement that writes the stream; PreBlock's residual
    # is written as an assignment below to make it count.
    src = src.replace("return x + self.ff(self.norm(x))", "x = x + self.ff(self.norm(x))\n            return x")
    expected = lines_of(src, "x = self.norm1(x + self.attn(x, x, x)[0])", "x = self.norm2(x + self.ff(x))")
    assert lint(tmp_path, {"m.py": src}) == expected


def test_one_flag_tested_in_two_blocks_is_one_choice(tmp_path):
    src = """
        import torch.nn as nn


        class Attn(nn.Module):
            def __init__(self, d, pre_norm):
                super().__init__()
                self.pre_norm = pre_norm
                self.norm, self.attn = nn.LayerNorm(d), nn.MultiheadAttention(d, 4)

            def forward(self, x):
                if self.pre_norm:
                    h = self.norm(x)
                    x = x + self.attn(h, h, h)[0]
                else:
                    x = self.norm(x + self.attn(x, x, x)[0])
                return x


        class FFN(nn.Module):
            def __init__(self, d, pre_norm):
                super().__init__()
                self.pre_norm = pre_norm
                self.norm, self.ff = nn.LayerNorm(d), nn.Linear(d, d)

            def forward(self, x):
                if not self.pre_norm:
                    x = self.norm(x + self.ff(x))
                if self.pre_norm:
                    x = x + self.ff(self.norm(x))
                return x


        class Layer(nn.Module):
            def __init__(self, d, pre_norm):
                super().__init__()
                self.attn = Attn(d, pre_norm)
                self.ffn = FFN(d, pre_norm)
    """
    # `if self.pre_norm` in Attn and FFN is one choice, `if not self.pre_norm` its other side
    assert lint(tmp_path, {"m.py": src}) == set()


def test_a_different_flag_is_a_different_choice(tmp_path):
    src = """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm1, self.attn = nn.LayerNorm(d), nn.MultiheadAttention(d, 4)
                self.norm2, self.ff = nn.LayerNorm(d), nn.Linear(d, d)

            def forward(self, x, use_attn=True):
                if use_attn:
                    h = self.norm1(x)
                    x = x + self.attn(h, h, h)[0]
                if self.training:
                    x = x + self.ff(self.norm2(x))
                else:
                    x = self.norm2(x + self.ff(x))
                return x
    """
    # the post-norm else branch runs together with the pre-norm attention residual
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = self.norm2(x + self.ff(x))")


def test_timm_style_norm_layers_are_recognised_by_name(tmp_path):
    src = """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, dim, attn_layer, mlp_layer, norm_layer=nn.LayerNorm):
                super().__init__()
                self.norm1 = norm_layer(dim)
                self.attn = attn_layer(dim)
                self.norm2 = norm_layer(dim)
                self.mlp = mlp_layer(dim)

            def forward(self, x):
                x = x + self.attn(self.norm1(x))
                x = self.norm2(x + self.mlp(x))
                return x
    """
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "x = self.norm2(x + self.mlp(x))")


def test_same_block_styles_in_separate_files_are_not_compared(tmp_path):
    pre = """
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm, self.ff = nn.LayerNorm(d), nn.Linear(d, d)

            def forward(self, x):
                x = x + self.ff(self.norm(x))
                return x
    """
    post = pre.replace("x = x + self.ff(self.norm(x))", "x = self.norm(x + self.ff(x))")
    assert lint(tmp_path, {"gpt.py": pre, "bert.py": post}) == set()


# --- sub-layers keeping their own residual, assembled in another file (issue 21) ----------

SUBLAYERS = """
    import torch.nn as nn


    class Attn(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.norm = nn.LayerNorm(d)

        def forward(self, x):
            residual = x
            x, _ = self.attn(x, x, x)
            x += residual
            x = self.norm(x)
            return x


    class FFN(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.net = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)

        def forward(self, x):
            residual = x
            x = self.net(self.norm(x))
            x += residual  # pre-norm
            return x
    {EXTRA}
"""

LAYER = """
    import torch.nn as nn

    from parts import Attn, FFN


    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.a = Attn(d)
            self.f = {SECOND}

        def forward(self, x):
            return self.f(self.a(x))
"""


@pytest.mark.parametrize("second, extra, reported", [
    ("FFN(d)", "", True),  # one layer of another file holds both parts
    ("nn.Linear(d, d)", "", False),  # nothing holds the two parts together
    # the parts file holds a complete stack of its own: judged there, alone
    ("FFN(d)", "\n\nclass Stack(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
               "        self.blocks = nn.ModuleList([FFN(d) for _ in range(2)])\n", False),
])
def test_parts_assembled_in_another_file(tmp_path, second, extra, reported):
    parts = _src(SUBLAYERS.replace("{EXTRA}", textwrap.indent(extra, "    ") if extra else ""))
    files = {"parts.py": parts, "layer.py": _src(LAYER.replace("{SECOND}", second))}
    line = next(i for i, text in enumerate(parts.splitlines(), 1) if "# pre-norm" in text)
    assert lint(tmp_path, files) == ({("parts.py", line, CODE)} if reported else set())


def test_parts_of_files_no_program_loads_together_are_not_compared(tmp_path):
    """The layer names the parts' classes but imports them from elsewhere: the files are
    not related, so the parts file is judged alone."""
    layer = _src(LAYER.replace("{SECOND}", "FFN(d)").replace("from parts import", "from other_pkg.parts import"))
    assert lint(tmp_path, {"parts.py": _src(SUBLAYERS.replace("{EXTRA}", "")), "layer.py": layer}) == set()


def test_a_saved_input_added_back_is_a_residual_in_one_file(tmp_path):
    """`residual = x ... x += residual` inside each sub-layer; the layer of the same file
    holds both: a mix within one file."""
    src = _src(SUBLAYERS.replace("{EXTRA}", "")) + _src(LAYER.replace("{SECOND}", "FFN(d)")).split(
        "from parts import Attn, FFN\n", 1)[1]
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "# pre-norm" in text)
    assert lint(tmp_path, {"m.py": src}) == {("m.py", line, CODE)}


# --- towers and stacks ---------------------------------------------------------------------

TOWERS = """
    import torch.nn as nn
    {IMPORT}


    class Attn(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mha = nn.MultiheadAttention(d, 4, batch_first=True)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]


    class PreBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn, self.mlp = Attn(d), nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            x = x + self.mlp(self.norm2(x))
            return x


    class PostBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn, self.mlp = Attn(d), nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

        def forward(self, x):
            x = self.norm1(x + self.attn(x))  # post-norm 1
            x = self.norm2(x + self.mlp(x))  # post-norm 2
            return x


    class Base({BASE}):
        pass


    class Vision(Base):
        def __init__(self, d):
            super().__init__()
            self.blocks = nn.ModuleList([PreBlock(d) for _ in range(6)])


    class Text(Base):
        def __init__(self, d):
            super().__init__()
            self.blocks = nn.ModuleList([PostBlock(d) for _ in range(3)])


    class Both(Base):
        def __init__(self, d):
            super().__init__()
            self.vision, self.text = Vision(d), Text(d)
"""


@pytest.mark.parametrize("base, imported, reported", [
    ("PreTrainedModel", "from transformers import PreTrainedModel", False),  # towers are models of their own
    ("MyPretrainedModel", "from mylib.modeling import MyPretrainedModel", False),
    ("nn.Module", "", True),  # a plain composite: one model
])
def test_towers_that_are_whole_models_are_judged_apart(tmp_path, base, imported, reported):
    src = _src(TOWERS.replace("{BASE}", base).replace("{IMPORT}", imported))
    assert lint(tmp_path, {"m.py": src}) == (lines_of(src, "# post-norm 1", "# post-norm 2") if reported else set())


def test_a_mix_inside_one_tower_is_still_reported(tmp_path):
    src = _src(TOWERS.replace("{BASE}", "PreTrainedModel").replace("{IMPORT}", "from transformers import PreTrainedModel")
               .replace("[PostBlock(d) for _ in range(3)]", "[PostBlock(d), PreBlock(d), PreBlock(d), PreBlock(d)]"))
    assert lint(tmp_path, {"m.py": src}) == lines_of(src, "# post-norm 1", "# post-norm 2")


STACK = """
    import torch.nn as nn


    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.ff = nn.Linear(d, d)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x):
            x = self.norm1(x + self.attn(x, x, x)[0])
            x = self.norm2(x + self.ff(x))
            return x, x.mean(1, keepdim=True)


    class Decoder(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.layers = nn.ModuleList([Layer(d) for _ in range(n)])
            self.ln = nn.LayerNorm(d)
            self.ff_out = nn.Linear(d, d)

        def forward(self, inputs_embeds, trend):
            hidden_states = self.ln(inputs_embeds)
            for layer in self.layers:
                {BODY}
            return hidden_states, trend
"""


@pytest.mark.parametrize("body, reported", [
    # a second output of the stack's blocks accumulated: not a residual of the stack
    ("hidden_states, part = layer(hidden_states)\n            trend = trend + part", False),
    ("hidden_states, part = layer(hidden_states)\n            trend += part", False),
    # a sub-layer of the stack itself, reading the trend and added back to it: a pre-norm residual
    ("hidden_states, part = layer(hidden_states)\n            trend = trend + self.ff_out(self.ln(trend))  # pre-norm",
     True),
])
def test_a_stack_summing_its_blocks_second_output(tmp_path, body, reported):
    src = _src(STACK.replace("{BODY}", body))
    assert lint(tmp_path, {"m.py": src}) == (lines_of(src, "# pre-norm") if reported else set())
