"""`tlint trace` under Lightning, TRL's trainers and the launchers (README "Tracing a training
run": "Frameworks", "Launchers"): a run-time invariant violated in a Lightning hook, in a
TRL trainer's subclass or callback, or under `torchrun` / `accelerate launch`, gives its
finding at the user's line, and the fixed twin or the healthy run gives none.

The Lightning and TRL twins run in this process (the hooks installed around `runpy`, as the
child does: torch, Lightning and TRL are imported once); a Lightning run under
`strategy="ddp"`, `torchrun` on 2 gloo ranks and `accelerate launch` run the command end to
end. The parsing of launched commands and the merging of the ranks' reports are tested
without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cliutil import run_tlint, tlint_env
from tests.torchutil import import_torch
from tlint.trace.command import Target, TraceRun, apply, parse_target
from tlint.trace.launch import script_command
from tlint.verify.child import ReportError

# --- without torch: launched commands, and the ranks' reports merged ---------------------------

def test_launchers_are_parsed_and_other_commands_refused(tmp_path):
    assert parse_target(["torchrun", "--nproc_per_node", "2", "t.py", "x"], tmp_path) == Target(
        "torch.distributed.run", ["--nproc_per_node", "2", "t.py", "x"], True, "torchrun")
    assert parse_target(["accelerate", "launch", "--cpu", "t.py"], tmp_path) == Target(
        "accelerate.commands.accelerate_cli", ["launch", "--cpu", "t.py"], True, "accelerate")
    assert parse_target(["python", "-m", "torch.distributed.run", "t.py"], tmp_path).launcher == "torch.distributed.run"
    assert parse_target(["python", "-m", "pkg.train"], tmp_path).launcher is None
    with pytest.raises(Exception, match="accelerate launch ARGS"):
        parse_target(["accelerate", "config"], tmp_path)


def test_the_commands_a_launcher_starts_that_are_traced(tmp_path):
    (tmp_path / "t.py").write_text("", encoding="utf-8")
    py = sys.executable
    assert script_command([py, "-u", "t.py", "--lr", "1"], str(tmp_path)) == ([py, "-u"], str(tmp_path / "t.py"),
                                                                              ["--lr", "1"], False)
    assert script_command(["python3", "-X", "utf8", "-m", "pkg.train", "a"], None) == (
        ["python3", "-X", "utf8"], "pkg.train", ["a"], True)
    for other in ([py, "-c", "print(1)"], "python t.py", ["nvidia-smi"], [py, "missing.py"], [py, "-u"]):
        assert script_command(other, str(tmp_path)) is None


def finding(code: str, line: int, count: int = 1, step: int = 0) -> dict:
    return {"code": code, "severity": "error", "message": f"{code} here", "site": {"path": "/w/t.py", "line": line},
            "step": step, "count": count, "related": []}


def end(findings: list, steps: int = 3) -> dict:
    return {"event": "end", "steps": steps, "stopped": True, "findings": findings, "observed": {},
            "counts": {"step": steps}, "lrs": [[0.1]] * steps, "scales": []}


def test_the_ranks_findings_are_merged_once_with_their_ranks():
    run = TraceRun()
    for proc, rank, found in ((0, 0, [finding("TL310", 9, 3)]), (1, 1, [finding("TL310", 9, 3), finding("TL305", 7)])):
        apply({"event": "ready", "proc": proc, "rank": rank}, run)
        apply({**end(found), "proc": proc, "rank": rank}, run)
    apply({**end([], 0), "launched": 2, "launcher_exit": 0}, run)
    assert [(f["code"], f["count"], f["ranks"]) for f in run.findings] == [("TL310", 6, [0, 1]), ("TL305", 1, [1])]
    assert run.end is not None and run.end["steps"] == 3 and run.end["counts"] == {"step": 6}
    assert [r["rank"] for r in run.end["ranks"]] == [0, 1] and run.error is None


def test_a_rank_that_failed_is_the_runs_error_and_a_bad_line_drops_the_report():
    run = TraceRun()
    apply({**end([]), "proc": 0, "rank": 0}, run)
    apply({"event": "error", "kind": "script", "message": "the script raised ValueError", "proc": 1, "rank": 1}, run)
    apply({**end([], 0), "launched": 2, "launcher_exit": 1}, run)
    apply({"event": "error", "kind": "launcher", "message": "the launcher exited with code 1"}, run)
    assert run.error == ("script", "rank 1: the script raised ValueError")
    with pytest.raises(ReportError, match="rank 1"):
        apply({"event": "bad", "proc": 1, "rank": 1, "problem": "a line that is not JSON"}, TraceRun())
    with pytest.raises(ReportError):  # a process whose rank changes
        forged = TraceRun()
        apply({"event": "ready", "proc": 0, "rank": 0}, forged)
        apply({"event": "ready", "proc": 0, "rank": 1}, forged)


# --- with torch: Lightning and TRL in this process -----------------------------------------------

def _traced():
    import_torch()
    from tests.test_trace import line_of, trace

    return trace, line_of


LIGHTNING = """\
import torch
import torch.nn.functional as F
import lightning as L
from torch import nn

