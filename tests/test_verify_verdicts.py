"""Verdicts that mean what they say: `not-reproduced` only when the probe has shown it can
see the bug on this model (a caught positive control, or a direct reading), else
`inconclusive` naming the missing power; the positive controls themselves (they catch the
injected bug on a correct model, they leave the model as it was); extra seeds near a
tolerance; skipped key probes and `--strict`; the formats (JSON schema, SARIF, LSP, text)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.torchutil import import_torch
from tlint.verify import output
from tlint.verify.matching import _verdict

# slow: runs the probes on broken and correct models
pytestmark = pytest.mark.slow

SCHEMA = json.loads((Path(__file__).parent / "tlint-output.schema.json").read_text(encoding="utf-8"))


def _diag(code: str) -> SimpleNamespace:
    start = SimpleNamespace(line=3, column=1)
    return SimpleNamespace(code=code, path="/nowhere/model.py", range=SimpleNamespace(start=start, end=start))


def _probe(name: str, status: str = "pass", figure: float = 0.0, tolerance: float = 1e-4, control=None,
           **extra) -> dict:
    entry = {"probe": name, "status": status, "figure": figure, "tolerance": tolerance, "unit": "u",
             "module": None, "detail": "", "extra": extra}
    if control is not None:
        entry["control"] = control
    return entry


def _control(caught: bool, figure: float | None = 0.3) -> dict:
    return {"injected": "the causal mask dropped", "caught": caught, "figure": figure, "detail": "x"}


def _run(code: str, *probes: dict) -> tuple[str, str | None, str]:
    return _verdict(_diag(code), [], {p["probe"]: p for p in probes})


def test_a_pass_clears_a_finding_only_when_its_control_was_caught():
    verdict, probe, reason = _run("TL207", _probe("causal-leak", control=_control(True)))
    assert (verdict, probe) == ("not-reproduced", "causal-leak") and "positive control" in reason
    verdict, _, reason = _run("TL207", _probe("causal-leak", control=_control(False, None)))
    assert verdict == "inconclusive" and "was not caught" in reason


def test_a_pass_without_a_control_for_the_rule_is_inconclusive():
    # depth-growth's control removes residuals: it speaks for TL203, not for a norm placement
    verdict, _, reason = _run("TL201", _probe("depth-growth", figure=1.0, tolerance=10.0, control=_control(True)))
    assert verdict == "inconclusive" and "no positive control for TL201" in reason


def test_direct_readings_clear_or_confirm():
    assert _run("TL211", _probe("init-stats", tolerance=0.0))[0] == "not-reproduced"
    # TL208: the scale applied to q·k, relative to 1/sqrt(d_head)
    verdict, _, reason = _run("TL208", _probe("attention-entropy", figure=0.9, tolerance=0.3, scale=[2.83, 2.83]))
    assert verdict == "confirmed" and "not scaled down" in reason
    assert _run("TL208", _probe("attention-entropy", figure=0.9, tolerance=0.3, scale=[1.0]))[0] == "not-reproduced"
    # no scale measured: the entropy's control (softmax axis) says nothing about scaling
    verdict, _, reason = _run("TL208", _probe("attention-entropy", figure=0.9, tolerance=0.3, scale=[],
                                              control=_control(True)))
    assert verdict == "inconclusive"
    # TL203: each block's skip share
    verdict, _, reason = _run("TL203", _probe("depth-growth", figure=1.2, tolerance=10.0, skip=[0.9, 0.02],
                                              stack="blocks"))
    assert verdict == "confirmed" and "`blocks.1` has no residual path" in reason
    cleared = _run("TL203", _probe("depth-growth", figure=1.0, tolerance=10.0, skip=[0.9, 0.95],
                                   control=_control(True, -0.2)))
    assert cleared[0] == "not-reproduced" and "residuals removed" in cleared[2]


def test_unmasked_call_in_a_right_padded_causal_model_is_inconclusive():
    mask_leak = _probe("mask-leak", unmasked=0.0, pads_unseen=True)
    verdict, _, reason = _run("TL101", mask_leak)
    assert verdict == "inconclusive" and "padding-side" in reason
    assert _run("TL101", _probe("mask-leak", unmasked=0.0, pads_unseen=False))[0] == "not-reproduced"
    assert _run("TL101", _probe("mask-leak", unmasked=0.5, pads_unseen=True))[0] == "confirmed"


def test_own_leak_needs_the_class_to_read_its_input():
    from tlint.verify.matching import ModelClass

    owner = ModelClass("Attn", Path("/nowhere/model.py"), 1, 10, ["blocks.0.attn"])
    probe = _probe("mask-leak", own={"blocks.0.attn": 0.0}, own_reads={"blocks.0.attn": 0.0})
    verdict, _, reason = _verdict(_diag("TL103"), [owner], {"mask-leak": probe})
    assert verdict == "inconclusive" and "does not move its output either" in reason
    probe["extra"]["own_reads"] = {"blocks.0.attn": 0.4}
    assert _verdict(_diag("TL103"), [owner], {"mask-leak": probe})[0] == "not-reproduced"


# --- the controls on real models ---------------------------------------------------------

torch = import_torch()


def test_controls_catch_their_bug_on_a_correct_model_and_leave_it_unchanged():
    from tests.test_verify import run_in_process

    try:
        gpt = {p["probe"]: p for p in run_in_process("gpt:build_gpt")["probes"]}
        bert = {p["probe"]: p for p in run_in_process("bert:build_encoder")["probes"]}
    finally:
        for name in ("gpt", "bert"):
            sys.modules.pop(name, None)
    for name in ("causal-leak", "position-blind", "batch-coupling", "depth-growth"):
        assert gpt[name]["control"]["caught"], gpt[name]
    assert gpt["causal-leak"]["control"]["figure"] > 100 * gpt["causal-leak"]["tolerance"]
    for name in ("mask-leak", "padding-equivalence", "attention-entropy"):
        assert bert[name]["control"]["caught"], bert[name]
    # scaled_dot_product_attention turns a fully masked row into zeros, not NaN: a -inf fill
    # cannot show there, and the control says so
    assert not bert["nan-trace"]["control"]["caught"]


def test_a_control_restores_the_weights():
    from tlint.verify.controls import run_control
    from tlint.verify.loading import Caller
    from tlint.verify.probes import ProbeContext

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures" / "zoo"))
    try:
        import decoders

        torch.manual_seed(0)
        model = decoders.rotary_gpt().eval()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        ctx = ProbeContext(model, Caller("ids"), vocab_size=96, pad_token_id=0, seq_len=16, batch_size=4,
                           causal=True, padding_side="right", device="cpu", seed=0)
        control = run_control("position-blind", ctx)
        assert control is not None and control["caught"] and "inv_freq" in control["detail"]
        after = model.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before)
    finally:
        sys.path.pop(0)
        sys.modules.pop("decoders", None)


def test_a_figure_near_its_tolerance_is_settled_by_three_seeds():
    from tlint.verify.probes import Probe
    from tlint.verify.worker import _settle

    class Wobbly(Probe):
        name, tolerance, unit = "wobbly", 1.0, "u"
        figures = {0: 1.2, 1: 0.8, 2: 0.9}

        def run(self, ctx):
            figure = self.figures[ctx.seed]
            return self.result("pass" if figure <= self.tolerance else "fail", figure)

    ctx = SimpleNamespace(seed=0)
    first = Wobbly().run(ctx)
    entry = first.to_json()
    _settle(Wobbly(), ctx, first, entry)
    assert entry["status"] == "pass" and entry["figure"] == 0.9  # the median run decides
    assert entry["seeds"]["figures"] == [1.2, 0.8, 0.9] and entry["seeds"]["spread"] == pytest.approx(0.4)
    assert ctx.seed == 0
    far = Wobbly().result("pass", 0.01)
    entry = far.to_json()
    _settle(Wobbly(), ctx, far, entry)
    assert "seeds" not in entry  # far from the tolerance: one seed


# --- summary, --strict and the formats --------------------------------------------------

MODEL = {"factory": "m:f", "class": "M", "parameters": 10, "call": "ids", "convention": "model(ids)",
         "causal": True, "causal_reason": "measured: outputs before t ignore the tokens from t on",
         "vocab_size": 96, "layout": "batch-first"}
FINDINGS = [{"code": "TL207", "path": "model.py", "range": {"start": {"line": 3, "column": 1},
                                                             "end": {"line": 3, "column": 9}},
             "verdict": "inconclusive", "probe": "causal-leak", "reason": "not caught"},
            {"code": "TL103", "path": "model.py", "range": {"start": {"line": 5, "column": 1},
                                                             "end": {"line": 5, "column": 9}},
             "verdict": "not-checkable", "probe": "mask-leak", "reason": "mask-leak skipped"}]
PROBES = [dict(_probe("causal-leak", control=_control(False, None)), seconds=0.1),
          dict(_probe("mask-leak", status="skip", figure=None), detail="could not run: boom", seconds=0.1)]


def test_skipped_key_probes_are_in_the_summary_and_strict_exits_1():
    counts = output.summary(PROBES, FINDINGS)
    assert counts["inconclusive"] == 1 and counts["skipped_key_probes"] == ["mask-leak"]
    assert output.exit_code(PROBES, FINDINGS) == 0
    assert output.exit_code(PROBES, FINDINGS, strict=True) == 1
    # a probe that does not apply (no mask to pass) is not a skipped key probe
    quiet = [dict(PROBES[1], detail="the call style passes no mask")]
    assert output.summary(quiet, [])["skipped_key_probes"] == []


def test_json_report_matches_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    document = output.report_json(MODEL, PROBES, FINDINGS)
    schema = {**SCHEMA, "$ref": "#/$defs/verify_report"}
    for key in ("required", "properties", "additionalProperties", "type"):
        schema.pop(key, None)
    jsonschema.validate(document, schema)
    assert document["model"]["causal"] == "yes" and document["model"]["causal_evidence"].startswith("measured")
    assert document["probes"][0]["control"]["caught"] is False


def test_sarif_lsp_and_text_carry_inconclusive_and_the_control():
    from tests.sarifcheck import check_sarif

    log = output.sarif_document(MODEL, PROBES, FINDINGS, strict=True)
    check_sarif(log)
    (run,) = log["runs"]
    result = next(r for r in run["results"] if r["ruleId"] == "TL207")
    assert (result["kind"], result["level"]) == ("review", "none")
    assert result["properties"]["verdict"] == "inconclusive" and result["properties"]["control"]["caught"] is False
    assert run["invocations"][0]["exitCode"] == 1  # --strict: a key probe was skipped
    stream = io.StringIO()
    output.render_lsp(MODEL, PROBES, FINDINGS, stream)
    (line,) = stream.getvalue().splitlines()
    diagnostics = json.loads(line)["diagnostics"]
    assert [d["severity"] for d in diagnostics] == [2, 2] and diagnostics[0]["data"]["verdict"] == "inconclusive"
    stream = io.StringIO()
    output.render_text(MODEL, PROBES, FINDINGS, stream)
    text = stream.getvalue()
    assert "causal: yes (measured" in text and "NOT caught" in text and "1 inconclusive" in text
    assert "key probes skipped (--strict fails on them): mask-leak" in text


# --- training-rule findings through the import graph -------------------------------------

TRAIN = '''import torch
import torch.nn.functional as F

from pkg.model import build


def train(loader, epochs=3):
    model = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for epoch in range(epochs):
        for ids, labels in loader:
            logits = model(ids)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    return model
'''
MODEL_PY = '''import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.pos = nn.Embedding(16, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)

    def forward(self, ids):
        return self.encoder(self.emb(ids) + self.pos.weight[: ids.size(1)])


def build():
    return Tiny()
'''


def test_training_scripts_are_found_through_the_import_graph(tmp_path):
    from tlint.verify.matching import ModelClass, importers, lint, verdicts

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    model_py = tmp_path / "pkg" / "model.py"
    model_py.write_text(MODEL_PY, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")  # at the root, beside the package
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "run.py").write_text("from train import train\n\ntrain([])\n", encoding="utf-8")
    (tmp_path / "unrelated.py").write_text("import os\n", encoding="utf-8")
    found = importers([model_py.resolve()], [tmp_path])
    assert found == {(tmp_path / "train.py").resolve(), (tmp_path / "tools" / "run.py").resolve()}
    classes = [ModelClass("Tiny", model_py.resolve(), 4, 13, ["(model)"])]
    findings = verdicts(lint([model_py.resolve()], classes, [tmp_path]), classes, [])
    codes = {f["code"] for f in findings if f["path"].endswith("train.py")}
    assert {"TL301", "TL304"} <= codes  # AdamW without warmup or clipping, in the root's training script
    assert {f["verdict"] for f in findings if f["path"].endswith("train.py")} == {"not-checkable"}  # no warmup-ab
    # without the roots (the old view: the model's folder only) the script is not seen
    assert not [f for f in verdicts(lint([model_py.resolve()], classes), classes, [])
                if f["path"].endswith("train.py")]


ONE_BLOCK = '''import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Tagger(nn.Module):
    def __init__(self, vocab_size=50, d=16, max_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_len, d)
        self.block = Block(d)
        self.out = nn.Linear(d, 5)

    def forward(self, ids):
        positions = torch.arange(ids.size(1), device=ids.device)
        return self.out(self.block(self.tok(ids) + self.pos(positions)))
'''


# duration: a verify run whose key probe times out on purpose, in a child process
def test_strict_fails_on_a_skipped_key_probe(tmp_path):
    from tests.cliutil import make_project, run_tlint

    make_project(tmp_path, {"model.py": ONE_BLOCK, "tlint.toml": "[verify]\nseq-len = 8\n"})
    args = ("verify", "--model", "model:Tagger", "--probe", "depth-growth", "--probe", "grad-flow", "--format", "json")
    proc = run_tlint(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    # TL203 maps to depth-growth, which finds no stack of blocks in a one-block model
    assert [f["code"] for f in report["findings"]] == ["TL203"]
    assert report["summary"]["skipped_key_probes"] == ["depth-growth"]
    assert report["findings"][0]["verdict"] == "inconclusive"  # grad-flow passes, with no control for TL203
    strict = run_tlint(*args, "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and json.loads(strict.stdout)["summary"] == report["summary"]


def test_a_stack_without_attention_may_have_no_residual_path():
    from tlint.verify.depth import DepthGrowthProbe
    from tlint.verify.loading import Caller
    from tlint.verify.probes import ProbeContext

    class MLPStack(torch.nn.Module):  # no attention: its blocks need no residual
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 16)
            self.layers = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16))
                                               for _ in range(4)])

        def forward(self, ids):
            x = self.emb(ids)
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    ctx = ProbeContext(MLPStack().eval(), Caller("ids"), vocab_size=20, pad_token_id=0, seq_len=8, batch_size=4,
                       causal=False, padding_side="right", device="cpu", seed=0)
    result = DepthGrowthProbe().run(ctx)
    assert result.status == "pass" and max(map(abs, result.extra["skip"])) < 0.25  # measured, not judged
