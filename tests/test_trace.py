"""`tlint trace` (issue 41, README "Tracing a training run"): each run-time invariant on a tiny
buggy training script (plain PyTorch, a 2-3 layer model built in code, CPU) gives its finding
at the right line, and its fixed twin gives none; a healthy plain loop and a healthy Hugging
Face Trainer run (a GPT-2 built from a config, nothing downloaded) give no warning; the run
stops after N optimizer steps; bad input is exit 2 with one line.

The twins run in this process (the hooks installed around `runpy`, as the child does: torch
is imported once); the command itself runs end to end in a few subprocesses."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cliutil import main_in, run_tlint
from tests.torchutil import import_torch

# slow: runs training scripts (each end-to-end case starts a child process that imports torch)
pytestmark = pytest.mark.slow

torch = import_torch()

from tests.traceutil import run_traced  # noqa: E402
from tlint.runtime.hooks import Tracer  # noqa: E402
from tlint.runtime.invariants import RULES, Invariants, Violation  # noqa: E402

HEAD = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def batch():
    return torch.randn(4, 8), torch.randint(0, 2, (4,))
"""


def trace(tmp_path: Path, body: str, *, head: str = HEAD, steps: int = 0) -> tuple[list[Violation], Path]:
    """Run HEAD + body as a script in this process with the hooks installed; its violations."""
    script = tmp_path / "train.py"
    script.write_text(head + textwrap.dedent(body), encoding="utf-8")
    found, _ = run_traced(script, steps=steps)
    return found, script


def line_of(script: Path, marker: str) -> int:
    lines = script.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def at(found: list[Violation]) -> set[tuple[str, str, int]]:
    return {(v.code, v.severity, v.site.line if v.site else 0) for v in found}


# --- each invariant: the buggy script and its fixed twin -------------------------------------