torch.manual_seed(0)
wrappers = []  # the module the strategy trains, at each fit's start


class Net(L.LightningModule):
    def __init__(self, manual=False):
        super().__init__()
        self.automatic_optimization = not manual
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1)}

    def on_train_start(self):
        wrappers.append(type(self.trainer.strategy.model).__name__)


def fit(model, strategy="auto"):
    data = torch.utils.data.TensorDataset(torch.randn(12, 8), torch.randint(0, 2, (12,)))
    trainer = L.Trainer(max_steps=3, accelerator="cpu", devices=1, strategy=strategy, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
"""

# (buggy, fixed, code): a module's body and its fit
LIGHTNING_TWINS = {
    "manual-scheduler-first": ("""
        class Manual(Net):
            def training_step(self, batch, i):
                x, y = batch
                optimizer, scheduler = self.optimizers(), self.lr_schedulers()
                scheduler.step()  # bug
                optimizer.zero_grad()
                self.manual_backward(F.cross_entropy(self.net(x), y))
                optimizer.step()

        fit(Manual(manual=True))
        """, """
        class Manual(Net):
            def training_step(self, batch, i):
                x, y = batch
                optimizer, scheduler = self.optimizers(), self.lr_schedulers()
                optimizer.zero_grad()
                self.manual_backward(F.cross_entropy(self.net(x), y))
                optimizer.step()
                scheduler.step()

        fit(Manual(manual=True))
        """, "TL305"),
    "manual-zero-grad-after-backward": ("""
        class Manual(Net):
            def training_step(self, batch, i):
                x, y = batch
                optimizer = self.optimizers()
                self.manual_backward(F.cross_entropy(self.net(x), y))
                optimizer.zero_grad()  # bug
                optimizer.step()

        fit(Manual(manual=True))
        """, """
        class Manual(Net):
            def training_step(self, batch, i):
                x, y = batch
                optimizer = self.optimizers()
                optimizer.zero_grad()
                self.manual_backward(F.cross_entropy(self.net(x), y))
                optimizer.step()

        fit(Manual(manual=True))
        """, "TL310"),
    "hook-scheduler-first": ("""
        class Auto(Net):
            def training_step(self, batch, i):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def on_train_batch_start(self, batch, i):
                self.lr_schedulers().step()  # bug

        fit(Auto())
        """, """
        class Auto(Net):
            def training_step(self, batch, i):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def on_train_batch_end(self, outputs, batch, i):
                self.lr_schedulers().step()

        fit(Auto())
        """, "TL305"),
    "hook-left-in-eval-mode": ("""
        class Auto(Net):
            def training_step(self, batch, i):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def on_train_batch_start(self, batch, i):
                with torch.no_grad():
                    self.eval()  # bug
                    self.net(batch[0])

        fit(Auto())
        """, """
        class Auto(Net):
            def training_step(self, batch, i):
                x, y = batch
                return F.cross_entropy(self.net(x), y)

            def on_train_batch_start(self, batch, i):
                with torch.no_grad():
                    self.eval()
                    self.net(batch[0])
                self.train()

        fit(Auto())
        """, "TL312"),
}


def at(found) -> set[tuple[str, int]]:
    return {(v.code, v.site.line if v.site else 0) for v in found}


# duration: Lightning is imported once per test process (about 2 s); each twin is a fit of 3 steps
@pytest.mark.slow
@pytest.mark.parametrize("buggy", [True, False])
@pytest.mark.parametrize("case", sorted(LIGHTNING_TWINS))
def test_lightning_twins(tmp_path, monkeypatch, case, buggy):
    pytest.importorskip("lightning")
    trace, line_of = _traced()
    monkeypatch.chdir(tmp_path)
    bad, good, code = LIGHTNING_TWINS[case]
    found, script = trace(tmp_path, textwrap.dedent(bad if buggy else good), head=LIGHTNING)
    assert at(found) == ({(code, line_of(script, "# bug"))} if buggy else set()), [str(v.message) for v in found]


TRL = """\
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainerCallback
from trl import SFTConfig, SFTTrainer

torch.manual_seed(0)
words = ["<pad>", "<eos>"] + [f"w{i}" for i in range(30)]
backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(words), n_positions=32,
                                   pad_token_id=0, eos_token_id=1, bos_token_id=1))
