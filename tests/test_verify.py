"""`tlint verify`, in process: loading (call styles, output normalisation, errors) and the
probes on the fixtures/models zoo — each broken model fails exactly its probes, far beyond
the tolerance; each correct model passes with a clear margin."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.torchutil import import_torch

# slow: builds models and runs the verifier's probes (forward and backward passes)
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify")]

torch = import_torch()
nn = torch.nn

from tlint.verify.loading import (
    Caller,
    UserCodeError,
    candidate_styles,
    choose_caller,
    first_tensor,
    infer_vocab_size,
)
from tlint.verify.options import (
    PROBES,
    OptionsError,
    VerifyOptions,
    resolve,
    select_probes,
)
from tlint.verify.probes import PROBE_CLASSES, ProbeContext
from tlint.verify.worker import verify

ZOO = Path(__file__).resolve().parent.parent / "fixtures" / "models"
ZOO_MODULES = ("gpt", "bert", "broken", "torch_encoder")
CAUSAL_NAMES = ["GPT", "CausalLM"]
# The comparison probes: a figure above the tolerance is a failure.
LEAK_PROBES = {"mask-leak", "causal-leak", "batch-coupling", "padding-equivalence"}
BROKEN = {
    "broken:mask_ignored": {"mask-leak", "padding-equivalence", "attention-maps"},
    "broken:no_causal_mask": {"causal-leak"},
    "broken:head_split_no_transpose": {"causal-leak"},
    "broken:neg_inf_mask_fill": {"nan-trace"},
    "broken:no_positions": {"position-blind"},
    "broken:position_slice_batch": {"batch-coupling", "position-blind", "padding-equivalence"},
    "broken:unused_pooler": {"grad-flow"},
    "broken:zero_init_qkv": {"init-stats"},
    # saturated softmax also starves the gradient of the early blocks (depth-growth)
    "broken:unscaled_attention": {"attention-entropy", "init-stats", "depth-growth"},
    "broken:softmax_wrong_axis": {"attention-entropy", "mask-leak", "padding-equivalence", "attention-maps"},
    "broken:no_residuals": {"depth-growth"},
    "broken:zero_mask_fill": {"mask-leak", "padding-equivalence", "attention-maps"},
}
CORRECT = ("gpt:build_gpt", "bert:build_encoder", "bert:build_left_padding_encoder", "torch_encoder:TokenTagger")


def run_in_process(model: str, root: Path = ZOO, **options) -> dict:
    """`verify` as the worker runs it, undoing its sys.path and bytecode settings after."""
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        return verify(VerifyOptions(model=model, root=str(root), causal_names=CAUSAL_NAMES, **options))
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode


# duration: every broken and correct model of the zoo is built once for the module
@pytest.fixture(scope="module")
def zoo():
    results = {}
    try:
        for model in (*BROKEN, *CORRECT):
            results[model] = run_in_process(model)
    finally:
        for name in ZOO_MODULES:
            sys.modules.pop(name, None)
    return results


def probes_of(result: dict) -> dict[str, dict]:
    return {p["probe"]: p for p in result["probes"]}


def test_probe_registry_matches_the_names_the_cli_lists():
    assert list(PROBE_CLASSES) == list(PROBES)


@pytest.mark.parametrize("model", sorted(BROKEN))
def test_broken_model_fails_exactly_its_probes_far_beyond_tolerance(zoo, model):
    probes = probes_of(zoo[model])
    failed = {name for name, p in probes.items() if p["status"] == "fail"}
    assert failed == BROKEN[model], probes
    for name in failed:
        p = probes[name]
        if name in LEAK_PROBES:
            assert p["figure"] > 100 * p["tolerance"]
        elif name == "position-blind":  # order reaches nothing: float rounding only (~1e-6)
            assert p["figure"] < p["tolerance"] / 20
        elif name == "depth-growth":  # the stream grows, or a block has no residual path (skip share ~0)
            assert p["figure"] > 3 * p["tolerance"] or max(map(abs, p["extra"]["skip"])) < 0.1
        elif name == "attention-maps":  # a share of the attention mass, at most 1
            assert p["figure"] > 10 * p["tolerance"]
        elif name == "attention-entropy":
            off = re.search(r"do not sum to 1 \(off by up to ([\d.e-]+)\)", p["detail"])
            assert (off and float(off.group(1)) > 0.1) or p["figure"] < p["tolerance"] / 10, p
        else:  # counts: non-finite values, parameters without gradient or off their init band
            assert p["figure"] >= 1


@pytest.mark.parametrize("model", CORRECT)
def test_correct_model_passes_every_probe_with_a_margin(zoo, model):
    probes = probes_of(zoo[model])
    assert not [p for p in probes.values() if p["status"] == "fail"], probes
    for name, p in probes.items():
        if p["status"] == "skip":
            continue
        if name in LEAK_PROBES:
            assert p["figure"] <= p["tolerance"] / 100
        elif name == "position-blind":
            assert p["figure"] >= 100 * p["tolerance"]
        elif name == "attention-entropy":
            assert p["figure"] >= 2 * p["tolerance"] and "saturated 0%" in p["detail"]
        elif name == "depth-growth":
            assert p["figure"] <= p["tolerance"] / 4 and "rebuilt with" in p["detail"]
        elif name == "norm-scale":  # ~0: every block after the first normalises what it reads
            assert p["figure"] <= p["tolerance"] / 20
        else:
            assert p["figure"] == 0


def test_gpt_without_mask_skips_mask_leak_and_encoders_skip_causal_leak(zoo):
    gpt, bert = probes_of(zoo["gpt:build_gpt"]), probes_of(zoo["bert:build_encoder"])
    assert zoo["gpt:build_gpt"]["model"]["call"] == "ids"
    assert gpt["mask-leak"]["status"] == "skip" and "no mask" in gpt["mask-leak"]["detail"]
    assert gpt["causal-leak"]["status"] == "pass"
    assert zoo["bert:build_encoder"]["model"]["call"] == "input_ids,attention_mask"
    assert bert["causal-leak"]["status"] == "skip"
    assert bert["mask-leak"]["status"] == "pass"


def test_failures_name_the_module_where_they_show(zoo):
    assert probes_of(zoo["broken:mask_ignored"])["mask-leak"]["module"].startswith("layers.0.attention")
    assert probes_of(zoo["broken:no_causal_mask"])["causal-leak"]["module"].startswith("h.0.attn")
    assert probes_of(zoo["broken:neg_inf_mask_fill"])["nan-trace"]["module"].startswith("layers.0.attention")
    grad_flow = probes_of(zoo["broken:unused_pooler"])["grad-flow"]
    assert grad_flow["module"] == "pooler" and "pooler.weight" in grad_flow["detail"]


def test_mask_leak_pins_the_leak_to_the_module_that_lets_it_in(zoo):
    leaky = probes_of(zoo["broken:mask_ignored"])["mask-leak"]["extra"]["own"]
    clean = probes_of(zoo["bert:build_encoder"])["mask-leak"]["extra"]["own"]
    assert leaky["layers.0.attention"] > 1e-2 and leaky["layers.1.attention"] > 1e-2
    assert leaky["layers.0.intermediate"] == 0.0  # per-token layers never leak
    assert clean and max(clean.values()) <= 1e-6


def test_mask_leak_replays_a_call_without_mask_for_tl101(zoo):
    """The correct encoder leaks when called with ids alone, as a call site without mask does."""
    assert probes_of(zoo["bert:build_encoder"])["mask-leak"]["extra"]["unmasked"] > 1e-2


def test_probes_are_deterministic(zoo):
    again = run_in_process("broken:mask_ignored")
    for name in ZOO_MODULES:
        sys.modules.pop(name, None)
    assert [(p["probe"], p["figure"]) for p in again["probes"]] == \
        [(p["probe"], p["figure"]) for p in zoo["broken:mask_ignored"]["probes"]]


def test_left_padding_fails_without_position_ids_from_the_mask_and_no_causal_flag(zoo):
    try:
        arange = probes_of(run_in_process("bert:build_encoder", padding_side="left",
                                          probes=["mask-leak", "padding-equivalence"]))
        from_mask = probes_of(run_in_process("bert:build_left_padding_encoder", padding_side="left",
                                             probes=["padding-equivalence"]))
        forced = probes_of(run_in_process("broken:no_causal_mask", causal=False, probes=["causal-leak"]))
    finally:
        for name in ZOO_MODULES:
            sys.modules.pop(name, None)
    assert arange["mask-leak"]["status"] == "pass" and "(left)" in arange["mask-leak"]["detail"]
    equivalence = arange["padding-equivalence"]
    assert equivalence["status"] == "fail" and equivalence["figure"] > 100 * equivalence["tolerance"]
    assert "position ids are not derived from the mask" in equivalence["detail"]
    assert "right padding: " in equivalence["detail"]
    assert from_mask["padding-equivalence"]["status"] == "pass"
    right = probes_of(zoo["bert:build_encoder"])["padding-equivalence"]
    assert right["status"] == "pass" and "left padding: " in right["detail"] and "(fails" in right["detail"]
    assert forced["causal-leak"]["status"] == "skip"


def run_probe(model: nn.Module, name: str, style: str = "ids", **settings) -> dict:
    torch.manual_seed(0)
    model.eval()
    context = {"vocab_size": 40, "pad_token_id": 0, "seq_len": 16, "batch_size": 4, "causal": False,
               "padding_side": "right", "device": "cpu", "seed": 0} | settings
    result = PROBE_CLASSES[name]().run(ProbeContext(model, Caller(style), **context))
    return result.to_json()


class Classifier(nn.Module):
    def __init__(self, logit_scale=1.0, classes=3):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.head = nn.Linear(16, classes)
        self.logit_scale = logit_scale

    def forward(self, ids):
        return self.head(self.emb(ids).mean(dim=1)) * self.logit_scale


def test_init_stats_checks_the_loss_at_init_against_ln_classes():
    calm = run_probe(Classifier(), "init-stats")
    assert calm["status"] == "pass" and "vs ln(3)" in calm["detail"]
    hot = run_probe(Classifier(logit_scale=100.0), "init-stats")
    assert hot["status"] == "fail" and hot["figure"] == 1 and "more than 25 % off ln(3)" in hot["detail"]


def test_init_stats_bands():
    model = Classifier()
    with torch.no_grad():
        model.head.weight.normal_(std=2.0)          # above 4/sqrt(16) = 1
        model.emb.weight[5] = model.emb.weight[7]    # a duplicated row
    result = run_probe(model, "init-stats")
    assert result["status"] == "fail" and result["figure"] == 3, result  # two bands + the loss it makes hot
    assert "head.weight: std" in result["detail"] and "emb.weight: 1 duplicated rows" in result["detail"]


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16)) for _ in range(2)])

    def forward(self, ids):
        x = self.emb(ids)
        for block in self.blocks:
            x = x + block(x)
        return x


def test_depth_growth_states_its_sensitivity_condition():
    shallow = run_probe(TwoBlocks(), "depth-growth")
    assert shallow["status"] == "skip" and shallow["detail"].startswith("not at this scale: 2 blocks")
    assert run_probe(Classifier(), "depth-growth")["status"] == "skip"


def test_attention_capture_sees_multihead_attention_and_nested_tensors():
    """nn.TransformerEncoder with a padding mask: its fast path (nested tensors) under
    no_grad, its slow path (attention weights) under grad; no probe crashes on either."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(40, 16)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)

        def forward(self, src, src_key_padding_mask=None):
            return self.encoder(self.emb(src), src_key_padding_mask=src_key_padding_mask)

    model = Tagger()
    entropy = run_probe(model, "attention-entropy", "src,src_key_padding_mask")
    assert entropy["status"] == "pass" and "encoder.layers.0.self_attn: entropy" in entropy["detail"]
    for name in ("mask-leak", "nan-trace", "batch-coupling"):
        assert run_probe(model, name, "src,src_key_padding_mask")["status"] == "pass"