TWINS = {
    "TL310-error": ("""
        for step in range(4):
            x, y = batch()
            F.cross_entropy(model(x), y).backward()
            optimizer.zero_grad()  # bug
            optimizer.step()
        """, """
        for step in range(4):
            x, y = batch()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        """, "TL310", "error"),
    "TL310-warning": ("""
        for step in range(3):
            for micro in range(2):
                x, y = batch()
                optimizer.zero_grad()  # bug
                (F.cross_entropy(model(x), y) / 2).backward()
            optimizer.step()
        """, """
        for step in range(3):
            optimizer.zero_grad()
            for micro in range(2):
                x, y = batch()
                (F.cross_entropy(model(x), y) / 2).backward()
            optimizer.step()
        """, "TL310", "warning"),
    "TL310-engine": ("""
        class Engine:  # a training step spread over a trainer class's methods
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model, optimizer

            def backward(self, loss):
                loss.backward()
                self.after_backward()

            def after_backward(self):
                self.optimizer.zero_grad()  # bug

            def step(self):
                self.optimizer.step()

        engine = Engine(model, optimizer)
        for step in range(3):
            x, y = batch()
            engine.backward(F.cross_entropy(model(x), y))
            engine.step()
        """, """
        class Engine:
            def __init__(self, model, optimizer):
                self.model, self.optimizer = model, optimizer

            def backward(self, loss):
                loss.backward()
                self.after_backward()

            def after_backward(self):
                pass

            def step(self):
                self.optimizer.step()
                self.optimizer.zero_grad()

        engine = Engine(model, optimizer)
        for step in range(3):
            x, y = batch()
            engine.backward(F.cross_entropy(model(x), y))
            engine.step()
        """, "TL310", "error"),
    "TL310-module": ("""
        for step in range(3):
            for micro in range(2):
                x, y = batch()
                (F.cross_entropy(model(x), y) / 2).backward()
                model.zero_grad(set_to_none=True)  # bug
            optimizer.step()
        """, """
        for step in range(3):
            model.zero_grad(set_to_none=True)
            for micro in range(2):
                x, y = batch()
                (F.cross_entropy(model(x), y) / 2).backward()
            optimizer.step()
        """, "TL310", "warning"),
    "TL305": ("""
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
        for step in range(4):
            x, y = batch()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            scheduler.step()  # bug
            optimizer.step()
        """, """
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
        for step in range(4):
            x, y = batch()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            scheduler.step()
        """, "TL305", "error"),
    "TL303": ("""
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        for step in range(4):
            x, y = batch()
            optimizer.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # bug
            scaler.step(optimizer)
            scaler.update()
        """, """
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        for step in range(4):
            x, y = batch()
            optimizer.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """, "TL303", "error"),
    "TL312": ("""
        def evaluate():
            model.eval()  # bug
            with torch.no_grad():
                model(batch()[0])

        for epoch in range(2):
            for step in range(2):
                x, y = batch()
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
            evaluate()
        """, """
        def evaluate():
            model.eval()
            with torch.no_grad():
                model(batch()[0])
            model.train()

        for epoch in range(2):
            for step in range(2):
                x, y = batch()
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
            evaluate()
        """, "TL312", "error"),
    "TL214-dropout": ("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 2)

            def forward(self, x):
                return self.b(F.dropout(torch.relu(self.a(x)), 0.1))  # bug

        net = Net()
        net.eval()
        with torch.no_grad():
            net(batch()[0])
        """, """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 2)

            def forward(self, x):
                return self.b(F.dropout(torch.relu(self.a(x)), 0.1, training=self.training))

        net = Net()
        net.eval()
        with torch.no_grad():
            net(batch()[0])
        """, "TL214", "error"),
    "TL214-sdpa": ("""
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(8, 24)

            def forward(self, x):
                q, k, v = self.qkv(x).view(1, 4, 3, 8).unbind(2)
                return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)  # bug

        attention = Attention().eval()
        with torch.no_grad():
            attention(batch()[0])
        """, """
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(8, 24)

            def forward(self, x):
                q, k, v = self.qkv(x).view(1, 4, 3, 8).unbind(2)
                return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if self.training else 0.0)

        attention = Attention().eval()
        with torch.no_grad():
            attention(batch()[0])
        """, "TL214", "error"),
}


@pytest.mark.parametrize("case", sorted(TWINS))
def test_the_buggy_script_gives_the_finding_at_its_line(tmp_path, case):
    buggy, _, code, severity = TWINS[case]
    found, script = trace(tmp_path, buggy)
    assert at(found) == {(code, severity, line_of(script, "# bug"))}, [v.message for v in found]
    assert found[0].site is not None and found[0].site.path == str(script.resolve())


@pytest.mark.parametrize("case", sorted(TWINS))
def test_the_fixed_twin_gives_none(tmp_path, case):
    _, fixed, _, _ = TWINS[case]
    found, _ = trace(tmp_path, fixed)
    assert found == [], [v.message for v in found]

def test_training_in_eval_mode_names_the_helper_call_that_switched(tmp_path):
    found, script = trace(tmp_path, TWINS["TL312"][0])
    (violation,) = found
    lines = {s.line for s in violation.related}
    assert line_of(script, "    evaluate()") in lines  # the call in the training loop, where tlint check reports


def test_the_numbers_do_not_change(tmp_path):
    body = """
        for step in range(3):
            x, y = batch()
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        model.eval()
        RESULT = [p.detach().clone() for p in model.parameters()]
        """
    script = tmp_path / "plain.py"
    script.write_text(HEAD + textwrap.dedent(body), encoding="utf-8")
    plain = runpy.run_path(str(script))["RESULT"]
    tracer = Tracer(Invariants(), lambda v: None)
    tracer.install()
    try:
        traced = runpy.run_path(str(script))["RESULT"]
    finally:
        tracer.uninstall()
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))
    assert tracer.counts["step"] == 3 and tracer.counts["clip"] == 3 and tracer.counts["backward"] == 3


def test_a_gradscaler_step_that_skips_the_optimizer_does_not_count_as_a_misordered_scheduler(tmp_path):
    found, _ = trace(tmp_path, """
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
        for step in range(3):
            x, y = batch()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y) * (float("inf") if step == 0 else 1.0)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        """)
    assert found == []


def test_a_plateau_scheduler_stepped_on_its_metric_first_is_no_finding_but_is_seen(tmp_path):
    """ReduceLROnPlateau.step(metric) before the optimizer's first step skips no rate."""
    script = tmp_path / "plateau.py"
    script.write_text(HEAD + textwrap.dedent("""
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        for step in range(3):
            x, y = batch()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            plateau.step(loss.item())
            optimizer.step()
        """), encoding="utf-8")
    found: list[Violation] = []
    tracer = Tracer(Invariants(), found.append)
    tracer.install()
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        tracer.uninstall()
    assert found == []
    assert tracer.counts["scheduler"] == 3


