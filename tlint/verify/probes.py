"""The probes: small, named numerical checks with explicit tolerances, in the style of Hugging Face's model
tests (`test_batching_equivalence`, `test_left_padding_compatibility`). Each returns a `ProbeResult` (figure,
unit, tolerance, pass / fail / skip); figures that compare outputs are relative to the output's RMS. Eval mode,
fixed seeds. Over 800 lines: the probes share one `ProbeContext` and its helpers, one class a probe."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from tlint.verify.loading import Caller

SDPA = torch._C._nn.scaled_dot_product_attention  # the kernel: `F.`'s may be the run-time hooks' wrapper

if TYPE_CHECKING:
    from tlint.verify.training_probes import TrainingSettings

# Fractions of seq-len that give each sample of a padded batch its length (sample 0 is full).
_LENGTH_FRACTIONS = (1.0, 0.75, 0.5, 0.875, 0.625, 0.3125)


@dataclass
class ProbeResult:
    probe: str
    status: str                     # "pass" | "fail" | "skip"
    figure: float | None
    tolerance: float
    unit: str
    module: str | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)   # figures other verdicts use (TL101)

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "status": self.status, "figure": self.figure, "tolerance": self.tolerance,
                "unit": self.unit, "module": self.module, "detail": self.detail}


class ProbeContext:
    """The model, how to call it, and the inputs the probes build from fixed seeds."""

    # Set by the worker (the probes read them with getattr: contexts built elsewhere lack them):
    artifacts: str | None  # where attention-maps may write PNG files
    training: TrainingSettings  # for the training probes
    data: dict[str, Any] | None  # data-ab: the data scan's settings (tlint.verify.data.DataOptions as a dict)

    def __init__(self, model: nn.Module, caller: Caller, *, vocab_size: int, pad_token_id: int, seq_len: int,
                 batch_size: int, causal: bool, padding_side: str, device: str, seed: int) -> None:
        self.model, self.caller = model, caller
        self.vocab_size, self.pad_token_id = vocab_size, pad_token_id
        self.seq_len, self.batch_size = seq_len, batch_size
        self.causal, self.padding_side = causal, padding_side
        self.device, self.seed = device, seed
        # () -> (a deeper copy of the model, (setting, depth)) or None; set by the worker
        self.rebuild_deeper: Callable[[int], tuple[nn.Module, tuple[str, int]] | None] | None = None

    def generator(self, salt: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed * 1000 + salt)

    def tokens(self, gen: torch.Generator, shape) -> torch.Tensor:
        """Random token ids that are never the pad id."""
        ids = torch.randint(0, self.vocab_size - 1, shape, generator=gen)
        return ids + (ids >= self.pad_token_id).long()

    def lengths(self, batch: int) -> list[int]:
        return [max(2, round(self.seq_len * _LENGTH_FRACTIONS[i % len(_LENGTH_FRACTIONS)])) for i in range(batch)]

    def padded_batch(self, gen: torch.Generator, batch: int | None = None,
                     lengths: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, keep): keep is True at real tokens; pads on the configured side."""
        batch = batch or self.batch_size
        lengths = lengths or self.lengths(batch)
        ids = self.tokens(gen, (batch, self.seq_len))
        positions = torch.arange(self.seq_len).unsqueeze(0)
        length = torch.tensor(lengths).unsqueeze(1)
        keep = positions < length if self.padding_side == "right" else positions >= self.seq_len - length
        ids = ids.masked_fill(~keep, self.pad_token_id)
        return ids, keep

    def full_batch(self, gen: torch.Generator, batch: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.padded_batch(gen, batch, [self.seq_len] * (batch or self.batch_size))

    def forward(self, ids: torch.Tensor, keep: torch.Tensor | None, caller: Caller | None = None) -> torch.Tensor:
        """The model's output on (ids, keep), every call under the same random seed (the
        caller's RNG state restored after): anything random left on in eval mode (TL214,
        which eval-determinism measures) draws the same numbers in the two forwards a probe
        compares, so it does not pass for a leak."""
        state = torch.get_rng_state()
        torch.manual_seed(self.seed)
        try:
            return self.raw_forward(ids, keep, caller)
        finally:
            torch.set_rng_state(state)

    def raw_forward(self, ids: torch.Tensor, keep: torch.Tensor | None, caller: Caller | None = None) -> torch.Tensor:
        with torch.no_grad():
            out = (caller or self.caller)(self.model, ids.to(self.device),
                                          None if keep is None else keep.to(self.device))
        return dense(out).detach().float().cpu()

    def per_position(self, out: torch.Tensor, ids: torch.Tensor) -> bool:
        return out.dim() >= 2 and out.shape[:2] == ids.shape

    def selection(self, out: torch.Tensor, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Which entries of `out` belong to real tokens: (batch, seq) for per-position
        outputs, (batch,) samples with a real token otherwise."""
        return keep if self.per_position(out, ids) else keep.any(dim=1)

    def loss(self, out: torch.Tensor, ids: torch.Tensor, keep: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """A real loss on the real positions: cross-entropy over the last axis against random
        targets (logits over a vocabulary or classes), else the mean square."""
        selected = out[self.selection(out, ids, keep).to(out.device)].float()
        if selected.dim() == 2 and selected.shape[-1] > 1:
            targets = torch.randint(0, selected.shape[-1], (selected.shape[0],), generator=gen).to(out.device)
            return F.cross_entropy(selected, targets)
        return selected.pow(2).mean()


def dense(tensor: torch.Tensor) -> torch.Tensor:
    """A nested tensor (nn.TransformerEncoder's eval fast path) as a padded dense one."""
    return tensor.to_padded_tensor(0.0) if tensor.is_nested else tensor


def relative_change(a: torch.Tensor, b: torch.Tensor, where: torch.Tensor) -> float:
    """max |a - b| over the selected entries, relative to the RMS of `a` there."""
    if not where.any():
        return 0.0
    ref, other = a[where], b[where]
    scale = ref.pow(2).mean().sqrt().clamp_min(1e-6)
    return float(((other - ref).abs().max() / scale).nan_to_num(nan=math.inf))


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []


class ModuleTrace:
    """Forward hooks on every submodule: the first floating output of each call, in the
    order calls finish (so an inner module comes before the one that contains it)."""

    def __init__(self, model: nn.Module, on_output: Callable[[str, torch.Tensor], None]) -> None:
        self.handles: list[Any]
        self.model, self.on_output, self.handles = model, on_output, []

    def __enter__(self) -> ModuleTrace:
        for name, module in self.model.named_modules():
            if name:
                self.handles.append(module.register_forward_hook(self._hook(name)))
        return self

    def _hook(self, name: str):
        def hook(_module, _inputs, output):
            for tensor in _tensors(output):
                if tensor.is_floating_point():
                    self.on_output(name, dense(tensor).detach())
                    break
        return hook

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()


def record_outputs(ctx: ProbeContext, ids: torch.Tensor, keep: torch.Tensor | None,
                   caller: Caller | None = None) -> list[tuple[str, torch.Tensor]]:
    calls: list[tuple[str, torch.Tensor]] = []
    with ModuleTrace(ctx.model, lambda name, t: calls.append((name, t.float().cpu()))):
        ctx.forward(ids, keep, caller)
    return calls


def first_divergence(ctx: ProbeContext, a: tuple[torch.Tensor, torch.Tensor | None],
                     b: tuple[torch.Tensor, torch.Tensor | None], where: torch.Tensor, tolerance: float,
                     caller: Caller | None = None) -> str | None:
    """The first module whose output differs between inputs `a` and `b` (each (ids, keep))
    at the selected (batch, seq) entries, beyond `tolerance` relative to its scale."""
    ids = a[0]
    for (name, x), (_, y) in zip(record_outputs(ctx, *a, caller), record_outputs(ctx, *b, caller)):
        if x.shape != y.shape:
            continue
        if x.dim() >= 2 and x.shape[:2] == ids.shape:
            sel = where
        elif x.dim() >= 1 and x.shape[0] == ids.shape[0]:
            sel = where.any(dim=1)
        else:
            continue
        if relative_change(x, y, sel) > tolerance:
            return name
    return None


class Probe:
    name = ""
    tolerance = 0.0
    unit = ""

    def run(self, ctx: ProbeContext) -> ProbeResult:
        raise NotImplementedError

    def result(self, status: str, figure: float | None, module: str | None = None, detail: str = "",
               **extra: Any) -> ProbeResult:
        if figure is not None and math.isfinite(figure):
            figure = float(f"{figure:.4g}")
        return ProbeResult(self.name, status, figure, self.tolerance, self.unit, module, detail, extra)

    def skip(self, reason: str) -> ProbeResult:
        return self.result("skip", None, detail=reason)


class MaskLeakProbe(Probe):
    """Same padded batch twice, the pad tokens replaced by random ids the second time (mask
    unchanged): outputs at real positions must not move."""

    name = "mask-leak"
    tolerance = 1e-4
    unit = "max abs change at real positions / output RMS"
    seeds = 3

    def run(self, ctx: ProbeContext) -> ProbeResult:
        if not ctx.caller.has_mask:
            return self.skip("the call style passes no mask, so padding cannot be expressed (not checkable)")
        ids, keep = ctx.padded_batch(ctx.generator(1))
        figure, worst = self.leak(ctx, ctx.caller, ids, keep)
        own, reads = self.module_leaks(ctx, ids, keep)
        extra: dict[str, Any] = {"unmasked": self.unmasked_figure(ctx, ids, keep), "own": own, "own_reads": reads,
                                 "pads_unseen": ctx.causal and ctx.padding_side == "right"}
        padded = int((~keep).any(dim=1).sum())
        if figure <= self.tolerance:
            return self.result("pass", figure, detail=f"{padded} of {len(ids)} samples padded ({ctx.padding_side}); "
                               f"{ctx.caller.convention}", **extra)
        module = first_divergence(ctx, (ids, keep), (worst, keep), keep, self.tolerance)
        where = f"; the change first shows in the output of `{module}`" if module else ""
        return self.result("fail", figure, module, f"changing only pad-token ids moves real positions{where}",
                           **extra)

    def leak(self, ctx: ProbeContext, caller: Caller, ids: torch.Tensor, keep: torch.Tensor, use_mask: bool = True):
        mask = None if not (caller.has_mask and use_mask) else keep
        base = ctx.forward(ids, mask, caller)
        where = ctx.selection(base, ids, keep)
        figure, worst = 0.0, ids
        gen = ctx.generator(2)
        for _ in range(self.seeds):
            changed = ids.clone()
            changed[~keep] = ctx.tokens(gen, (int((~keep).sum()),))
            change = relative_change(base, ctx.forward(changed, mask, caller), where)
            if change > figure:
                figure, worst = change, changed
        return figure, worst

    def module_leaks(self, ctx: ProbeContext, ids: torch.Tensor,
                     keep: torch.Tensor) -> tuple[dict[str, float], dict[str, float]]:
        """Each submodule on its own: its recorded inputs replayed with the (batch, seq)
        hidden states at pad positions replaced by noise, masks unchanged; the change of its
        output at real positions. So a leak is pinned to the module that lets it in, even
        when another one leaks earlier. Second: the same with the noise at the real positions
        (the positive control: the module reads its input there)."""
        inputs: dict[str, tuple[nn.Module, tuple, dict]] = {}

        def hook(name):
            def record(module, args, kwargs):
                if name not in inputs:
                    inputs[name] = (module, _clone(args), _clone(kwargs))
            return record

        handles = [m.register_forward_pre_hook(hook(n), with_kwargs=True)
                   for n, m in ctx.model.named_modules() if n]
        try:
            ctx.forward(ids, keep)
        finally:
            for handle in handles:
                handle.remove()
        gen, pads = ctx.generator(8), (~keep).to(ctx.device)
        leaks, reads = {}, {}
        for name, (module, args, kwargs) in inputs.items():
            noisy_args, noisy_kwargs = _noise_at(args, pads, gen), _noise_at(kwargs, pads, gen)
            if noisy_args is None and noisy_kwargs is None:
                continue
            real_args, real_kwargs = _noise_at(args, ~pads, gen), _noise_at(kwargs, ~pads, gen)
            try:
                with torch.no_grad():
                    base = _first_float(module(*args, **kwargs))
                    out = _first_float(module(*(noisy_args or args), **(noisy_kwargs or kwargs)))
                    read = _first_float(module(*(real_args or args), **(real_kwargs or kwargs)))
            except Exception:
                continue
            if base is None or out is None or base.shape != out.shape:
                continue
            base, out = base.float().cpu(), out.float().cpu()
            if base.dim() >= 2 and base.shape[:2] == ids.shape:
                where = keep
            elif base.dim() >= 1 and base.shape[0] == ids.shape[0]:
                where = keep.any(dim=1)
            else:
                continue
            leaks[name] = float(f"{relative_change(base, out, where):.4g}")
            if read is not None and read.shape == base.shape:
                reads[name] = float(f"{relative_change(base, read.float().cpu(), where):.4g}")
        return leaks, reads

    def unmasked_figure(self, ctx: ProbeContext, ids: torch.Tensor, keep: torch.Tensor) -> float | None:
        """The same test with ids alone (no mask), as a call site that forgets the mask does
        (TL101); None when forward cannot be called without a mask."""
        try:
            return self.leak(ctx, ctx.caller, ids, keep, use_mask=False)[0]
        except Exception:
            return None


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _noise_at(value: Any, pads: torch.Tensor, gen: torch.Generator) -> Any:
    """`value` with every floating (batch, seq, ...) tensor noised at pad positions; None
    when it holds no such tensor."""
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() or value.is_nested or value.dim() < 2 or value.shape[:2] != pads.shape:
            return None
        noise = torch.randn(value.shape, generator=gen).to(value.device, value.dtype)
        scale = value.float().std().clamp_min(1e-3).to(value.dtype)
        mask = pads.reshape(*pads.shape, *([1] * (value.dim() - 2)))
        return torch.where(mask, noise * scale, value)
    if isinstance(value, (tuple, list, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        noised = {k: _noise_at(v, pads, gen) for k, v in items}
        if all(v is None for v in noised.values()):
            return None
        if isinstance(value, dict):
            return {k: value[k] if noised[k] is None else noised[k] for k in value}
        return type(value)(value[i] if noised[i] is None else noised[i] for i in range(len(value)))
    return None


def _first_float(output: Any) -> torch.Tensor | None:
    for tensor in _tensors(output):
        if tensor.is_floating_point():
            return dense(tensor)
    return None


class CausalLeakProbe(Probe):
    """Change the tokens at positions >= t: outputs at positions < t must not move."""

    name = "causal-leak"
    tolerance = 1e-4
    unit = "max abs change before t when tokens from t on change / output RMS"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        if not ctx.causal:
            return self.skip("the model is not causal (causal = false, or not inferred from its class name)")
        gen = ctx.generator(3)
        ids, keep = ctx.full_batch(gen)
        base = ctx.forward(ids, keep)
        if not ctx.per_position(base, ids):
            return self.skip(f"the output {tuple(base.shape)} has no sequence axis to compare per position")
        figure, worst = 0.0, None
        for t in (ctx.seq_len // 4, ctx.seq_len // 2, 3 * ctx.seq_len // 4):
            changed = ids.clone()
            changed[:, t:] = ctx.tokens(gen, (len(ids), ctx.seq_len - t))
            before = torch.zeros_like(keep)
            before[:, :t] = True
            change = relative_change(base, ctx.forward(changed, keep), before)
            if change > figure:
                figure, worst = change, (t, changed, before)
        if figure <= self.tolerance:
            return self.result("pass", figure, detail="positions before t ignore tokens at t and later "
                               f"(t = {ctx.seq_len // 4}, {ctx.seq_len // 2}, {3 * ctx.seq_len // 4})")
        assert worst is not None  # (set with figure)
        t, changed, before = worst
        module = first_divergence(ctx, (ids, keep), (changed, keep), before, self.tolerance)
        where = f"; first in the output of `{module}`" if module else ""
        return self.result("fail", figure, module, f"outputs before position {t} change with tokens from {t} on{where}")


class NanTraceProbe(Probe):
    """Forward (and backward) on a padded batch plus one fully padded sequence: every output
    and gradient must be finite; when not, name the first module that produced a non-finite
    value."""

    name = "nan-trace"
    tolerance = 0.0
    unit = "non-finite values in outputs and gradients"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        gen = ctx.generator(4)
        ids, keep = ctx.padded_batch(gen)
        ids = torch.cat([ids, torch.full((1, ctx.seq_len), ctx.pad_token_id)])
        keep = torch.cat([keep, torch.zeros(1, ctx.seq_len, dtype=torch.bool)])
        first: list[str] = []

        def on_output(name: str, tensor: torch.Tensor) -> None:
            if not first and not torch.isfinite(tensor).all():
                first.append(name)

        ctx.model.zero_grad(set_to_none=True)
        with torch.enable_grad(), ModuleTrace(ctx.model, on_output):
            out = dense(ctx.caller(ctx.model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None))
        bad_out = int((~torch.isfinite(out.detach())).sum())
        real = keep.clone()
        real[-1] = False  # the loss, as in training, counts only real tokens
        loss = ctx.loss(out, ids, real, gen)
        bad_grads, grad_module = 0, None
        if loss.requires_grad:
            loss.backward()
            for name, param in ctx.model.named_parameters():
                if param.grad is not None and not torch.isfinite(param.grad).all():
                    bad_grads += int((~torch.isfinite(param.grad)).sum())
                    grad_module = grad_module or name.rpartition(".")[0] or name
            ctx.model.zero_grad(set_to_none=True)
        figure = float(bad_out + bad_grads)
        pad_note = "with one fully padded sequence in the batch"
        if figure == 0:
            return self.result("pass", figure, detail=f"outputs and gradients finite {pad_note}")
        module = first[0] if first else grad_module
        where = (f"first non-finite output in `{first[0]}`" if first
                 else f"outputs finite, first non-finite gradient in `{grad_module}`")
        return self.result("fail", figure, module, f"{bad_out} non-finite outputs, {bad_grads} non-finite gradient "
                           f"values {pad_note}; {where}")


class PositionBlindProbe(Probe):
    """Permute tokens: a model that knows token order must change its output (causal: the
    tokens before t, at t; encoders: the whole sequence, against the permuted outputs).
    Judged at the first block that sees the ids (its output minus its input), where positions
    must enter (README "tlint verify"); the output's figure only when no block is measured.
    A model no order reaches moves by float rounding (~1e-6 of the RMS)."""

    name = "position-blind"
    tolerance = 1e-4
    unit = ("max change under a token permutation / RMS, at the first block (the output when no block is "
            "measured; fails below the tolerance)")
    lower_bound = True

    def run(self, ctx: ProbeContext) -> ProbeResult:
        gen = ctx.generator(5)
        ids, keep = ctx.full_batch(gen)
        stack, first, base, base_block = self.first_block(ctx, ids, keep)
        figure, block_figure = 0.0, 0.0
        if ctx.causal and ctx.per_position(base, ids):
            how = "tokens before t permuted, output at t compared"
            for t in (ctx.seq_len - 1, ctx.seq_len // 2):
                permuted = ids.clone()
                permuted[:, :t] = ids[:, _derangement(t, gen)]
                at_t = torch.zeros_like(keep)
                at_t[:, t] = True
                out, block = self.forward(ctx, first, permuted, keep)
                figure = max(figure, relative_change(base, out, at_t))
                if block is not None and base_block is not None:
                    block_figure = max(block_figure, relative_change(base_block, block, at_t))
        else:
            how = "whole sequence permuted, outputs compared with the permuted originals"
            for _ in range(2):
                order = _derangement(ctx.seq_len, gen)
                out, block = self.forward(ctx, first, ids[:, order], keep)
                expected = base[:, order] if ctx.per_position(base, ids) else base
                figure = max(figure, relative_change(expected, out, ctx.selection(base, ids, keep)))
                if block is not None and base_block is not None:
                    block_figure = max(block_figure, relative_change(base_block[:, order], block, keep))
        output, blocked = figure, base_block is not None
        figure = block_figure if blocked else output
        what = f"the first block `{stack[0]}.0`" if blocked else "the output"
        measured = (f"first block `{stack[0]}.0` {block_figure:.3g} (judged), output {output:.3g}" if blocked
                    else f"output {output:.3g} (no block seen)")
        if figure >= self.tolerance:
            return self.result("pass", figure, detail=f"token order changes {what} ({how}; {measured})",
                               output=output)
        return self.result("fail", figure, f"{stack[0]}.0" if blocked else None,
                           detail=f"{what} ignores token order ({how}; {measured}): no positional information "
                           "enters", output=output)

    def first_block(self, ctx: ProbeContext, ids: torch.Tensor, keep: torch.Tensor):
        """(stack, its first block, the output, the block's contribution) for the first stack
        whose first block sees the ids (an encoder-decoder's encoder, fed a fixed source,
        does not: its decoder's stack is taken)."""
        other = ctx.full_batch(ctx.generator(15))[0]
        base = None
        for stack in block_stacks(ctx.model)[:4]:
            first = stack[1][0]
            base, block = self.forward(ctx, first, ids, keep)
            if block is None:
                continue
            changed = self.forward(ctx, first, other, keep)[1]
            if changed is not None and relative_change(block, changed, keep) >= self.tolerance:
                return stack, first, base, block
        return None, None, base if base is not None else ctx.forward(ids, keep), None

    @staticmethod
    def forward(ctx: ProbeContext, first: nn.Module | None, ids: torch.Tensor,
                keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The output, and the first block's contribution per position (None when the block
        is not per (batch, seq) position)."""
        seen: list[torch.Tensor | None] = [None, None]

        def before(_module, args, kwargs):
            if seen[0] is None:
                seen[0] = _first_float(list(args) + list(kwargs.values()))

        def after(_module, _args, output):
            if seen[1] is None:
                seen[1] = _first_float(output)

        handles = [] if first is None else [first.register_forward_pre_hook(before, with_kwargs=True),
                                             first.register_forward_hook(after)]
        try:
            out = ctx.forward(ids, keep)
        finally:
            for handle in handles:
                handle.remove()
        x, y = seen
        if y is None or y.dim() < 3 or y.shape[:2] != ids.shape:
            return out, None
        y = y.detach().float().cpu()
        if x is not None and x.shape == y.shape:
            y = y - x.detach().float().cpu()
        return out, y


def _derangement(n: int, gen: torch.Generator) -> torch.Tensor:
    """A random permutation of range(n) that moves every index (a shift when n is small)."""
    for _ in range(20):
        order = torch.randperm(n, generator=gen)
        if n < 2 or not (order == torch.arange(n)).any():
            return order
    return torch.roll(torch.arange(n), 1)


class BatchCouplingProbe(Probe):
    """Sample i alone (same padded length) vs inside batches of 2 and 5, at the first and
    the last index; and the gradient of sample i's output w.r.t. the other samples' token
    embeddings, which must be zero."""

    name = "batch-coupling"
    tolerance = 1e-4
    unit = "max change of a sample's output with its batch / output RMS"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        gen = ctx.generator(6)
        ids, keep = ctx.padded_batch(gen)
        mask = keep if ctx.caller.has_mask else None
        samples = sorted({0, min(2, len(ids) - 1)})
        figure, worst = 0.0, ""
        for i in samples:
            alone = ctx.forward(ids[i:i + 1], None if mask is None else keep[i:i + 1])
            where = ctx.selection(alone, ids[i:i + 1], keep[i:i + 1])
            for size in (2, 5):
                other_ids, other_keep = ctx.padded_batch(gen, size - 1)
                for at in (0, size - 1):
                    batch_ids = torch.cat([other_ids[:at], ids[i:i + 1], other_ids[at:]])
                    batch_keep = torch.cat([other_keep[:at], keep[i:i + 1], other_keep[at:]])
                    out = ctx.forward(batch_ids, None if mask is None else batch_keep)[at:at + 1]
                    change = relative_change(alone, out, where)
                    if change > figure:
                        figure, worst = change, f"sample {i} alone vs at index {at} of a batch of {size}"
        grad_figure, grad_note = self.cross_gradient(ctx, gen)
        notes = f"forward: {figure:.3g}" + (f" ({worst})" if worst else "") + f"; {grad_note}"
        figure = max(figure, grad_figure)
        status = "pass" if figure <= self.tolerance else "fail"
        return self.result(status, figure, detail=notes)

    def cross_gradient(self, ctx: ProbeContext, gen: torch.Generator) -> tuple[float, str]:
        ids, keep = ctx.padded_batch(gen, 5)
        leaves: list[torch.Tensor] = []

        def hook(_module, inputs, output):
            if not leaves and inputs and isinstance(inputs[0], torch.Tensor) and inputs[0].shape == ids.shape:
                leaf = output.detach().requires_grad_(True)
                leaves.append(leaf)
                return leaf
            return None

        handles = [m.register_forward_hook(hook) for m in ctx.model.modules() if isinstance(m, nn.Embedding)]
        try:
            with torch.enable_grad():
                out = dense(ctx.caller(ctx.model, ids.to(ctx.device),
                                       keep.to(ctx.device) if ctx.caller.has_mask else None))
                if not leaves:
                    return 0.0, "gradient test skipped: no nn.Embedding takes the token ids"
                i = 2
                row = out[i][keep[i].to(out.device)] if ctx.per_position(out, ids) else out[i]
                row.float().sum().backward()
        finally:
            for handle in handles:
                handle.remove()
            ctx.model.zero_grad(set_to_none=True)
        grad = leaves[0].grad
        if grad is None:
            return 0.0, "gradient: sample 2's output does not depend on the token embeddings"
        own = grad[i].abs().max().clamp_min(1e-12)
        others = torch.cat([grad[:i], grad[i + 1:]]).abs().max()
        ratio = float(others / own)
        return ratio, f"gradient of sample 2's output w.r.t. other samples' embeddings / own: {ratio:.3g}"


class GradFlowProbe(Probe):
    """One backward on a real loss taken on the probed output (the logits, or the hidden
    states): every trainable parameter on that output's path must get a non-zero gradient,
    and none may be used by no output at all. Parameters that only feed another output (a
    pooler beside the hidden states) are left out and named."""

    name = "grad-flow"
    tolerance = 0.0
    unit = "trainable parameters with no or all-zero gradient (on the probed output's path, or used by no output)"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        gen = ctx.generator(7)
        ids, keep = ctx.padded_batch(gen)
        ctx.model.zero_grad(set_to_none=True)
        with torch.enable_grad():
            raw = ctx.caller.raw(ctx.model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None)
            main = ctx.caller.output(raw)
            if main is None:
                return self.skip("forward returned no tensor")
            out = dense(main)
            every = _graph_parameters([t for t in _tensors(raw) if t.requires_grad])
            on_path = _graph_parameters([main] if main.requires_grad else [])
            loss = ctx.loss(out, ids, keep, gen)
            if not loss.requires_grad:
                return self.skip("the output does not depend on any trainable parameter")
            loss.backward()
        trainable = [(n, p) for n, p in ctx.model.named_parameters() if p.requires_grad]
        elsewhere = [n for n, p in trainable if id(p) in every and id(p) not in on_path]
        checked = [(n, p) for n, p in trainable if id(p) in on_path or id(p) not in every]
        dead = [n for n, p in checked if p.grad is None or not p.grad.abs().sum() > 0]
        ctx.model.zero_grad(set_to_none=True)
        note = (f"; {len(elsewhere)} parameters feed only another output, not checked: "
                + ", ".join(elsewhere[:4]) + (" ..." if len(elsewhere) > 4 else "")) if elsewhere else ""
        if not dead:
            return self.result("pass", 0.0, detail=f"all {len(checked)} trainable parameters on the output's path "
                               f"get a gradient{note}", elsewhere=elsewhere)
        listed = ", ".join(dead[:8]) + (f" and {len(dead) - 8} more" if len(dead) > 8 else "")
        module = dead[0].rpartition(".")[0] or dead[0]
        return self.result("fail", float(len(dead)), module, f"no gradient reaches: {listed}{note}",
                           elsewhere=elsewhere)


def _graph_parameters(outputs: list[torch.Tensor]) -> set[int]:
    """ids of the leaf tensors (parameters) the outputs' autograd graphs reach."""
    seen: set[int] = set()
    found: set[int] = set()
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    leaves = [t for t in outputs if t.grad_fn is None and t.requires_grad]
    found.update(id(t) for t in leaves)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.add(id(variable))
        stack.extend(child for child, _ in node.next_functions if child is not None)
    return found


@dataclass
class AttentionCall:
    module: str | None
    weights: torch.Tensor   # (batch, ..., queries, keys)
    visible: torch.Tensor   # bool, same shape: the keys each query may attend to
    max_logit: float | None


class AttentionCapture(TorchFunctionMode):
    """Sees every attention computation of a forward: softmax calls whose last two axes are
    (seq, seq), `F.scaled_dot_product_attention` (the weights are recomputed from q, k and
    the mask) and `F.multi_head_attention_forward` (asked for per-head weights)."""

    _SOFTMAX = (torch.softmax, F.softmax, torch.Tensor.softmax, torch.special.softmax)

    def __init__(self, seq_len: int, modules: list[str]) -> None:
        super().__init__()
        self.calls: list[AttentionCall]
        self.seq_len, self.modules, self.calls = seq_len, modules, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is SDPA:
            self._record_sdpa(*args, **kwargs)
        elif func is F.multi_head_attention_forward and "need_weights" in kwargs:
            wanted, average = kwargs["need_weights"], kwargs.get("average_attn_weights", True)
            out, weights = func(*args, **{**kwargs, "need_weights": True, "average_attn_weights": False})
            assert weights is not None  # (need_weights=True)
            self._record(weights.detach(), weights.detach() > 0, None)
            return out, (weights.mean(dim=1) if average else weights) if wanted else None
        elif func in self._SOFTMAX:
            out = func(*args, **kwargs)
            scores = args[0]
            if isinstance(scores, torch.Tensor) and self._square(scores) and scores.is_floating_point():
                # a softmax over another axis is recorded as is: its rows will not sum to 1
                visible = scores.detach() > torch.finfo(scores.dtype).min / 2
                self._record(out.detach(), visible, float(scores.detach()[visible].max()) if visible.any() else None)
            return out
        return func(*args, **kwargs)

    def _square(self, tensor: torch.Tensor) -> bool:
        return tensor.dim() >= 3 and tensor.shape[-1] == tensor.shape[-2] == self.seq_len

    def _record(self, weights, visible, max_logit) -> None:
        module = self.modules[-1] if self.modules else None
        self.calls.append(AttentionCall(module, weights.float().cpu(), visible.cpu(), max_logit))

    def _record_sdpa(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                     enable_gqa=False, **_):
        if not (isinstance(query, torch.Tensor) and query.dim() >= 3
                and query.shape[-2] == key.shape[-2] == self.seq_len):
            return
        with torch.no_grad():
            q, k = query.detach().float(), key.detach().float()
            if k.shape[-3] != q.shape[-3] and q.dim() >= 4:
                k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
            scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
            visible = torch.ones_like(scores, dtype=torch.bool)
            if attn_mask is not None:
                if attn_mask.dtype == torch.bool:
                    visible = visible & attn_mask
                else:
                    scores = scores + attn_mask.float()
                    visible = visible & (attn_mask > torch.finfo(attn_mask.dtype).min / 2)
            if is_causal:
                visible = visible & torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
            weights = scores.masked_fill(~visible, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
            max_logit = float(scores[visible].max()) if visible.any() else None
        self._record(weights, visible, max_logit)


def capture_attention(ctx: ProbeContext, ids: torch.Tensor, keep: torch.Tensor) -> list[AttentionCall]:
    """Every attention computation of one forward, each named by the innermost module running."""
    stack: list[str] = []  # the modules being run, innermost last

    def enter(name):
        def hook(_module, _args):
            stack.append(name)
        return hook

    def leave(_module, _args, _output):
        stack.pop()

    handles = []
    for name, module in ctx.model.named_modules():
        if name:
            handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    capture = AttentionCapture(ctx.seq_len, stack)
    try:
        # grad on: nn.MultiheadAttention and nn.TransformerEncoder skip their fused fast paths
        with torch.enable_grad(), capture:
            ctx.caller(ctx.model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None)
    finally:
        for handle in handles:
            handle.remove()
    return capture.calls


class AttentionEntropyProbe(Probe):
    """Attention rows at init: over real query rows that see at least two keys, the mean
    entropy normalised by ln(visible keys) must be >= 0.3, at most half of the rows may put
    > 0.99 on one key, and every row must sum to 1 (softmax over the key axis). And each
    attention's effective scale, measured on every model (`controls.judge_scale`), must lie
    within [1/1.9, 1.9] x 1/sqrt(d_head): at init a missing scale often leaves the entropy high."""

    name = "attention-entropy"
    tolerance = 0.3
    unit = ("lowest per-layer mean normalised entropy of attention rows (fails below the tolerance, or when "
            "the effective scale of q·k is off 1/sqrt(d_head) by more than 1.9x)")
    saturation = 0.99

    def run(self, ctx: ProbeContext) -> ProbeResult:
        from tlint.verify.controls import judge_scale

        result = self.entropy(ctx)
        return result if result.status == "skip" else judge_scale(self, ctx, result)

    def entropy(self, ctx: ProbeContext) -> ProbeResult:
        ids, keep = ctx.padded_batch(ctx.generator(11))
        stats = [self.layer_stats(call, keep) for call in capture_attention(ctx, ids, keep)]
        layers = [layer for layer in stats if layer is not None]
        if not layers:
            return self.skip("no attention seen (no softmax over (seq, seq) scores, no scaled_dot_product_attention)")
        worst = min(layers, key=lambda layer: layer["entropy"])
        figure = worst["entropy"]
        summary = ", ".join(f"{layer['module'] or '?'}: entropy {layer['entropy']:.2f}, saturated "
                            f"{layer['saturated']:.0%}" + (f", max logit {layer['max_logit']:.3g}"
                                                           if layer["max_logit"] is not None else "")
                            for layer in layers[:6])
        unnormalised = [layer for layer in layers if layer["off_sum"] > 1e-3]
        saturated = [layer for layer in layers if layer["saturated"] > 0.5]
        if unnormalised:
            layer = unnormalised[0]
            return self.result("fail", figure, layer["module"], f"attention rows do not sum to 1 (off by up to "
                               f"{layer['off_sum']:.3g}): the softmax is not over the key axis; {summary}")
        if figure < self.tolerance or saturated:
            layer = saturated[0] if saturated and figure >= self.tolerance else worst
            return self.result("fail", figure, layer["module"], f"attention saturated at init; {summary}")
        return self.result("pass", figure, detail=summary)

    def layer_stats(self, call: AttentionCall, keep: torch.Tensor) -> dict | None:
        batch = keep.shape[0]
        weights, visible = call.weights, call.visible.expand_as(call.weights)
        if weights.shape[0] != batch:
            if weights.shape[0] % batch:
                return None
            weights = weights.reshape(batch, -1, *weights.shape[-2:])
            visible = visible.reshape(batch, -1, *visible.shape[-2:])
        weights = weights.reshape(batch, -1, *weights.shape[-2:])
        visible = visible.reshape(batch, -1, *visible.shape[-2:])
        rows = keep[:, None, :].expand(weights.shape[:3]) & (visible.sum(dim=-1) >= 2)
        if not rows.any():
            return None
        w, v = weights[rows], visible[rows]
        w = torch.where(v, w, torch.zeros_like(w))
        entropy = -(w * w.clamp_min(1e-12).log()).sum(dim=-1) / v.sum(dim=-1).float().log()
        return {"module": call.module, "entropy": float(entropy.mean()),
                "saturated": float((w.max(dim=-1).values > self.saturation).float().mean()),
                "off_sum": float((w.sum(dim=-1) - 1).abs().max()), "max_logit": call.max_logit}


class PaddingEquivalenceProbe(Probe):
    """Each sequence alone and unpadded, then inside a right-padded and a left-padded batch:
    the outputs at its real positions must agree. The configured padding side decides the
    verdict; the other side is reported as a note (left padding fails when position ids
    are not derived from the mask)."""

    name = "padding-equivalence"
    tolerance = 1e-4
    unit = "max abs change at real positions, padded vs unpadded / output RMS (configured side)"

    def run(self, ctx: ProbeContext) -> ProbeResult:
        if not ctx.caller.has_mask:
            return self.skip("the call style passes no mask, so padding cannot be expressed (not checkable)")
        gen = ctx.generator(14)
        lengths = ctx.lengths(ctx.batch_size)
        ids = ctx.tokens(gen, (ctx.batch_size, ctx.seq_len))
        alone = []
        for i, length in enumerate(lengths):
            row = ids[i:i + 1, :length]
            alone.append(ctx.forward(row, torch.ones_like(row, dtype=torch.bool)))
        figures = {side: self.compare(ctx, ids, lengths, alone, side) for side in ("right", "left")}
        side, other = ctx.padding_side, "left" if ctx.padding_side == "right" else "right"
        figure = figures[side]
        note = f"{other} padding: {figures[other]:.3g}"
        if other == "left" and figures[other] > self.tolerance:
            note += " (fails: position ids are not derived from the mask)"
        if figure <= self.tolerance:
            return self.result("pass", figure, detail=f"{side} padding matches the unpadded sequences; {note}")
        hint = " (position ids are not derived from the mask)" if side == "left" else ""
        return self.result("fail", figure, detail=f"{side}-padded outputs differ from the unpadded ones{hint}; {note}")

    def compare(self, ctx: ProbeContext, ids: torch.Tensor, lengths: list[int], alone: list[torch.Tensor],
                side: str) -> float:
        positions = torch.arange(ctx.seq_len).unsqueeze(0)
        length = torch.tensor(lengths).unsqueeze(1)
        keep = positions < length if side == "right" else positions >= ctx.seq_len - length
        padded = torch.full_like(ids, ctx.pad_token_id)
        for i, n in enumerate(lengths):
            if side == "right":
                padded[i, :n] = ids[i, :n]
            else:
                padded[i, ctx.seq_len - n:] = ids[i, :n]
        out = ctx.forward(padded, keep)
        figure = 0.0
        for i, n in enumerate(lengths):
            if ctx.per_position(out, ids):
                real = out[i, :n] if side == "right" else out[i, ctx.seq_len - n:]
                reference = alone[i][0]
            else:
                real, reference = out[i], alone[i][0]
            figure = max(figure, relative_change(reference, real, torch.ones(reference.shape[:1], dtype=torch.bool)))
        return figure


def block_stacks(model: nn.Module) -> list[tuple[str, list[nn.Module]]]:
    """Every ModuleList/Sequential of two or more modules of one class that have submodules
    of their own, the longest first (in model order among equals)."""
    found = []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(module.children())
        if len(children) < 2 or len({type(c) for c in children}) != 1 or not list(children[0].children()):
            continue
        found.append((name, children))
    return sorted(found, key=lambda stack: -len(stack[1]))


def block_stack(model: nn.Module) -> tuple[str, list[nn.Module]] | None:
    """The model's stack of blocks: the longest of `block_stacks`."""
    stacks = block_stacks(model)
    return stacks[0] if stacks else None


# Names of residual-branch output projections: zero or scaled-down init is a known scheme
# (GPT-2, T5, fixup), so they are exempt from the lower bound (TL211's exemption).
_OUTPUT_PROJECTIONS = {"out_proj", "o_proj", "c_proj", "fc2", "w2", "down_proj", "dense_4h_to_h", "wo", "out"}
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm,
          getattr(nn, "RMSNorm", nn.LayerNorm))


class InitStatsProbe(Probe):
    """Parameters at init: matmul weights with std inside [min(0.25/sqrt(fan_in), 0.005),
    4/sqrt(fan_in)], embeddings with std in [0.002, 1.5], no constant tensors, no duplicated
    rows; and, when the output is logits, the loss at init within 25 % of ln(classes)."""

    name = "init-stats"
    tolerance = 0.0
    unit = "parameters initialised outside the bands (+1 for a loss at init off ln(classes))"
    loss_band = 0.25

    def run(self, ctx: ProbeContext) -> ProbeResult:
        problems: list[tuple[str, str]] = []   # (module path, what)
        norm_params = {id(p) for m in ctx.model.modules() if isinstance(m, _NORMS) for p in m.parameters()}
        seen: set[int] = set()
        for module_name, module in ctx.model.named_modules():
            for param_name, param in module.named_parameters(recurse=False):
                if id(param) in seen or id(param) in norm_params:
                    continue
                seen.add(id(param))
                issue = self.check(module, module_name, param_name, param.detach().float().cpu())
                if issue:
                    where = f"{module_name}.{param_name}" if module_name else param_name
                    problems.append((module_name or param_name, f"{where}: {issue}"))
        loss_ok, loss_note = self.loss_at_init(ctx)
        if not loss_ok:
            problems.append(("", loss_note))
        checked = len(seen) - len(norm_params & seen)
        if not problems:
            return self.result("pass", 0.0, detail=f"{checked} parameters within their bands; {loss_note}")
        listed = "; ".join(what for _, what in problems[:6]) + (f"; and {len(problems) - 6} more"
                                                                if len(problems) > 6 else "")
        module = next((where for where, _ in problems if where), None)
        return self.result("fail", float(len(problems)), module, listed)

    def check(self, module: nn.Module, module_name: str, param_name: str, w: torch.Tensor) -> str | None:
        if w.dim() < 2:
            return None  # biases and scales: zeros and ones are expected
        std = float(w.std())
        last = module_name.rpartition(".")[2]
        if isinstance(module, nn.Embedding):
            if not 0.002 <= std <= 1.5:
                return f"embedding std {std:.3g} outside [0.002, 1.5]"
        elif isinstance(module, (nn.Linear, nn.MultiheadAttention)) and param_name.endswith("weight"):
            fan_in = w.shape[1]
            low, high = min(0.25 / math.sqrt(fan_in), 0.005), 4 / math.sqrt(fan_in)
            if last in _OUTPUT_PROJECTIONS:
                low = 0.0
            if std > high:
                return f"std {std:.3g} above 4/sqrt(fan_in) = {high:.3g}"
            if std < low:
                what = "all zero" if not w.any() else ("constant" if std == 0 else f"std {std:.3g}")
                return f"{what}, below min(0.25/sqrt(fan_in), 0.005) = {low:.3g}"
        if std == 0 and w.numel() > 1 and (w.any() or last not in _OUTPUT_PROJECTIONS):
            return "constant tensor" if w.any() else "all zero"
        if w.numel() <= 4_000_000:
            rows = w.reshape(w.shape[0], -1)
            rows = rows[rows.any(dim=1)]  # zero rows (an embedding's padding_idx) are not copies
            duplicates = rows.shape[0] - torch.unique(rows, dim=0).shape[0]
            if duplicates > 0:
                return f"{duplicates} duplicated rows"
        return None

    def loss_at_init(self, ctx: ProbeContext) -> tuple[bool, str]:
        ids, keep = ctx.padded_batch(ctx.generator(9))
        out = ctx.forward(ids, keep)
        classes = out.shape[-1]
        per_position_lm = ctx.per_position(out, ids) and out.dim() == 3 and classes == ctx.vocab_size
        sequence_level = out.dim() == 2 and not ctx.per_position(out, ids)
        if not (per_position_lm or sequence_level) or classes < 2:
            return True, "loss at init not checked (the output is not logits over the vocabulary or classes)"
        loss = float(ctx.loss(out, ids, keep, ctx.generator(10)))
        expected = math.log(classes)
        if abs(loss - expected) <= self.loss_band * expected:
            return True, f"cross-entropy at init {loss:.3g} vs ln({classes}) = {expected:.3g}"
        return False, f"cross-entropy at init {loss:.3g} is more than 25 % off ln({classes}) = {expected:.3g}"


PROBE_CLASSES: dict[str, type[Probe]] = {
    probe.name: probe for probe in (MaskLeakProbe, CausalLeakProbe, NanTraceProbe, PositionBlindProbe,
                                    BatchCouplingProbe, GradFlowProbe, InitStatsProbe,
                                    AttentionEntropyProbe, PaddingEquivalenceProbe)
}
# Last: depth, determinism and activations import this module (a cycle) and register their probes.
import tlint.verify.depth  # noqa: E402, F401, I001
import tlint.verify.determinism  # noqa: E402, F401
import tlint.verify.activations  # noqa: E402, F401
