"""norm-scale: does each block of the stack normalise what it reads? A normalisation layer
makes a block indifferent to the scale of the stream: scale a pre-norm block's input by 100
and its branch (output minus input) stays the same; scale a post-norm block's input and its
output stays the same. A block with its norm skipped passes the scale on (a linear layer,
an attention's values, a GELU MLP all grow with their input). At init, at the stream's own
scale, the two look alike (a 0.02 initialisation keeps every branch small), so the probe
replays each block on its recorded input rescaled, and measures how its branch and its
output grow with that scale (TL215)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

# (a module, not its names: depth imports this module at its end, so it may be half-initialised here)
from tlint.verify import depth
from tlint.verify.probes import (
    _NORMS,
    PROBE_CLASSES,
    Probe,
    ProbeContext,
    ProbeResult,
    _first_float,
    block_stack,
    dense,
)

# The stream sizes (RMS) at which each block is replayed: the growth from the first to the
# second is the block's scale exponent (0: indifferent to the scale, 1: proportional to it).
SIZES = (1.0, 100.0)
# A block whose branch or output grows with an exponent below this normalises what it reads.
EXPONENT_MAX = 0.5
# A branch smaller than this share of its input's RMS at both sizes adds nothing at init
# (zero-initialised output projections): its exponent is not measured.
BRANCH_MIN = 1e-6


def is_norm(module: nn.Module) -> bool:
    """A normalisation layer: torch's, or a class named `...Norm` (RMSNorm, T5LayerNorm)."""
    return isinstance(module, _NORMS) or type(module).__name__.endswith("Norm")


def has_norm(model: nn.Module) -> bool:
    return any(is_norm(m) for m in model.modules())


@contextmanager
def norms_skipped(ctx: ProbeContext) -> Iterator[list[str]]:
    """The positive control: every normalisation layer inside the stack's blocks passes its
    input through unchanged (a forward hook; the model is not changed)."""
    stack = block_stack(ctx.model)
    skipped: list[str] = []
    handles = []

    def through(_module, args, out):
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        return x if x is not None and isinstance(out, torch.Tensor) and x.shape == out.shape else out

    if stack is not None:
        path, blocks = stack
        for i, block in enumerate(blocks):
            for name, module in block.named_modules():
                if name and is_norm(module):
                    handles.append(module.register_forward_hook(through))
                    skipped.append(f"{path}.{i}.{name}")
    try:
        yield skipped
    finally:
        for handle in handles:
            handle.remove()


class NormScaleProbe(Probe):
    """Each block of the stack replayed alone on its recorded input rescaled to an RMS of 1
    and of 100: its scale exponent is the smaller of the growth exponents of its branch
    (output - input; ~0 for pre-norm) and of its output (~0 for post-norm), ~1 or more when
    what the block's sub-layers read is not normalised. The figure is the largest exponent
    among the blocks after the first (the first block's own when no other is measured): it
    fails at or above 0.5, in a model that holds normalisation layers (a norm skipped in a
    block, or in every block). The first block is not judged on its own: it reads the
    embedding output, which the model may normalise already (ModernBERT's first block has no
    attention norm by design); every later block reads the residual stream, which in a
    pre-norm model nothing else normalises. A model with no norm at all (a norm-free design)
    and blocks whose branch is zero at init are not judged."""

    name = "norm-scale"
    tolerance = EXPONENT_MAX
    unit = ("the largest scale exponent among the blocks after the first: growth of the block's branch or "
            "output per growth of its input's scale (log-log, RMS 1 to 100; ~0 behind a norm, ~1 without; "
            "fails at or above the tolerance)")

    def run(self, ctx: ProbeContext) -> ProbeResult:
        stack = block_stack(ctx.model)
        if stack is None:
            return self.skip("no stack of blocks found (a ModuleList/Sequential of one block class)")
        path, blocks = stack
        if not depth._attends(blocks[0]):
            return self.skip(f"the stack `{path}` holds no attention: not a stack of transformer blocks")
        if not has_norm(ctx.model):
            return self.skip("the model holds no normalisation layer (a norm-free design): nothing to find skipped")
        measured = {i: e for i, e in block_exponents(ctx, ctx.model).items() if e is not None}
        if not measured:
            return self.skip("no block could be replayed alone on a rescaled input, or every branch is zero "
                             "at init (nothing grows with the scale, normalised or not)")
        judged = {i: e for i, e in measured.items() if i > 0} or measured
        worst = max(judged, key=lambda i: judged[i])
        detail = (f"scale exponent per block of `{path}` (branch or output growth per input growth, RMS 1 to "
                  f"100; ~0 behind a norm, ~1 without): "
                  + ", ".join(f"{i}: {e:.2f}" for i, e in sorted(measured.items()))
                  + ("; the first block is not judged (it reads the embedding output)"
                     if measured.get(0, 0.0) >= self.tolerance > judged[worst] else ""))
        extra: dict[str, Any] = {"exponents": {str(i): round(e, 4) for i, e in measured.items()}, "stack": path}
        if judged[worst] >= self.tolerance:
            every = all(e >= self.tolerance for e in measured.values())
            what = ("no block normalises what it reads" if every else
                    f"block `{path}.{worst}` does not normalise what it reads, while "
                    + ("the blocks before it do" if all(measured[i] < self.tolerance for i in measured if i < worst)
                       else "other blocks do"))
            whose = "each one's" if every else "its"
            return self.result("fail", judged[worst], f"{path}.{worst}",
                               f"{what}: {whose} branch and output grow with the stream's scale (a norm skipped, or "
                               f"never applied); {detail}", **extra)
        return self.result("pass", judged[worst], detail=detail, **extra)


