"""`tlint verify` with no model configured builds each flagged class whose constructor needs
no argument, runs the probes its findings map to and gives each finding a verdict; the other
findings are `not-checkable` with the reason. Also: the verifier's causal default is the
linter's (`causal_evidence`, as TL207 decides), not a class-name match."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from tests.cliutil import make_project, run_tlint
from tests.torchutil import import_torch
from tlint.verify.instantiate import _enclosing_class, _module_name, _owner

# --- which class, which module (no torch) ------------------------------------------------

# slow: builds every flagged model class and runs its probes
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_instantiate")]

NESTED = '''
class Outer:
    class Inner:
        def f(self):
            return 1  # line 5

def factory():
    class Local:
        x = 1  # line 9
    return Local

y = 2  # line 12
'''


def test_enclosing_class_qualname_and_local_classes():
    tree = ast.parse(NESTED)
    assert _enclosing_class(tree, 5) == ("Outer.Inner", False)
    assert _enclosing_class(tree, 3) == ("Outer.Inner", False)
    assert _enclosing_class(tree, 2) == ("Outer", False)
    assert _enclosing_class(tree, 9) == ("factory.<locals>.Local", True)
    assert _enclosing_class(tree, 12) is None


def test_module_name_from_the_deepest_root(tmp_path):
    src = tmp_path / "src"
    assert _module_name(src / "proj" / "model.py", [tmp_path, src]) == "proj.model"
    assert _module_name(src / "proj" / "__init__.py", [tmp_path, src]) == "proj"
    assert _module_name(tmp_path / "train.py", [tmp_path, src]) == "train"
    assert _module_name(tmp_path / "my-scripts" / "model.py", [tmp_path]) is None
    assert _module_name(Path("/elsewhere/model.py"), [tmp_path]) is None


def test_owner_reasons(tmp_path):
    (tmp_path / "m.py").write_text(NESTED, encoding="utf-8")
    assert _owner(tmp_path / "m.py", 5, [tmp_path]) == (("m", "Outer.Inner"), "")
    assert "defined inside a function" in _owner(tmp_path / "m.py", 9, [tmp_path])[1]
    assert "not inside a class" in _owner(tmp_path / "m.py", 12, [tmp_path])[1]


# --- end to end ----------------------------------------------------------------------------

import_torch()

# Tagger needs no argument (built and probed); SizedTagger needs its sizes; Mixer needs none
# but takes hidden states, not token ids. Each has a mask it ignores (TL103) and the first
# two an attention called without the padding mask (TL102).
MODEL = '''import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab_size=50, d_model=32, n_heads=4, max_len=32, n_tags=5):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.out = nn.Linear(d_model, n_tags)

    def forward(self, src, src_key_padding_mask=None):
        x = self.tok(src) + self.pos(torch.arange(src.size(1), device=src.device))
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return self.out(x)


class SizedTagger(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.attn = nn.MultiheadAttention(d_model, 4, batch_first=True)

    def forward(self, src, src_key_padding_mask=None):
        x = self.tok(src)
        return x + self.attn(x, x, x, need_weights=False)[0]
'''
MIXER = '''import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self, d_model=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, 2, batch_first=True)

    def forward(self, x, key_padding_mask=None):
        return self.attn(x, x, x, need_weights=False)[0]
'''


def _tree(root: Path) -> dict[str, float]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime for p in root.rglob("*") if ".git" not in p.parts}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("flagged")
    make_project(root, {"src/proj/__init__.py": "", "src/proj/model.py": MODEL, "src/proj/mixer.py": MIXER,
                        "tlint.toml": '[verify]\npython-path = ["src"]\nseq-len = 8\n'})
    return root


# duration: builds every flagged class of the project and runs its probes, in a child process
def test_flagged_classes_are_built_when_no_model_is_configured(project):
    before = _tree(project)
    proc = run_tlint("verify", "--probe", "mask-leak", "--format", "json", cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _tree(project) == before  # no __pycache__, nothing written
    report = json.loads(proc.stdout)
    verdicts = {(f["path"], f["range"]["start"]["line"], f["code"]): (f["verdict"], f["reason"])
                for f in report["findings"]}
    model_py, mixer_py = "src/proj/model.py", "src/proj/mixer.py"
    assert {key: verdict for key, (verdict, _) in verdicts.items()} == {
        (model_py, 13, "TL103"): "confirmed", (model_py, 15, "TL102"): "confirmed",
        (model_py, 25, "TL103"): "not-checkable", (model_py, 27, "TL102"): "not-checkable",
        (mixer_py, 9, "TL103"): "not-checkable", (mixer_py, 10, "TL102"): "not-checkable",
    }
    assert verdicts[(model_py, 27, "TL102")][1].startswith("SizedTagger(vocab_size, d_model) needs arguments")
    assert "no nn.Embedding" in verdicts[(mixer_py, 10, "TL102")][1]
    assert "inside Tagger (the model itself)" in verdicts[(model_py, 15, "TL102")][1]
    assert report["model"]["factory"] == "proj.model:Tagger" and report["model"]["class"] == "Tagger"
    assert [(p["probe"], p["status"]) for p in report["probes"]] == [("mask-leak", "fail")]
    assert report["probes"][0]["detail"].startswith("[Tagger] ")


def test_paths_restrict_the_classes_and_no_class_built_is_a_usage_error(project):
    """Only mixer.py's classes: none can be built alone, so no probe runs: exit 2, with how to
    name a model."""
    proc = run_tlint("verify", "src/proj/mixer.py", "--probe", "mask-leak", "--format", "json", cwd=project)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "usage" and error["message"].startswith("no model to verify")
    assert "none of the 2 findings a probe can test sits in a class the verifier could build alone" in \
        error["message"]
    assert "no nn.Embedding" in error["message"] and "--model pkg.module:factory" in error["message"]
    text = run_tlint("verify", "src/proj/mixer.py", "--probe", "mask-leak", cwd=project)
    assert text.returncode == 2 and text.stdout == ""
    assert text.stderr.startswith("tlint: error: no model to verify") and len(text.stderr.splitlines()) == 1


def test_nothing_flagged_and_no_model_is_a_usage_error(tmp_path):
    make_project(tmp_path, {"clean.py": "import torch.nn as nn\n\n\nclass Id(nn.Module):\n"
                                        "    def forward(self, x):\n        return x\n"})
    proc = run_tlint("verify", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no model to verify" in proc.stderr and "found no finding a probe can test" in proc.stderr


# --- causal: the linter's evidence ------------------------------------------------------------

# Named like a causal model but with no causal evidence (no next-token loss, no generate
# loop): the linter does not take it for causal (TL207 stays quiet), so neither does verify.
NAMED_ONLY = '''import torch.nn as nn


class TinyGPT(nn.Module):
    def __init__(self, vocab_size=20, d_model=8):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, ids):
        return self.out(self.tok(ids))
'''
# No causal name, but a generate loop: causal.
GENERATES = NAMED_ONLY.replace("TinyGPT", "Decoder") + '''
    def generate(self, ids, steps):
        for _ in range(steps):
            ids = self(ids).argmax(-1)
        return ids
'''


def _verify_in_process(root: Path, model: str, **options) -> dict:
    from tlint.verify.options import VerifyOptions
    from tlint.verify.worker import verify

    saved_path, saved_bytecode = list(sys.path), sys.dont_write_bytecode
    try:
        return verify(VerifyOptions(model=model, root=str(root), causal_names=["GPT", "CausalLM"], **options))
    finally:
        sys.path[:], sys.dont_write_bytecode = saved_path, saved_bytecode
        sys.modules.pop(model.partition(":")[0], None)


@pytest.mark.parametrize("source, module, measured, words", [
    # no evidence in the source: the model is asked (it mixes no tokens, so it sees no future)
    (NAMED_ONLY, "named_only_lm", True, "measured: outputs before t ignore"),
    (GENERATES, "generating_lm", False, "Decoder.generate()"),
])
def test_causal_default_is_the_linters_evidence_else_measured(tmp_path, source, module, measured, words):
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    cls = "TinyGPT" if source is NAMED_ONLY else "Decoder"
    result = _verify_in_process(tmp_path, f"{module}:{cls}", probes=["causal-leak"], seq_len=8)
    assert result["model"]["causal"] is True and words in result["model"]["causal_reason"]
    assert result["model"]["causal_measured"] is measured
    assert result["probes"][0]["status"] == "pass"
    forced = _verify_in_process(tmp_path, f"{module}:{cls}", probes=["causal-leak"], seq_len=8, causal=True)
    assert forced["model"]["causal"] is True and forced["model"]["causal_reason"] == "configured"
