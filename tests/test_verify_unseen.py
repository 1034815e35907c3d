"""`tlint verify` on real model classes nobody here wrote (Hugging Face classes of families the
zoo does not hold, built from tiny config objects by bench/verify_models/batch1.py; no
download): position-blind judged at the first block, the effective attention scale measured
on every model, depth-growth's skip share independent of the stream's size, and causality
taken from the class verified and its uses, never from the other classes of its file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.torchutil import import_torch, torch_required

# slow: builds and probes real transformers models in process
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_unseen")]

import_torch()
if torch_required():  # the dev extra installs transformers: with TLINT_REQUIRE_TORCH=1 a missing one fails
    import transformers  # noqa: F401
else:
    pytest.importorskip("transformers")

from tlint.verify.options import VerifyOptions  # noqa: E402
from tlint.verify.worker import verify  # noqa: E402

BATCH = Path(__file__).resolve().parent.parent / "bench" / "verify_models"


def _run(model: str, root: Path = BATCH, **options) -> dict:
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        return verify(VerifyOptions(model=model, root=str(root), causal_names=["GPT", "CausalLM", "LMHeadModel"],
                                    **options))
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode


def _probes(result: dict) -> dict[str, dict]:
    return {p["probe"]: p for p in result["probes"]}


@pytest.fixture(scope="module")
def results():
    cache: dict = {}

    def get(model: str, probes: tuple[str, ...]) -> dict:
        if (model, probes) not in cache:
            spec = model if ":" in model else f"batch1:{model}"
            cache[(model, probes)] = _run(spec, probes=list(probes))
        return cache[(model, probes)]

    yield get
    sys.modules.pop("batch1", None)
    sys.modules.pop("variants", None)


POSITION = ("position-blind",)


@pytest.mark.parametrize("model", ["roformer", "modernbert", "deberta_v2"])
def test_post_norm_and_relative_positions_are_judged_at_the_first_block(results, model):
    """Rotary or relative positions at a 0.02 initialisation: the output barely moves with
    word order, the first block clearly does."""
    entry = _probes(results(model, POSITION))["position-blind"]
    assert entry["status"] == "pass", entry
    assert "first block" in entry["detail"] and "(judged)" in entry["detail"]
    assert entry["figure"] >= 5 * entry["tolerance"]
    if model != "deberta_v2":
        assert entry["extra"]["output"] < entry["figure"] / 10  # the output alone would have failed


@pytest.mark.parametrize("model", ["roformer_no_rotary", "opt_positions_by_batch"])
def test_positions_that_never_enter_fail_at_the_first_block(results, model):
    entry = _probes(results(model, POSITION))["position-blind"]
    assert entry["status"] == "fail" and entry["figure"] < entry["tolerance"] / 5, entry
    assert entry["module"] is not None and "first block" in entry["detail"]


ENTROPY = ("attention-entropy",)


@pytest.mark.parametrize("model, ratio", [("mistral_unscaled", 4.0), ("opt_unscaled", 4.0),
                                          ("gemma_scaled_twice", 0.25)])
def test_the_effective_scale_is_measured_without_a_static_finding(results, model, ratio):
    entry = _probes(results(model, ENTROPY))["attention-entropy"]
    assert entry["status"] == "fail", entry
    assert entry["extra"]["scale"] and all(abs(r - ratio) < 0.05 * ratio for r in entry["extra"]["scale"])
    assert "scale applied to q·k" in entry["detail"]


@pytest.mark.parametrize("model", ["mistral", "opt", "gemma", "t5_encoder", "bloom"])
def test_usual_scales_pass_and_a_scale_folded_into_the_init_counts(results, model):
    """T5 scales no score: its query projection is drawn 1/sqrt(d_head) smaller instead."""
    entry = _probes(results(model, ENTROPY))["attention-entropy"]
    assert entry["status"] == "pass", entry
    assert entry["extra"]["scale"] and all(0.6 < r < 1.6 for r in entry["extra"]["scale"]), entry["extra"]


def test_depth_growth_does_not_depend_on_the_stream_size_the_init_gives(results):
    """Llama-style pre-norm blocks over an embedding drawn 100x smaller than usual: the branch
    dominates block 0's output at that size, yet the residual path is there."""
    entry = _probes(results("variants:qwen2_small_embedding", ("depth-growth",)))["depth-growth"]
    assert entry["status"] == "pass", entry
    assert min(entry["extra"]["skip"]) > 0.5
    broken = _probes(results("phi_no_residual", ("depth-growth",)))["depth-growth"]
    assert broken["status"] == "fail" and min(broken["extra"]["skip"]) < 0.25, broken


