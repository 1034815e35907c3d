"""depth-growth: the residual stream through the stack of blocks at init, block by block;
and each block's skip share, the direct measurement of a residual path (TL203)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tlint.verify.probes import (
    PROBE_CLASSES,
    Probe,
    ProbeContext,
    ProbeResult,
    _first_float,
    _tensors,
    block_stack,
    dense,
)

# A block whose skip share is below this has no residual path (a residual block keeps ~1).
SKIP_MIN = 0.25


class DepthGrowthProbe(Probe):
    """The residual stream through the stack at init: the RMS of each block's output relative
    to the previous block's output must stay within [0.1, 10] (the jump from the embedding
    output to the first block is reported apart: a post-norm model or scaled embeddings
    move it legitimately), and the per-block gradient norms after one backward within a
    factor of 100 of each other. Needs at least 4 blocks; a shallower model is rebuilt
    deeper through its layer-count argument. A transformer block (one holding attention)
    whose skip share (`skip_shares`) is below 0.25 has no residual path: a failure too (TL203)."""

    name = "depth-growth"
    tolerance = 10.0
    unit = ("worst growth or decay factor of the stream's RMS from one block to the next, or the spread of "
            "per-block gradient norms / 10 (fails above the tolerance, or when a block has no residual path)")
    min_blocks = 4
    deeper = 8
    grad_spread = 100.0

    def run(self, ctx: ProbeContext) -> ProbeResult:
        model, note = ctx.model, ""
        stack = block_stack(model)
        if stack is None:
            return self.skip("no stack of blocks found (a ModuleList/Sequential of one block class)")
        if len(stack[1]) < self.min_blocks:
            deeper = ctx.rebuild_deeper(self.deeper) if ctx.rebuild_deeper else None
            if deeper is None:
                return self.skip(f"not at this scale: {len(stack[1])} blocks; depth-growth needs >= {self.min_blocks} "
                                 "and the factory takes no layer-count argument (set one in model-kwargs)")
            model, (setting, depth) = deeper
            stack = block_stack(model)
            if stack is None or len(stack[1]) < self.min_blocks:
                return self.skip(f"not at this scale: rebuilding with {setting} = {depth} gave no deeper stack")
            note = f" (rebuilt with {setting} = {depth}: {len(stack[1])} blocks)"
        path, blocks = stack
        ids, keep = ctx.padded_batch(ctx.generator(12))
        streams: list[torch.Tensor] = []

        def record_input(_module, args, kwargs):
            tensors = [t for t in _tensors(list(args) + list(kwargs.values())) if t.is_floating_point()]
            if not streams and tensors:
                streams.append(dense(tensors[0]).detach().float().cpu())

        def record_output(_module, _args, output):
            tensor = _first_float(output)
            if tensor is not None:
                streams.append(tensor.detach().float().cpu())

        handles = [blocks[0].register_forward_pre_hook(record_input, with_kwargs=True)]
        handles += [block.register_forward_hook(record_output) for block in blocks]
        model.zero_grad(set_to_none=True)
        try:
            with torch.enable_grad():
                out = dense(ctx.caller(model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None))
                loss = ctx.loss(out, ids, keep, ctx.generator(13))
                if loss.requires_grad:
                    loss.backward()
        finally:
            for handle in handles:
                handle.remove()
        if len(streams) < 3:
            return self.skip("the blocks returned no floating tensor to measure")
        rms = [self.rms(t, ids, keep) for t in streams]
        jump = rms[1] / max(rms[0], 1e-12)
        ratios = [rms[i + 1] / max(rms[i], 1e-12) for i in range(1, len(rms) - 1)]
        factor = max(max(ratios), 1 / max(min(ratios), 1e-12))
        norms = [math.sqrt(sum(float(p.grad.float().pow(2).sum()) for p in b.parameters() if p.grad is not None))
                 for b in blocks]
        model.zero_grad(set_to_none=True)
        alive = [n for n in norms if n > 0]
        spread = max(alive) / min(alive) if alive else 1.0
        shares = skip_shares(ctx, model)
        detail = (f"stream RMS of each block relative to the previous one (`{path}.1` on): "
                  + ", ".join(f"{r:.3g}" for r in ratios) + f"; embedding to `{path}.0`: {jump:.3g} (not judged)"
                  + f"; per-block gradient norms spread {spread:.3g}x"
                  + (f"; skip share per block (residual path, TL203): {', '.join(f'{s:.2f}' for s in shares)}"
                     if shares else "") + note)
        figure = max(factor, spread * self.tolerance / self.grad_spread)
        extra: dict[str, Any] = {"embedding_jump": float(f"{jump:.4g}"), "skip": shares, "stack": path}
        if shares and min(shares) < SKIP_MIN and _attends(blocks[0]):
            worst = min(range(len(shares)), key=lambda i: shares[i])
            return self.result("fail", figure, f"{path}.{worst}", f"block `{path}.{worst}` has no residual path: a "
                               f"small change of its input reaches its output with cosine {shares[worst]:.3g} "
                               f"(< {SKIP_MIN}; a residual block passes it through, ~1); {detail}", **extra)
        if figure > self.tolerance:
            if factor > self.tolerance:
                worst = 1 + max(range(len(ratios)), key=lambda i: max(ratios[i], 1 / max(ratios[i], 1e-12)))
            else:
                worst = min(range(len(norms)), key=lambda i: norms[i] if norms[i] > 0 else math.inf)
            return self.result("fail", figure, f"{path}.{worst}", detail, **extra)
        return self.result("pass", figure, detail=detail, **extra)

    @staticmethod
    def rms(tensor: torch.Tensor, ids: torch.Tensor, keep: torch.Tensor) -> float:
        if tensor.dim() >= 2 and tensor.shape[:2] == ids.shape:
            tensor = tensor[keep]
        return float(tensor.pow(2).mean().sqrt())


def skip_shares(ctx: ProbeContext, model: nn.Module | None = None) -> list[float] | None:
    """Per block: cos(output change, input perturbation) for a small random perturbation of
    the block's input (relative size 1e-3) at real positions. ~1 with a residual path (pre-
    or post-norm), ~0 without one. None without a stack of blocks."""
    model = model or ctx.model
    stack = block_stack(model)
    if stack is None:
        return None
    _, blocks = stack
    ids, keep = ctx.padded_batch(ctx.generator(22))
    inputs: dict[int, tuple[tuple, dict]] = {}

    def record(i):
        def hook(_module, args, kwargs):
            if i not in inputs:
                inputs[i] = (_clone_tree(args), _clone_tree(kwargs))
        return hook

    handles = [b.register_forward_pre_hook(record(i), with_kwargs=True) for i, b in enumerate(blocks)]
    try:
        with torch.enable_grad():  # (grad on: torch's encoder takes no nested-tensor fast path)
            ctx.caller(model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None)
    finally:
        for handle in handles:
            handle.remove()
    gen = ctx.generator(23)
    shares = []
    for i, block in enumerate(blocks):
        if i not in inputs:
            continue
        share = _skip_share(block, *inputs[i], keep, gen)
        if share is not None:
            shares.append(float(f"{share:.4g}"))
    return shares


# The stream sizes (RMS) at which a block's input is replayed, besides its own: a residual
# path passes a change of the input through at any size, while a branch behind a norm shrinks
# relative to it as the stream grows. So the skip share does not depend on how small the
# model's own initialisation makes the stream (an embedding drawn at std 1e-3, say).
STREAM_SIZES = (1.0, 10.0, 100.0)


def _skip_share(block: nn.Module, args: tuple, kwargs: dict[str, Any], keep: torch.Tensor,
                gen: torch.Generator) -> float | None:
    """cos(output change, input perturbation) of one block replayed on its recorded inputs
    (the hidden states: the first floating argument, positional or keyword): the largest over
    the recorded input and the same input rescaled to each of STREAM_SIZES."""
    positional = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    keyword = [k for k, a in kwargs.items() if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not positional and not keyword:
        return None
    x = dense(args[positional[0]] if positional else kwargs[keyword[0]])
    rms = float(x.float().pow(2).mean().sqrt())
    shares = []
    for size in (None, *STREAM_SIZES):
        scaled = x if size is None or rms == 0 else x * (size / rms)
        share = _skip_share_at(block, args, kwargs, positional, keyword, scaled, keep, gen)
        if share is None:
            return None
        shares.append(share)
    return max(shares)


def _skip_share_at(block: nn.Module, args: tuple, kwargs: dict[str, Any], positional: list[int],
                   keyword: list[str], x: torch.Tensor, keep: torch.Tensor, gen: torch.Generator) -> float | None:
    delta = torch.randn(x.shape, generator=gen).to(x.device, x.dtype) * x.float().pow(2).mean().sqrt() * 1e-3
    if x.dim() >= 2 and x.shape[:2] == keep.shape:
        delta = delta * keep.to(x.device).reshape(*keep.shape, *([1] * (x.dim() - 2)))

    def call(hidden: torch.Tensor) -> torch.Tensor | None:
        # a key/value cache would grow with each replay: the block is called without one; a
        # nested input (torch's encoder fast path) is replayed dense, both times
        new_args, new_kwargs = [_uncached(a) for a in args], _no_cache(kwargs)
        if positional:
            new_args[positional[0]] = hidden
        else:
            new_kwargs[keyword[0]] = hidden
        with torch.no_grad():
            return _first_float(block(*new_args, **new_kwargs))

    try:
        base, out = call(x), call(x + delta)
    except Exception:  # noqa: BLE001  (a block that cannot be replayed alone is not measured)
        return None
    if base is None or out is None or out.shape != x.shape:
        return None
    change, d = (out - base).float().flatten(), delta.float().flatten()
    return float(change @ d / (change.norm() * d.norm()).clamp_min(1e-30))


_ATTENTION_WORDS = ("attn", "attention")


def _attends(block: nn.Module) -> bool:
    """A transformer block: it holds an attention module (torch's, or a sub-module named
    after attention). Only such blocks must have a residual path; another stack (a list of
    plain MLPs, say) may legitimately have none."""
    for name, module in block.named_modules():
        if isinstance(module, (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            return True
        if any(word in name.rpartition(".")[2].lower() for word in _ATTENTION_WORDS):
            return True
        if "attention" in type(module).__name__.lower():
            return True
    return False


def _no_cache(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: (False if k == "use_cache" else None if ("past" in k or k.endswith("cache")) else _uncached(v))
            for k, v in kwargs.items()}


def _uncached(value: Any) -> Any:
    """A key/value cache object (a Hugging Face `Cache`) is replaced by None."""
    return None if "Cache" in type(value).__name__ else value


def _clone_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_clone_tree(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone_tree(v) for k, v in value.items()}
    return value



PROBE_CLASSES[DepthGrowthProbe.name] = DepthGrowthProbe
# norm-scale replays the blocks with this module's helpers, and registers itself beside it.
import tlint.verify.norms  # noqa: E402, F401
