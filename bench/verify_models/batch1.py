"""Batch 1 of unseen real models for `tlint verify` (listed in batch-1.toml; run by
`python bench/verify_bench.py --batch bench/verify_models/batch-1.toml`).

Each factory builds a real model class with random weights from a tiny config object (no
download): Hugging Face `transformers` classes of families the tests and the zoo do not use,
and two model files of public repositories that are not on PyPI, read at a pinned commit from
a local mirror (`TLINT_MIRRORS`, default /work/.mirror; only coordinates are stored here, the
file is read at build time). The `*_bug` factories plant one bug into the same class, the way
such bugs are written: an attribute or a buffer changed after the build, or a forward hook
that changes what a sub-module computes. Nothing here is tlint's code under test."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch
from torch import nn

VOCAB, HIDDEN, HEADS, LAYERS, POSITIONS = 96, 64, 4, 2, 64
COMMON = {"vocab_size": VOCAB, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def _hf(model_class: str, config_class: str, **settings):
    import transformers

    config = getattr(transformers, config_class)(**settings)
    return getattr(transformers, model_class)(config)


# --- correct models --------------------------------------------------------------------

def gpt_neo(num_layers=LAYERS):
    return _hf("GPTNeoForCausalLM", "GPTNeoConfig", **COMMON, hidden_size=HIDDEN, num_layers=num_layers,
               num_heads=HEADS, attention_types=[[["global", "local"], max(1, num_layers // 2)]],
               max_position_embeddings=POSITIONS, window_size=8, intermediate_size=128)


def opt(num_hidden_layers=LAYERS):
    return _hf("OPTForCausalLM", "OPTConfig", **COMMON, hidden_size=HIDDEN, num_hidden_layers=num_hidden_layers,
               num_attention_heads=HEADS, ffn_dim=128, max_position_embeddings=POSITIONS, word_embed_proj_dim=HIDDEN)


def bloom(n_layer=LAYERS):
    return _hf("BloomForCausalLM", "BloomConfig", **COMMON, hidden_size=HIDDEN, n_layer=n_layer, n_head=HEADS)


def falcon(num_hidden_layers=LAYERS):
    return _hf("FalconForCausalLM", "FalconConfig", **COMMON, hidden_size=HIDDEN,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, alibi=False,
               new_decoder_architecture=False, multi_query=True, parallel_attn=True, max_position_embeddings=POSITIONS)


def mistral(num_hidden_layers=LAYERS):
    return _hf("MistralForCausalLM", "MistralConfig", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, num_key_value_heads=2,
               max_position_embeddings=POSITIONS, sliding_window=None)


def qwen2(num_hidden_layers=LAYERS):
    return _hf("Qwen2ForCausalLM", "Qwen2Config", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, num_key_value_heads=2,
               max_position_embeddings=POSITIONS)


def phi(num_hidden_layers=LAYERS):
    return _hf("PhiForCausalLM", "PhiConfig", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, max_position_embeddings=POSITIONS)


def gemma(num_hidden_layers=LAYERS):
    return _hf("GemmaForCausalLM", "GemmaConfig", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, num_key_value_heads=1,
               head_dim=HIDDEN // HEADS, max_position_embeddings=POSITIONS)


def gpt_neox(num_hidden_layers=LAYERS):
    return _hf("GPTNeoXForCausalLM", "GPTNeoXConfig", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, max_position_embeddings=POSITIONS)


def xglm(num_layers=LAYERS):
    return _hf("XGLMForCausalLM", "XGLMConfig", **COMMON, d_model=HIDDEN, ffn_dim=128, num_layers=num_layers,
               attention_heads=HEADS, max_position_embeddings=POSITIONS)


def electra(num_hidden_layers=LAYERS):
    return _hf("ElectraModel", "ElectraConfig", vocab_size=VOCAB, pad_token_id=0, embedding_size=HIDDEN,
               hidden_size=HIDDEN, num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS,
               intermediate_size=128, max_position_embeddings=POSITIONS)


def deberta_v2(num_hidden_layers=LAYERS):
    return _hf("DebertaV2Model", "DebertaV2Config", vocab_size=VOCAB, pad_token_id=0, hidden_size=HIDDEN,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, intermediate_size=128,
               max_position_embeddings=POSITIONS, relative_attention=True, position_buckets=16,
               pos_att_type=["p2c", "c2p"], position_biased_input=False)


def roformer(num_hidden_layers=LAYERS):
    return _hf("RoFormerModel", "RoFormerConfig", vocab_size=VOCAB, pad_token_id=0, embedding_size=HIDDEN,
               hidden_size=HIDDEN, num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS,
               intermediate_size=128, max_position_embeddings=POSITIONS)


def modernbert(num_hidden_layers=LAYERS):
    return _hf("ModernBertModel", "ModernBertConfig", vocab_size=VOCAB, pad_token_id=0, hidden_size=HIDDEN,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, intermediate_size=128,
               max_position_embeddings=POSITIONS, global_attn_every_n_layers=1, local_attention=16,
               bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)


def t5_encoder(num_layers=LAYERS):
    return _hf("T5EncoderModel", "T5Config", vocab_size=VOCAB, pad_token_id=0, d_model=HIDDEN, d_kv=HIDDEN // HEADS,
               d_ff=128, num_layers=num_layers, num_heads=HEADS, relative_attention_num_buckets=16)


def biogpt(num_hidden_layers=LAYERS):
    return _hf("BioGptForCausalLM", "BioGptConfig", **COMMON, hidden_size=HIDDEN, intermediate_size=128,
               num_hidden_layers=num_hidden_layers, num_attention_heads=HEADS, max_position_embeddings=POSITIONS)


# --- models from public repositories (a pinned file read from a local mirror) -----------

MIRRORS = Path(os.environ.get("TLINT_MIRRORS", "/work/.mirror"))
CLIP_FILE = ("openai/CLIP", "d05afc436d78f1c48dc0dbf8e5980a9d471f35f6", "clip/model.py")
WHISPER_FILE = ("openai/whisper", "c0d2f624c09dc18e709e37c2ad90c039a4eb72a2", "whisper/model.py")
_LOADED: dict[tuple[str, str, str], types.ModuleType] = {}


def _mirror_module(coordinates: tuple[str, str, str], package: str, stubs: dict[str, dict] | None = None):
    """The file at `commit:path` of the repository's mirror, imported as `package.<stem>`
    (with empty sibling modules `stubs` for imports the model classes never use)."""
    if coordinates in _LOADED:
        return _LOADED[coordinates]
    repo, commit, path = coordinates
    git_dir = MIRRORS / repo.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        raise RuntimeError(f"no mirror of {repo} at {git_dir} (set TLINT_MIRRORS)")
    text = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="tlint-batch1-")) / package
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name, attributes in (stubs or {}).items():
        (folder / f"{name}.py").write_text("".join(f"def {a}(*args, **kwargs):\n    raise NotImplementedError\n"
                                                   for a in attributes))
    stem = Path(path).stem
    (folder / f"{stem}.py").write_text(text)
    sys.path.insert(0, str(folder.parent))
    module = importlib.import_module(f"{package}.{stem}")
    _LOADED[coordinates] = module
    return module


def clip_text(transformer_layers=LAYERS):
    """CLIP's text tower (causal: its attention mask), the vision tower frozen (unused here)."""
    clip = _mirror_module(CLIP_FILE, "clip_b1")
    model = clip.CLIP(embed_dim=32, image_resolution=16, vision_layers=1, vision_width=64, vision_patch_size=8,
                      context_length=16, vocab_size=VOCAB, transformer_width=HIDDEN, transformer_heads=HEADS,
                      transformer_layers=transformer_layers)
    model.visual.requires_grad_(False)
    model.logit_scale.requires_grad_(False)
    return model


