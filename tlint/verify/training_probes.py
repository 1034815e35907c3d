"""The training probes: short, seeded training runs on fixed batches (README "tlint verify"
`overfit-batch`, `warmup-ab`, `optimizer-coverage`).

They cost more than the forward probes, so `overfit-batch` and `warmup-ab` run only when
asked for (`--probe overfit-batch`, `--probe training` for all three); `optimizer-coverage`
(one step) runs by default when an optimiser factory is configured. Each run is bounded in
steps and by `max-seconds`, starts from the model's initial weights and restores them after,
and runs in eval mode (dropout off)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tlint.verify.probes import Probe, ProbeContext, ProbeResult, dense


@dataclass
class TrainingSettings:
    """What the worker hands the training probes (set as `ctx.training`)."""

    optimizer_factory: Callable[[nn.Module], Any] | None = None
    optimizer_spec: str | None = None
    lr: float | None = None
    max_seconds: float = 30.0
    # (probe, done, total, what) -> None: progress of a long run (the parent draws a bar)
    progress: Callable[[str, int, int, str], None] = field(default=lambda *args: None)


def settings_of(ctx: ProbeContext) -> TrainingSettings:
    return getattr(ctx, "training", None) or TrainingSettings()


class _Weights:
    """The model's parameters and buffers as they were, restored on exit."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __enter__(self) -> _Weights:  # noqa: PYI034
        self.saved = {k: v.detach().clone() for k, v in self.model.state_dict(keep_vars=True).items()}
        self.was_training = self.model.training
        return self

    def reset(self) -> None:
        with torch.no_grad():
            for key, value in self.model.state_dict(keep_vars=True).items():
                if key in self.saved:
                    value.data.copy_(self.saved[key])
        self.model.zero_grad(set_to_none=True)

    def __exit__(self, *exc) -> None:
        self.reset()
        self.model.train(self.was_training)


def _trainable(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    seen: set[int] = set()
    out = []
    for name, param in model.named_parameters():
        if param.requires_grad and id(param) not in seen:
            seen.add(id(param))
            out.append((name, param))
    return out


def _grad_norm(params: list[nn.Parameter]) -> float:
    total = sum(float(p.grad.detach().float().pow(2).sum()) for p in params if p.grad is not None)
    return math.sqrt(total)


class Task:
    """A fixed batch and its targets, and the loss of the model's output on it: next token
    for a causal model whose output is logits over the vocabulary, else fixed random targets
    per position (or per sample for sequence-level outputs) over the output's last axis."""

    def __init__(self, ctx: ProbeContext, ids: torch.Tensor, salt: int) -> None:
        self.ctx, self.ids = ctx, ids
        self.keep = torch.ones_like(ids, dtype=torch.bool)
        out = self.output(ids, grad=False)
        self.classes = out.shape[-1]
        self.next_token = bool(ctx.causal and ctx.per_position(out, ids) and out.dim() == 3
                               and self.classes == ctx.vocab_size)
        gen = ctx.generator(salt)
        shape = out.shape[:-1] if out.dim() >= 2 else out.shape[:1]
        self.targets = ids[:, 1:] if self.next_token else torch.randint(0, max(self.classes, 1), shape, generator=gen)
        self.kind = "next token" if self.next_token else "fixed random targets"

    def output(self, ids: torch.Tensor, grad: bool = True) -> torch.Tensor:
        ctx = self.ctx
        with torch.set_grad_enabled(grad):
            keep = self.keep.to(ctx.device) if ctx.caller.has_mask else None
            return dense(ctx.caller(ctx.model, ids.to(ctx.device), keep)).float()

    def loss(self, ids: torch.Tensor | None = None) -> torch.Tensor:
        out = self.output(self.ids if ids is None else ids)
        targets = self.targets.to(out.device)
        if self.next_token:
            out = out[:, :-1]
        if out.dim() == 1 or out.shape[-1] < 2:
            return (out.reshape(-1) - 1.0).pow(2).mean()  # a scalar output per entry: regress to 1
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))


