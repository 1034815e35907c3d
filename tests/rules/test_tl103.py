"""TL103 unused-mask-argument: precision guards beyond the rule document."""

from __future__ import annotations

import textwrap

import pytest

from tests.rules.conftest import expected
from tests.rules.conftest import lint as lint_project

CODE = "TL103"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def lint(tmp_path, files):
    # TL003 is kept: a rule that crashes must not pass a "no finding" test
    return set(lint_project(tmp_path, files, [CODE]))


def module_with_forward(signature: str, body: str) -> str:
    """`forward(self, <signature>)` on line 5, body from line 6."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return f"import torch.nn as nn\n\n\nclass M(nn.Module):\n    def forward(self, {signature}):\n{body}\n"


@pytest.mark.parametrize("signature", [
    "x, mask", "x, mask=None", "x, attention_mask=None", "x, *, attn_mask=None",
    "x, key_padding_mask, /", "x, causal_mask: torch.Tensor | None = None", "x, srcMask=None",
])
def test_unread_mask_parameter_spellings(tmp_path, signature):
    src = module_with_forward(signature, "return x * 2")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 5, CODE)}


@pytest.mark.parametrize("body", [
    "return x.masked_fill(mask, 0.0)",
    "return F.scaled_dot_product_attention(x, x, x, attn_mask=mask)",
    "return self.layer(x, src_key_padding_mask=mask)",
    "if mask is not None:\n    x = x * mask\nreturn x",
    "return self.attn(x, mask=mask)",
    "inner = lambda t: t * mask\nreturn inner(x)",
    "def apply(t):\n    return t * mask\nreturn apply(x)",
    "kwargs = dict(mask=mask)\nreturn self.layer(x, **kwargs)",
    "return self.layer(**locals())",
    "del mask\nreturn x",
    "del x, mask\nreturn None",
])
def test_mask_read_or_deleted_is_clean(tmp_path, body):
    assert lint(tmp_path, {"m.py": module_with_forward("x, mask=None", body)}) == set()


@pytest.mark.parametrize("body", [
    "...",
    "pass",
    '"""Subclasses apply the mask."""',
    '"""Subclasses apply the mask."""\nraise NotImplementedError',
    "raise NotImplementedError('use a subclass')",
])
def test_placeholder_bodies_are_clean(tmp_path, body):
    assert lint(tmp_path, {"m.py": module_with_forward("x, mask=None", body)}) == set()


@pytest.mark.parametrize("signature", ["x, _mask=None", "x, _attention_mask", "x, *_mask_args"])
def test_underscore_prefixed_mask_is_clean(tmp_path, signature):
    assert lint(tmp_path, {"m.py": module_with_forward(signature, "return x")}) == set()


def test_mask_only_overwritten_is_flagged(tmp_path):
    src = module_with_forward("x, mask=None", "mask = None  # TODO: masking\nreturn x")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 5, CODE)}


def test_parameter_without_mask_in_its_name_is_not_checked(tmp_path):
    src = module_with_forward("x, lengths=None, padding=None", "return x")
    assert lint(tmp_path, {"m.py": src}) == set()


# --- functions called from forward ---------------------------------------------------------


HELPERS = """
    import torch
    import torch.nn as nn


    def attention(q, k, v, mask=None):
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


    def unrelated_utility(x, mask):
        return x


    class Block(nn.Module):
        def _attend(self, x, attn_mask):
            return attention(x, x, x, attn_mask)

        def _mix(self, x, mask):
            return self._attend(x, mask)

        def not_called_from_forward(self, x, mask):
            return x

        def forward(self, x, mask=None):
            return self._mix(x, mask)