def call_clip_text(model, ids):
    """encode_text up to the pooling: per-token features, projected."""
    x = model.token_embedding(ids) + model.positional_embedding[: ids.shape[1]]
    x = model.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
    return model.ln_final(x) @ model.text_projection


def _whisper_decoder(n_layer=LAYERS):
    whisper = _mirror_module(WHISPER_FILE, "whisper_b1", {"decoding": ["decode", "detect_language"],
                                                           "transcribe": ["transcribe"]})
    return whisper.TextDecoder(n_vocab=VOCAB, n_ctx=POSITIONS, n_state=HIDDEN, n_head=HEADS, n_layer=n_layer)


_AUDIO = torch.randn(1, 12, HIDDEN, generator=torch.Generator().manual_seed(3))


def call_whisper_decoder(model, ids):
    """The text decoder over fixed audio features (the same for every sample)."""
    return model(ids, _AUDIO.to(ids.device).expand(ids.shape[0], -1, -1))


def _init_whisper(model):
    """Its positional table is allocated uninitialised (a checkpoint fills it): drawn here."""
    with torch.no_grad():
        model.positional_embedding.normal_(std=0.02)
    return model


def whisper(n_layer=LAYERS):
    return _init_whisper(_whisper_decoder(n_layer))


# --- planted bugs ------------------------------------------------------------------------

def _attentions(model, word="attn"):
    return [m for name, m in model.named_modules() if name.rpartition(".")[2] in (word, "self_attn", "attention",
                                                                                 "self_attention")]


def _bidirectional(model):
    """The causal mask removed: each self-attention called with a padding-only mask (the
    mask row of the last query, which sees every real key) and `is_causal` off."""
    def drop(_module, args, kwargs):
        mask = kwargs.get("attention_mask")
        if isinstance(mask, torch.Tensor) and mask.dim() == 4:
            kwargs["attention_mask"] = mask[..., -1:, :].expand_as(mask).clone()
        return args, kwargs

    for attention in _attentions(model):
        attention.is_causal = False
        attention.register_forward_pre_hook(drop, with_kwargs=True)
    return model


