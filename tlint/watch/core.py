"""`Watch`: the verifier's probes inside a real training run (plain loops, accelerate, and
the framework callbacks, which drive it).

Per step, without a device sync: the step's loss stays on the device (a reference in the
window; no copy), the applied learning rates are read from the optimizer (Python floats),
and the AMP scale is compared on the device. Every `every` steps the window is read in one
copy: non-finite losses and the loss-spike test (robust running baseline). The sampled steps
(step 1 and every multiple of `every`) also measure, with hooks attached for that step only:
gradient norms before clipping (total and per layer), update-to-weight ratios and applied
learning rates per parameter group, the AMP scale and skipped steps, the pad share of the
batch, per-sub-layer activation ranges over real positions, attention mass on pad keys.

Where the loss lives on the CPU, reading it costs no device sync, so its finiteness is
checked every step (`nan_check="step"`): a non-finite loss is caught before the optimizer
step, and the batch's forward is re-run with hooks to name the first module whose output is
non-finite. On an accelerator the default is `nan_check="window"` (read every `every`
steps); `nan_check="step"` opts into one small read per step.

Distributed runs (torch.distributed initialised): every rank checks its own loss and
gradients; gradient norms of sharded gradients (FSDP) are summed across ranks as the
clipping of those engines does (DDP's gradients are already averaged); at each window read
the ranks exchange their new findings and a stop request, so a stop stops every rank at the
same step; only rank 0 writes the event file, logs scalars and prints the summary.

The training-step invariants (`tlint.runtime`, shared with `tlint trace`: gradients reset
before a step used them, a scheduler stepped before its optimizer, clipping of scaled
gradients, training in eval mode, dropout on in eval mode) are checked on every step through
torch's global hooks while the watch is open (`invariants=False` turns them off); each is
a finding at the user's line."""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tlint.watch.needs import WATCH_EXTRA, absent, needs

try:
    import torch
except ImportError as _exc:
    if not absent(_exc, "torch"):
        raise
    raise needs("tlint.watch", "PyTorch", WATCH_EXTRA) from None
from torch import nn

from tlint.runtime import hooks
from tlint.runtime.invariants import Violation
from tlint.watch import findings as F
from tlint.watch.measure import (
    StepProbe,
    UpdateRatio,
    as_float,
    first_nonfinite_module,
    grad_norms,
    layer_of,
    learning_rates,
    nonfinite_parameters,
    unwrap,
)
from tlint.watch.output import JsonLines, print_summary, summary_text

ACTIONS = ("log", "warn", "stop")
NAN_CHECKS = ("step", "window")


class TrainingStopped(RuntimeError):
    """Raised by a plain-loop `Watch` with `on_nan="stop"` (or `on_problem="stop"`) when it
    stops the run; `.finding` is the finding that stopped it."""

    def __init__(self, finding: F.Finding) -> None:
        super().__init__(f"tlint watch stopped training: {finding}")
        self.finding = finding


def _listener(watch: Watch) -> Callable[[Violation], None]:
    """The hooks' listener for `watch`, holding it weakly (the hooks are process-wide)."""
    ref = weakref.ref(watch)

    def listener(violation: Violation) -> None:
        owner = ref()
        if owner is not None:
            owner._on_violation(violation)
    return listener


def _vocabulary(model: nn.Module) -> int | None:
    """The `vocab_size` of the configuration of the model or of the first of its sub-modules
    that has one (a Hugging Face model inside a LightningModule)."""
    for module in model.modules():
        size = getattr(getattr(module, "config", None), "vocab_size", None)
        if isinstance(size, int) and size > 1:
            return size
    return None


def _finding(item: dict[str, Any]) -> F.Finding:
    found = F.Finding(**{k: v for k, v in item.items() if k != "last_step"})
    found.last_step = item.get("last_step")
    return found


