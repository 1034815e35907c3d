"""eval-determinism (TL214): two eval-mode forwards of one batch must agree. The probe fails
on a model whose attention dropout stays on in eval mode and names where; it passes on the
zoo's correct models, whose positive control (attention dropout injected) it catches; the
control leaves the model as it was; the other probes' paired forwards share one seed; and
the verdicts of TL214 and TL213 follow from it."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from tests.torchutil import import_torch

# slow: runs every probe twice on real models
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_determinism")]

torch = import_torch()

from tests.test_verify import ZOO_MODULES, probes_of, run_in_process  # noqa: E402
from tlint.verify.matching import _verdict  # noqa: E402

PROBE = "eval-determinism"


@pytest.fixture(scope="module")
def runs():
    try:
        return {model: run_in_process(model, probes=[PROBE, "mask-leak", "causal-leak"])
                for model in ("broken:eval_dropout", "broken:zero_mask_fill", "gpt:build_gpt", "bert:build_encoder")}
    finally:
        for name in ZOO_MODULES:
            sys.modules.pop(name, None)


def test_dropout_left_on_in_eval_fails_and_names_the_attention(runs):
    probe = probes_of(runs["broken:eval_dropout"])[PROBE]
    assert probe["status"] == "fail" and probe["figure"] > 100 * probe["tolerance"], probe
    assert probe["module"].startswith("h.0.attn") and "model.eval()" in probe["detail"]


def test_the_comparison_probes_draw_the_same_random_numbers_in_both_forwards(runs):
    # causal-leak compares two forwards of one shape: under the fixed seed, the dropout left
    # on draws the same mask in both, so the (correct) causal masking is not taken for a leak
    causal = probes_of(runs["broken:eval_dropout"])["causal-leak"]
    assert causal["status"] == "pass" and causal["figure"] == 0, causal


@pytest.mark.parametrize("model", ["gpt:build_gpt", "bert:build_encoder", "broken:zero_mask_fill"])
def test_deterministic_models_pass_and_their_control_is_caught(runs, model):
    probe = probes_of(runs[model])[PROBE]
    assert probe["status"] == "pass" and probe["figure"] == 0, probe
    control = probe["control"]
    assert control["caught"] and control["figure"] > 100 * probe["tolerance"], control
    assert "attention dropout" in control["injected"]


def test_the_control_leaves_the_model_as_it_was():
    from tlint.verify.controls import run_control
    from tlint.verify.loading import Caller
    from tlint.verify.probes import ProbeContext

    sys.path.insert(0, str(__import__("tests.test_verify", fromlist=["ZOO"]).ZOO))
    try:
        import gpt

        model = gpt.build_gpt().eval()
        ctx = ProbeContext(model, Caller("ids"), vocab_size=96, pad_token_id=0, seq_len=16, batch_size=4,
                           causal=True, padding_side="right", device="cpu", seed=0)
        ids, keep = ctx.full_batch(ctx.generator(5))
        before = ctx.forward(ids, keep)
        control = run_control(PROBE, ctx)
        assert control is not None and control["caught"]
        assert torch.equal(before, ctx.forward(ids, keep)) and not model.training
    finally:
        sys.path.pop(0)
        for name in ZOO_MODULES:
            sys.modules.pop(name, None)


def _diag(code: str) -> SimpleNamespace:
    start = SimpleNamespace(line=3, column=1)
    return SimpleNamespace(code=code, path="/nowhere/model.py", range=SimpleNamespace(start=start, end=start))


def _entry(status: str, figure: float, control: dict | None = None) -> dict:
    entry = {"probe": PROBE, "status": status, "figure": figure, "tolerance": 1e-5, "unit": "u", "module": None,
             "detail": "", "extra": {}}
    if control is not None:
        entry["control"] = control
    return entry


def test_tl214_verdicts():
    failed = _verdict(_diag("TL214"), [], {PROBE: _entry("fail", 0.8)})
    assert failed[:2] == ("confirmed", PROBE)
    caught = {"injected": "attention dropout", "caught": True, "figure": 0.3, "detail": "x"}
    assert _verdict(_diag("TL214"), [], {PROBE: _entry("pass", 0.0, caught)})[:2] == ("not-reproduced", PROBE)
    missed = {**caught, "caught": False, "figure": None}
    assert _verdict(_diag("TL214"), [], {PROBE: _entry("pass", 0.0, missed)})[0] == "inconclusive"
    assert _verdict(_diag("TL214"), [], {})[0] == "not-checkable"


def test_tl213_is_confirmed_by_the_leak_probes():
    leak = {"probe": "mask-leak", "status": "fail", "figure": 0.17, "tolerance": 1e-4, "unit": "u",
            "module": "layers.0.attention", "detail": "", "extra": {}}
    assert _verdict(_diag("TL213"), [], {"mask-leak": leak})[:2] == ("confirmed", "mask-leak")
    causal = {**leak, "probe": "causal-leak"}
    assert _verdict(_diag("TL213"), [], {"causal-leak": causal})[:2] == ("confirmed", "causal-leak")