def test_an_optimizer_built_before_the_hooks_is_known_through_know(tmp_path):
    """A module's zero_grad() resets the optimizers holding its parameters: one built before the
    hooks were installed (a watch opened after it) is added with `know`."""
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    found: list[Violation] = []
    tracer = Tracer(Invariants(), found.append)
    tracer.install()
    try:
        tracer.know(optimizer)
        model(torch.randn(3, 4)).sum().backward()
        model.zero_grad()
        optimizer.step()
    finally:
        tracer.uninstall()
    assert [(v.code, v.severity) for v in found] == [("TL310", "error")]


def test_the_rules_are_the_catalogues():
    from tlint.rules import ALL_RULES

    names = {rule.code: rule.name for rule in ALL_RULES}
    assert {code: names[code] for code in RULES} == RULES


def test_the_parent_side_imports_no_torch():
    code = "import sys, tlint.cli, tlint.trace.command, tlint.runtime.invariants; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the command, end to end ------------------------------------------------------------------

def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


HEALTHY = HEAD + """
import sys
print("args:", sys.argv[1:])
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=10)
for step in range(20):
    x, y = batch()
    model.train()
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    print("done step", step)
"""


def test_a_healthy_loop_stops_after_n_steps_with_no_finding(tmp_path):
    write(tmp_path, "train.py", HEALTHY)
    result = run_tlint("trace", "--steps", "3", "--format", "json", "--", "python", "train.py", "--lr", "1",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] == 3 and report["stopped"] is True and report["findings"] == []
    assert report["events"]["step"] == 3 and len(report["lrs"]) == 3
    assert "args: ['--lr', '1']" in result.stderr  # the user's output stays visible
    assert "done step 1" in result.stderr and "done step 2" not in result.stderr  # stopped in step 3


def test_a_script_that_swallows_the_stop_is_ended_at_its_next_step(tmp_path):
    write(tmp_path, "train.py", HEAD + """
for step in range(50):
    try:
        x, y = batch()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    except BaseException as exc:
        print("caught", type(exc).__name__)
print("the script's end")
""")
    result = run_tlint("trace", "--steps", "2", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("caught TraceStop") == 1 and "the script's end" not in result.stderr
    assert "tlint trace: 2 optimizer steps (stopped after --steps 2); 0 findings" in result.stdout


# duration: two traced runs of the buggy loop (text, then JSON to a file to its end), each a child importing torch
def test_the_buggy_loop_in_text_and_to_a_file(tmp_path):
    write(tmp_path, "train.py", HEAD + textwrap.dedent(TWINS["TL310-error"][0]))
    result = run_tlint("trace", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = line_of(tmp_path / "train.py", "# bug")
    assert result.stdout.startswith(f"train.py:{line}: error TL310 zero-grad-misplaced: ")
    assert "tlint trace: 4 optimizer steps (the script ended); 1 finding (1 error, 0 warnings)" in result.stdout
    result = run_tlint("trace", "--steps", "0", "--format", "json", "-o", "report.json", "--", "python", "train.py",
                       cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [(f["code"], f["path"], f["line"]) for f in report["findings"]] == [("TL310", "train.py", line)]


def test_python_dash_m_gets_its_argv_and_path(tmp_path):
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/train.py", HEALTHY.replace('print("args:", sys.argv[1:])',
                                                     'print("args:", sys.argv[1:], sys.path[0])'))
    result = run_tlint("trace", "--steps", "2", "--", "python", "-m", "pkg.train", "x", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"args: ['x'] {tmp_path}" in result.stderr
    assert "tlint trace: 2 optimizer steps (stopped after --steps 2); 0 findings" in result.stdout


HF_TRAINER = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32))


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,))
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, max_steps=6, learning_rate=1e-3,
                         warmup_steps=2, max_grad_norm=1.0, report_to=[], save_strategy="no", use_cpu=True,
                         disable_tqdm=True, logging_steps=100)
Trainer(model=model, args=args, train_dataset=Data()).train()
"""


# duration: a Hugging Face Trainer run in a child process (importing transformers: about 5 s of CPU)
def test_a_healthy_hf_trainer_run_gives_no_warning(tmp_path):
    pytest.importorskip("transformers")
    write(tmp_path, "train.py", HF_TRAINER)
    result = run_tlint("trace", "--steps", "4", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["findings"] == [] and report["steps"] == 4 and report["stopped"] is True
    events = report["events"]
    assert events["clip"] == 4 and events["scheduler"] >= 3 and events["backward"] == 4 and events["forward"] == 4


ACCELERATE = """\
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn

torch.manual_seed(0)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=10)
data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(8)]
loader = torch.utils.data.DataLoader(data, batch_size=None)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
model.train()
for x, y in loader:
    with accelerator.accumulate(model):
        accelerator.backward(F.cross_entropy(model(x), y))
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
"""


# duration: two runs of an accelerate script in child processes (accelerate's state is a process singleton)
@pytest.mark.parametrize("buggy", [False, True])
def test_accelerate_with_accumulate(tmp_path, buggy):
    pytest.importorskip("accelerate")
    text = ACCELERATE
    if buggy:
        text = text.replace("        optimizer.step()\n        scheduler.step()\n",
                            "        scheduler.step()  # bug\n        optimizer.step()\n")
    write(tmp_path, "train.py", text)
    result = run_tlint("trace", "--steps", "0", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert report["steps"] == 4 and report["events"]["backward"] == 8, result.stderr[-2000:]  # 2 micro-batches a step
    found = [(f["code"], f["line"]) for f in report["findings"]]
    assert found == ([("TL305", line_of(tmp_path / "train.py", "# bug"))] if buggy else [])


HF_TRAINER_DROPOUT = """
import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainingArguments

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.head = nn.Embedding(64, 16), nn.Linear(16, 2)

    def forward(self, input_ids, labels=None):
        hidden = F.dropout(self.embed(input_ids).mean(1), 0.2)  # bug
        logits = self.head(hidden)
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.tensor(i % 2)} for i in range(16)]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, per_device_eval_batch_size=4, max_steps=2,
                         report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True, logging_steps=100)
trainer = Trainer(model=Classifier(), args=args, train_dataset=data, eval_dataset=data)
trainer.train()
trainer.evaluate()
"""


# duration: two Hugging Face Trainer runs in child processes (importing transformers: about 5 s of CPU each)
@pytest.mark.parametrize("buggy", [False, True])
def test_hf_trainer_evaluation_with_dropout_always_on(tmp_path, buggy):
    """TL214 through the Trainer: its `evaluate()` puts the model in eval mode; a functional
    dropout without `training=self.training` stays on."""
    pytest.importorskip("transformers")
    text = HF_TRAINER_DROPOUT
    if not buggy:
        text = text.replace("0.2)  # bug", "0.2, training=self.training)")
    write(tmp_path, "train.py", text)
    result = run_tlint("trace", "--steps", "0", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert report["steps"] == 2, result.stderr[-2000:]
    found = [(f["code"], f["severity"], f["line"]) for f in report["findings"]]
    assert found == ([("TL214", "error", line_of(tmp_path / "train.py", "# bug"))] if buggy else [])


FORKED = HEAD + """
import datasets


class Noisy(torch.utils.data.Dataset):  # runs a module in each forked DataLoader worker
    def __init__(self):
        self.augment = nn.Dropout(0.5).eval()

    def __len__(self):
        return 16

    def __getitem__(self, i):
        x, y = torch.randn(8), torch.tensor(i % 2)
        return self.augment(x), y


def scale(row):
    row["x"] = (torch.tensor(row["x"]) * 2).tolist()
    return row


table = datasets.Dataset.from_dict({"x": [[float(i)] * 8 for i in range(8)]}).map(scale, num_proc=2)
assert len(table) == 8
loader = torch.utils.data.DataLoader(Noisy(), batch_size=4, num_workers=2)
for epoch in range(2):
    for x, y in loader:
        F.cross_entropy(model(x), y).backward()
        optimizer.zero_grad()  # bug
        optimizer.step()