"""


def test_helpers_are_followed_transitively(tmp_path):
    # forward -> self._mix -> self._attend -> attention(): the mask dies in `attention`.
    # Functions and methods that forward never reaches are not checked.
    assert lint(tmp_path, {"m.py": HELPERS}) == {("m.py", 5, CODE)}


def test_helper_reached_from_two_forwards_is_reported_once(tmp_path):
    src = """
        import torch.nn as nn


        def pool(x, mask):
            return x.mean(1)


        class A(nn.Module):
            def forward(self, x, mask):
                return pool(x, mask)


        class B(nn.Module):
            def forward(self, x, mask):
                return pool(x, mask)
    """
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 4, CODE)}


def test_multi_line_signature_reports_the_parameter_line(tmp_path):
    src = """
        import torch.nn as nn


        class Layer(nn.Module):
            def forward(
                self,
                hidden_states,
                attention_mask=None,
                head_mask=None,
                output_attentions=False,
            ):
                return (hidden_states * attention_mask, output_attentions)
    """
    # attention_mask is read; head_mask (line 9) is the unread one
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 9, CODE)}


def test_functions_outside_any_forward_are_not_checked(tmp_path):
    src = """
        import torch


        def collate(batch, mask_token_id=103, mask_prob=0.15):
            return torch.stack(batch)


        class Config:
            def build(self, mask=None):
                return self
    """
    assert lint(tmp_path, {"m.py": src}) == set()


# --- parameters kept for signature compatibility (issue 9, transformers triage) -------------


def test_mask_documented_as_unused_is_not_reported(tmp_path):
    src = '''
        import torch.nn as nn


        class AudioEncoder(nn.Module):
            def forward(self, input_features, attention_mask=None):
                """
                Args:
                    attention_mask (`torch.Tensor`, *optional*):
                        This model does not support masking of the features; the argument is
                        preserved for compatibility, but it is not used.
                """
                return self.layers(input_features)
    '''
    assert lint(tmp_path, {"m.py": src}) == set()


def test_mask_named_in_an_unused_warning_is_not_reported(tmp_path):
    src = '''
        import logging

        import torch.nn as nn

        logger = logging.getLogger(__name__)


        class RecurrentModel(nn.Module):
            def forward(self, input_ids, attention_mask=None):
                if attention_mask is not None:
                    logger.warning("`attention_mask` was passed, but it is unused in this model.")
                return self.blocks(self.embed(input_ids))


        class RecurrentLM(nn.Module):
            def forward(self, input_ids, attention_mask=None, labels=None):
                return self.head(self.model(input_ids)), labels
    '''
    assert lint(tmp_path, {"m.py": src}) == set()


def test_a_docstring_that_does_not_say_unused_keeps_the_finding(tmp_path):
    src = '''
        import torch.nn as nn


        class Layer(nn.Module):
            def forward(self, x, attention_mask=None):
                """attention_mask: the padding mask, 1 for real tokens."""
                return self.mlp(x)
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 5, CODE)}


def test_layer_taking_the_uniform_keyword_set_is_not_reported(tmp_path):
    # a recurrent/deformable block called with the same keywords as the attention blocks
    src = '''
        import torch.nn as nn


        class RecurrentBlock(nn.Module):
            def forward(self, hidden_states, position_ids, attention_mask, use_cache=True, **kwargs):
                return self.rg_lru(self.conv(hidden_states), position_ids)
    '''
    assert lint(tmp_path, {"m.py": src}) == set()



def test_attention_layer_with_kwargs_that_drops_its_mask_is_reported(tmp_path):
    # `**kwargs` is no excuse for a layer that computes attention itself
    src = '''
        import torch
        import torch.nn as nn


        class SelfAttention(nn.Module):
            def forward(self, hidden_states, attention_mask=None, **kwargs):
                q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
                scores = q @ k.transpose(-2, -1) * self.scale
                return torch.softmax(scores, dim=-1) @ v
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 6, CODE)}

POSITION_FAMILY = '''
    import torch
    import torch.nn as nn


    class SinePositionEmbedding(nn.Module):
        def forward(self, shape, device, dtype, mask=None):
            not_mask = torch.ones(shape, device=device) if mask is None else ~mask
            return not_mask.cumsum(1).to(dtype)


    class LearnedPositionEmbedding(nn.Module):
        def forward(self, shape, device, dtype, mask=None):
            rows = self.row_embeddings(torch.arange(shape[-2], device=device))
            return rows.to(dtype)
'''


def test_member_of_an_interchangeable_family_that_computes_no_attention_is_not_reported(tmp_path):
    # the learned grid embedding ignores the pixel mask, as the original DETR's does
    assert lint(tmp_path, {"m.py": POSITION_FAMILY}) == set()


def test_attention_variant_dropping_the_mask_of_its_family_is_reported(tmp_path):
    src = '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class SoftmaxAttention(nn.Module):
            def forward(self, q, k, v, mask=None):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


        class ChunkedAttention(nn.Module):
            def forward(self, q, k, v, mask=None):
                return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 12, CODE)}


def test_unused_word_in_the_next_documented_argument_does_not_count(tmp_path):
    src = '''
        import torch.nn as nn


        class Layer(nn.Module):
            def forward(self, x, attention_mask=None, head_mask=None):
                """
                Args:
                    attention_mask (`torch.Tensor`, *optional*):
                        Padding mask, 1 for real tokens.
                    head_mask (`torch.Tensor`, *optional*):
                        Deprecated and unused.
                """
                del head_mask
                return self.mlp(x)
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 5, CODE)}


def test_layer_sharing_parameter_names_with_its_caller_is_not_a_family(tmp_path):
    # Block builds and calls FeedForward: the same parameter names, but its caller, not a sibling
    src = '''
        import torch
        import torch.nn as nn


        class FeedForward(nn.Module):
            def forward(self, x, padding_mask=None):
                return self.down(torch.relu(self.up(x)))


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ff = FeedForward(d)

            def forward(self, x, padding_mask):
                h = self.ln1(x)
                x = x + self.attn(h, h, h, key_padding_mask=padding_mask)[0]
                return x + self.ff(self.ln2(x), padding_mask)
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 6, CODE)}


def test_deformable_attention_masks_encoder_values_with_attention_mask(tmp_path):
    # the padding mask of the attended (encoder) states arrives as `attention_mask` and is
    # applied to the values; `encoder_attention_mask` only keeps the decoder-layer signature
    src = '''
        import torch.nn as nn
        import torch.nn.functional as F


        class DeformableAttention(nn.Module):
            def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                        encoder_attention_mask=None, reference_points=None):
                value = self.value_proj(encoder_hidden_states)
                if attention_mask is not None:
                    value = value.masked_fill(~attention_mask[..., None], 0.0)
                weights = F.softmax(self.attention_weights(hidden_states), -1)
                return self.sample(value, reference_points, weights)
    '''
    assert lint(tmp_path, {"m.py": src}) == set()


def test_cross_mask_unread_while_other_mask_only_masks_self_attention(tmp_path):
    # attention_mask goes to self-attention; the cross-attention over encoder states ignores
    # encoder_attention_mask: still reported
    src = '''
        import torch.nn as nn


        class DecoderLayer(nn.Module):
            def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                        encoder_attention_mask=None):
                h = hidden_states + self.self_attn(hidden_states, attention_mask)
                h = h + self.cross_attn(h, encoder_hidden_states, encoder_hidden_states)
                return h + self.mlp(h)
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 6, CODE)}


def test_grid_position_embedding_reading_only_shapes_is_not_flagged(tmp_path):
    # the embedding is built from the height/width of the input only: no values to mask
    src = '''
        import torch
        import torch.nn as nn


        class LearnedGridEmbedding(nn.Module):
            def forward(self, pixel_values, pixel_mask=None):
                height, width = pixel_values.shape[-2:]
                cols = self.col(torch.arange(width, device=pixel_values.device))
                rows = self.row(torch.arange(height, device=pixel_values.device))
                pos = torch.cat([cols[None].repeat(height, 1, 1), rows[:, None].repeat(1, width, 1)], -1)
                return pos.permute(2, 0, 1)[None].repeat(pixel_values.size(0), 1, 1, 1)
    '''
    assert lint(tmp_path, {"m.py": src}) == set()


def test_function_reading_values_and_ignoring_mask_still_flagged(tmp_path):
    # reads the shape AND the values of x: the shape guard does not apply
    src = '''
        import torch.nn as nn


        class Pool(nn.Module):
            def forward(self, x, mask=None):
                return x.sum(1) / x.shape[1]
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 5, CODE)}


def test_position_wise_link_layer_is_not_flagged(tmp_path):
    # only adds and normalises: no position sees another, so padding cannot leak
    src = '''
        import torch.nn as nn


        class LinkTower(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.beta = nn.Parameter(torch.tensor(0.5))

            def forward(self, hidden_states, cross_states, attention_mask):
                if self.kind == "add":
                    return self.norm(hidden_states + cross_states)
                elif self.kind == "interpolate":
                    return self.norm(hidden_states * (1 - self.beta) + cross_states * self.beta)
                raise NotImplementedError(f"link {self.kind}")
    '''
    assert lint(tmp_path, {"m.py": src}) == set()


def test_layer_with_projection_ignoring_mask_still_flagged(tmp_path):
    # a sub-layer call (not a norm): not position-wise by this guard, still reported
    src = '''
        import torch.nn as nn


        class Layer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.mixer = Mixer(d)

            def forward(self, x, attention_mask):
                return self.norm(x + self.mixer(x))
    '''
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 10, CODE)}


# --- masks that no call in the file ever supplies ------------------------------------------

QUERY_DECODER = '''
    import torch.nn as nn


    class QuerySelfAttention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, heads)
            self.norm = nn.LayerNorm(d)

        def _post(self, queries, attn_mask=None, key_padding_mask=None, pos=None):
            out, _ = self.attn(queries + pos, queries + pos, queries, attn_mask=attn_mask)
            return self.norm(queries + out)

        def _pre(self, queries, attn_mask=None, key_padding_mask=None, pos=None):
            q = self.norm(queries)
            out, _ = self.attn(q + pos, q + pos, q, attn_mask=attn_mask)
            return queries + out

        def forward(self, queries, attn_mask=None, key_padding_mask=None, pos=None):
            if self.pre_norm:
                return self._pre(queries, attn_mask, key_padding_mask, pos)
            return self._post(queries, attn_mask, key_padding_mask, pos)


    class DecoderLayer(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.self_attn = QuerySelfAttention(d, heads)

        def forward(self, queries, pos, attention_mask=None):
            return self.self_attn(queries, key_padding_mask={CALLER_MASK}, pos=pos)


    class Decoder(nn.Module):
        def __init__(self, d, heads, n):
            super().__init__()
            self.layers = nn.ModuleList([DecoderLayer(d, heads) for _ in range(n)])

        def forward(self, queries, pos):
            for i, layer in enumerate(self.layers):
                queries = layer(queries, pos, {LAYER_MASK})
            return queries
'''


@pytest.mark.parametrize("caller_mask", ["None", "attention_mask"])
def test_mask_that_every_caller_passes_as_none_is_not_reported(tmp_path, caller_mask):
    # Object-query self-attention: the fixed set of queries has no padding, and every call in
    # the file passes None (by keyword, or positionally through a loop over a ModuleList),
    # directly or through the layer's own parameter, which its caller (defined later) sets to None
    src = QUERY_DECODER.replace("{CALLER_MASK}", caller_mask).replace("{LAYER_MASK}", "None")
    assert lint(tmp_path, {"m.py": _src(src)}) == set()


def test_mask_that_one_caller_supplies_is_reported(tmp_path):
    # the decoder passes a real mask to the layer, which drops it: the layer is reported
    src = QUERY_DECODER.replace("{CALLER_MASK}", "None").replace("{LAYER_MASK}", "queries.new_ones(4)")
    assert lint(tmp_path, {"m.py": _src(src)}) == {("m.py", 30, CODE)}
    # the layer forwards its mask, which the self-attention's helpers drop
    src = QUERY_DECODER.replace("{CALLER_MASK}", "attention_mask").replace("{LAYER_MASK}", "queries.new_ones(4)")
    assert lint(tmp_path, {"m.py": _src(src)}) == {("m.py", 10, CODE), ("m.py", 14, CODE)}


def test_mask_of_a_layer_used_in_an_unseen_way_is_reported(tmp_path):
    # `partial(self.self_attn, ...)` hides what is passed: no call site is known, so the
    # helpers dropping the key padding mask are reported (the layer's own mask still is not)
    src = QUERY_DECODER.replace("{CALLER_MASK}", "None").replace("{LAYER_MASK}", "None").replace(
        "return self.self_attn(queries, key_padding_mask=None, pos=pos)",
        "return functools.partial(self.self_attn, pos=pos)(queries)")
    found = lint(tmp_path, {"m.py": "import functools\n" + _src(src)})
    assert {line for _, line, _ in found} == {11, 15}


def test_mask_rebound_by_the_caller_is_not_known_to_be_none(tmp_path):
    src = module_with_forward("x, mask=None", "return self._mix(x, mask)") + (
        "\n    def _mix(self, x, mask):\n        return x @ x.transpose(-2, -1)\n\n"
        "    def outer(self, x, mask=None):\n        mask = x > 0\n        return self.forward(x, mask)\n")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 8, CODE)}


# --- a helper that only copies and index-writes tokens -----------------------------------

CORRUPTION = '''
    import torch.nn as nn


    class MaskedLM(nn.Module):
        def corrupt(self, tokens, attention_mask, pattern):
            {BODY}

        def forward(self, tokens, attention_mask, pattern):
            inputs, targets = self.corrupt(tokens, attention_mask, pattern)
            hidden = self.encoder(inputs, {ENCODER_MASK})
            return self.head(hidden), targets
'''


def test_token_corruption_helper_ignoring_the_padding_mask_is_not_reported(tmp_path):
    body = ("inputs, targets = tokens.clone(), tokens.clone()\n"
            "            inputs[pattern == 1] = self.mask_id\n"
            "            targets[pattern != 1] = -100\n"
            "            return inputs, targets")
    src = CORRUPTION.replace("{BODY}", body).replace("{ENCODER_MASK}", "attention_mask")
    assert lint(tmp_path, {"m.py": _src(src)}) == set()


def test_copy_helper_holding_the_only_use_of_the_mask_is_reported(tmp_path):
    # the forward hands the mask to the helper alone: it dies there
    body = "inputs = tokens.clone()\n            inputs[pattern == 1] = 0\n            return inputs, tokens"
    src = CORRUPTION.replace("{BODY}", body).replace("{ENCODER_MASK}", "None")
    assert lint(tmp_path, {"m.py": _src(src)}) == {("m.py", 5, CODE)}


def test_helper_that_mixes_positions_is_reported_even_if_the_caller_applies_the_mask(tmp_path):
    # a mean over positions includes the padding: the mask was needed here
    body = "pooled = tokens.float().mean(1)\n            return pooled, tokens"
    src = CORRUPTION.replace("{BODY}", body).replace("{ENCODER_MASK}", "attention_mask")
    assert lint(tmp_path, {"m.py": _src(src)}) == {("m.py", 5, CODE)}


@pytest.mark.parametrize("outer_call, reported", [
    ("self.model.embed_prefix(input_ids, pixel_values)", set()),
    ("self.model.embed_prefix(input_ids, pixel_values, attention_mask)", {("m.py", 5, CODE)}),
])
def test_method_called_through_another_object_counts_as_a_call_site(tmp_path, outer_call, reported):
    src = f'''
        import torch.nn as nn


        class Model(nn.Module):
            def embed_prefix(self, input_ids, pixel_values, attention_mask=None):
                return self.embed(input_ids) + self.vision(pixel_values) @ self.proj

            def forward(self, input_ids, pixel_values, attention_mask=None):
                return self.decoder(self.embed_prefix(input_ids, pixel_values), attention_mask)


        class ForAction(nn.Module):
            def forward(self, input_ids, pixel_values, attention_mask=None):
                embeds = {outer_call}
                return self.model.decoder(embeds, attention_mask)
    '''
    assert lint(tmp_path, {"m.py": _src(src)}) == reported


def test_a_mask_converted_into_itself_and_never_passed_on(tmp_path):
    """`attn_mask = attn_mask.masked_fill(...)` and then the attention runs without it; the
    same conversion handed to the attention is clean."""
    src = """
        import torch
        import torch.nn as nn


        class EncoderLayer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.self_attn = nn.MultiheadAttention(d, 4)

            def forward(self, x, padding_mask, attn_mask=None):  # expect: TL103
                if attn_mask is not None:
                    attn_mask = attn_mask.masked_fill(attn_mask.to(torch.bool), -1e8)
                x, _ = self.self_attn(x, x, x, key_padding_mask=padding_mask{passed})
                return x
    """
    files = {"m.py": src.replace("{passed}", "")}
    assert sorted(lint(tmp_path / "a", files)) == expected(files, CODE)
    clean = src.replace("{passed}", ", attn_mask=attn_mask").replace("  # expect: TL103", "")
    assert lint(tmp_path / "b", {"m.py": clean}) == set()


def test_a_family_member_that_runs_an_encoder_is_judged(tmp_path):
    """Poolers of one family share `forward(input_ids, mask)`; the one that runs the encoder
    and never reads the mask attends to padding (its siblings pool with it)."""
    files = {"m.py": """
        import torch.nn as nn


        class MeanEmbedder(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids, mask=None):
                hidden = self.encoder(input_ids, attention_mask=mask).last_hidden_state
                return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


        class ClsEmbedder(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids, mask=None):  # expect: TL103
                return self.encoder(input_ids).last_hidden_state[:, 0]
    """}
    assert sorted(lint(tmp_path, files)) == expected(files, CODE)


def test_a_per_position_block_taking_the_uniform_mask_is_clean(tmp_path):
    """A feed-forward block (linear layers, norm, activation, dropout) takes the `mask` every
    layer of the stack receives: nothing it computes crosses positions. A convolution does."""
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class FeedForwardBlock(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                self.norm = nn.LayerNorm(d)

            def forward(self, x, attn_mask=None):
                return x + F.dropout(self.mlp(self.norm(x)), 0.1, self.training)


        class ConvBlock(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.conv = nn.Conv1d(d, d, 3, padding=1)

            def forward(self, x, mask=None):  # expect: TL103
                return self.conv(x.transpose(1, 2)).transpose(1, 2)
    """}
    assert sorted(lint(tmp_path, files)) == expected(files, CODE)


