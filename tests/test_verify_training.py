"""The training probes (overfit-batch, warmup-ab, optimizer-coverage) on tiny models: the
correct ones pass (and the constant-input control stays up), broken ones fail with a figure;
a too-high learning rate spikes without warmup and not with it; an optimiser factory that
leaves out a parameter group is caught. Plus their wiring: opt-in selection, settings,
verdicts on TL301/TL304/TL307, `max-seconds`, progress events."""

from __future__ import annotations

import io
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.torchutil import import_torch

# slow: trains small models (the warmup and clipping probes)
pytestmark = pytest.mark.slow

torch = import_torch()
nn = torch.nn

from tlint.verify.loading import Caller
from tlint.verify.matching import _warmup_verdict
from tlint.verify.options import OptionsError, VerifyOptions, resolve, select_probes
from tlint.verify.probes import ProbeContext
from tlint.verify.progress import ProgressBar
from tlint.verify.training_probes import (
    OptimizerCoverageProbe,
    OverfitBatchProbe,
    TrainingSettings,
    WarmupABProbe,
)
from tlint.verify.worker import verify

ZOO = Path(__file__).resolve().parent.parent / "fixtures" / "models"
VOCAB = 32


class TinyLM(nn.Module):
    """A small causal LM: token + position embeddings, one causal attention block, a head."""

    def __init__(self, vocab=VOCAB, d=32, seq=16, detach_blocks=False):
        super().__init__()
        self.detach_blocks = detach_blocks
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        a = self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]
        x = x + (a.detach() if self.detach_blocks else a)
        m = self.mlp(x)
        x = x + (m.detach() if self.detach_blocks else m)
        return self.head(self.ln(x))


class InputBlindLM(nn.Module):
    """Its output ignores the tokens: one learnt table of logits per position."""

    def __init__(self, vocab=VOCAB, seq=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, 8)
        self.table = nn.Parameter(torch.randn(seq, vocab) * 0.02)

    def forward(self, ids):
        return self.table[: ids.shape[1]].expand(ids.shape[0], -1, -1) + 0 * self.wte(ids).sum()


class BatchIndexedLM(TinyLM):
    """Adds a learnt vector per batch index: identical samples become distinguishable."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.slot = nn.Embedding(64, 32)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t)) + self.slot(torch.arange(ids.shape[0]))[:, None]
        return self.head(self.ln(x + self.mlp(x)))


def context(model, seq_len=8, batch_size=4, causal=True, **training) -> ProbeContext:
    torch.set_num_threads(1)  # as the worker does: tiny models, reproducible runs
    torch.manual_seed(0)
    model.eval()
    ctx = ProbeContext(model, Caller("ids"), vocab_size=VOCAB, pad_token_id=0, seq_len=seq_len,
                       batch_size=batch_size, causal=causal, padding_side="right", device="cpu", seed=0)
    ctx.training = TrainingSettings(**training)
    return ctx


def build(cls, **kwargs):
    torch.manual_seed(0)
    return cls(**kwargs)


# --- overfit-batch -------------------------------------------------------------------------


def test_correct_model_memorises_the_batch_and_its_control_stays_up():
    model = build(TinyLM)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = OverfitBatchProbe().run(context(model))
    assert result.status == "pass", result.detail
    assert result.figure <= result.tolerance
    main, control = result.extra["overfit"], result.extra["control"]
    assert main["loss_ratio"] <= 0.1 and main["grad_ratio"] <= 0.1
    assert control["loss_ratio"] > 0.5 and control["steps"] == main["steps"]
    assert result.extra["targets"] == "next token"
    assert "control (every token =" in result.detail
    # the probe restores the weights: the later probes see the model as built
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_encoder_targets_are_fixed_random_ones():
    result = OverfitBatchProbe().run(context(build(TinyLM), causal=False))
    assert result.status == "pass", result.detail
    assert result.extra["targets"] == "fixed random targets"


@pytest.mark.parametrize("cls, kwargs", [(InputBlindLM, {}), (TinyLM, {"detach_blocks": True})],
                         ids=["output-ignores-input", "detached-blocks"])
def test_a_model_that_cannot_use_its_input_fails(cls, kwargs):
    probe = OverfitBatchProbe()
    probe.steps = 120
    result = probe.run(context(build(cls, **kwargs)))
    assert result.status == "fail", result.detail
    assert result.figure > 2 * result.tolerance
    assert "cannot memorise" in result.detail


def test_a_control_that_learns_fails():
    result = OverfitBatchProbe().run(context(build(BatchIndexedLM)))
    assert result.status == "fail", result.detail
    assert result.extra["control"]["loss_ratio"] < 0.5
    assert "control run learns" in result.detail


def test_max_seconds_is_respected():
    # a budget no machine can train the batch in (at 0.3 s a quiet machine converged first)
    started = time.monotonic()
    result = OverfitBatchProbe().run(context(build(TinyLM), max_seconds=0.02))
    assert time.monotonic() - started < 3
    assert "max-seconds" in result.detail


# --- warmup-ab -----------------------------------------------------------------------------


def gpt_context(**training) -> ProbeContext:
    """The zoo's GPT (vocabulary 96), 4 x 8 token batches."""
    torch.set_num_threads(1)
    sys.path.insert(0, str(ZOO))
    try:
        import gpt
    finally:
        sys.path.remove(str(ZOO))
        sys.modules.pop("gpt", None)
    torch.manual_seed(0)
    model = gpt.build_gpt().eval()
    ctx = ProbeContext(model, Caller("ids"), vocab_size=96, pad_token_id=0, seq_len=8, batch_size=4, causal=True,
                       padding_side="right", device="cpu", seed=0)
    ctx.training = TrainingSettings(**training)
    return ctx