"""


# duration: a traced run whose DataLoader forks 2 workers and whose datasets.map forks 2 processes
def test_forked_workers_and_datasets_map_do_not_break_the_hooks(tmp_path):
    pytest.importorskip("datasets")
    write(tmp_path, "train.py", FORKED)
    result = run_tlint("trace", "--steps", "0", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert report["steps"] == 8 and report["events"].get("internal_errors", 0) == 0, result.stderr[-2000:]
    assert [(f["code"], f["line"]) for f in report["findings"]] == [("TL310", line_of(tmp_path / "train.py", "# bug"))]


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["trace"], "give the command to trace after `--`"),
    (["trace", "python", "train.py"], "put the command to trace after `--`: tlint trace -- python train.py"),
    (["trace", "--", "python", "missing.py"], "no such script: missing.py"),
    (["trace", "--", "ls", "-l"], "tlint trace runs `python SCRIPT ARGS`, `python -m MODULE ARGS`, `torchrun"),
    (["trace", "--", "python", "-c", "print(1)"], "the Python option '-c' is not supported"),
    (["trace", "--steps", "-1", "--", "python", "train.py"], "--steps must be 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, message):
    write(tmp_path, "train.py", "print('hello')\n")
    result = main_in(tmp_path, *args, capsys=capsys, monkeypatch=monkeypatch)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_a_script_that_raises_is_exit_2_with_the_users_traceback_only(tmp_path):
    write(tmp_path, "train.py", """\
        def load():
            raise FileNotFoundError("data/train.bin")


        load()
        """)
    result = run_tlint("trace", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "tlint: error: the script raised FileNotFoundError: data/train.bin (at train.py:2)")
    assert 'File "' + str(tmp_path / "train.py") in result.stderr
    assert "tlint/" not in result.stderr and "runpy" not in result.stderr


# --- pairing with tlint check -----------------------------------------------------------------

# duration: traced runs of three scripts, each followed by tlint check on the files the run went through
def test_static_findings_are_confirmed_refuted_or_not_observed(tmp_path):
    write(tmp_path, "train.py", HEAD + """
warmup = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3)
for step in range(4):
    x, y = batch()
    F.cross_entropy(model(x), y).backward()
    optimizer.zero_grad()  # confirmed
    if step > 0:
        warmup.step()  # refuted: the first optimizer step came before it
    if step > 100:
        decay.step()  # not observed: never ran
    optimizer.step()
""")
    result = run_tlint("trace", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    script = tmp_path / "train.py"
    verdicts = {(c["code"], c["line"]): c["verdict"] for c in report["check"]["findings"]}
    assert verdicts == {("TL310", line_of(script, "# confirmed")): "confirmed",
                        ("TL305", line_of(script, "# refuted")): "refuted",
                        ("TL305", line_of(script, "# not observed")): "not-observed"}
    assert report["check"]["files"] == ["train.py"]
    assert [(f["code"], f["static"]) for f in report["findings"]] == [("TL310", "confirmed")]


def test_a_trace_finding_with_no_static_finding_is_new():
    from types import SimpleNamespace

    from tlint.diagnostics import Range
    from tlint.trace.pairing import pair

    site = {"path": "/p/train.py", "line": 7, "function": "f"}
    findings = [{"code": "TL310", "site": site, "related": []}, {"code": "TL305", "site": {**site, "line": 9}}]
    diagnostic = SimpleNamespace(code="TL305", name="scheduler-before-optimizer", severity="error", message="m",
                                 path="/p/train.py", range=Range.point(9, 5))
    checked = pair([diagnostic], findings, {"observed": {}, "steps": 3, "counts": {}})
    assert [c["verdict"] for c in checked] == ["confirmed"]
    assert [f["static"] for f in findings] == ["new", "confirmed"]


@pytest.mark.parametrize("fmt", ["concise", "github", "sarif", "junit", "lsp"])
def test_the_other_formats_of_check(tmp_path, monkeypatch, fmt):
    from tlint.trace.command import TraceRun, report_other

    write(tmp_path, "train.py", "import torch\n\nfor step in range(3):\n    optimizer.zero_grad()\n")
    monkeypatch.chdir(tmp_path)
    site = {"path": str(tmp_path / "train.py"), "line": 4, "function": "<module>"}
    run = TraceRun(findings=[{"code": "TL310", "severity": "error", "message": "gradients reset", "site": site,
                              "step": 1, "count": 1, "related": []}], checked=[site["path"]])
    out = report_other(fmt, run, tmp_path)
    if fmt == "sarif":
        from tests.sarifcheck import check_sarif

        log = json.loads(out)
        check_sarif(log)
        region = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == 4 and region["startColumn"] == 5
    elif fmt in ("concise", "github"):
        assert "train.py" in out and ("4:5" in out or "line=4,col=5" in out) and "[trace]" in out
    else:
        assert "TL310" in out and "gradients reset [trace]" in out