MIXER_LAYER = """
    import torch
    import torch.nn as nn
    {IMPORT}


    {MIXER}

    class MixerLayer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.mixer = Mixer(d)

        def forward(self, x, {MASK}=None):
            return x + self.mixer(self.norm(x))
"""

_SCAN = """class Mixer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.proj = nn.Linear(d, d)

        def forward(self, hidden_states{EXTRA}):
            return torch.cumsum(self.proj(hidden_states), dim=1)
"""


@pytest.mark.parametrize("mixer, imported, mask, reported", [
    (_SCAN.replace("{EXTRA}", ""), "", "attention_mask", False),  # no attention anywhere: nothing to mask
    (_SCAN.replace("{EXTRA}", ""), "", "padding_mask", True),  # a padding mask is not an attention mask
    (_SCAN.replace("{EXTRA}", ", mask=None"), "", "attention_mask", True),  # the mixer could take it
    (_SCAN.replace("{EXTRA}", "").replace("torch.cumsum(self.proj(hidden_states), dim=1)",
                                          "torch.softmax(hidden_states @ hidden_states.transpose(1, 2), -1)"),
     "", "attention_mask", True),  # the mixer attends
    ("", "from .mixers import Mixer", "attention_mask", True),  # a mixer from another file is not seen
])
def test_attention_mask_of_a_block_without_attention(tmp_path, mixer, imported, mask, reported):
    src = _src(MIXER_LAYER.replace("{IMPORT}", imported).replace("{MIXER}", mixer).replace("{MASK}", mask))
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "def forward(self, x," in text)
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", line, CODE)} if reported else set())