def _dist() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class Watch:
    """Watches one training run. Plain loop::

        w = Watch(model, optimizer, every=50)
        ...
        loss.backward()
        w.after_backward(loss)      # before clipping
        clip_grad_norm_(...); optimizer.step()
        w.after_step()              # after optimizer.step() (and scaler.update())

    or `with w.step(loss): loss.backward(); ...; optimizer.step()`. Results: `findings`,
    `summary()`, the JSON Lines file `<output_dir>/tlint-watch.jsonl`; `close()` ends the run
    (prints the summary)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, every: int = 50,
                 scaler: Any = None, pad_token_id: int | None = None, on_nan: str = "log", on_problem: str = "log",
                 output_dir: str | None = ".", log: Callable[[dict[str, float], int], Any] | None = None,
                 nan_check: str | None = None, attention: bool = True, print_summary: bool = True,
                 measure: bool = True, framework: str = "plain", invariants: bool = True) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"Watch: model must be a torch.nn.Module, got {type(model).__name__}")
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"Watch: optimizer must be a torch optimizer, got {type(optimizer).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"Watch: every must be a positive integer, got {every!r}")
        for name, value, allowed in (("on_nan", on_nan, ACTIONS), ("on_problem", on_problem, ACTIONS),
                                     ("nan_check", nan_check, (*NAN_CHECKS, None))):
            if value not in allowed:
                raise ValueError(f"Watch: {name} must be one of {', '.join(map(str, allowed))}; got {value!r}")
        if scaler is None:
            scaler = getattr(optimizer, "scaler", None)  # accelerate's optimizer wrapper carries its scaler
        if scaler is not None and not getattr(scaler, "is_enabled", lambda: True)():
            scaler = None
        self.model, self.inner, self.optimizer, self.scaler = model, unwrap(model), optimizer, scaler
        self.every, self.on_nan, self.on_problem, self.nan_check = every, on_nan, on_problem, nan_check
        self.log, self.framework, self.print_at_close, self.measure = log, framework, print_summary, measure
        self.rank, self.world = _dist()
        self.named = [(n, p) for n, p in self.inner.named_parameters() if p.requires_grad]
        self.layer = layer_of(self.inner)
        self.probe = StepProbe(self.inner, pad_token_id, attention)
        self.updates = UpdateRatio(optimizer)
        self.optimizer_name = type(getattr(optimizer, "optimizer", optimizer)).__name__
        self.steps = 0                       # optimizer steps completed
        self.findings: list[F.Finding] = []
        self._seen: dict[tuple[Any, ...], F.Finding] = {}
        self._unsent: list[F.Finding] = []   # this rank's findings not yet exchanged
        self._window: list[tuple[int, torch.Tensor]] = []
        self._window_lrs: list[list[float]] = []
        self._lrs0: list[float] = []         # group 0's applied learning rate: the first steps, the samples
        self._lr_top = 0.0                   # the largest applied so far (group 0)
        self._loss: torch.Tensor | None = None
        self._bad_step: int | None = None    # first non-finite loss seen
        self.spike = F.SpikeTest()
        self.divergence = F.DivergenceTest(_vocabulary(self.inner))
        groups = optimizer.param_groups
        self._main_group = max(range(len(groups)), key=lambda i: sum(p.numel() for p in groups[i]["params"]),
                               default=0)
        self._exploded = False
        self._classes_hook: Any = None
        if self.divergence.classes is None:
            self._classes_hook = self.inner.register_forward_hook(self._read_classes)
        self._norms: list[tuple[int, float]] = []
        self._grads: tuple[float, dict[str, float]] | None = None
        self._grad_hooks: list[Any] = []
        self._queued = False
        self._skipped = 0
        self._skipped_dev: torch.Tensor | None = None
        self._prev_scale: torch.Tensor | None = None
        self._last_call: tuple[Any, Any] | None = None
        self._last_sample: dict[str, Any] | None = None
        self.rerun: Callable[[], Any] | None = None   # set by a callback that re-runs a step its own way
        self.raise_on_stop = framework == "plain"
        self.should_stop = False
        self._stop_request: F.Finding | None = None
        self.stopped: F.Finding | None = None
        self.closed = False
        self._sharded = self._is_sharded()
        self.writer = JsonLines(output_dir) if output_dir is not None and self.rank == 0 else None
        self._call_hook = self.inner.register_forward_pre_hook(self._remember_call, with_kwargs=True)
        self._violations: list[tuple[int, Violation]] = []   # seen by the hooks, not yet findings
        self._reported: list[tuple[Violation, F.Finding]] = []
        self._listener: Callable[[Violation], None] | None = None
        if invariants:
            self._listener = _listener(self)
            hooks.acquire(self._listener).know(getattr(optimizer, "optimizer", optimizer))
            weakref.finalize(self, hooks.release, self._listener)  # (a watch never closed)
        self._write("start", None, framework=framework, every=every, world_size=self.world,
                    model=type(self.inner).__name__, parameters=sum(p.numel() for _, p in self.named),
                    param_groups=len(optimizer.param_groups), optimizer=self.optimizer_name,
                    nan_check=nan_check, amp=scaler is not None)
        if self.sampled(1):
            self.probe.arm()

    # --- the user's calls ---------------------------------------------------------------

    def sampled(self, step: int | None = None) -> bool:
        """Whether `step` (default: the current one) is measured: step 1 and every `every`-th
        (never with `measure=False`: the per-step checks alone)."""
        step = self.steps + 1 if step is None else step
        return self.measure and (step == 1 or step % self.every == 0)

    def after_backward(self, loss: Any) -> None:
        """After `loss.backward()`, before clipping (and before `scaler.unscale_` or after it)."""
        self.observe_loss(loss)
        if self.sampled() and self._grads is None:
            self.measure_grads()

    def after_step(self) -> None:
        """After `optimizer.step()` (and `scaler.update()`)."""
        self.finish_step()

    @contextmanager
    def step(self, loss: Any) -> Iterator[None]:
        """`with w.step(loss): loss.backward(); clip; optimizer.step()`: the loss is checked
        on entry, the gradients measured at the end of the backward (before clipping)."""
        self.observe_loss(loss)
        if self.sampled():
            self.arm_backward_end()
        yield
        if self.sampled() and self._grads is None:
            self.measure_grads()
        self.finish_step()

    def close(self) -> None:
        """Ends the run: the last window is read, the summary printed (rank 0), the file closed."""
        if self.closed:
            return
        self.closed = True
        self._call_hook.remove()
        if self._classes_hook is not None:
            self._classes_hook.remove()
        if self._listener is not None:
            hooks.release(self._listener)
        self._take_violations()
        self._count_violations()
        self.probe.disarm()
        self._disarm_backward_end()
        if self._window:
            self._read_window(final=True)
        self._exchange(final=True)
        counts = {s: sum(f.severity == s for f in self.findings) for s in F.SEVERITIES}
        repeated = [{"kind": f.kind, "step": f.step, "rank": f.rank, "count": f.count, "last_step": f.last_step}
                    for f in self.findings if f.count > 1]
        self._write("end", self.steps, steps=self.steps, findings=counts, repeated=repeated,
                    stopped=self.stopped.kind if self.stopped else None)
        if self.writer is not None:
            self.writer.close()
        if self.print_at_close and self.rank == 0:
            print_summary(self.summary())

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def summary(self) -> str:
        return summary_text(self.steps, self.findings, self._last_sample,
                            str(self.stopped) if self.stopped else None,
                            self.writer.path if self.writer is not None else None)

    @property
    def problems(self) -> list[F.Finding]:
        return [f for f in self.findings if f.severity != "info"]

    # --- per step -----------------------------------------------------------------------

    def _remember_call(self, _module: nn.Module, args: Any, kwargs: Any) -> None:
        if self.inner.training:
            self._last_call = (args, kwargs)   # references only: the re-run's batch

    def _read_classes(self, _module: nn.Module, _args: Any, output: Any) -> None:
        """The number of classes of the model's `logits` output (its last axis), once."""
        logits = output.get("logits") if isinstance(output, dict) else getattr(output, "logits", None)
        if isinstance(logits, torch.Tensor) and logits.dim() >= 2 and self.divergence.first is None:
            self.divergence.classes = int(logits.shape[-1]) if logits.shape[-1] > 1 else None
        if self._classes_hook is not None:
            self._classes_hook.remove()
            self._classes_hook = None

    def _on_violation(self, violation: Violation) -> None:
        """Called inside the hooked torch call: kept, and made a finding at the next call of
        the user's (an action such as a stop must not be raised inside torch's call)."""
        self._violations.append((self.steps + 1, violation))

    def _take_violations(self) -> None:
        pending, self._violations = self._violations, []
        for step, violation in pending:
            site = violation.site
            finding = F.from_violation(step, violation)
            self._add(finding, key=(site.path, site.line) if site else None)
            self._reported.append((violation, finding))

    def _count_violations(self) -> None:
        """A violation seen again is counted by the invariants, not reported again."""
        for violation, finding in self._reported:
            finding.count = max(finding.count, violation.count)

    def observe_loss(self, loss: Any) -> None:
        if self._violations:
            self._take_violations()
        if loss is None:
            return
        if not isinstance(loss, torch.Tensor):
            if isinstance(loss, (str, bytes, bool)) or not hasattr(loss, "__float__"):
                hint = (" (the model's outputs: pass outputs['loss'], or outputs.loss)"
                        if isinstance(loss, Mapping) or hasattr(loss, "loss") else "")
                raise TypeError(f"tlint.watch: the loss must be a tensor or a number, not "
                                f"{type(loss).__name__}{hint}")
            loss = torch.tensor(float(loss))
        loss = loss.detach()
        self._loss = loss
        lrs = learning_rates(self.optimizer)
        self._window_lrs.append(lrs)
        first = lrs[0] if lrs else None
        if isinstance(first, (int, float)):  # (a tensor learning rate is read at the samples only: no sync)
            self._lr_top = max(self._lr_top, float(first))
        if len(self._lrs0) < F.WARMUP_STEPS or self.sampled():
            self._lrs0.append(as_float(first) if first is not None else 0.0)
        mode = self.nan_check or ("step" if loss.device.type == "cpu" else "window")
        if mode == "step" and self._bad_step is None and not bool(torch.isfinite(loss).all()):
            self._nonfinite(self.steps + 1, as_float(loss.float().mean()), same_step=True)
        if mode == "step" and self.world > 1 and "stop" in (self.on_nan, self.on_problem):
            self._stop_flag(loss.device)

    def arm_backward_end(self) -> None:
        """Measure the gradients when the backward ends (after DDP's reduction, before any
        clipping): a hook on each parameter's gradient queues an autograd-engine callback,
        which queues the measurement behind the callbacks already queued."""
        self._disarm_backward_end()

        def fired(_param: torch.Tensor) -> None:
            if self._queued:
                return
            self._queued = True
            engine = torch.autograd.Variable._execution_engine

            def measure() -> None:
                self._queued = False
                self.measure_grads()
            engine.queue_callback(lambda: engine.queue_callback(measure))

        for _, p in self.named:
            self._grad_hooks.append(p.register_post_accumulate_grad_hook(fired))

    def _disarm_backward_end(self) -> None:
        for handle in self._grad_hooks:
            handle.remove()
        self._grad_hooks, self._queued = [], False

    def _scale(self) -> float:
        """The factor the gradients are multiplied by now (the AMP scale before unscale_)."""
        scaler = self.scaler
        if scaler is None:
            return 1.0
        try:
            from torch.amp.grad_scaler import OptState

            state = scaler._per_optimizer_states[id(self.optimizer)]["stage"]
            if state is not OptState.READY:
                return 1.0
        except (ImportError, AttributeError, KeyError):
            pass
        return float(scaler.get_scale())

    def _is_sharded(self) -> bool:
        if self.world == 1:
            return False
        names = {type(m).__name__ for m in self.model.modules()} | {type(self.model).__name__}
        return "FullyShardedDataParallel" in names or any(
            type(p).__name__ == "DTensor" for _, p in self.named)

    def _reduce(self, squares: torch.Tensor) -> torch.Tensor:
        torch.distributed.all_reduce(squares, op=torch.distributed.ReduceOp.SUM)
        return squares

    def measure_grads(self) -> None:
        self._grads = grad_norms(self.named, self.layer, self._scale(), self._reduce if self._sharded else None)
        self.updates.snapshot()

    def finish_step(self) -> None:
        step = self.steps + 1
        if self._violations:
            self._take_violations()
        if self._loss is not None:
            self._window.append((step, self._loss))
        self._loss = None
        self._count_skipped()
        self.steps = step
        if self.sampled(step):
            self._sample(step)
        if step % self.every == 0:
            self._read_window()
            self._exchange()
        elif step <= F.EARLY_READS:  # (absolute checks from step 1: a run may diverge at once)
            self._read_window()
        if self.sampled(step + 1):
            self.probe.arm()
        self._act_on_stop()

    def _count_skipped(self) -> None:
        if self.scaler is None:
            return
        skipped = getattr(self.optimizer, "step_was_skipped", None)  # accelerate's optimizer wrapper
        if isinstance(skipped, bool):
            self._skipped += skipped
            return
        scale = getattr(self.scaler, "_scale", None)
        if not isinstance(scale, torch.Tensor):
            return
        before = self._prev_scale if self._prev_scale is not None else getattr(self.scaler, "_init_scale", None)
        if before is not None:
            dropped = (scale < before).to(torch.int64)   # the scaler backs off on the steps it skips
            self._skipped_dev = dropped if self._skipped_dev is None else self._skipped_dev + dropped
        self._prev_scale = scale.detach().clone()

    def skipped_steps(self) -> int:
        return self._skipped + (int(self._skipped_dev) if self._skipped_dev is not None else 0)

    # --- a sampled step -----------------------------------------------------------------

    def _sample(self, step: int) -> None:
        probe = self.probe
        probe.disarm()
        self._disarm_backward_end()
        activations = probe.activations() if probe.done else []
        keep = probe.keep if probe.done else None
        pad_share = float(1.0 - keep.float().mean()) if keep is not None and keep.numel() else None
        masses = dict(getattr(probe, "masses", {})) if probe.done and keep is not None else {}
        ratios = self.updates.ratios()
        grads, self._grads = self._grads, None
        lrs = [as_float(v) if v is not None else None for v in learning_rates(self.optimizer)]
        applied = self._window_lrs[-1] if self._window_lrs else lrs
        applied = [as_float(v) if v is not None else None for v in applied]
        amp = None
        if self.scaler is not None:
            amp = {"scale": float(self.scaler.get_scale()), "skipped_steps": self.skipped_steps()}
        loss = self._window[-1][1] if self._window and self._window[-1][0] == step else None
        sample = {"step": step, "loss": as_float(loss.float().mean()) if loss is not None else None,
                  "grad_norm": {"total": grads[0], "layers": grads[1]} if grads else None,
                  "lr": applied, "update_ratio": ratios, "amp": amp, "pad_share": pad_share,
                  "activations": activations, "attention_pad_mass": masses}
        self._last_sample = sample
        self._write("sample", step, **{k: v for k, v in sample.items() if k != "step"})
        self._log_scalars(step, sample)
        self._judge_sample(step, sample)

    def _judge_sample(self, step: int, sample: dict[str, Any]) -> None:
        grads = sample["grad_norm"]
        if grads is not None:
            total = grads["total"]
            if not math.isfinite(total) and self.scaler is None and self._bad_step is None:
                bad = [name for name, v in grads["layers"].items() if not math.isfinite(v)]
                self._add(F.make(step, "nonfinite-grad", "error",
                                 f"non-finite gradient norm ({total}) at step {step} with a finite loss; "
                                 f"layers: {', '.join(bad[:5])}", layers=bad[:20]), action=self.on_nan)
            elif math.isfinite(total):
                self._norms.append((step, total))
                exploded = F.explosion(self._norms) if not self._exploded else None
                if exploded:
                    self._exploded = True
                    first, low = exploded
                    self._add(F.make(step, "grad-norm-explosion", "error",
                                     f"gradient norm {F.fmt(total)} at step {step}, {F.fmt(total / low)} × the "
                                     f"{F.fmt(low)} of step {first}: the updates are out of control{self._context()}",
                                     first_step=first, first_norm=low, norm=total))
                grew = F.growth(self._norms)
                if grew:
                    first, low, high = grew
                    self._add(F.make(step, "grad-norm-growth", "warning",
                                     f"gradient norm grew at every sample from {F.fmt(low)} (step {first}) to "
                                     f"{F.fmt(high)} (step {step}){self._context()}", first_step=first,
                                     first_norm=low, last_norm=high))
        ratios = sample["update_ratio"] or []
        ratio = ratios[self._main_group] if self._main_group < len(ratios) else None
        if ratio is not None and math.isfinite(ratio) and ratio > F.UPDATE_RATIO_LIMIT:
            lr = sample["lr"][self._main_group] if self._main_group < len(sample["lr"]) else None
            self._add(F.make(step, "update-ratio", "error",
                             f"one optimizer step changed the weights of parameter group {self._main_group} (the "
                             f"largest) by {F.fmt(ratio)} × their own size (‖Δw‖/‖w‖; usually 1e-4 to 1e-2) at step "
                             f"{step}, learning rate {F.fmt(lr)}: the step size is far too large",
                             ratio=ratio, group=self._main_group, lr=lr))
        amp = sample["amp"]
        if amp and amp["skipped_steps"]:
            self._add(F.make(step, "amp-skipped-steps", "info",
                             f"the AMP scaler skipped {amp['skipped_steps']} optimizer steps so far (scale now "
                             f"{F.fmt(amp['scale'])}): overflowing gradients, not a problem unless it goes on",
                             skipped_steps=amp["skipped_steps"], scale=amp["scale"]))
        share = sample["pad_share"]
        if share is not None and share > F.PAD_SHARE_LIMIT:
            self._add(F.make(step, "pad-share", "warning",
                             f"{share:.0%} of the batch's tokens are padding (above {F.PAD_SHARE_LIMIT:.0%}): "
                             "compute spent on pads; sort or pack by length, pad to the batch's longest",
                             pad_share=round(share, 4)))
        for row in sample["activations"]:
            where = f"{row['module']} ({row['kind']})"
            if row["zero_variance"]:
                self._add(F.make(step, "constant-sublayer", "warning",
                                 f"{where} outputs one constant value over the batch's real positions",
                                 module=row["module"]), key=row["module"])
            elif row["saturated"] is not None and row["saturated"] > F.SATURATED_LIMIT:
                self._add(F.make(step, "saturated-sublayer", "warning",
                                 f"{where}: {row['saturated']:.0%} of its outputs are saturated "
                                 f"(range {row['min']} .. {row['max']})", module=row["module"],
                                 saturated=row["saturated"]), key=row["module"])
        for module, mass in sample["attention_pad_mass"].items():
            if mass > F.ATTENTION_PAD_LIMIT:
                self._add(F.make(step, "attention-on-padding", "warning",
                                 f"{module}: real tokens put {mass:.1%} of their attention on pad keys "
                                 f"(above {F.ATTENTION_PAD_LIMIT:.0%}): the attention mask does not reach it",
                                 module=module, mass=round(mass, 4)), key=module)

    def _log_scalars(self, step: int, sample: dict[str, Any]) -> None:
        if self.log is None or self.rank != 0:
            return
        scalars: dict[str, float] = {}
        if sample["grad_norm"]:
            scalars["tlint/grad_norm"] = sample["grad_norm"]["total"]
        for i, lr in enumerate(sample["lr"]):
            if lr is not None:
                scalars["tlint/lr" if i == 0 else f"tlint/lr_group{i}"] = lr
        for i, ratio in enumerate(sample["update_ratio"] or []):
            if ratio is not None:
                scalars["tlint/update_ratio" if i == 0 else f"tlint/update_ratio_group{i}"] = ratio
        if sample["pad_share"] is not None:
            scalars["tlint/pad_share"] = sample["pad_share"]
        if sample["attention_pad_mass"]:
            scalars["tlint/attention_pad_mass"] = max(sample["attention_pad_mass"].values())
        saturated = [r["saturated"] for r in sample["activations"] if r["saturated"] is not None]
        if saturated:
            scalars["tlint/saturated_max"] = max(saturated)
        if sample["amp"]:
            scalars["tlint/skipped_steps"] = float(sample["amp"]["skipped_steps"])
            if sample["amp"]["scale"] is not None:
                scalars["tlint/amp_scale"] = sample["amp"]["scale"]
        scalars["tlint/problems"] = float(len(self.problems))
        self.log({k: v for k, v in scalars.items() if math.isfinite(v)}, step)

    # --- the window ---------------------------------------------------------------------

    def _read_window(self, final: bool = False) -> None:
        window, lrs = self._window, self._window_lrs
        self._window, self._window_lrs = [], []
        if not window:
            return
        losses = torch.stack([t.float().mean() for _, t in window]).cpu().tolist()
        steps = [s for s, _ in window]
        bad = [s for s, v in zip(steps, losses) if not math.isfinite(v)]
        self._write("window", steps[-1], first_step=steps[0], losses=losses, nonfinite_steps=bad,
                    lr=[as_float(lr[0]) if lr and lr[0] is not None else None for lr in lrs])
        if bad and self._bad_step is None:
            self._nonfinite(bad[0], losses[steps.index(bad[0])], same_step=bad[0] == self.steps and not final)
        for step, loss, lr in zip(steps, losses, lrs):
            bound = self.spike.see(loss)
            if bound is not None:
                self._spike(step, loss, bound)
            diverged = self.divergence.see(step, loss)
            if diverged is not None:
                self._diverged(step, loss, diverged, lr[0] if lr else None)
        for note in F.schedule_notes(self._lrs0, self._lr_top, self.optimizer_name, self.steps):
            self._add(note)

    def _context(self) -> str:
        notes = [f for f in self.findings if f.severity == "info" and f.kind in ("no-warmup", "high-learning-rate")]
        return ("; next to: " + "; ".join(f"{f.message} [{f.rule}]" for f in notes)) if notes else ""

    def _spike(self, step: int, loss: float, bound: tuple[float, float]) -> None:
        for note in F.schedule_notes(self._lrs0, self._lr_top, self.optimizer_name, step):
            self._add(note)
        before = [(s, v) for s, v in self._norms if s < step]
        typical = sorted(v for _, v in self._norms[:-1] or self._norms)
        grad = ""
        data: dict[str, Any] = {"loss": loss, "baseline": bound[0], "threshold": bound[1]}
        if before:
            s, v = before[-1]
            mid = typical[len(typical) // 2] if typical else None
            grad = f"; the gradient norm before it: {F.fmt(v)} at step {s} (median of samples {F.fmt(mid)})"
            data.update(grad_norm_before=v, grad_norm_step=s)
        rule = "TL307" if any(f.kind == "high-learning-rate" for f in self.findings) else "TL301"
        self._add(F.make(step, "loss-spike", "warning",
                         f"loss {F.fmt(loss)} at step {step} against a running baseline of {F.fmt(bound[0])} "
                         f"(threshold {F.fmt(bound[1])}){grad}{self._context()}", rule=rule, **data), key=step)

    def _diverged(self, step: int, loss: float, found: tuple[float, str, int], lr: Any) -> None:
        threshold, why, since = found
        applied = f"; learning rate applied {F.fmt(as_float(lr))}" if lr is not None else ""
        self._add(F.make(step, "loss-divergence", "error",
                         f"loss {F.fmt(loss)} at step {step}, above {F.fmt(threshold)} ({why}) on "
                         f"{F.DIVERGE_STEPS} steps in a row since step {since}: the run diverges{applied}",
                         loss=loss, threshold=threshold, first_loss=self.divergence.first, since=since,
                         lr=as_float(lr) if lr is not None else None), key=since)

    def _nonfinite(self, step: int, value: float, same_step: bool) -> None:
        """A non-finite loss first seen at `step`: re-run the batch's forward to name the
        first module whose output is non-finite."""
        self._bad_step = step
        rerun = self.rerun
        if rerun is None and self._last_call is not None:
            args, kwargs = self._last_call

            def rerun() -> Any:
                return self.inner(*args, **kwargs)
        origin, reproduced = (first_nonfinite_module(self.inner, rerun) if rerun is not None else (None, False))
        broken = nonfinite_parameters(self.named)
        batch = "that batch's" if same_step else f"step {self.steps}'s batch (read at step {self.steps})"
        if origin:
            where = f"; first module with a non-finite output when {batch} forward is re-run: {origin}"
        elif rerun is not None:
            where = f"; re-running {batch} forward gives {'a non-finite' if reproduced else 'finite'} output"
        else:
            where = "; no batch to re-run (the model's forward was not seen)"
        if broken:
            where += f"; parameters already non-finite: {', '.join(broken)}"
        kind = self.probe.kinds.get(origin or "", "")
        rule = "TL210" if kind == "attention" else ("TL301" if broken else "TL110")
        grads = self._norms[-1] if self._norms else None
        context = f"; last gradient norm {F.fmt(grads[1])} at step {grads[0]}" if grads else ""
        self._add(F.make(step, "nonfinite-loss", "error",
                         f"non-finite loss ({value}) at step {step}{where}{context}{self._context()}", rule=rule,
                         module=origin, parameters=broken or None), action=self.on_nan)

    # --- findings, actions, ranks -------------------------------------------------------

    def _add(self, finding: F.Finding, key: Any = None, action: str | None = None) -> None:
        finding.rank = self.rank
        ident = (finding.kind, key)
        seen = self._seen.get(ident)
        if seen is not None:
            seen.count += 1
            seen.last_step = finding.step
            return
        self._seen[ident] = finding
        self.findings.append(finding)
        self._unsent.append(finding)
        if self.rank == 0:
            self._write("finding", finding.step, **{k: v for k, v in finding.to_json().items() if k != "step"})
        if finding.severity == "info":
            return
        action = action or self.on_problem
        if action in ("warn", "stop"):
            warnings.warn(f"tlint watch: {finding}", RuntimeWarning, stacklevel=3)
        if action == "stop" and self._stop_request is None:
            self._stop_request = finding
            if self.world == 1:
                self._act_on_stop()

    def _act_on_stop(self) -> None:
        if self._stop_request is None or self.stopped is not None:
            return
        if self.world > 1:
            return  # decided at the window read, with every rank (_exchange)
        self.stopped = self._stop_request
        self._stop()

    def _stop(self) -> None:
        self.should_stop = True
        if self.writer is not None:
            self.writer.flush()
        if self.raise_on_stop and self.stopped is not None:
            self.probe.disarm()
            raise TrainingStopped(self.stopped)

    def _exchange(self, final: bool = False) -> None:
        """Distributed (a collective: every rank calls it at the same step): every rank's new
        findings go to rank 0; a stop requested on any rank stops every rank."""
        if self.writer is not None:
            self.writer.flush()
        if self.world == 1:
            return
        dist = torch.distributed
        mine = [f.to_json() for f in self._unsent]
        self._unsent = []
        gathered: list[Any] = [None] * self.world
        request = self._stop_request.to_json() if self._stop_request is not None else None
        dist.all_gather_object(gathered, {"findings": mine, "stop": request})
        if self.rank == 0:
            for rank, payload in enumerate(gathered):
                for item in payload["findings"] if rank else ():
                    found = _finding(item)
                    self.findings.append(found)
                    self._write("finding", found.step, **{k: v for k, v in found.to_json().items() if k != "step"})
            if self.writer is not None:
                self.writer.flush()
        requests = [p["stop"] for p in gathered if p["stop"] is not None]
        if requests and self.stopped is None and not final:
            self.stopped = self._stop_request or _finding(requests[0])
            self._stop()

    def _stop_flag(self, device: torch.device) -> None:
        """Distributed, per step (`nan_check="step"` with a stop action): one flag reduced
        across ranks, so a stop requested on one rank stops all before the optimizer step."""
        flag = torch.tensor([0.0 if self._stop_request is None else 1.0], device=device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        if float(flag) > 0:
            self._exchange()

    def _write(self, event: str, step: int | None, **fields: Any) -> None:
        if self.writer is not None:
            self.writer.write(event, step, **fields)
