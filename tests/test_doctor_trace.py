"""`tlint doctor` runs `tlint trace` when `[tool.tlint.doctor] train` names the training
command (README "tlint doctor"): the command runs after the notice, its findings join their
rules' items as run-time evidence and rank them, `--no-run` skips it, and a command trace
cannot run is exit 2 before any step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_doctor import env, validate
from tlint.cli import main

TRAIN = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    F.cross_entropy(model(x), y).backward()
    optimizer.zero_grad()  # bug
    optimizer.step()
"""


def project(tmp_path: Path, train: str = '["python", "train.py", "--quiet"]', steps: int = 3) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "train.py").write_text(TRAIN, encoding="utf-8")
    (root / "tlint.toml").write_text(f"[doctor]\ntrain = {train}\ntrain-steps = {steps}\n", encoding="utf-8")
    return root


# duration: doctor with one traced run of a tiny plain loop (a child importing torch: about 3 s of CPU)
@pytest.mark.slow
def test_doctor_traces_the_training_command_and_ranks_what_it_saw(tmp_path):
    from tests.torchutil import import_torch

    import_torch()
    root = project(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "tlint", "doctor", "proj", "--format", "json", "--no-cache"],
                          capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    doc = json.loads(proc.stdout)
    validate(doc)
    assert proc.returncode == 1 == doc["exit_code"], proc.stderr[-2000:]
    assert "the training command `python train.py --quiet` (trace: 3 optimizer steps)" in proc.stderr
    steps = {s["step"]: s for s in doc["steps"]}
    assert steps["trace"]["status"] == "ran" and steps["trace"]["exit_code"] == 1
    assert steps["trace"]["summary"]["steps"] == 3 and steps["trace"]["summary"]["findings"] == 1
    line = next(i for i, text in enumerate(TRAIN.splitlines(), 1) if "# bug" in text)
    trace = doc["parts"]["trace"]
    assert [(f["code"], f["path"], f["line"], f["static"]) for f in trace["findings"]] == [
        ("TL310", str(Path("proj") / "train.py"), line, "confirmed")]
    first = doc["items"][0]  # seen at run time and confirmed: the top of the list
    assert first["codes"] == ["TL310"] and first["impact"] == "high" and first["runtime"] == "confirmed"
    sources = {(e["source"], e.get("line")) for e in first["evidence"]}
    assert {("check", line), ("trace", line)} <= sources
    assert (root / "train.py").read_text(encoding="utf-8") == TRAIN


def test_no_run_skips_the_training_command(tmp_path, capsys, monkeypatch):
    root = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["doctor", str(root), "--no-run", "--format", "json", "--no-cache"])
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    steps = {s["step"]: s for s in doc["steps"]}
    assert steps["trace"]["status"] == "skipped" and "--no-run" in steps["trace"]["reason"]
    assert doc["user_code"] == [] and doc["parts"]["trace"] is None and code == 1  # (check's TL310)


@pytest.mark.parametrize(("train", "message"), [
    ('["ls", "-l"]', "[tool.tlint.doctor] train: tlint trace runs `python SCRIPT ARGS`"),
    ('["python", "missing.py"]', "[tool.tlint.doctor] train: no such script: missing.py"),
    ('[]', "`train` must be a command as a list of words"),
    ('"python train.py"', "`train` must be a command as a list of words"),
])
def test_a_command_trace_cannot_run_is_exit_2_before_any_step(tmp_path, capsys, monkeypatch, train, message):
    root = project(tmp_path, train)
    monkeypatch.chdir(tmp_path)
    code = main(["doctor", str(root), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_train_steps_must_be_a_count(tmp_path, capsys, monkeypatch):
    root = project(tmp_path, steps=-1)
    monkeypatch.chdir(tmp_path)
    assert main(["doctor", str(root), "--no-cache"]) == 2
    assert "`train-steps` must be an integer, 0 or more" in capsys.readouterr().err


def test_trace_findings_rank_as_run_time_evidence_and_a_refuted_finding_drops():
    from tlint.doctor.ranking import rank
    from tlint.doctor.steps import Results

    def diag(code, line, severity="error"):
        return {"code": code, "severity": severity, "path": "t.py", "message": f"{code} here",
                "range": {"start": {"line": line, "column": 1}, "end": {"line": line, "column": 2}}}

    results = Results(check={"diagnostics": [diag("TL310", 8), diag("TL305", 12), diag("TL301", 20, "warning")]})
    results.trace = {
        "findings": [{"code": "TL310", "severity": "error", "message": "reset here", "path": "t.py", "line": 8,
                      "step": 0, "count": 5},
                     {"code": "TL312", "severity": "error", "message": "trained in eval mode", "path": "t.py",
                      "line": 30, "step": 1, "count": 2}],
        "check": {"files": ["t.py"], "findings": [
            {"code": "TL310", "path": "t.py", "line": 8, "verdict": "confirmed"},
            {"code": "TL305", "path": "t.py", "line": 12, "verdict": "refuted"}]}}
    items = {i["codes"][0]: i for i in rank(results)}
    assert items["TL310"]["score"] == 6 and items["TL310"]["runtime"] == "confirmed"   # error, seen and confirmed
    assert items["TL312"]["score"] == 6 and items["TL312"]["stage"] == "training"      # seen at run time only
    assert items["TL305"]["score"] == 1 and items["TL305"]["runtime"] == "not-reproduced"  # error, refuted
    assert items["TL301"]["score"] == 2                                               # a static warning, untouched
    assert [e["source"] for e in items["TL310"]["evidence"]] == ["check", "trace"]
    assert items["TL310"]["evidence"][1]["text"] == "reset here (×5)"
    assert [(e["source"], e.get("verdict")) for e in items["TL305"]["evidence"]] == [("check", None),
                                                                                     ("trace", "refuted")]
