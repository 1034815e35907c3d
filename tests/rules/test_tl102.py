"""TL102 missing-key-padding-mask: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

from tests.rules.conftest import expected
from tests.rules.conftest import lint as lint_project

CODE = "TL102"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def lint(tmp_path, files):
    # TL003 is kept: a rule that crashes must not pass a "no finding" test
    return set(lint_project(tmp_path, files, [CODE]))


def encoder_module(imports: str, ctor: str, signature: str, call: str) -> str:
    """A module whose forward (`signature`) makes one sub-module call (`call`, line 10);
    `imports` holds at most three lines."""
    imports = _src(imports).rstrip("\n")
    imports += "\n" * (3 - imports.count("\n"))  # the class starts on line 4
    return imports + _src(f"""
        class Model(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.sub = {ctor}

            def forward(self, {signature}):
                out = {call}
                return out
    """)


ENCODER = "nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, batch_first=True), 2)"


# --- names resolve through imports and aliases --------------------------------------------


@pytest.mark.parametrize(("imports", "ctor"), [
    ("from torch.nn import MultiheadAttention as MHA\nimport torch.nn as nn", "MHA(d, 4, batch_first=True)"),
    ("import torch.nn as tnn\nimport torch.nn as nn", "tnn.MultiheadAttention(d, 4)"),
    ("import torch\nfrom torch import nn", "torch.nn.MultiheadAttention(d, 4)"),
    ("from torch import nn", "nn.modules.activation.MultiheadAttention(d, 4)"),
])
def test_multihead_attention_spellings(tmp_path, imports, ctor):
    src = encoder_module(imports, ctor, "x, attention_mask", "self.sub(x, x, x)[0]")
    line = src.splitlines().index("        out = self.sub(x, x, x)[0]") + 1
    assert lint(tmp_path, {"m.py": src}) == {("m.py", line, CODE)}


def test_a_local_class_named_like_a_torch_module_is_not_checked(tmp_path):
    src = """
        import torch.nn as nn


        class MultiheadAttention(nn.Module):
            def forward(self, q, k, v):
                return q


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = MultiheadAttention()

            def forward(self, x, key_padding_mask):
                return self.attn(x, x, x) * key_padding_mask
    """
    assert lint(tmp_path, {"m.py": src}) == set()


@pytest.mark.parametrize("param", [
    "attention_mask", "key_padding_mask", "src_key_padding_mask", "padding_mask", "pad_mask",
    "src_pad_mask", "padMask",
])
def test_padding_mask_parameter_names(tmp_path, param):
    src = encoder_module("import torch.nn as nn", ENCODER, f"x, {param}=None", "self.sub(x)")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 10, CODE)}


# --- stacks -----------------------------------------------------------------------------


STACK = """
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self, d=64, n=4):
            super().__init__()
            self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, 4, batch_first=True) for _ in range(n)])
            self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(n)])

        def forward(self, x, padding_mask):
            {loop}
                x = {call}
            return x