# --- loading: call styles, outputs, errors ----------------------------------------------


class _Recorder(nn.Module):
    """A model that records how it was called and returns per-position features."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 4)
        self.seen = None


class KwargsModel(_Recorder):
    def forward(self, input_ids, attention_mask=None):
        self.seen = ("kwargs", attention_mask)
        return {"logits": self.emb(input_ids)}


class TorchStyleModel(_Recorder):
    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        self.seen = ("torch", src_key_padding_mask)
        return (self.emb(src), None)


class PositionalMaskModel(_Recorder):
    def forward(self, x, mask):
        self.seen = ("positional", mask)
        return [None, self.emb(x)]


class IdsOnlyModel(_Recorder):
    def forward(self, idx, targets=None):
        self.seen = ("ids", targets)
        return self.emb(idx)


class RejectingModel(_Recorder):
    def forward(self, *args, **kwargs):
        raise ValueError("expects a dict batch")


def _batch():
    ids = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    return ids, ids != 0


def _options(**kw):
    return VerifyOptions(model="m:f", root="/nonexistent", **kw)


@pytest.mark.parametrize("model_cls, style, check", [
    (KwargsModel, "input_ids,attention_mask", lambda m: m.dtype == torch.long and m[1].tolist() == [1, 1, 0, 0]),
    (TorchStyleModel, "src,src_key_padding_mask", lambda m: m.dtype == torch.bool and m[1].tolist() == [False, False, True, True]),
    (PositionalMaskModel, "ids,mask", lambda m: m.dtype == torch.long and m[0].tolist() == [1, 1, 1, 0]),
    (IdsOnlyModel, "ids", lambda m: m is None),
])
def test_call_style_chosen_from_the_signature_with_its_mask_convention(model_cls, style, check):
    model = model_cls()
    ids, keep = _batch()
    caller = choose_caller(model, _options(), [], ids, keep)
    assert caller.style == style
    out = caller(model, ids, keep)
    assert out.shape == (2, 4, 4)
    assert check(model.seen[1])


def test_configured_style_and_adapter(tmp_path):
    (tmp_path / "adapters_for_test.py").write_text(
        "def call(model, ids, mask):\n    return model(ids, mask.bool())\n", encoding="utf-8")
    ids, keep = _batch()
    model = PositionalMaskModel()
    saved = list(sys.path)
    sys.path.insert(0, str(tmp_path))
    try:
        caller = choose_caller(model, _options(call="adapters_for_test:call"), [tmp_path], ids, keep)
    finally:
        sys.path[:] = saved
        sys.modules.pop("adapters_for_test", None)
    assert caller.adapter is not None and caller.has_mask
    caller(model, ids, keep)
    assert model.seen[1].dtype == torch.bool


def test_forward_rejecting_every_style_names_them():
    ids, keep = _batch()
    with pytest.raises(UserCodeError) as info:
        choose_caller(RejectingModel(), _options(), [], ids, keep)
    message = str(info.value)
    for style in ('"ids,mask"', '"input_ids,attention_mask"', '"src,src_key_padding_mask"', '"ids"'):
        assert style in message
    assert "expects a dict batch" in message and "set `call`" in message


def test_candidate_styles_put_the_signature_first():
    assert candidate_styles(KwargsModel())[0] == "input_ids,attention_mask"
    assert candidate_styles(IdsOnlyModel()) == ["ids"]


def test_output_normalisation():
    t = torch.ones(2, 3)
    assert first_tensor(t) is t
    assert first_tensor((None, t)) is t
    assert first_tensor({"last_hidden_state": t, "other": 1}) is t
    assert first_tensor({"hidden": t}) is None

    class Out:
        logits = t

    assert first_tensor(Out()) is t
    with pytest.raises(UserCodeError):
        Caller("ids")(lambda ids: {"nothing": 1}, torch.zeros(1, 2, dtype=torch.long), None)


def test_vocab_size_from_the_first_embedding():
    assert infer_vocab_size(nn.Sequential(nn.Linear(2, 2), nn.Embedding(33, 2), nn.Embedding(7, 2))) == 33
    assert infer_vocab_size(nn.Linear(2, 2)) is None


def _project(tmp_path: Path, name: str, source: str) -> Path:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return tmp_path


def _error(tmp_path, name, source, model=None, **options) -> UserCodeError:
    _project(tmp_path, name, source)
    try:
        with pytest.raises(UserCodeError) as info:
            run_in_process(model or f"{name}:build", root=tmp_path, **options)
    finally:
        sys.modules.pop(name, None)
    return info.value


def test_factory_raising_shows_the_users_frame(tmp_path):
    error = _error(tmp_path, "raising_factory", """
        def build(**kwargs):
            width = kwargs["d_model"]
            return width
    """)
    assert error.kind == "factory"
    assert "KeyError" in str(error) and "raising_factory.py:3 in build: width = kwargs[\"d_model\"]" in str(error)


def test_import_error_shows_the_users_frame(tmp_path):
    error = _error(tmp_path, "broken_import", """
        import torch
        VALUE = 1 / 0
    """)
    assert error.kind == "import"
    assert "ZeroDivisionError" in str(error) and "broken_import.py:3" in str(error)


def test_wrong_dotted_path(tmp_path):
    missing_module = _error(tmp_path, "present", "x = 1\n", model="absent.module:build")
    assert missing_module.kind == "import" and "no module named `absent`" in str(missing_module)
    missing_attr = _error(tmp_path, "present", "x = 1\n", model="present:build")
    assert "has no attribute `build`" in str(missing_attr)


def test_factory_returning_something_else(tmp_path):
    error = _error(tmp_path, "not_a_module", "def build():\n    return 3\n")
    assert error.kind == "factory" and "not a torch.nn.Module" in str(error)


def test_vocab_size_needed_without_embedding(tmp_path):
    error = _error(tmp_path, "no_embedding", """
        import torch.nn as nn

        def build():
            return nn.Linear(4, 4)
    """)
    assert error.kind == "config" and "vocab-size" in str(error)


# --- options ----------------------------------------------------------------------------


def test_flags_override_config_and_values_are_checked(tmp_path):
    config = {"model": "a.b:c", "seq-len": 32, "python-path": ["src"], "causal": True}
    options = resolve(config, tmp_path / "tlint.toml", tmp_path, {"seq-len": 8, "model": None, "causal": False})
    assert (options.model, options.seq_len, options.causal) == ("a.b:c", 8, False)
    assert options.python_path == [str((tmp_path / "src").resolve())]
    with pytest.raises(OptionsError, match="`seq-len` in \\[tool.tlint.verify\\] must be a positive integer"):
        resolve({"model": "a:b", "seq-len": "long"}, tmp_path / "tlint.toml", tmp_path, {})
    with pytest.raises(OptionsError, match="dotted path"):
        resolve({"model": "a.b.c"}, None, tmp_path, {})
    with pytest.raises(OptionsError, match="no model to verify"):
        resolve({}, None, tmp_path, {})
    with pytest.raises(OptionsError, match="unknown probe `nope`"):
        select_probes(["nope"])
