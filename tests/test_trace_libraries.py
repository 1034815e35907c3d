"""Training libraries whose engines clip, step and zero for the user (tlint/runtime/libraries.py):
their entry points become events at the user's call, whether the library was imported before
the hooks were installed or after (as a script imports it).

DeepSpeed does not install on every machine (it builds from source against the installed
torch): the import hook and the engine's clipping are tested with an engine module of
DeepSpeed's interface (`DeepSpeedEngine.gradient_clipping()`,
`is_gradient_accumulation_boundary()`, `step()`), and with the real library where it is
installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.torchutil import import_torch

import_torch()

from tests.traceutil import run_traced  # noqa: E402
from tlint.runtime.hooks import Tracer  # noqa: E402

ENGINE = '''
import torch


class DeepSpeedEngine:
    """DeepSpeed's engine, as far as the step goes: clipping from the configuration at the
    steps that end an accumulation, then the optimizer's step and its zeroing."""

    def __init__(self, model, optimizer, gradient_clipping, accumulation):
        self.module, self.optimizer = model, optimizer
        self.clip, self.accumulation, self.micro = gradient_clipping, accumulation, 0

    def gradient_clipping(self):
        return self.clip

    def is_gradient_accumulation_boundary(self):
        return (self.micro + 1) % self.accumulation == 0

    def __call__(self, *args):
        return self.module(*args)

    def backward(self, loss):
        (loss / self.accumulation).backward()

    def step(self):
        if self.is_gradient_accumulation_boundary():
            if self.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.clip)
            self.optimizer.step()
            self.optimizer.zero_grad()
        self.micro += 1
'''

SCRIPT = '''
import torch
import torch.nn.functional as F
from torch import nn

from deepspeed.runtime.engine import DeepSpeedEngine

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
engine = DeepSpeedEngine(model, torch.optim.SGD(model.parameters(), lr=0.1), CLIP, ACCUMULATION)
for micro in range(6):
    loss = F.cross_entropy(engine(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
    engine.backward(loss)
    engine.step()  # the engine's step
'''


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A `deepspeed` package of DeepSpeed's engine interface on sys.path, not yet imported."""
    root = tmp_path / "lib"
    (root / "deepspeed" / "runtime").mkdir(parents=True)
    (root / "deepspeed" / "__init__.py").write_text("", encoding="utf-8")
    (root / "deepspeed" / "runtime" / "__init__.py").write_text("", encoding="utf-8")
    (root / "deepspeed" / "runtime" / "engine.py").write_text(ENGINE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    for name in [n for n in sys.modules if n == "deepspeed" or n.startswith("deepspeed.")]:
        monkeypatch.delitem(sys.modules, name)
    yield root
    for name in [n for n in sys.modules if n == "deepspeed" or n.startswith("deepspeed.")]:
        del sys.modules[name]


def run(tmp_path: Path, *, clip: float, accumulation: int, import_first: bool) -> tuple[list, Path]:
    """The script under the hooks; every event as (kind, line, data)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("CLIP", repr(clip)).replace("ACCUMULATION", str(accumulation)), encoding="utf-8")
    if import_first:
        importlib.import_module("deepspeed.runtime.engine")
    events: list = []

    def spy(tracer: Tracer) -> None:
        observe = tracer.inv.observe

        def record(kind, site, **data):
            events.append((kind, site.line if site else None, data))
            return observe(kind, site, **data)

        tracer.inv.observe = record  # type: ignore[method-assign]

    run_traced(script, prepare=spy)
    return events, script


def engine_step_line(script: Path) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if "# the engine's step" in line)


@pytest.mark.parametrize("import_first", [False, True], ids=["imported-after-install", "imported-before"])
def test_the_engine_s_clipping_is_one_clip_event_before_its_step_at_the_user_s_line(tmp_path, library, import_first):
    events, script = run(tmp_path, clip=1.0, accumulation=2, import_first=import_first)
    kinds = [kind for kind, _, _ in events if kind in ("clip", "step")]
    assert kinds == ["clip", "step"] * 3  # 6 micro-steps, accumulation 2: the torch clip inside is no second event
    clips = [(line, data) for kind, line, data in events if kind == "clip"]
    assert {line for line, _ in clips} == {engine_step_line(script)}
    assert all(data["scale"] is None and "gradient_clipping=1" in data["function"] for _, data in clips)


def test_an_engine_configured_without_clipping_gives_no_clip_event(tmp_path, library):
    events, _ = run(tmp_path, clip=0.0, accumulation=1, import_first=False)
    assert [kind for kind, _, _ in events].count("step") == 6
    assert not [kind for kind, _, _ in events if kind == "clip"]


def test_the_import_hook_and_the_patch_are_gone_after_uninstall(tmp_path, library):
    run(tmp_path, clip=1.0, accumulation=1, import_first=False)
    engine = sys.modules["deepspeed.runtime.engine"].DeepSpeedEngine
    assert engine.step.__qualname__ == "DeepSpeedEngine.step"
    assert not [f for f in sys.meta_path if type(f).__module__ == "tlint.runtime.libraries"]


REAL = '''
import torch
import deepspeed

model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
config = {"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
for step in range(4):
    loss = torch.nn.functional.mse_loss(engine(torch.randn(4, 8)), torch.randn(4, 1))
    engine.backward(loss)
    engine.step()
'''


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed is not installed here")
def test_real_deepspeed_engine_clipping_is_traced(tmp_path):
    """`tlint trace` on a DeepSpeed script on the CPU accelerator, one process."""
    (tmp_path / "ds_train.py").write_text(textwrap.dedent(REAL), encoding="utf-8")
    env = dict(os.environ, DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0",
               WORLD_SIZE="1", LOCAL_RANK="0")
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "tlint", "trace", "--steps", "3", "--format", "json", "-o",
                           str(report), "--", "python", "ds_train.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert report.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    events = json.loads(report.read_text())["events"]
    assert events["clip"] == events["step"] == 3