data = Dataset.from_dict({"text": [" ".join(f"w{(i + j) % 30}" for j in range(6)) for i in range(16)]})
args = SFTConfig(output_dir="out", per_device_train_batch_size=4, max_steps=3, learning_rate=1e-3, report_to=[],
                 save_strategy="no", use_cpu=True, disable_tqdm=True, logging_steps=100, max_length=16,
                 warmup_steps=1, max_grad_norm=1.0)
"""

TRL_HEALTHY = """
SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
"""

TRL_PLANTED = """
class Trainer(SFTTrainer):  # a subclass that steps the scheduler at the start of each step
    def training_step(self, model, inputs, num_items_in_batch=None):
        self.lr_scheduler.step()  # bug: scheduler
        return super().training_step(model, inputs, num_items_in_batch)


class Clean(TrainerCallback):  # a callback that resets the gradients before the optimizer step
    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        model.zero_grad()  # bug: reset


Trainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[Clean()]).train()
"""


# duration: TRL and transformers imported once (about 4 s), two SFT runs of 3 steps
@pytest.mark.slow
@pytest.mark.parametrize("planted", [False, True])
def test_trl_sft_trainer(tmp_path, monkeypatch, planted):
    pytest.importorskip("trl")
    trace, line_of = _traced()
    monkeypatch.chdir(tmp_path)
    found, script = trace(tmp_path, TRL_PLANTED if planted else TRL_HEALTHY, head=TRL)
    expected = {("TL305", line_of(script, "# bug: scheduler")),
                ("TL310", line_of(script, "# bug: reset"))} if planted else set()
    assert at(found) == expected, [v.message for v in found]
    assert all(v.severity == "error" for v in found)


# --- end to end: Lightning's DDP strategy, torchrun, accelerate launch -------------------------

def leftovers(folder: Path) -> list[str]:
    """Processes still running in `folder` (the traced runs' working folder; nothing must be
    left of them)."""
    out = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                cmdline = stream.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if cwd == str(folder) or str(folder) in cmdline:
            out.append(cmdline)
    return out


# duration: one more Lightning fit of 3 steps, in this process (a gloo group of one, destroyed after)
@pytest.mark.slow
def test_lightning_ddp_strategy_on_one_cpu_process(tmp_path, monkeypatch):
    """`Trainer(strategy="ddp", accelerator="cpu", devices=1)`: DDP wraps the module and
    Lightning starts a gloo group of one in this process; the hook's finding still lands at
    its line."""
    pytest.importorskip("lightning")
    trace, line_of = _traced()
    import torch.distributed as dist

    monkeypatch.chdir(tmp_path)
    environ = dict(os.environ)  # (Lightning sets MASTER_PORT, WORLD_SIZE, ...: put back after)
    bad = textwrap.dedent(LIGHTNING_TWINS["hook-left-in-eval-mode"][0]).replace('fit(Auto())',
                                                                              'fit(Auto(), strategy="ddp")')
    try:
        found, script = trace(tmp_path, bad + 'assert wrappers == ["DistributedDataParallel"], wrappers\n',
                              head=LIGHTNING)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()
        os.environ.update(environ)
    assert at(found) == {("TL312", line_of(script, "# bug"))}, [v.message for v in found]


DDP = """\
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
print('{"event": "finding", "finding": {"code": "TL214"}}', flush=True)  # stdout is no report channel
words = open("/proc/self/cmdline", "rb").read().split(b"\\0")  # the report pipe, passed to this process by number
fd = int(words[words.index(b"tlint.trace.child") + 2])
sys.stdout.flush()
probe = ("import os; print('rank %d starts; its report pipe in a process it starts: ' + "
         "('open' if os.path.exists('/proc/self/fd/%d') else 'closed'))" % (rank, fd))
os.system('%s -c "%s"' % (sys.executable, probe))  # (system(): every descriptor not close-on-exec is inherited)
for step in range(10):
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    if rank == 1:
        scheduler.step()  # bug: rank 1
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.zero_grad()  # bug: every rank
    optimizer.step()
    if rank == 0:
        scheduler.step()