"""


@pytest.mark.parametrize(("loop", "call"), [
    ("for layer in self.layers:", "layer(x)"),
    ("for i, layer in enumerate(self.layers):", "layer(x)"),
    ("for layer, norm in zip(self.layers, self.norms):", "layer(norm(x))"),
    ("for i in range(len(self.layers)):", "self.layers[i](x)"),
])
def test_module_list_of_encoder_layers_iterated_in_forward(tmp_path, loop, call):
    src = STACK.replace("{loop}", loop).replace("{call}", call)
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 12, CODE)}


@pytest.mark.parametrize("call", [
    "layer(x, src_key_padding_mask=padding_mask)",
    "layer(x, None, padding_mask)",
    "layer(x, **kwargs)",
])
def test_stack_that_passes_the_mask_is_clean(tmp_path, call):
    src = STACK.replace("{loop}", "for layer in self.layers:").replace("{call}", call)
    src = src.replace("def forward(self, x, padding_mask):", "def forward(self, x, padding_mask, **kwargs):")
    assert lint(tmp_path, {"m.py": src}) == set()


# --- positional slots ---------------------------------------------------------------------


@pytest.mark.parametrize(("ctor", "call"), [
    ("nn.MultiheadAttention(d, 4)", "self.sub(x, x, x, pad_mask)"),
    ("nn.MultiheadAttention(d, 4)", "self.sub(x, x, x, key_padding_mask=pad_mask)"),
    (ENCODER, "self.sub(x, None, pad_mask)"),
    ("nn.TransformerEncoderLayer(d, 4)", "self.sub(x, None, pad_mask)"),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 4), 2)", "self.sub(x, x, None, None, pad_mask)"),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 4), 2)", "self.sub(x, x, memory_key_padding_mask=pad_mask)"),
    ("nn.Transformer(d, 4)", "self.sub(x, x, None, None, None, pad_mask)"),
    ("nn.Transformer(d, 4)", "self.sub(x, x, src_key_padding_mask=pad_mask)"),
])
def test_mask_passed_by_keyword_or_in_its_slot(tmp_path, ctor, call):
    src = encoder_module("import torch.nn as nn", ctor, "x, pad_mask", call)
    assert lint(tmp_path, {"m.py": src}) == set()


@pytest.mark.parametrize(("ctor", "call"), [
    ("nn.MultiheadAttention(d, 4)", "self.sub(x, x, x)"),
    ("nn.MultiheadAttention(d, 4)", "self.sub(x, x, x, attn_mask=causal)"),
    (ENCODER, "self.sub(x, causal)"),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 4), 2)", "self.sub(x, x, causal, None)"),
    ("nn.Transformer(d, 4)", "self.sub(x, x, None, causal, None)"),
])
def test_causal_mask_alone_does_not_count_as_the_padding_mask(tmp_path, ctor, call):
    src = encoder_module("import torch.nn as nn", ctor, "x, pad_mask, causal=None", call)
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 10, CODE)}


# --- project padding ----------------------------------------------------------------------


COLLATE = """
    import torch
    from torch.nn.utils.rnn import pad_sequence


    def collate(samples):
        return pad_sequence([torch.tensor(s) for s in samples], batch_first=True)