ADAPTER = """
    import torch.nn as nn


    class Layer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 4)

        def forward(self, x, {PARENT}):
            return self.attn(x, x, x, {APPLY})[0]


    class Adapter(Layer):
        def forward(self, x, {OWN}):
            return super().forward(x, {PASS})
"""


@pytest.mark.parametrize("parent, apply, own, passed, reported", [
    ("padding_mask", "key_padding_mask=padding_mask", "attn_mask=None, padding_mask=None", "padding_mask", False),
    # the parent could take the dropped mask: the adapter should hand it over
    ("padding_mask, attn_mask=None", "key_padding_mask=padding_mask, attn_mask=attn_mask",
     "attn_mask=None, padding_mask=None", "padding_mask", True),
    # a causal mask dropped by an adapter is reported
    ("padding_mask", "key_padding_mask=padding_mask", "causal_mask=None, padding_mask=None", "padding_mask", True),
    # nothing passed on: not an adapter that keeps the padding
    ("", "", "attn_mask=None", "", True),
])
def test_signature_adapter_to_a_narrower_parent(tmp_path, parent, apply, own, passed, reported):
    src = ADAPTER.replace("{PARENT}", parent).replace("{APPLY}", apply).replace("{OWN}", own).replace("{PASS}", passed)
    src = _src(src.replace("x, )", "x)").replace(", )", ")").replace("x, x, x, )", "x, x, x)"))
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "def forward" in text and "Adapter" not in text
                and i > 10)
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", line, CODE)} if reported else set())


