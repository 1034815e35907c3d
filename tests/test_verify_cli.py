"""`tlint verify` end to end: config and flags, the child process (no __pycache__ in the
user's tree, timeouts and crashes reported), verdicts on static findings, text and JSON
output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cliutil import REPO, make_project, run_tlint
from tests.torchutil import import_torch
from tlint.verify.options import PROBES

# slow: `tlint verify` end to end: each run builds a model in a child process
pytestmark = pytest.mark.slow

import_torch()

# A token tagger: nn.MultiheadAttention called without its key padding mask (TL102, a real
# leak) and a feed-forward that takes the padding mask and never reads it (TL103, harmless:
# it works per token; `torch.clamp` is not among the per-position calls TL103 recognises, so
# the rule still reports it) — the second finding is planted on a correct class.
TAGGER = '''
import torch
import torch.nn as nn


class FeedForward(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x, padding_mask=None):
        return self.down(torch.clamp(self.up(x), min=0))


class Block(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model)

    def forward(self, x, padding_mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.ln2(x), padding_mask)


class Tagger(nn.Module):
    def __init__(self, vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=32, n_tags=5):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, n_tags)

    def forward(self, src, src_key_padding_mask=None):
        x = self.tok(src) + self.pos(torch.arange(src.size(1), device=src.device))
        for block in self.blocks:
            x = block(x, src_key_padding_mask)
        return self.out(self.norm(x))
'''
CONFIG = '''[verify]
model = "proj.model:not_this_one"   # the command line's --model wins
python-path = ["src"]
seq-len = 16
'''


def _tree_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if ".git" not in p.parts}


def test_verify_tagger_confirms_the_real_leak_and_clears_the_planted_finding(tmp_path):
    make_project(tmp_path, {"src/proj/__init__.py": "", "src/proj/model.py": TAGGER, "tlint.toml": CONFIG})
    before = _tree_files(tmp_path)
    proc = run_tlint("verify", "--model", "proj.model:Tagger", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert _tree_files(tmp_path) == before  # no __pycache__, nothing written
    report = json.loads(proc.stdout)
    assert set(report) == {"tool", "version", "model", "probes", "findings", "summary"}
    assert report["model"] == {"factory": "proj.model:Tagger", "class": "Tagger",
                               "parameters": report["model"]["parameters"], "call": "src,src_key_padding_mask",
                               "causal": "inconclusive", "causal_evidence": report["model"]["causal_evidence"],
                               "layout": "batch-first"}
    # nobody declared it causal and nothing in its class or its uses says so: the model was
    # asked, it sees later tokens (bidirectional, or causal with a broken mask): inconclusive
    assert report["model"]["causal_evidence"].startswith("inconclusive: only the model's own behaviour could tell")
    assert "`causal = true`" in report["model"]["causal_evidence"]
    probes = {p["probe"]: p for p in report["probes"]}
    assert set(probes["mask-leak"]) == {"probe", "status", "figure", "tolerance", "unit", "module", "detail"}
    assert probes["mask-leak"]["status"] == "fail" and probes["mask-leak"]["figure"] > 1e-2
    assert probes["mask-leak"]["module"] == "blocks.0.attn"
    verdicts = {(f["code"], f["range"]["start"]["line"]): (f["verdict"], f["probe"]) for f in report["findings"]}
    assert verdicts == {("TL102", 26): ("confirmed", "mask-leak"), ("TL103", 12): ("not-reproduced", "mask-leak")}
    # the third failure: attention-maps, the real positions attend to the padding (TL102's leak)
    assert report["summary"] == {"probes": len(PROBES), "failed": 3, "confirmed": 1, "inconclusive": 0,
                                 "skipped_key_probes": []}


def test_verify_text_output_and_probe_selection(tmp_path):
    make_project(tmp_path, {"src/proj/__init__.py": "", "src/proj/model.py": TAGGER, "tlint.toml": CONFIG})
    proc = run_tlint("verify", "--model", "proj.model:Tagger", "--probe", "grad-flow", "--probe", "nan-trace",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # TL102 and TL103 need mask-leak, not run: not-checkable
    assert "call style \"src,src_key_padding_mask\"" in proc.stdout and "True = pad" in proc.stdout
    assert "nan-trace" in proc.stdout and "grad-flow" in proc.stdout and "mask-leak" not in proc.stdout.split("static")[0]
    assert "not-checkable" in proc.stdout


# duration: every probe on a correct zoo model, in a child that imports torch
def test_correct_zoo_model_exits_0(tmp_path):
    proc = run_tlint("verify", "--model", "bert:build_encoder", "--format", "json", cwd=REPO / "fixtures" / "models")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"] == {"probes": len(PROBES), "failed": 0, "confirmed": 0, "inconclusive": 0,
                                 "skipped_key_probes": []}
    assert not list((REPO / "fixtures" / "models").rglob("__pycache__"))


def test_nan_is_a_finding_not_an_error(tmp_path):
    proc = run_tlint("verify", "--model", "broken:neg_inf_mask_fill", "--probe", "nan-trace", "--format", "json",
                     cwd=REPO / "fixtures" / "models")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["probes"][0]["status"] == "fail"
    assert [f["verdict"] for f in report["findings"] if f["code"] == "TL210"] in ([], ["confirmed"])


@pytest.mark.parametrize("source, fmt, kind, words", [
    ("import torch.nn as nn\n\ndef build(d=8):\n    return nn.Linear(d, d, nonsense=1)\n", "json", "factory",
     "usermodel.py:4 in build: return nn.Linear(d, d, nonsense=1)"),
    ("import time\ntime.sleep(600)\n", "text", "timeout", "did not finish the probes within 3 s"),
    ("import os\n\ndef build():\n    os._exit(3)\n", "json", "crash", "exited with code 3"),
])
def test_user_code_errors_are_one_paragraph_exit_2(tmp_path, source, fmt, kind, words):
    make_project(tmp_path, {"usermodel.py": source})
    timeout = "3" if kind == "timeout" else "300"
    proc = run_tlint("verify", "--model", "usermodel:build", "--timeout", timeout, "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 2
    if fmt == "json":
        error = json.loads(proc.stdout)
        assert error["tool"] == "tlint" and error["error"]["kind"] == kind
        assert words in error["error"]["message"]
        assert "Traceback" not in proc.stdout + proc.stderr
    else:
        assert proc.stdout == "" and words in proc.stderr
        assert proc.stderr.startswith("tlint: error:") and "Traceback" not in proc.stderr
    assert not list(tmp_path.rglob("__pycache__"))


@pytest.mark.parametrize("args, words", [
    (["--model", "nodots"], "dotted path"),
    (["--model", "a:b", "--model-kwargs", "{oops"], "--model-kwargs must be a JSON object"),
    (["--model", "a:b", "--probe", "nope"], "unknown probe `nope`"),
    ([], "no model to verify"),
])
def test_usage_errors_exit_2_without_running_anything(tmp_path, args, words):
    make_project(tmp_path, {})
    proc = run_tlint("verify", *args, cwd=tmp_path)
    assert proc.returncode == 2 and words in proc.stderr
    error = json.loads(run_tlint("verify", *args, "--format", "json", cwd=tmp_path).stdout)
    assert words in error["error"]["message"]


def test_config_errors_name_the_key(tmp_path):
    make_project(tmp_path, {"tlint.toml": '[verify]\nmodel = "a:b"\nseq-len = "long"\n'})
    proc = run_tlint("verify", cwd=tmp_path)
    assert proc.returncode == 2 and "`seq-len`" in proc.stderr and "tlint.toml" in proc.stderr


def test_list_probes(tmp_path):
    proc = run_tlint("verify", "--list-probes", cwd=tmp_path)
    assert proc.returncode == 0
    assert [line.split()[0] for line in proc.stdout.splitlines()] == [
        "mask-leak", "causal-leak", "nan-trace", "position-blind", "batch-coupling", "grad-flow", "init-stats",
        "attention-entropy", "depth-growth", "norm-scale",
        "padding-equivalence", "activation-ranges", "attention-maps", "eval-determinism",
        "optimizer-coverage", "overfit-batch", "warmup-ab", "data-ab"]
    assert "only with --probe overfit-batch or --probe training" in proc.stdout
    assert "(training: only with --probe data-ab)" in proc.stdout


def test_demo_findings_get_verdicts(tmp_path):
    demo = REPO / "fixtures" / "demo"
    if not (demo / "tlint.toml").is_file():
        pytest.skip("fixtures/demo has no [verify] config")
    proc = run_tlint("verify", "--format", "json", cwd=demo)
    assert proc.returncode == 1, proc.stderr
    verdicts = {(f["path"], f["code"]): f["verdict"] for f in json.loads(proc.stdout)["findings"]}
    assert verdicts[("model.py", "TL102")] == "confirmed"
    assert verdicts[("model.py", "TL103")] == "confirmed"
    assert verdicts[("train.py", "TL101")] == "confirmed"
    assert not list(demo.rglob("__pycache__"))