"""
NO_MASK_MODEL = encoder_module("import torch.nn as nn", ENCODER, "tokens", "self.sub(tokens)")


def test_forward_without_mask_in_a_padded_project_is_flagged(tmp_path):
    assert lint(tmp_path, {"data.py": COLLATE, "model.py": NO_MASK_MODEL}) == {("model.py", 10, CODE)}


def test_forward_without_mask_padding_in_an_imported_module(tmp_path):
    model = "from data.collate import collate\n" + NO_MASK_MODEL
    got = lint(tmp_path, {"data/collate.py": COLLATE, "models/encoder.py": model})
    assert got == {("models/encoder.py", 11, CODE)}


def test_files_that_only_share_an_importer_are_not_related(tmp_path):
    # README "How tlint works": related = one imports the other (transitively) or they share a folder.
    got = lint(tmp_path, {
        "data/collate.py": COLLATE,
        "models/encoder.py": NO_MASK_MODEL,
        "train.py": "from data.collate import collate\nfrom models.encoder import Model\n",
    })
    assert got == set()


def test_forward_without_mask_padding_only_in_an_unrelated_folder(tmp_path):
    got = lint(tmp_path, {"other_experiment/data.py": COLLATE, "vision/model.py": NO_MASK_MODEL})
    assert got == set()


def test_forward_without_mask_in_an_unpadded_project_is_clean(tmp_path):
    assert lint(tmp_path, {"model.py": NO_MASK_MODEL}) == set()


def test_causal_only_forward_is_clean_even_in_a_padded_project(tmp_path):
    model = """
        import torch.nn as nn


        class LM(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4), 2)

            def forward(self, src, src_mask):
                return self.encoder(src, src_mask)
    """
    assert lint(tmp_path, {"data.py": COLLATE, "model.py": model}) == set()


def test_word_language_model_has_mask_flag_is_clean(tmp_path):
    model = """
        import math

        import torch
        import torch.nn as nn


        class TransformerModel(nn.Module):
            def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
                super().__init__()
                self.src_mask = None
                self.input_emb = nn.Embedding(ntoken, ninp)
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout), nlayers)
                self.decoder = nn.Linear(ninp, ntoken)
                self.ninp = ninp

            def _generate_square_subsequent_mask(self, sz):
                return torch.log(torch.tril(torch.ones(sz, sz)))

            def forward(self, src, has_mask=True):
                if has_mask:
                    if self.src_mask is None or self.src_mask.size(0) != len(src):
                        self.src_mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
                else:
                    self.src_mask = None
                src = self.input_emb(src) * math.sqrt(self.ninp)
                output = self.encoder(src, mask=self.src_mask)
                return torch.log_softmax(self.decoder(output), dim=-1)
    """
    assert lint(tmp_path, {"data.py": COLLATE, "model.py": model}) == set()


def test_other_calls_in_forward_are_not_checked(tmp_path):
    model = """
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.proj = nn.Linear(d, d)

            def forward(self, x, attention_mask):
                x = self.proj(self.norm(x))
                return F.scaled_dot_product_attention(x, x, x, attn_mask=attention_mask)
    """
    assert lint(tmp_path, {"data.py": COLLATE, "model.py": model}) == set()


def test_loops_over_plain_values_do_not_crash_the_view(tmp_path):
    # `for o, t in zip(outputs[0], targets)` once sent the loop resolution into a recursion
    model = """
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.attn = nn.MultiheadAttention(d, 4)

            def forward(self, x, outputs, targets, pad_mask):
                for o, t in zip(outputs[0], targets):
                    x = x + o * t
                for row in outputs[1]:
                    x = x + row
                for i, (a, b) in enumerate(zip(outputs, targets)):
                    x = x + a
                return self.attn(x, x, x)[0]
    """
    assert lint(tmp_path, {"model.py": model}) == {("model.py", 16, CODE)}


def test_padding_folded_into_attn_mask(tmp_path):
    """SigLIP2's pooling head expands its padding mask into an additive `attn_mask`;
    a causal `attn_mask` that does not carry the padding mask is still flagged."""
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class PoolingHead(nn.Module):
            def __init__(self, d, heads):
                super().__init__()
                self.probe = nn.Parameter(torch.randn(1, 1, d))
                self.attention = nn.MultiheadAttention(d, heads, batch_first=True)
                self.heads = heads

            def forward(self, hidden_state, attention_mask=None):
                probe = self.probe.repeat(hidden_state.shape[0], 1, 1)
                if attention_mask is not None:
                    attention_mask = attention_mask[:, None, None, :].repeat(1, self.heads, 1, 1)
                    attention_mask = attention_mask.reshape(-1, 1, hidden_state.shape[1])
                return self.attention(probe, hidden_state, hidden_state, attn_mask=attention_mask)[0]


        class Decoder(nn.Module):
            def __init__(self, d, heads):
                super().__init__()
                self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

            def forward(self, x, padding_mask):
                causal = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool), 1)
                return self.attn(x, x, x, attn_mask=causal)[0]  # expect: TL102
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_vision_pooling_head_in_a_padded_project_is_clean(tmp_path):
    # an attention-pooling head of a vision tower attends over image patches, which the
    # project's token padding does not touch; the same head over text is still flagged
    head = """
        import torch
        import torch.nn as nn


        class PoolingHead(nn.Module):
            def __init__(self, config: {CONFIG}):
                super().__init__()
                self.probe = nn.Parameter(torch.randn(1, 1, config.hidden_size))
                self.attention = nn.MultiheadAttention(config.hidden_size, 4, batch_first=True)

            def forward(self, hidden_state):
                probe = self.probe.repeat(hidden_state.shape[0], 1, 1)
                return self.attention(probe, hidden_state, hidden_state)[0]
    """
    assert lint(tmp_path, {"data.py": COLLATE, "model.py": head.replace("{CONFIG}", "VisionConfig")}) == set()
    got = lint(tmp_path / "text", {"data.py": COLLATE, "model.py": head.replace("{CONFIG}", "TextConfig")})
    assert got == {("model.py", 13, CODE)}


def test_a_mask_passed_as_none_is_no_mask(tmp_path):
    """Issue 21: `key_padding_mask=None` (by keyword, by position, or a local bound to None)
    is no mask; a parameter passed on is one."""
    files = {"m.py": """
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, x, key_padding_mask):
                a, _ = self.attn(x, x, x, key_padding_mask=None)  # expect: TL102
                b, _ = self.attn(x, x, x, None)  # expect: TL102
                empty = None
                c, _ = self.attn(x, x, x, key_padding_mask=empty)  # expect: TL102
                d, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask)
                return a + b + c + d
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