PROJECTION = """
    import torch
    import torch.nn as nn


    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)

        def project(self, x, attention_mask):
            {BODY}

        def forward(self, x, attention_mask):
            q, k, v = self.project(x, attention_mask)
            {ATTEND}
"""


@pytest.mark.parametrize("body, attend, reported", [
    ("return [t.contiguous() for t in torch.split(self.qkv(x), x.size(-1), dim=-1)]",
     "return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)", False),
    # the caller never applies the mask
    ("return self.qkv(x).chunk(3, dim=-1)",
     "return nn.functional.scaled_dot_product_attention(q, k, v)", True),
    # the helper pools over positions: the mask was needed there
    ("return self.qkv(x).mean(1, keepdim=True).chunk(3, dim=-1)",
     "return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)", True),
])
def test_projection_helper_of_an_attention_that_applies_the_mask(tmp_path, body, attend, reported):
    src = _src(PROJECTION.replace("{BODY}", body).replace("{ATTEND}", attend))
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", 10, CODE)} if reported else set())


@pytest.mark.parametrize("body, reported", [
    ("scores = q @ k.transpose(-2, -1)\n    if mask is not None:\n        scores = scores.float()\n"
     "    return scores.softmax(-1)", True),
    # a predicate: the mask's presence picks the kernel, the caller applies it
    ("return mask is not None and q.size(-1) <= 128", False),
])
def test_mask_only_tested_against_none(tmp_path, body, reported):
    src = ("import torch.nn as nn\n\n\ndef helper(q, k, mask=None):\n    " + body + "\n\n\n"
           "class M(nn.Module):\n    def forward(self, q, k, mask=None):\n"
           "        if helper(q, k, mask):\n            return (q @ k.transpose(-2, -1)).masked_fill(mask, 0)\n"
           "        return q\n")
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", 4, CODE)} if reported else set())