# --- causality: the class verified and its uses ------------------------------------------

VENDORED = '''import torch
from torch import nn
import torch.nn.functional as F


class TextModel(nn.Module):
    """A bidirectional encoder."""

    def __init__(self, vocab_size=48, d_model=32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(64, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids, mask=None, causal=False):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1]))
        attn = nn.Transformer.generate_square_subsequent_mask(ids.shape[1]) if causal else None
        pad = None if mask is None else mask == 0
        return self.head(self.layers(x, mask=attn, src_key_padding_mask=pad))


class TextModelForCausalLM(nn.Module):
    """The same encoder run as a decoder, with its next-token loss: a sibling in the file."""

    def __init__(self):
        super().__init__()
        self.model = TextModel()

    def forward(self, ids, labels=None):
        logits = self.model(ids, causal=True)
        if labels is None:
            return logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


def build_encoder():
    return TextModel()


def build_lm():
    return TextModelForCausalLM()
'''
TRAIN = '''from modeling import build_encoder


def sample(steps):
    model = build_encoder()
    return model.generate(steps)
'''


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_causal_sibling_in_the_same_file_does_not_make_the_encoder_causal(tmp_path):
    root = _project(tmp_path, {"modeling.py": VENDORED})
    try:
        result = _run("modeling:build_encoder", root, probes=["causal-leak"], seq_len=8)
        lm = _run("modeling:build_lm", root, probes=["causal-leak"], seq_len=8)
    finally:
        sys.modules.pop("modeling", None)
    model = result["model"]
    assert model["causal"] is False and model["causal_inconclusive"], model
    entry = _probes(result)["causal-leak"]
    assert entry["status"] == "skip" and entry["detail"].startswith("inconclusive") and "`causal = true`" in \
        entry["detail"]
    assert lm["model"]["causal"] is True and "next-token loss" in lm["model"]["causal_reason"]
    assert _probes(lm)["causal-leak"]["status"] == "pass"


def test_a_use_in_the_project_makes_a_model_causal_and_its_broken_mask_shows(tmp_path):
    """No evidence in the class; a script of the project samples from it: causal. The model
    sees later tokens (the mask the class never applies): causal-leak fails."""
    root = _project(tmp_path, {"modeling.py": VENDORED, "train.py": TRAIN})
    try:
        result = _run("modeling:build_encoder", root, probes=["causal-leak"], seq_len=8)
    finally:
        sys.modules.pop("modeling", None)
    assert result["model"]["causal"] is True and "`.generate(...)` in train.py" in result["model"]["causal_reason"]
    assert _probes(result)["causal-leak"]["status"] == "fail"


def test_the_report_says_inconclusive_and_names_the_setting(tmp_path):
    from tlint.verify.output import causal_json, report_json

    root = _project(tmp_path, {"modeling.py": VENDORED})
    try:
        result = _run("modeling:build_encoder", root, probes=["causal-leak"], seq_len=8)
    finally:
        sys.modules.pop("modeling", None)
    assert causal_json(result["model"])["causal"] == "inconclusive"
    document = report_json(result["model"], result["probes"], [])
    assert document["model"]["causal"] == "inconclusive" and "`causal = true`" in document["model"]["causal_evidence"]


# --- norm-scale: a norm skipped, seen by what the block does with the stream's scale -------

NORM = ("norm-scale",)
# batch 1's correct classes from `transformers` (CLIP's and Whisper's need their repositories' mirrors)
CORRECT = ["gpt_neo", "opt", "bloom", "falcon", "mistral", "qwen2", "phi", "gemma", "gpt_neox", "xglm", "biogpt",
           "electra", "deberta_v2", "roformer", "modernbert", "t5_encoder"]