"""


# duration: torchrun with 2 gloo ranks, each a child process importing torch (about 8 s of CPU)
@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the script reads its command line in /proc")
def test_torchrun_two_ranks_every_rank_checks_one_report(tmp_path):
    import_torch()
    script = tmp_path / "ddp.py"
    script.write_text(DDP, encoding="utf-8")
    result = run_tlint("trace", "--steps", "3", "--format", "json", "--", "torchrun", "--standalone",
                       "--nproc_per_node", "2", "ddp.py", cwd=tmp_path, env=tlint_env(OMP_NUM_THREADS="1"))
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["error"] is None, result.stderr[-3000:]
    lines = {marker: i for i, text in enumerate(DDP.splitlines(), 1) for marker in ("rank 1", "every rank")
             if f"# bug: {marker}" in text}
    found = [(f["code"], f["line"], f["ranks"], f["count"]) for f in report["findings"]]
    assert sorted(found) == [("TL305", lines["rank 1"], [1], 1), ("TL310", lines["every rank"], [0, 1], 6)]
    assert report["launcher"] == "torchrun" and report["steps"] == 3 and report["stopped"] is True
    assert [(r["rank"], r["steps"], r["stopped"]) for r in report["ranks"]] == [(0, 3, True), (1, 3, True)]
    for rank in (0, 1):  # close-on-exec: what a rank starts cannot write to its channel
        assert f"rank {rank} starts; its report pipe in a process it starts: closed" in result.stderr
    assert leftovers(tmp_path) == []


ACCELERATE = """\
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import nn

accelerator = Accelerator()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=10)
model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
for step in range(3):
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    scheduler.step()  # bug
    accelerator.backward(F.cross_entropy(model(x), y))
    optimizer.step()
    optimizer.zero_grad()
"""


# duration: accelerate launch starting one process (the launcher and the script each import torch: about 8 s of CPU)
@pytest.mark.slow
def test_accelerate_launch_reaches_the_launched_process(tmp_path):
    pytest.importorskip("accelerate")
    import_torch()
    (tmp_path / "train.py").write_text(ACCELERATE, encoding="utf-8")
    result = run_tlint("trace", "--steps", "0", "--", "accelerate", "launch", "--cpu", "--num_processes", "1",
                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "train.py",
                       cwd=tmp_path, env=tlint_env(HF_HOME=str(tmp_path / "hf")))
    assert result.returncode == 1, result.stderr[-3000:]
    line = next(i for i, text in enumerate(ACCELERATE.splitlines(), 1) if "# bug" in text)
    assert result.stdout.startswith(f"train.py:{line}: error TL305 scheduler-before-optimizer: ")
    assert "[trace, confirms tlint check, rank 0, step 0]" in result.stdout
    assert "tlint trace: 3 optimizer steps in 1 launched process (rank 0) (the script ended); 1 finding" in result.stdout
    assert leftovers(tmp_path) == []


def test_a_launcher_that_starts_no_python_script_traces_nothing_and_says_so(tmp_path, monkeypatch):
    """The launcher's process (`run_launcher`, here in this process): a command that is not a
    Python script is started as it is, and a launcher that started none ends with an error."""
    from tlint.trace.launch import run_launcher
    from tlint.verify.child import Reporter, ReportLines

    (tmp_path / "fake_launcher.py").write_text(
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'print(\"started as it is\")'], check=True)\n",
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    read, write = os.pipe()
    try:
        run_launcher(Reporter(write), {"target": "fake_launcher", "args": [], "steps": 3}, tmp_path)
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as stream:
        events = ReportLines().feed(stream.read())
    assert [e["event"] for e in events] == ["end", "error"]
    assert events[0]["launched"] == 0 and events[0]["launcher_exit"] == 0
    assert events[1]["message"] == "the launcher started no Python script or module: nothing was traced"
    assert subprocess.Popen.__init__.__module__ == "subprocess"  # the launcher's Popen put back


def test_the_launchers_process_tags_each_event_and_forwards_a_bad_line_once(tmp_path):
    """What a launched process writes on its pipe reaches the launcher's pipe tagged with its
    process and rank (a `proc` or `rank` of its own is overwritten); a line that is not an
    event is forwarded once as `bad`, and nothing after it."""
    from tlint.trace.launch import Host, _Launched
    from tlint.verify.child import Reporter, ReportLines

    out_read, out_write = os.pipe()
    host = Host(Reporter(out_write), tmp_path, 3)
    for proc, lines in ((0, b'{"event": "ready", "rank": 7}\n{"event": "end", "steps": 3'),
                        (1, b'not json\n{"event": "ready"}\n')):
        read, write = os.pipe()
        launched = _Launched(proc, proc, read)
        host._open[read] = launched
        os.write(write, lines)
        os.close(write)
        host._read(launched)
        host._read(launched)  # (the end of the pipe: closed)
        assert read not in host._open
    os.close(out_write)
    with os.fdopen(out_read, "rb") as stream:
        events = ReportLines().feed(stream.read())
    assert events == [{"event": "ready", "rank": 0, "proc": 0},
                      {"event": "bad", "proc": 1, "rank": 1, "problem": "a line that is not JSON: 'not json'"}]