def test_too_high_lr_spikes_without_warmup_and_not_with_it():
    result = WarmupABProbe().run(gpt_context(lr=0.2))
    assert result.status == "fail", result.detail
    runs = result.extra["runs"]
    assert runs["plain"]["spike"] > result.tolerance > runs["warmup"]["spike"]
    assert result.extra["needs_warmup"]
    assert "(warmup alone fixes it)" in result.detail
    verdict, probe, reason = _warmup_verdict("TL304", result.to_json() | {"extra": result.extra})
    assert (verdict, probe) == ("confirmed", "warmup-ab"), reason
    assert _warmup_verdict("TL307", result.to_json() | {"extra": result.extra})[0] == "confirmed"


def test_moderate_lr_is_stable_and_not_reproduced():
    result = WarmupABProbe().run(gpt_context(lr=1e-3))
    assert result.status == "pass", result.detail
    assert not result.extra["runs"]["plain"]["diverged"]
    entry = result.to_json() | {"extra": result.extra}
    for code in ("TL301", "TL304", "TL307"):
        assert _warmup_verdict(code, entry)[0] == "not-reproduced"


def test_warmup_ab_needs_an_optimiser_or_lr():
    result = WarmupABProbe().run(context(build(TinyLM)))
    assert result.status == "skip" and "--lr" in result.detail
    assert _warmup_verdict("TL301", result.to_json())[0] == "not-checkable"


def test_warmup_ab_uses_the_configured_optimiser_and_lr_override():
    seen = []

    def factory(model):
        seen.append(model)
        return torch.optim.SGD(model.parameters(), lr=0.5), None

    ctx = context(build(TinyLM), optimizer_factory=factory, optimizer_spec="pkg.train:make", lr=0.01)
    probe = WarmupABProbe()
    probe.steps = 12
    result = probe.run(ctx)
    assert len(seen) == 4 and result.status in ("pass", "fail")
    assert "SGD from `pkg.train:make`, lr 0.01" in result.detail


# --- optimizer-coverage --------------------------------------------------------------------


def test_optimizer_coverage_catches_a_missing_parameter_group():
    def no_head(model):
        return torch.optim.AdamW([p for n, p in model.named_parameters() if not n.startswith("head.")], lr=1e-3)

    result = OptimizerCoverageProbe().run(context(build(TinyLM), optimizer_factory=no_head, optimizer_spec="t:no_head"))
    assert result.status == "fail"
    assert result.figure == 2 and result.module == "head"
    assert result.extra["missing"] == ["head.weight", "head.bias"]