def qwen2_no_causal_mask(num_hidden_layers=LAYERS):
    return _bidirectional(qwen2(num_hidden_layers))


def gpt_neox_no_causal_mask(num_hidden_layers=LAYERS):
    return _bidirectional(gpt_neox(num_hidden_layers))


def whisper_no_causal_mask(n_layer=LAYERS):
    model = whisper(n_layer)
    model.mask = None  # the decoder's blocks then attend without a mask
    return model


def clip_text_no_causal_mask(transformer_layers=LAYERS):
    model = clip_text(transformer_layers)
    for block in model.transformer.resblocks:
        block.attn_mask = None
    return model


def _scaled(model, factor):
    for attention in model.modules():
        if isinstance(getattr(attention, "scaling", None), float):
            attention.scaling = attention.scaling * factor
    return model


def mistral_unscaled(num_hidden_layers=LAYERS):
    """Attention scores not scaled by 1/sqrt(d_head)."""
    return _scaled(mistral(num_hidden_layers), (HIDDEN // HEADS) ** 0.5)


def opt_unscaled(num_hidden_layers=LAYERS):
    return _scaled(opt(num_hidden_layers), (HIDDEN // HEADS) ** 0.5)


def gemma_scaled_twice(num_hidden_layers=LAYERS):
    """Attention scores divided by d_head instead of sqrt(d_head)."""
    return _scaled(gemma(num_hidden_layers), (HIDDEN // HEADS) ** -0.5)


def _positions_by_batch(module):
    """A learned positional table read by the batch index: row b for every position of
    sample b (`table[:x.size(0)]` on batch-first inputs)."""
    def by_batch(_module, _args, out):
        rows = out.shape[0]
        table = out.reshape(-1, out.shape[-1])
        return table[:rows].unsqueeze(1).expand(rows, out.shape[1], out.shape[-1]).clone() if out.dim() == 3 \
            else out
    module.register_forward_hook(by_batch)


def opt_positions_by_batch(num_hidden_layers=LAYERS):
    model = opt(num_hidden_layers)
    _positions_by_batch(model.model.decoder.embed_positions)
    return model


def electra_positions_by_batch(num_hidden_layers=LAYERS):
    model = electra(num_hidden_layers)

    def by_batch(_module, args, out):  # the position ids' table rows taken by the batch index
        return out[0:1].expand_as(out).clone() if out.dim() == 3 else out[:1].expand_as(out).clone()
    model.embeddings.position_embeddings.register_forward_hook(by_batch)
    return model


def roformer_no_rotary(num_hidden_layers=LAYERS):
    """Rotary positions never applied: the sinusoidal table the attention rotates by is zero."""
    model = roformer(num_hidden_layers)
    table = model.encoder.embed_positions
    table.register_forward_hook(lambda _m, _a, out: torch.cat([torch.zeros_like(out[..., : out.shape[-1] // 2]),
                                                              torch.ones_like(out[..., out.shape[-1] // 2:])], -1))
    return model


def bloom_no_input_norm(n_layer=LAYERS):
    """Each block's input LayerNorm skipped (pre-norm without its norm)."""
    model = bloom(n_layer)
    for block in model.transformer.h:
        block.input_layernorm = nn.Identity()
    return model


def electra_no_output_norm(num_hidden_layers=LAYERS):
    """Post-norm without its norms: each block's output LayerNorms skipped."""
    model = electra(num_hidden_layers)
    for layer in model.encoder.layer:
        layer.attention.output.LayerNorm = nn.Identity()
        layer.output.LayerNorm = nn.Identity()
    return model


def phi_no_residual(num_hidden_layers=LAYERS):
    """The residual add of each block dropped (its output is the branch alone)."""
    model = phi(num_hidden_layers)

    def branch_only(_module, args, kwargs, output):
        x = args[0] if args else kwargs["hidden_states"]
        y = output[0] if isinstance(output, tuple) else output
        return (y - x, *output[1:]) if isinstance(output, tuple) else y - x
    for layer in model.model.layers:
        layer.register_forward_hook(branch_only, with_kwargs=True)
    return model


def deberta_v2_mask_dropped(num_hidden_layers=LAYERS):
    """The padding mask never reaches the encoder (forward drops `attention_mask`)."""
    model = deberta_v2(num_hidden_layers)

    def drop(_module, args, kwargs):
        kwargs.pop("attention_mask", None)
        return args, kwargs
    model.register_forward_pre_hook(drop, with_kwargs=True)
    return model


def falcon_query_zero(num_hidden_layers=LAYERS):
    """The fused query/key/value projection initialised to zero (a bad init of attention)."""
    model = falcon(num_hidden_layers)
    for layer in model.transformer.h:
        nn.init.zeros_(layer.self_attention.query_key_value.weight)
    return model