# --- the project's own attention modules (issue 21) -----------------------------------------


def test_a_local_module_whose_forward_takes_a_padding_mask(tmp_path):
    """Its signature says it takes one: called without it where forward holds one (a
    parameter, or a mask the forward builds) is the bug; given by keyword, by position or
    folded into another argument is not."""
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class SelfAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
                scores = query @ key.transpose(-1, -2)
                if key_padding_mask is not None:
                    scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
                return scores.softmax(-1) @ value


        class Layer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = SelfAttention(d)

            def forward(self, x, encoder_padding_mask):
                a = self.attn(query=x, key=x, value=x)  # expect: TL102
                b = self.attn(x, x, x, key_padding_mask=None)  # expect: TL102
                c = self.attn(x, x, x, encoder_padding_mask)
                d = self.attn(x, x, x, key_padding_mask=encoder_padding_mask)
                e = self.attn(x, x, x, attn_mask=encoder_padding_mask[:, None, :].float())
                return a + b + c + d + e


        class Speaker(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = SelfAttention(d)

            def forward(self, x, lengths):
                padding_mask = torch.arange(x.size(1))[None, :] >= lengths[:, None]
                return self.attn(x, x, x) * padding_mask[..., None]  # expect: TL102


        class Plain(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attn = SelfAttention(d)

            def forward(self, x):
                return self.attn(x, x, x)
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_an_imported_module_known_by_its_other_calls(tmp_path):
    """An attention module of another file, built by a builder method (or after a `None`
    placeholder): another call in this file of a module of the same constructor (or, the
    constructor unknown, of the same attribute) passes `key_padding_mask=`, so it takes
    one; a call that drops it in a forward holding a padding mask is reported."""
    files = {"layers.py": """
        import torch.nn as nn

        from mylib.attention import MultiheadAttention
        from mylib.layers import DecoderBase


        class EncoderLayer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.self_attn = self.build_self_attention(d)

            def build_self_attention(self, d):
                return MultiheadAttention(d, 8, self_attention=True)

            def forward(self, x, encoder_padding_mask):
                x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=encoder_padding_mask)
                return x


        class DecoderLayer(nn.Module):
            def __init__(self, d, no_cross=False):
                super().__init__()
                self.self_attn = MultiheadAttention(d, 8, self_attention=True)
                if no_cross:
                    self.encoder_attn = None
                else:
                    self.encoder_attn = self.build_encoder_attention(d)

            def build_encoder_attention(self, d):
                return MultiheadAttention(d, 8, encoder_decoder_attention=True)

            def forward(self, x, encoder_out, encoder_padding_mask, self_attn_padding_mask=None):
                x, _ = self.self_attn(query=x, key=x, value=x)  # expect: TL102
                x, _ = self.encoder_attn(query=x, key=encoder_out, value=encoder_out)  # expect: TL102
                return x


        class AugLayer(DecoderBase):  # `self.cross` is built by the base, in another file
            def forward(self, x, encoder_out, encoder_padding_mask, use_first=True):
                if use_first:
                    x, _ = self.cross(query=x, key=encoder_out, value=encoder_out,
                                      key_padding_mask=encoder_padding_mask)
                else:
                    x, _ = self.cross(query=x, key=encoder_out, value=encoder_out)  # expect: TL102
                return x
    """}
    assert lint(tmp_path, files) == set(expected(files, CODE))


def test_no_evidence_no_finding(tmp_path):
    """A module of another file that no call here gives a padding mask (only `None`), one
    called with `**kwargs`, or a forward holding no padding mask: not reported."""
    files = {"layers.py": """
        import torch.nn as nn

        from mylib.attention import MultiheadAttention, RelativeAttention


        class EncoderLayer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.self_attn = MultiheadAttention(d, 8)
                self.rel_attn = RelativeAttention(d, 8)

            def forward(self, x, encoder_padding_mask, **kwargs):
                a, _ = self.rel_attn(query=x, key=x, value=x, key_padding_mask=None)
                b, _ = self.rel_attn(query=x, key=x, value=x)
                c, _ = self.self_attn(query=x, key=x, value=x, **kwargs)
                d, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=encoder_padding_mask)
                return a + b + c + d


        class Pooler(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.self_attn = MultiheadAttention(d, 8)

            def forward(self, x):
                return self.self_attn(query=x, key=x, value=x)[0]
    """}
    assert lint(tmp_path, files) == set()


FILLER_MASK = """
    import torch
    import torch.nn as nn

    MASK_VALUE = -1.0


    class SetEncoder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, batch_first=True), 2)

        def forward(self, src, src_key_padding_mask=None):
            return self.encoder(src, src_key_padding_mask=src_key_padding_mask)


    class Policy(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = SetEncoder(d)

        def forward(self, obs, lengths):
            {binding}
            return self.attn(obs){marker}
"""


@pytest.mark.parametrize(("binding", "flagged"), [
    ("mask = obs.eq(MASK_VALUE).all(2).float()", True),  # the positions holding the filler
    ("mask = obs[..., 0] == 0", True),
    ("obs_mask = obs.ne(self.PAD).any(-1)", True),
    ("mask = torch.arange(obs.size(1))[None] < lengths[:, None]", False),  # not an equality: unknown
    ("mask = torch.ones(obs.size(1), obs.size(1)).triu(1).bool()", False),  # a causal mask
    ("mask = obs.eq(other).all(2)", False),  # compared with a tensor, not a constant
])
def test_a_plain_mask_local_holding_the_filler_positions(tmp_path, binding, flagged):
    marker = "  # expect: TL102" if flagged else ""
    files = {"policy.py": FILLER_MASK.format(binding=binding, marker=marker)}
    assert lint(tmp_path, files) == set(expected(files, "TL102"))


INHERITED = """
    import torch.nn as nn

    from .layers import DecoderLayerBase


    class AugLayer(DecoderLayerBase):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.cross2 = nn.MultiheadAttention(cfg.d, cfg.h)

        def forward(self, x, memory, memory_padding_mask, self_attn_padding_mask=None):
            x, _ = self.self_attn({self_call}){marker}
            x, _ = self.cross2(query=x, key=memory, value=memory, {cross})
            return x
"""


@pytest.mark.parametrize(("self_call", "cross", "flagged"), [
    ("query=x, key=x, value=x", "key_padding_mask=memory_padding_mask", True),
    ("query=x, key=x, value=x, key_padding_mask=self_attn_padding_mask", "key_padding_mask=memory_padding_mask",
     False),
    ("query=x, key=x, value=x", "**self.extra", False),  # no call of the file shows the slot
    ("x, x, x", "key_padding_mask=memory_padding_mask", False),  # not called as the others are
])
def test_an_inherited_attention_called_like_the_masked_ones(tmp_path, self_call, cross, flagged):
    marker = "  # expect: TL102" if flagged else ""
    files = {"layer.py": INHERITED.format(self_call=self_call, cross=cross, marker=marker)}
    assert lint(tmp_path, files) == set(expected(files, "TL102"))