@pytest.mark.parametrize("guard, reported", [
    # a branch on the mask's presence that raises refuses it loudly
    ("if mask is not None:\n    raise NotImplementedError('masks are not supported')", False),
    # one that validates its shape accepts it, and then it is never applied
    ("if mask is not None and mask.dim() != 2:\n    raise ValueError('mask must be 2-D')", True),
    # a branch on a combination of arguments refuses the combination, not the mask
    ("if mask is not None and is_causal:\n    raise ValueError('mask or is_causal, not both')", True),
    # only asserted on and reshaped into itself: never applied
    ("assert mask is None or mask.size(0) == q.size(0)\nif mask is not None:\n"
     "    mask = mask[:, None, None, :]", True),
])
def test_a_mask_only_inspected_in_an_attending_function(tmp_path, guard, reported):
    body = guard.replace("\n", "\n    ")
    files = {"m.py": f"""
import torch
from torch import nn


def attend(q, k, v, mask=None, is_causal=False):
    {body}
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    return torch.softmax(scores, dim=-1) @ v


class Attention(nn.Module):
    def forward(self, q, k, v, mask=None):
        return attend(q, k, v, mask=mask)
"""}
    assert lint(tmp_path, files) == ({("m.py", 5, CODE)} if reported else set())


ATTEND = """
import torch
from torch import nn


def exists(value):
    return value is not None


class Attention(nn.Module):
    def forward(self, q, k, v, mask=None):
        dots = torch.einsum("b i d, b j d -> b i j", q, k)
        {body}
        return dots.softmax(dim=-1) @ v
"""