def block_exponents(ctx: ProbeContext, model: nn.Module) -> dict[int, float | None]:
    """Per block of the model's stack: its scale exponent (see NormScaleProbe), None when it
    could not be replayed alone or its branch is zero at init."""
    stack = block_stack(model)
    if stack is None:
        return {}
    _, blocks = stack
    ids, keep = ctx.padded_batch(ctx.generator(31))
    inputs: dict[int, tuple[tuple, dict]] = {}

    def record(i):
        def hook(_module, args, kwargs):
            if i not in inputs:
                inputs[i] = (depth._clone_tree(args), depth._clone_tree(kwargs))
        return hook

    handles = [b.register_forward_pre_hook(record(i), with_kwargs=True) for i, b in enumerate(blocks)]
    try:
        with torch.no_grad():
            ctx.caller(model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None)
    finally:
        for handle in handles:
            handle.remove()
    return {i: _exponent(block, *inputs[i], keep) for i, block in enumerate(blocks) if i in inputs}


def _exponent(block: nn.Module, args: tuple, kwargs: dict[str, Any], keep: torch.Tensor) -> float | None:
    positional = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    keyword = [k for k, a in kwargs.items() if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not positional and not keyword:
        return None
    x = dense(args[positional[0]] if positional else kwargs[keyword[0]])
    real = keep.to(x.device) if x.dim() >= 2 and x.shape[:2] == keep.shape else None

    def rms(t: torch.Tensor) -> float:
        return float((t[real] if real is not None else t).float().pow(2).mean().sqrt())

    size = rms(x)
    if not math.isfinite(size) or size == 0:
        return None
    branches, outputs = [], []
    for target in SIZES:
        hidden = x * (target / size)
        new_args, new_kwargs = [depth._uncached(a) for a in args], depth._no_cache(kwargs)
        if positional:
            new_args[positional[0]] = hidden
        else:
            new_kwargs[keyword[0]] = hidden
        try:
            with torch.no_grad():
                out = _first_float(block(*new_args, **new_kwargs))
        except Exception:  # noqa: BLE001  (a block that cannot be replayed alone is not measured)
            return None
        if out is None or out.shape != hidden.shape:
            return None
        branches.append(rms(out - hidden) / target)
        outputs.append(rms(out))
    if min(branches) < BRANCH_MIN or min(outputs) == 0 or not all(map(math.isfinite, branches + outputs)):
        return None
    span = math.log(SIZES[1] / SIZES[0])
    return min(math.log(branches[1] * SIZES[1] / (branches[0] * SIZES[0])) / span,
               math.log(outputs[1] / outputs[0]) / span)


PROBE_CLASSES[NormScaleProbe.name] = NormScaleProbe