def test_optimizer_coverage_passes_a_complete_optimiser_and_flags_frozen_ones():
    def groups(model):
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        rest = [p for n, p in model.named_parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}])

    model = build(TinyLM)
    result = OptimizerCoverageProbe().run(context(model, optimizer_factory=groups, optimizer_spec="t:groups"))
    assert result.status == "pass", result.detail
    model.ln.weight.requires_grad_(False)
    result = OptimizerCoverageProbe().run(context(model, optimizer_factory=groups, optimizer_spec="t:groups"))
    assert result.status == "fail" and result.extra["frozen"] == ["ln.weight"]


def test_optimizer_coverage_skips_without_a_factory():
    assert OptimizerCoverageProbe().run(context(build(TinyLM))).status == "skip"


# --- wiring --------------------------------------------------------------------------------


def test_training_probes_are_opt_in():
    default = select_probes(None)
    assert not {"overfit-batch", "warmup-ab", "optimizer-coverage"} & set(default)
    assert select_probes(None, optimizer=True)[-1] == "optimizer-coverage"
    assert select_probes(["training"]) == ["optimizer-coverage", "overfit-batch", "warmup-ab"]
    assert select_probes(["warmup-ab", "mask-leak"]) == ["mask-leak", "warmup-ab"]
    with pytest.raises(OptionsError, match="training"):
        select_probes(["overfit"])


def test_training_settings_are_read_and_checked(tmp_path):
    options = resolve({"model": "m:build", "optimizer": "pkg.train:make_optimizer", "lr": 3e-4,
                       "max-seconds": 5}, None, tmp_path, {"lr": 1e-3})
    assert (options.optimizer, options.lr, options.max_seconds) == ("pkg.train:make_optimizer", 1e-3, 5)
    with pytest.raises(OptionsError, match="optimizer"):
        resolve({"model": "m:build", "optimizer": "not a path"}, None, tmp_path, {})
    with pytest.raises(OptionsError, match="lr"):
        resolve({"model": "m:build", "lr": -1}, None, tmp_path, {})


def test_verify_runs_the_configured_optimiser_factory_and_reports_progress(tmp_path):
    (tmp_path / "tlint_opts.py").write_text(textwrap.dedent("""
        import torch

        def skip_first_block(model):
            return torch.optim.AdamW([p for n, p in model.named_parameters() if not n.startswith("h.0.")])
    """))
    events = []
    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        result = verify(VerifyOptions(model="gpt:build_gpt", root=str(ZOO), python_path=[str(tmp_path)],
                                      causal_names=["GPT"], seq_len=8, optimizer="tlint_opts:skip_first_block",
                                      probes=["optimizer-coverage", "warmup-ab"], max_seconds=5),
                        events.append)
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode
        for name in ("gpt", "tlint_opts"):
            sys.modules.pop(name, None)
    probes = {p["probe"]: p for p in result["probes"]}
    assert probes["optimizer-coverage"]["status"] == "fail"
    assert probes["optimizer-coverage"]["module"].startswith("h.0")
    assert probes["warmup-ab"]["status"] in ("pass", "fail") and "AdamW from `tlint_opts:skip_first_block`" in \
        probes["warmup-ab"]["detail"]
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"]


def test_progress_bar_draws_on_its_stream_only_when_enabled():
    stream = io.StringIO()
    bar = ProgressBar(stream=stream)  # not a terminal: nothing
    bar.update({"probe": "overfit-batch", "done": 5, "total": 5, "what": "overfit"})
    bar.close()
    assert stream.getvalue() == ""
    bar = ProgressBar(stream=stream, force=True)
    bar.update({"probe": "overfit-batch", "done": 5, "total": 10, "what": "overfit"})
    bar.update({"probe": "overfit-batch", "done": 10, "total": 10, "what": "control"})
    bar.close()