@pytest.mark.parametrize("body, reported", [
    # the value is followed, not the name: reshaped, deleted, and the name reused for a causal mask
    ("if exists(mask):\n    mask = mask[:, None, :]\n    del mask\n"
     "mask = torch.ones(q.size(1), k.size(1)).triu_(1).bool()\ndots.masked_fill_(mask, -1e9)", True),
    ("if exists(mask):\n    mask = mask[:, None, :]\n    dots.masked_fill_(~mask, -1e9)\n    del mask\n"
     "mask = torch.ones(q.size(1), k.size(1)).triu_(1).bool()\ndots.masked_fill_(mask, -1e9)", False),
    # turned into a pairwise mask under another name, which is then dropped
    ("if mask is not None:\n    pair = mask[:, :, None] * mask[:, None, :]\n    del pair", True),
    ("if mask is not None:\n    pair = mask[:, :, None] * mask[:, None, :]\n    dots = dots.masked_fill(~pair, -1e9)",
     False),
    # a test that guards nothing decides nothing; one that guards work is a switch
    ("if mask:\n    pass", True),
    ("if mask:\n    dots = dots * 0.5", False),
    # a value computed from it and tested, the test guarding work: its value picks a path
    ("padded = mask.any()\nif padded:\n    dots = dots - dots.amax(-1, keepdim=True)", False),
    # the value leaves the function: stored, returned, handed to a call, appended
    ("self.last_mask = mask", False),
    ("self.cache.append(mask[:, None])", False),
    ("dots = self.bias(dots, mask=mask)", False),
    ("mask.unsqueeze_(1)\ndots.masked_fill_(~mask, -1e9)", False),
    ("for row in mask:\n    dots = dots + row", False),
    ("dots[~mask[:, None, :].expand_as(dots)] = -1e9", False),
])
def test_the_mask_value_is_followed_to_the_scores(tmp_path, body, reported):
    body = body.replace("\n", "\n        ")
    files = {"m.py": ATTEND.replace("{body}", body)}
    assert lint(tmp_path, files) == ({("m.py", 10, CODE)} if reported else set())