@pytest.mark.parametrize("model", ["bloom_no_input_norm", "electra_no_output_norm"])
def test_a_norm_skipped_in_every_block_fails(results, model):
    """Pre-norm without its input norm (BLOOM), post-norm without its norms (ELECTRA): at the
    stream's own scale the blocks look normal; rescaled, each passes the scale on."""
    entry = _probes(results(model, NORM))["norm-scale"]
    assert entry["status"] == "fail" and entry["figure"] > 0.8, entry
    assert all(e > 0.8 for e in entry["extra"]["exponents"].values()), entry["extra"]
    assert "no block normalises what it reads" in entry["detail"]


def test_the_correct_classes_pass_and_the_control_is_caught_on_each(results):
    """Batch 1's correct classes; ModernBERT's first block has no attention norm by design (it
    reads the normalised embedding output): measured, not judged."""
    for model in CORRECT:
        entry = _probes(results(model, NORM))["norm-scale"]
        assert entry["status"] == "pass" and entry["figure"] < 0.1, (model, entry)
        assert entry["control"]["caught"], (model, entry["control"])
    modernbert = _probes(results("modernbert", NORM))["norm-scale"]
    assert modernbert["extra"]["exponents"]["0"] > 0.8 and "first block is not judged" in modernbert["detail"]


PLANTED_NORMS = '''import torch
from torch import nn
from decoders import rotary_gpt
from library import distilbert, gpt2


def gpt2_no_ln_1():
    model = gpt2()
    for block in model.transformer.h:
        block.ln_1 = nn.Identity()
    return model


def gpt2_last_block_no_ln_2():
    model = gpt2(4)
    model.transformer.h[-1].ln_2 = nn.Identity()
    return model


def rotary_gpt_no_norm_2():
    model = rotary_gpt()
    for layer in model.layers:
        layer.norm_2 = nn.Identity()
    return model


def distilbert_no_layer_norms():
    model = distilbert()
    for layer in model.distilbert.transformer.layer:
        layer.sa_layer_norm = nn.Identity()
        layer.output_layer_norm = nn.Identity()
    return model


class Block(nn.Module):
    """No norm by design: the branches are scaled by a small learned gain (ReZero-style)."""

    def __init__(self, d_model=32):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d_model, 64), nn.GELU(), nn.Linear(64, d_model))
        self.gain = nn.Parameter(torch.full((), 0.1))

    def forward(self, x):
        x = x + self.gain * self.attn(x, x, x, need_weights=False)[0]
        return x + self.gain * self.mlp(x)


class NormFree(nn.Module):
    def __init__(self, vocab_size=96, d_model=32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model) for _ in range(2)])
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def norm_free():
    return NormFree()
'''
ZOO = Path(__file__).resolve().parent.parent / "fixtures" / "zoo"


@pytest.mark.parametrize("model, every", [("gpt2_no_ln_1", True), ("rotary_gpt_no_norm_2", True),
                                          ("distilbert_no_layer_norms", True), ("gpt2_last_block_no_ln_2", False)])
def test_norms_skipped_in_models_outside_the_batch_fail(tmp_path, model, every):
    """GPT-2 (pre-norm, library), an own-code rotary GPT (its own RMSNorm class), DistilBERT
    (post-norm, library); and one block of four without its MLP norm."""
    root = _project(tmp_path, {"planted_norms.py": PLANTED_NORMS})
    try:
        entry = _probes(_run(f"planted_norms:{model}", root, probes=list(NORM), python_path=[str(ZOO)]))["norm-scale"]
    finally:
        sys.modules.pop("planted_norms", None)
    assert entry["status"] == "fail" and entry["figure"] > 0.8, entry
    assert ("no block normalises" in entry["detail"]) is every
    if not every:
        assert entry["module"] == "transformer.h.3" and "while the blocks before it do" in entry["detail"]


def test_a_model_without_any_norm_is_not_judged(tmp_path):
    root = _project(tmp_path, {"planted_norms.py": PLANTED_NORMS})
    try:
        entry = _probes(_run("planted_norms:norm_free", root, probes=list(NORM), call="ids"))["norm-scale"]
    finally:
        sys.modules.pop("planted_norms", None)
    assert entry["status"] == "skip" and "norm-free design" in entry["detail"], entry