@dataclass
class Curve:
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    stopped: str = ""           # why it ended before its steps, if it did

    @property
    def steps(self) -> int:
        return len(self.losses)

    def ratio(self, values: list[float]) -> float:
        if not values:
            return math.nan
        first, last = values[0], values[-1]
        if not math.isfinite(last):
            return math.inf
        return last / first if first > 0 else (0.0 if last == 0 else math.inf)

    @property
    def loss_ratio(self) -> float:
        return self.ratio(self.losses)

    @property
    def grad_ratio(self) -> float:
        return self.ratio(self.grad_norms)

    def summary(self) -> dict[str, Any]:
        return {"steps": self.steps, "loss_first": _round(self.losses[0] if self.losses else None),
                "loss_last": _round(self.losses[-1] if self.losses else None),
                "grad_norm_first": _round(self.grad_norms[0] if self.grad_norms else None),
                "grad_norm_last": _round(self.grad_norms[-1] if self.grad_norms else None),
                "loss_ratio": _round(self.loss_ratio), "grad_ratio": _round(self.grad_ratio),
                "loss_curve": [_round(v) for v in _sample(self.losses)]}


def _round(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None if value is None or math.isnan(value) else value
    return float(f"{value:.4g}")


def _sample(values: list[float], points: int = 12) -> list[float]:
    if len(values) <= points:
        return list(values)
    return [values[round(i * (len(values) - 1) / (points - 1))] for i in range(points)]


def train(model: nn.Module, loss_fn: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer, steps: int,
          deadline: float, on_step: Callable[[int], None], *, warmup: int = 0, clip: float | None = None,
          until: Callable[[Curve], bool] | None = None) -> Curve:
    """`steps` optimiser steps (fewer once `until(curve)` holds); the loss and the gradient
    norm (before clipping) of each. Linear warmup over `warmup` steps scales each group's
    learning rate."""
    params = [p for _, p in _trainable(model)]
    base = [group["lr"] for group in optimizer.param_groups]
    curve = Curve()
    for step in range(steps):
        if time.monotonic() >= deadline:
            curve.stopped = f"stopped after {step} of {steps} steps (max-seconds)"
            break
        if warmup:
            for group, lr in zip(optimizer.param_groups, base):
                group["lr"] = lr * min(1.0, (step + 1) / warmup)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        value = float(loss.detach())
        if not math.isfinite(value):
            curve.losses.append(value)
            curve.grad_norms.append(math.inf)
            curve.stopped = f"diverged at step {step} (non-finite loss)"
            break
        loss.backward()
        norm = _grad_norm(params)
        curve.losses.append(value)
        curve.grad_norms.append(norm)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        on_step(step + 1)
        if until is not None and until(curve):
            break
    for group, lr in zip(optimizer.param_groups, base):
        group["lr"] = lr
    return curve


class OverfitBatchProbe(Probe):
    """Adam on one fixed batch for N steps (dropout off): the loss and the gradient norm must
    both fall by >= 90 %. The control run replaces every input token by one constant non-pad
    token (full mask), so the samples become indistinguishable: its final loss must stay
    above 50 % of its initial loss. The batch holds at least 4 * sqrt(classes) samples (up to
    64), so a model that tells samples apart only by their tokens cannot take the control
    below ln(samples), more than half of the initial ln(classes)."""

    name = "overfit-batch"
    tolerance = 0.1
    unit = "final / initial loss or gradient norm, whichever is larger, after overfitting one batch"
    steps = 200
    lr = 3e-3
    control_floor = 0.5
    max_batch = 64
    max_seq = 16

    def memorised(self, curve: Curve) -> bool:
        return curve.steps >= 10 and max(curve.loss_ratio, curve.grad_ratio) <= self.tolerance * 0.8

    def run(self, ctx: ProbeContext) -> ProbeResult:
        settings = settings_of(ctx)
        model = ctx.model
        if not _trainable(model):
            return self.skip("the model has no trainable parameter")
        started = time.monotonic()
        deadline = started + settings.max_seconds
        with _Weights(model) as weights:
            model.eval()  # dropout off
            seq = min(ctx.seq_len, self.max_seq)
            probe_task = Task(ctx, ctx.tokens(ctx.generator(40), (2, seq)), 41)
            batch = min(self.max_batch, max(ctx.batch_size, 4 * math.ceil(math.sqrt(probe_task.classes))))
            ids = ctx.tokens(ctx.generator(42), (batch, seq))
            task = Task(ctx, ids, 43)
            constant = ctx.tokens(ctx.generator(44), (1,)).item()
            control_ids = torch.full_like(ids, constant)
            total = 2 * self.steps

            def progress(offset: int, what: str):
                return lambda step: settings.progress(self.name, offset + step, total, what)

            main = train(model, task.loss, torch.optim.Adam([p for _, p in _trainable(model)], lr=self.lr),
                         self.steps, started + settings.max_seconds / 2, progress(0, "overfit"), until=self.memorised)
            weights.reset()
            control = train(model, lambda: task.loss(control_ids),
                            torch.optim.Adam([p for _, p in _trainable(model)], lr=self.lr),
                            main.steps, deadline, progress(self.steps, "control"))
        if not main.steps or not control.steps:
            return self.skip(f"max-seconds ({settings.max_seconds:g} s) ran out before both runs took a step "
                             "(raise `max-seconds`)")
        extra: dict[str, Any] = {"overfit": main.summary(), "control": control.summary(), "batch": [batch, seq],
                                 "targets": task.kind, "constant_token": constant}
        figure = max(main.loss_ratio, main.grad_ratio)
        figures = (f"overfit: loss {main.losses[0]:.4g} -> {main.losses[-1]:.4g} ({main.loss_ratio:.1%}), grad norm "
                   f"{main.grad_norms[0]:.4g} -> {main.grad_norms[-1]:.4g} ({main.grad_ratio:.1%}) in {main.steps} "
                   f"steps; control (every token = {constant}): loss {control.losses[0]:.4g} -> "
                   f"{control.losses[-1]:.4g} ({control.loss_ratio:.1%}, must stay > {self.control_floor:.0%}); "
                   f"batch {batch} x {seq}, {task.kind}, Adam lr {self.lr:g}, dropout off")
        stopped = "; ".join(f"{what} {curve.stopped}" for what, curve in (("overfit", main), ("control", control))
                            if curve.stopped)
        if stopped:
            figures += f"; {stopped}"
        if figure > self.tolerance:
            return self.result("fail", figure, detail="the model cannot memorise one small batch: " + figures,
                               **extra)
        if control.loss_ratio < self.control_floor:
            return self.result("fail", figure, detail="the control run learns although its samples are identical "
                               "(outputs depend on the batch index or the targets leak): " + figures, **extra)
        return self.result("pass", figure, detail=figures, **extra)


def make_optimizer(ctx: ProbeContext, settings: TrainingSettings) -> tuple[torch.optim.Optimizer, str]:
    """The configured optimiser (`optimizer` factory, its learning rate replaced by `lr`
    when that is given too), else AdamW at `lr`. Raises LookupError when neither is set."""
    if settings.optimizer_factory is not None:
        made = settings.optimizer_factory(ctx.model)
        optimizer = _first_optimizer(made)
        if optimizer is None:
            raise TypeError(f"`{settings.optimizer_spec}` returned a {type(made).__name__}, not a "
                            "torch.optim.Optimizer (nor a tuple holding one)")
        if settings.lr is not None:
            for group in optimizer.param_groups:
                group["lr"] = settings.lr
        lrs = sorted({group["lr"] for group in optimizer.param_groups})
        what = f"{type(optimizer).__name__} from `{settings.optimizer_spec}`, lr {', '.join(f'{v:g}' for v in lrs)}"
        return optimizer, what
    if settings.lr is None:
        raise LookupError("no optimiser or learning rate configured")
    params = [p for _, p in _trainable(ctx.model)]
    return torch.optim.AdamW(params, lr=settings.lr), f"AdamW, lr {settings.lr:g} (--lr; no `optimizer` configured)"


def _first_optimizer(made: Any) -> torch.optim.Optimizer | None:
    if isinstance(made, torch.optim.Optimizer):
        return made
    if isinstance(made, (tuple, list)):
        return next((item for item in made if isinstance(item, torch.optim.Optimizer)), None)
    if isinstance(made, dict):  # Lightning's configure_optimizers style
        return _first_optimizer(made.get("optimizer"))
    return None


NOT_CONFIGURED = ("no optimiser or learning rate configured: set `optimizer = \"pkg.mod:make_optimizer\"` (a "
                  "callable(model) returning the optimiser) or `lr` in [tool.tlint.verify], or give --lr")


class WarmupABProbe(Probe):
    """The same fixed batches trained K steps at the configured optimiser and learning rate,
    four times from the same initial weights: with and without linear warmup, with and
    without gradient clipping (max norm 1). A run is unstable when its loss diverges (non-
    finite, or ends above its start) or spikes by more than `tolerance` of its initial loss
    above the lowest loss so far. Fails when the configured run (no warmup, no clipping) is
    unstable; the other runs say whether warmup (TL304) or clipping (TL301) helps."""

    name = "warmup-ab"
    tolerance = 0.5
    unit = "max loss spike above the running minimum / initial loss, configured run (no warmup, no clipping)"
    steps = 40
    warmup = 10
    clip = 1.0
    batches = 4
    max_seq = 16
    runs = (("plain", 0, None), ("warmup", 10, None), ("clip", 0, 1.0), ("warmup+clip", 10, 1.0))

    def run(self, ctx: ProbeContext) -> ProbeResult:
        settings = settings_of(ctx)
        if settings.optimizer_factory is None and settings.lr is None:
            return self.skip(NOT_CONFIGURED)
        if not _trainable(ctx.model):
            return self.skip("the model has no trainable parameter")
        started = time.monotonic()
        seq = min(ctx.seq_len, self.max_seq)
        tasks = [Task(ctx, ctx.tokens(ctx.generator(50 + i), (ctx.batch_size, seq)), 60 + i)
                 for i in range(self.batches)]
        stats: dict[str, dict[str, Any]] = {}
        what = ""
        with _Weights(ctx.model) as weights:
            ctx.model.eval()  # dropout off: the runs differ only in warmup and clipping
            for index, (label, warmup, clip) in enumerate(self.runs):
                weights.reset()
                torch.manual_seed(ctx.seed)
                optimizer, what = make_optimizer(ctx, settings)
                counter = iter(range(10**9))

                def loss_fn(counter=counter) -> torch.Tensor:
                    return tasks[next(counter) % len(tasks)].loss()

                remaining = len(self.runs) - index
                deadline = time.monotonic() + (started + settings.max_seconds - time.monotonic()) / remaining
                curve = train(ctx.model, loss_fn, optimizer, self.steps, deadline,
                              # (mypy infers no type for a lambda with bound defaults)
                              lambda step, i=index, lab=label: settings.progress(self.name, i * self.steps + step,  # type: ignore[misc]
                                                                                 len(self.runs) * self.steps, lab),
                              warmup=warmup, clip=clip)
                stats[label] = self.stats(curve)
        plain = stats["plain"]
        figure = plain["spike"]
        summary = "; ".join(f"{label}: final loss {s['final']:.4g}, max spike {s['spike']:.3g}, max grad norm "
                            f"{s['max_grad_norm']:.3g}" + (", diverged" if s["diverged"] else "")
                            + (f" ({s['stopped']})" if s["stopped"] else "")
                            for label, s in stats.items())
        detail = (f"{what}; {self.steps} steps on {self.batches} fixed batches of {ctx.batch_size} x {seq}, "
                  f"warmup {self.warmup} steps, clipping at {self.clip:g}; {summary}")
        extra: dict[str, Any] = {"runs": stats, "optimizer": what,
                                 "needs_warmup": plain["unstable"] and not stats["warmup"]["unstable"],
                                 "needs_clipping": plain["unstable"] and not stats["clip"]["unstable"],
                                 "grad_spike": plain["grad_spike"]}
        if plain["unstable"]:
            helps = [w for w, key in (("warmup", "needs_warmup"), ("clipping", "needs_clipping")) if extra[key]]
            verdict = (f"the configured learning rate is unstable without warmup and clipping ({' and '.join(helps)}"
                       " alone fixes it)" if helps else "the configured learning rate is unstable even with warmup "
                       "or clipping")
            return self.result("fail", figure, detail=f"{verdict}: {detail}", **extra)
        return self.result("pass", figure, detail=detail, **extra)

    def stats(self, curve: Curve) -> dict[str, Any]:
        losses = curve.losses
        finite = all(math.isfinite(v) for v in losses)
        first = losses[0] if losses else math.nan
        spike, low = 0.0, math.inf
        for value in losses:
            if not math.isfinite(value):
                spike = math.inf
                break
            if low < math.inf:
                spike = max(spike, value - low)
            low = min(low, value)
        relative = spike / first if first and math.isfinite(first) and first > 0 else spike
        norms = [n for n in curve.grad_norms if math.isfinite(n)]
        median = sorted(norms)[len(norms) // 2] if norms else 0.0
        diverged = not finite or (bool(losses) and losses[-1] > first)
        return {"final": losses[-1] if losses else math.nan, "initial": first, "spike": relative,
                "max_grad_norm": max(curve.grad_norms) if curve.grad_norms else 0.0,
                "grad_spike": (max(norms) / median) if norms and median > 0 else 0.0,
                "diverged": diverged, "unstable": diverged or relative > self.tolerance, "steps": curve.steps,
                "stopped": curve.stopped, "loss_curve": [_round(v) for v in _sample(losses)]}


class OptimizerCoverageProbe(Probe):
    """The configured optimiser's parameters against the model's trainable ones (same set,
    each once), and one `step()` on a real loss: every trainable parameter must change."""

    name = "optimizer-coverage"
    tolerance = 0.0
    unit = "trainable parameters the optimiser misses or does not change (+ frozen ones it holds)"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        settings = settings_of(ctx)
        if settings.optimizer_factory is None:
            return self.skip("no optimiser factory configured: set `optimizer = \"pkg.mod:make_optimizer\"` in "
                             "[tool.tlint.verify] (a callable(model) returning the optimiser)")
        trainable = dict(_trainable(ctx.model))
        names = {id(p): n for n, p in ctx.model.named_parameters(remove_duplicate=False)}
        with _Weights(ctx.model):
            ctx.model.eval()
            optimizer, what = make_optimizer(ctx, settings)
            held = [p for group in optimizer.param_groups for p in group["params"]]
            held_ids = {id(p) for p in held}
            missing = [n for n, p in trainable.items() if id(p) not in held_ids]
            frozen = [names.get(id(p), "?") for p in held if not p.requires_grad]
            twice = len(held) - len(held_ids)
            foreign = [p for p in held if id(p) not in names]
            before = {n: p.detach().clone() for n, p in trainable.items()}
            task = Task(ctx, ctx.tokens(ctx.generator(70), (ctx.batch_size, min(ctx.seq_len, 16))), 71)
            optimizer.zero_grad(set_to_none=True)
            task.loss().backward()
            optimizer.step()
            unchanged = [n for n, p in trainable.items() if n not in missing and torch.equal(before[n], p.detach())]
        problems = []
        if missing:
            problems.append(f"{len(missing)} trainable parameters not in the optimiser: {_listed(missing)}")
        if unchanged:
            problems.append(f"{len(unchanged)} unchanged after one step (no gradient, or lr 0): {_listed(unchanged)}")
        if frozen:
            problems.append(f"{len(frozen)} frozen parameters in the optimiser: {_listed(frozen)}")
        if twice:
            problems.append(f"{twice} parameters in more than one group")
        if foreign:
            problems.append(f"{len(foreign)} parameters that are not the model's")
        figure = float(len(missing) + len(unchanged) + len(frozen) + twice + len(foreign))
        extra: dict[str, Any] = {"missing": missing, "unchanged": unchanged, "frozen": frozen}
        base = f"{what}; {len(held_ids)} parameters in {len(optimizer.param_groups)} groups, {len(trainable)} trainable"
        if problems:
            module: str | None = (missing or unchanged or [None])[0]  # type: ignore[list-item]  # (a list of str, or [None])
            module = module.rpartition(".")[0] if module else None
            return self.result("fail", figure, module or None, f"{base}: " + "; ".join(problems), **extra)
        return self.result("pass", figure, detail=f"{base}: all held once and all changed by one step", **extra)


def _listed(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


TRAINING_PROBE_CLASSES: dict[str, type[Probe]] = {
    probe.name: probe for probe in (OptimizerCoverageProbe, OverfitBatchProbe, WarmupABProbe)
}


def training_settings(options, roots, emit: Callable[[dict], None]) -> TrainingSettings:
    """The worker's settings for the training probes: the optimiser factory imported (a
    UserCodeError when it does not import), and progress events at most every 0.2 s."""
    from tlint.verify.loading import UserCodeError, import_object

    factory = None
    if options.optimizer:
        factory = import_object(options.optimizer, "optimizer", roots)
        if not callable(factory):
            raise UserCodeError("factory", f"`optimizer = \"{options.optimizer}\"` is a {type(factory).__name__}, "
                                "not a callable(model) returning an optimiser")
    last = [0.0]

    def progress(probe: str, done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2 or done >= total:
            last[0] = now
            emit({"event": "progress", "probe": probe, "done": done, "total": total, "what": what})

    # inside the parent's per-probe limit, so a long run ends with its figures instead of being killed
    budget = min(options.max_seconds, 0.8 * options.probe_timeout)
    return TrainingSettings(optimizer_factory=factory, optimizer_spec=options.optimizer, lr=options.lr,
                            max_seconds=budget, progress=progress)


# Last: tlint.verify.data_ab imports this module (a cycle) and registers data-ab in TRAINING_PROBE_CLASSES.
import tlint.verify.data_ab  # noqa: E402, F401, I001