def test_a_del_of_a_converted_mask_is_not_a_statement_that_it_is_unused(tmp_path):
    """`del mask` on the parameter itself says it is ignored on purpose; `del` of a value
    computed from it (after `mask = rearrange(mask, ...)`) drops what was built to be applied."""
    purposeful = ATTEND.replace("{body}", "del mask")
    converted = ATTEND.replace("{body}", "mask = mask[:, None, :]\n        del mask")
    assert lint(tmp_path, {"m.py": purposeful}) == set()
    assert lint(tmp_path, {"m.py": converted}) == {("m.py", 10, CODE)}


def test_masks_taken_with_kwargs_whose_values_are_all_dropped(tmp_path):
    """A layer taking `**kwargs` is trusted to ignore one mask when it applies another: here
    both are converted into a pairwise mask that is then deleted, so neither is applied."""
    src = _src('''
        import torch
        from torch import nn


        class KmeansAttention(nn.Module):
            def forward(self, q, k, v, query_mask=None, key_mask=None, **kwargs):
                key_mask = key_mask if key_mask is not None else query_mask
                dots = torch.einsum("b i d, b j d -> b i j", q, k)
                if query_mask is not None or key_mask is not None:
                    pair = query_mask[:, :, None] * key_mask[:, None, :]
                    {apply}
                    del pair
                return dots.softmax(dim=-1) @ v
    ''')
    dropped = src.replace("{apply}", "pass")
    applied = src.replace("{apply}", "dots.masked_fill_(~pair, -1e9)")
    assert lint(tmp_path, {"m.py": dropped}) == {("m.py", 6, CODE)}
    assert {c for _, _, c in lint(tmp_path, {"m.py": dropped})} == {CODE}
    assert lint(tmp_path, {"m.py": applied}) == set()


@pytest.mark.parametrize("body, keyword, reported", [
    ("return scores", "attention_mask_func", True),
    ("return scores.masked_fill(ltor_mask, torch.finfo(scores.dtype).min)", "attention_mask_func", False),
    ("scores.masked_fill_(ltor_mask, -10000.0)\n    return scores", "mask_fn", False),
    # handed over under a keyword that names no mask: not known to be the layer's mask function
    ("return scores", "callback", False),
])
def test_a_mask_function_handed_to_a_layer(tmp_path, body, keyword, reported):
    """A top-level mask function passed by name to a layer's constructor (`attention_mask_func=`,
    `mask_fn=`): the layer calls it with the scores and the mask in its forward."""
    src = _src(f'''
        import torch
        from layers import ParallelTransformerLayer


        def attention_mask_func(scores, ltor_mask):
            {body.replace(chr(10), chr(10) + "            ")}


        def build(args):
            return [ParallelTransformerLayer(args, {keyword}=attention_mask_func) for _ in range(args.num_layers)]
    ''')
    found = lint(tmp_path, {"m.py": src})
    assert found == ({("m.py", 5, CODE)} if reported else set())


@pytest.mark.parametrize("manual, reported", [
    ("scores = scores.masked_fill(~mask[:, None, None, :], float('-inf'))", False),
    ("bias = (~mask[:, None, None, :]).float() * -1e9\n        scores = scores + bias", False),
    ("scores = scores - scores.amax(-1, keepdim=True)", True),  # the fill was lost on this path
])
def test_a_mask_applied_on_the_flash_path_only(tmp_path, manual, reported):
    """A mask handed to the fused kernel in one branch and never to the scores the function
    soft-maxes itself in the other: padded keys are attended to on the hand-written path."""
    src = _src(f'''
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Attend(nn.Module):
            def forward(self, q, k, v, mask=None):
                if self.flash:
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                scores = torch.einsum("b h i d, b h j d -> b h i j", q, k) * q.shape[-1] ** -0.5
                {manual}
                return scores.softmax(dim=-1) @ v
    ''')
    assert lint(tmp_path, {"m.py": src}) == ({("m.py", 7, CODE)} if reported else set())
