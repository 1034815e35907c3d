"""tlint.watch in plain training loops (real training of tiny models on CPU): a healthy run
stays quiet; planted problems are found with the right finding and step; the event file
validates against its schema."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.torchutil import import_torch

# slow: trains small models with the watch attached
pytestmark = pytest.mark.slow

torch = import_torch()

from tests.watchutil import PAD, TinyGPT, V, batches, gpt2, one_thread, validate  # noqa: E402,F401
from tlint.watch import TrainingStopped, Watch  # noqa: E402

nn = torch.nn


def run_gpt2(tmp_path, data, *, lr=1e-3, lr_at=None, mask=True, clip=1.0, **options):
    """A plain loop: forward, backward, after_backward, clip, step, after_step."""
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    w = Watch(model, opt, output_dir=str(tmp_path), print_summary=False, **options)
    losses = []
    for step, b in enumerate(data, 1):
        for group in opt.param_groups:
            group["lr"] = (lr_at or {}).get(step, group["lr"])
        out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"] if mask else None, labels=b["labels"])
        out.loss.backward()
        w.after_backward(out.loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
        w.after_step()
        losses.append(out.loss.item())
    w.close()
    return w, losses


def kinds(w, severity=None):
    return [f.kind for f in w.findings if severity is None or f.severity == severity]


def test_healthy_run_reports_no_warning_or_error(tmp_path):
    """Constant learning rate, no warmup, some padding: only info notes."""
    w, losses = run_gpt2(tmp_path, batches(40, lengths=(16, 12)), every=10)
    assert losses[-1] < losses[0] - 0.5  # it trains
    assert w.problems == [], [str(f) for f in w.problems]
    assert "no-warmup" in kinds(w, "info")
    found = validate(tmp_path)
    samples = [e for e in found if e["event"] == "sample"]
    assert [e["step"] for e in samples] == [1, 10, 20, 30, 40]
    first = samples[0]
    assert first["pad_share"] == pytest.approx(4 / 32)
    assert set(first["grad_norm"]["layers"]) == {"transformer.wte", "transformer.wpe", "transformer.h.0",
                                                 "transformer.h.1", "transformer.ln_f"}
    assert first["lr"] == [1e-3] and first["update_ratio"][0] > 0
    assert {r["kind"] for r in first["activations"]} >= {"embedding", "attention", "mlp", "norm", "block"}
    assert set(first["attention_pad_mass"]) == {"transformer.h.0.attn", "transformer.h.1.attn"}
    windows = [e for e in found if e["event"] == "window"]
    assert sum(len(e["losses"]) for e in windows) == 40
    assert windows[0]["losses"][0] == pytest.approx(losses[0])
    assert found[-1]["event"] == "end" and found[-1]["findings"]["warning"] == 0
    assert "tlint watch: 40 steps, 0 errors, 0 warnings" in w.summary()


def test_learning_rate_jump_spikes_the_loss_at_the_next_step(tmp_path):
    """The learning rate applied at step 30 is 1.0: step 31's loss spikes; the finding quotes
    the gradient norm sampled before it and the high-learning-rate note (TL307)."""
    w, losses = run_gpt2(tmp_path, batches(40), every=10, lr_at={30: 1.0})
    spikes = [f for f in w.findings if f.kind == "loss-spike"]
    assert [f.step for f in spikes] == [31], [str(f) for f in w.findings]
    spike = spikes[0]
    assert spike.severity == "warning" and spike.rule == "TL307"
    assert spike.data["grad_norm_step"] == 30 and spike.data["loss"] == pytest.approx(losses[30], rel=1e-4)
    assert "the gradient norm before it" in spike.message and "above the usual range" in spike.message
    assert "tlint check --select TL301,TL304,TL307" in spike.next
    assert "high-learning-rate" in kinds(w, "info")
    validate(tmp_path)


def test_padding_heavy_loader_warns_with_the_pad_share(tmp_path):
    w, _ = run_gpt2(tmp_path, batches(10, lengths=(4, 6)), every=5)
    pads = [f for f in w.findings if f.kind == "pad-share"]
    assert len(pads) == 1 and pads[0].step == 1 and pads[0].rule == "TL111"
    assert pads[0].data["pad_share"] == pytest.approx(1 - 5 / 16)
    assert pads[0].count == 3  # steps 1, 5, 10


def test_attention_over_padding_is_found_where_the_mask_is_not_passed(tmp_path):
    """Left padding, the mask left out of the model call: real tokens attend to pads (the pad
    positions come from the pad id). With the mask passed, nothing."""
    data = batches(6, lengths=(16, 10, 8, 12), left=True)
    w, _ = run_gpt2(tmp_path / "bug", data, every=5, mask=False, pad_token_id=PAD)
    found = {f.data["module"]: f for f in w.findings if f.kind == "attention-on-padding"}
    assert set(found) == {"transformer.h.0.attn", "transformer.h.1.attn"}, [str(f) for f in w.findings]
    assert all(f.step == 1 and f.rule == "TL101" and f.data["mass"] > 0.01 for f in found.values())
    fixed, _ = run_gpt2(tmp_path / "fixed", data, every=5, mask=True, pad_token_id=PAD)
    assert "attention-on-padding" not in kinds(fixed)


def nan_batches(steps: int, at: int) -> list[dict]:
    data = batches(steps)
    data[at - 1]["attention_mask"][3] = 0  # one row of step `at` is all padding: -inf everywhere, NaN
    return data


def run_tiny(tmp_path, data, **options):
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w = Watch(model, opt, output_dir=str(tmp_path), print_summary=False, **options)
    try:
        for b in data:
            loss = model(b["input_ids"], b["attention_mask"])
            loss.backward()
            w.after_backward(loss)
            opt.step()
            opt.zero_grad()
            w.after_step()
    finally:
        w.close()
    return w, model


def test_nan_in_one_batch_names_the_first_nonfinite_module_and_stops(tmp_path):
    with pytest.raises(TrainingStopped) as stopped:
        run_tiny(tmp_path, nan_batches(12, at=7), every=5, on_nan="stop")
    finding = stopped.value.finding
    assert (finding.kind, finding.step, finding.severity) == ("nonfinite-loss", 7, "error")
    assert finding.data["module"] == "blocks.0.attn" and finding.rule == "TL210"
    assert "first module with a non-finite output when that batch's forward is re-run: blocks.0.attn" in finding.message
    events = validate(tmp_path)
    assert events[-1]["event"] == "end" and events[-1]["stopped"] == "nonfinite-loss" and events[-1]["steps"] == 6


def test_nan_read_with_the_window_names_its_step_and_the_broken_weights(tmp_path):
    """nan_check="window" (an accelerator's default): after the first 16 steps (each read) the
    flag is read at step 20; the finding still names step 19, and the weights the NaN update
    spoiled."""
    w, model = run_tiny(tmp_path, nan_batches(24, at=19), every=5, nan_check="window")
    (finding,) = [f for f in w.findings if f.kind == "nonfinite-loss"]
    assert finding.step == 19 and "parameters already non-finite" in finding.message
    windows = [e for e in validate(tmp_path) if e["event"] == "window"]
    assert [e["step"] for e in windows[:16]] == list(range(1, 17))
    assert windows[16]["first_step"] == 17 and windows[16]["nonfinite_steps"] == [19, 20]
    assert windows[16]["losses"][2] is None and windows[16]["losses"][1] is not None


def test_saturated_and_constant_sublayers(tmp_path):
    class Saturating(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embed, self.proj, self.squash = nn.Embedding(V, 32), nn.Linear(32, 32), nn.Tanh()
            self.gate, self.dead, self.head = nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, V)
            with torch.no_grad():
                self.proj.weight.mul_(300.0)
                self.gate.bias.fill_(-100.0)

        def forward(self, input_ids, attention_mask):
            x = self.embed(input_ids)
            logits = self.head(self.squash(self.proj(x)) + self.dead(self.gate(x)))
            return nn.functional.cross_entropy(logits.reshape(-1, V), input_ids.reshape(-1))

    model = Saturating()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    w = Watch(model, opt, every=5, output_dir=None, print_summary=False)
    for b in batches(5):
        with w.step(model(b["input_ids"], b["attention_mask"])) as _:
            pass
        # (the body may also do the backward; here the loss alone is watched)
    w.close()
    found = {(f.kind, f.data.get("module")) for f in w.findings}
    assert ("saturated-sublayer", "squash") in found and ("constant-sublayer", "dead") in found, found


def test_step_context_measures_the_gradients_before_clipping(tmp_path):
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    w = Watch(model, opt, every=3, output_dir=str(tmp_path), print_summary=False)
    before_clip = {}
    for step, b in enumerate(batches(6), 1):
        loss = model(**b).loss
        with w.step(loss):
            loss.backward()
            before_clip[step] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05))
            opt.step()
            opt.zero_grad()
    w.close()
    samples = {e["step"]: e for e in validate(tmp_path) if e["event"] == "sample"}
    assert sorted(samples) == [1, 3, 6]
    for step, sample in samples.items():
        assert sample["grad_norm"]["total"] == pytest.approx(before_clip[step], rel=1e-4)
        assert sample["grad_norm"]["total"] > 0.05  # clipped afterwards, measured before


def test_hooks_live_only_for_the_sampled_step():
    model = gpt2()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w = Watch(model, opt, every=10, output_dir=None, print_summary=False)

    def hooks():
        return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())

    armed = hooks()
    data = batches(3)
    for b in data:
        loss = model(**b).loss
        loss.backward()
        w.after_backward(loss)
        opt.step()
        opt.zero_grad()
        w.after_step()
        assert hooks() == 1  # steps 2 and 3 are not sampled: the batch reference hook alone
    assert armed > 50
    w.close()
    assert hooks() == 0


def test_amp_scale_and_skipped_steps_are_counted(tmp_path):
    """A GradScaler whose first scale overflows float16: the steps it skips are counted
    (compared on the device, read at the sample) and the scale reported."""
    model = gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    w = Watch(model, opt, every=8, scaler=scaler, output_dir=str(tmp_path), print_summary=False)
    scales = [scaler.get_scale()]
    for b in batches(8):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(**b).loss
        scaler.scale(loss).backward()
        w.after_backward(loss)
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        w.after_step()
        scales.append(scaler.get_scale())
    w.close()
    dropped = sum(b < a for a, b in zip(scales, scales[1:]))
    assert dropped >= 1
    sample = [e for e in validate(tmp_path) if e["event"] == "sample"][-1]
    assert sample["amp"] == {"scale": scales[-1], "skipped_steps": dropped}
    assert not any(f.kind == "nonfinite-grad" for f in w.findings)  # overflow under a scaler is its business
    (note,) = [f for f in w.findings if f.kind == "amp-skipped-steps"]
    assert note.severity == "info" and note.step == 1 and note.rule == "TL303" and w.problems == []


@pytest.mark.parametrize("kwargs, message", [
    ({"every": 0}, "every must be a positive integer"),
    ({"on_nan": "explode"}, "on_nan must be one of log, warn, stop"),
    ({"nan_check": "sometimes"}, "nan_check must be one of step, window"),
])
def test_bad_options_get_a_clear_message(kwargs, message):
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=message):
        Watch(model, torch.optim.SGD(model.parameters(), lr=0.1), output_dir=None, **kwargs)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        Watch("model", torch.optim.SGD(model.parameters(), lr=0.1), output_dir=None)


@pytest.mark.parametrize("loss, words", [
    ({"loss": 1.0}, "not dict (the model's outputs: pass outputs['loss'], or outputs.loss)"),
    ("0.5", "not str"),
    ([1.0], "not list"),
])
def test_a_loss_that_is_not_a_tensor_or_a_number_gets_a_clear_message(loss, words):
    model = nn.Linear(2, 2)
    w = Watch(model, torch.optim.SGD(model.parameters(), lr=0.1), output_dir=None, print_summary=False)
    with pytest.raises(TypeError, match=r"^tlint\.watch: the loss must be a tensor or a number, ") as info:
        w.after_backward(loss)
    assert str(info.value).endswith(words)
    w.after_backward(0.5)  # a plain number is taken
    w.after_step()
    w.close()


def test_importing_the_watch_imports_neither_transformers_nor_lightning(tmp_path):
    code = ("import sys, tlint.watch\n"
            "print(sorted(m for m in ('transformers', 'lightning', 'pytorch_lightning', 'accelerate') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    (tmp_path / "train.py").write_text("import tlint.watch\nimport torch\n")
    check = ("import sys, tlint.cli\n"
             "code = tlint.cli.main(['check', 'train.py', '--no-cache'])\n"
             "print(code, [m for m in ('tlint.watch', 'torch') if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stdout.splitlines()[-1].endswith(" []"), proc.stdout + proc.stderr  # `tlint check` never imports it


def test_warn_action_warns(tmp_path):
    with pytest.warns(RuntimeWarning, match="pad-share"):
        run_gpt2(tmp_path, batches(2, lengths=(2,)), every=5, on_problem="warn")


def test_per_step_checks_alone_still_catch_the_spike(tmp_path):
    """measure=False (the benchmark's per-step mode): no sampled step, no hooks, the loss
    window and the spike test remain."""
    w, _ = run_gpt2(tmp_path, batches(40), every=10, lr_at={30: 1.0}, measure=False)
    assert [f.step for f in w.findings if f.kind == "loss-spike"] == [31]
    found = validate(tmp_path)
    windows = [e["step"] for e in found if e["event"] == "window"]
    assert not [e for e in found if e["event"] == "sample"] and windows == [*range(1, 17), 20, 30, 40]  # (read every step of the first 16)


def test_sustained_gradient_norm_growth(tmp_path):
    """The backward of step n runs on the loss times 2**n (learning rate 0): the sampled
    gradient norms double and quadruple; at the fifth sample (step 8) it is growth."""
    model = TinyGPT()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    w = Watch(model, opt, every=2, output_dir=None, print_summary=False)
    for step, b in enumerate(batches(10), 1):
        loss = model(b["input_ids"], b["attention_mask"])
        (loss * 2.0 ** step).backward()
        w.after_backward(loss)
        opt.step()
        opt.zero_grad()
        w.after_step()
    w.close()
    (grew,) = [f for f in w.findings if f.kind == "grad-norm-growth"]
    assert (grew.step, grew.severity, grew.rule, grew.data["first_step"]) == (8, "warning", "TL301", 1)
    assert grew.data["last_norm"] == pytest.approx(grew.data["first_norm"] * 2 ** 7, rel=0.2)


def test_nonfinite_gradient_with_a_finite_loss(tmp_path):
    model = gpt2()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w = Watch(model, opt, every=5, output_dir=None, print_summary=False)
    for step, b in enumerate(batches(5), 1):
        loss = model(**b).loss
        if step == 5:
            model.transformer.h[1].mlp.c_fc.weight.register_hook(lambda g: g * float("inf"))
        loss.backward()
        w.after_backward(loss)
        opt.zero_grad()
        w.after_step()
    w.close()
    (bad,) = [f for f in w.findings if f.kind == "nonfinite-grad"]
    assert bad.step == 5 and bad.severity == "error" and bad.data["layers"] == ["transformer.h.1"]
