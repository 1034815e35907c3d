"""tlint.watch under `torchrun --nproc_per_node 2` on CPU (gloo): DistributedDataParallel in
a plain loop and the Hugging Face Trainer. Every rank checks its own loss; gradient norms are
the ones the clipping sees; only rank 0 writes the event file and logs; a stop on NaN stops
every rank at the same step, before the optimizer step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.torchutil import import_torch

# slow: trains under torchrun with two processes
# one worker for the timing-sensitive modules (timeouts, memory limits, several processes): xdist group "serial"
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serial")]

torch = import_torch()

from tests.watchutil import events, validate  # noqa: E402

SCRIPT = Path(__file__).with_name("watch_dist_script.py")


def torchrun(mode: str, out: Path) -> list[dict]:
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPT.parent.parent)}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(SCRIPT), mode, str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


# duration: torchrun starts two ranks that each import torch and train
def test_ddp_nan_on_one_rank_stops_every_rank(tmp_path):
    out = tmp_path / "ddp"
    ranks = torchrun("ddp", out)
    for result in ranks:  # both stopped at step 7, before its optimizer step
        assert result["steps"] == 6 and result["weights_finite"], result
        assert result["stopped"]["kind"] == "nonfinite-loss" and result["stopped"]["rank"] == 1
        assert result["stopped"]["data"]["module"] == "blocks.0.attn"
    # gradients are averaged by DDP: each rank's measured norm is the one clipping saw, the same on both
    assert ranks[0]["samples"]["total"] == ranks[1]["samples"]["total"]
    assert abs(ranks[0]["samples"]["total"] - ranks[0]["norms"]["5"]) < 1e-4 * ranks[0]["norms"]["5"]
    assert [f["kind"] for f in ranks[1]["findings"] if f["severity"] == "error"] == ["nonfinite-loss"]
    assert not [f for f in ranks[0]["findings"] if f["rank"] == 0 and f["severity"] == "error"]
    # one file, rank 0's, with rank 1's finding in it
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json", "tlint-watch.jsonl"]
    found = validate(out)
    assert found[0]["world_size"] == 2
    errors = [e for e in found if e["event"] == "finding" and e["severity"] == "error"]
    assert [(e["step"], e["rank"]) for e in errors] == [(7, 1)]
    assert found[-1]["stopped"] == "nonfinite-loss" and found[-1]["steps"] == 6


# duration: torchrun starts two ranks that each import torch and transformers and train
def test_hf_trainer_under_torchrun(tmp_path):
    out = tmp_path / "hf"
    ranks = torchrun("hf", out)
    assert [r["world"] for r in ranks] == [2, 2] and [r["steps"] for r in ranks] == [20, 20]
    logged = [[h for h in r["log_history"] if "tlint/grad_norm" in h] for r in ranks]
    assert [h["step"] for h in logged[0]] == [1, 10, 20] and logged[1] == []  # rank 0 logs
    theirs = {h["step"]: h["grad_norm"] for h in ranks[0]["log_history"] if "grad_norm" in h}
    for h in logged[0][1:]:
        assert abs(h["tlint/grad_norm"] - theirs[h["step"]]) < 1e-4 * theirs[h["step"]]
    assert all(f["severity"] == "info" for r in ranks for f in r["findings"])
    found = events(out)
    assert found[0]["world_size"] == 2 and found[0]["framework"] == "hf"
    validate(out)
