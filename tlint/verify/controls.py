"""Positive controls: before a passing probe may clear a static finding (`not-reproduced`),
the verifier injects the bug that finding's rule describes into this very model and runs
the probe again. A control the probe catches shows it can see the bug here; one it misses
makes the verdict `inconclusive`, naming the missing power.

Injections (all undone after the control runs; the model's weights are never changed for
good):
- causal-leak: attention un-masked (scores below the row's maximum minus 1000, the fills of
  `masked_fill`/additive masks, replaced by the row's mean; `scaled_dot_product_attention`
  and `multi_head_attention_forward` called without their masks and `is_causal`);
- nan-trace: the masked scores filled with `-inf` (so a fully masked row gives NaN);
- position-blind: the positional modules zeroed (every `nn.Embedding` but the token one, the
  parameters and buffers named after positions, rotary `inv_freq`);
- batch-coupling: the batch mean added to the token embeddings;
- attention-entropy: the softmax taken over the query axis (TL209);
- depth-growth (TL203): each block's residual removed by a forward hook (output - input);
- norm-scale (TL215): every normalisation layer inside the blocks passing its input through;
- eval-determinism (TL214): dropout (p = 0.1, on in every mode) applied to each attention's
  weights, `dropout_p=0.1` given to `scaled_dot_product_attention` and to
  `multi_head_attention_forward` (with `training=True`).

Two direct measurements sit here too: the attention's effective scale (`scale_ratio`:
the factor between the scores and q·k/sqrt(d_head), tracked through the scalar products
and views that produce them, TL208) and each block's skip share (`skip`: the cosine between
a small perturbation of the block's input and the change of its output; a residual path
passes it whole, a block without one scrambles it, TL203)."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from tlint.verify.depth import SKIP_MIN, skip_shares
from tlint.verify.norms import norms_skipped
from tlint.verify.probes import (
    PROBE_CLASSES,
    SDPA,
    AttentionCapture,
    ProbeContext,
    _tensors,
    block_stack,
    dense,
)

_SOFTMAX = AttentionCapture._SOFTMAX
_MASK_GAP = 1000.0  # a score this far below its row's maximum is a mask fill, not a logit
_FILL = -1e4        # and so is one this low (a fully masked row has no real maximum)


def _masked(scores: torch.Tensor) -> torch.Tensor:
    finite = torch.isfinite(scores)
    rowmax = torch.where(finite, scores, torch.full_like(scores, -math.inf)).amax(dim=-1, keepdim=True)
    return ~finite | (scores < rowmax - _MASK_GAP) | (scores <= _FILL)


class _AttentionEdit(TorchFunctionMode):
    """Edits every attention computation of a forward: softmax over (seq, seq) scores,
    `scaled_dot_product_attention`, `multi_head_attention_forward`."""

    def __init__(self, seq_len: int) -> None:
        super().__init__()
        self.seq_len, self.edits = seq_len, 0

    def square(self, tensor: Any) -> bool:
        return isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.dim() >= 2 \
            and tensor.shape[-1] == tensor.shape[-2] == self.seq_len

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _SOFTMAX and args and self.square(args[0]):
            return self.softmax(func, args, kwargs)
        if func is SDPA:
            return self.sdpa(func, args, kwargs)
        if func is F.multi_head_attention_forward:
            return self.mha(func, args, kwargs)
        return func(*args, **kwargs)

    def softmax(self, func, args, kwargs):
        return func(*args, **kwargs)

    def sdpa(self, func, args, kwargs):
        return func(*args, **kwargs)

    def mha(self, func, args, kwargs):
        return func(*args, **kwargs)


class Unmask(_AttentionEdit):
    """Every attention sees every key: the causal (and padding) masks dropped."""

    def softmax(self, func, args, kwargs):
        scores = args[0]
        masked = _masked(scores)
        if masked.any():
            visible = ~masked
            mean = torch.where(visible, scores, torch.zeros_like(scores)).sum(dim=-1, keepdim=True) \
                / visible.sum(dim=-1, keepdim=True).clamp_min(1)
            scores = torch.where(masked & visible.any(dim=-1, keepdim=True), mean.expand_as(scores), scores)
            self.edits += 1
        return func(scores, *args[1:], **kwargs)

    def sdpa(self, func, args, kwargs):
        names = ("attn_mask", "dropout_p", "is_causal")
        args, extra = list(args[:3]), dict(zip(names, args[3:], strict=False))
        kwargs = {**kwargs, **extra}
        if kwargs.get("attn_mask") is not None or kwargs.get("is_causal"):
            self.edits += 1
        kwargs["attn_mask"], kwargs["is_causal"] = None, False
        return func(*args, **kwargs)

    def mha(self, func, args, kwargs):
        if kwargs.get("attn_mask") is not None or kwargs.get("is_causal"):
            self.edits += 1
        kwargs["attn_mask"], kwargs["is_causal"] = None, False
        return func(*args, **kwargs)


class NegInfFill(_AttentionEdit):
    """Masked scores filled with -inf (TL210's fill), so a fully masked row is NaN."""

    def softmax(self, func, args, kwargs):
        scores = args[0]
        masked = _masked(scores)
        if masked.any():
            self.edits += 1
            scores = scores.masked_fill(masked, -math.inf)
        return func(scores, *args[1:], **kwargs)

    def sdpa(self, func, args, kwargs):
        mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
        if isinstance(mask, torch.Tensor):
            query = args[0]
            if mask.dtype == torch.bool:
                fill = torch.zeros(mask.shape, dtype=query.dtype, device=mask.device).masked_fill(~mask, -math.inf)
            else:
                fill = mask.masked_fill(mask < -_MASK_GAP, -math.inf)
            self.edits += 1
            args = tuple(args[:3])
            kwargs = {**kwargs, "attn_mask": fill}
        return func(*args, **kwargs)


class SoftmaxOverQueries(_AttentionEdit):
    """The attention softmax taken over the query axis instead of the keys (TL209)."""

    def softmax(self, func, args, kwargs):
        self.edits += 1
        kwargs.pop("dim", None)
        return func(args[0], -2, *args[2:], **kwargs)


class AttentionDropout(_AttentionEdit):
    """Attention dropout left on in eval mode (TL214): dropout (p = 0.1, always on) on each
    attention's weights, and `dropout_p=0.1` given to `scaled_dot_product_attention`."""

    def softmax(self, func, args, kwargs):
        self.edits += 1
        return F.dropout(func(*args, **kwargs), 0.1, training=True)

    def sdpa(self, func, args, kwargs):
        self.edits += 1
        extra = dict(zip(("attn_mask", "dropout_p", "is_causal", "scale"), args[3:], strict=False))
        return func(*args[:3], **{**kwargs, **extra, "dropout_p": 0.1})

    def mha(self, func, args, kwargs):
        self.edits += 1
        args = list(args)
        if len(args) > 10:  # (query, key, value, embed_dim, heads, in_proj w/b, bias_k/v, add_zero_attn, dropout_p)
            args[10] = 0.1
        else:
            kwargs["dropout_p"] = 0.1
        return func(*args, **{**kwargs, "training": True})


# --- the effective attention scale (TL208) ---------------------------------------------

FOLD = 2.0  # one side of q·k this much smaller than the other carries a scale of its own

_VIEWS = {"view", "reshape", "transpose", "permute", "contiguous", "split", "chunk", "unbind", "__getitem__",
          "unflatten", "flatten", "expand", "repeat_interleave", "to", "float", "type_as", "clone", "mT",
          "unsqueeze", "squeeze", "narrow", "swapaxes", "movedim"}
_MATMULS = {"matmul", "__matmul__", "bmm", "einsum", "baddbmm"}
_SCALARS = {"mul", "__mul__", "__rmul__", "mul_", "div", "__truediv__", "div_", "true_divide"}


class ScaleTrace(TorchFunctionMode):
    """Follows scalar factors through views and products: `q * c`, `(q @ k^T) / c`, ...;
    at each (seq, seq) softmax (and in `scaled_dot_product_attention`) records the product
    of the factors applied to q·k^T, times sqrt(d_head): 1 for the usual 1/sqrt(d_head)
    scaling, sqrt(d_head) for none, d_head for a multiplication by sqrt(d_head)."""

    def __init__(self, seq_len: int) -> None:
        super().__init__()
        self.seq_len = seq_len
        self.factors: dict[int, tuple[weakref.ref, float]] = {}
        self.products: dict[int, tuple[weakref.ref, float, int]] = {}   # q·k^T: factor, d_head
        self.ratios: list[float] = []

    def _get(self, table: dict, tensor: Any):
        if not isinstance(tensor, torch.Tensor):
            return None
        entry = table.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            return None
        return entry[1:]

    def factor(self, tensor: Any) -> float:
        got = self._get(self.factors, tensor)
        return got[0] if got else 1.0

    def folded(self, query: Any, key: Any) -> float:
        """A scale folded into the initialisation: one side of q·k (its tracked factors taken
        out) smaller than the other by more than FOLD, as when the query projection is drawn
        1/sqrt(d_head) smaller than the key's (T5); 1 otherwise (q and k drawn alike)."""
        try:
            sizes = [float(t.detach().float().pow(2).mean().sqrt()) / abs(self.factor(t)) for t in (query, key)]
        except (AttributeError, RuntimeError, ZeroDivisionError):
            return 1.0
        small, large = min(sizes), max(sizes)
        if small <= 0 or large / small < FOLD:
            return 1.0
        return small / large

    def _set(self, table: dict, tensor: Any, *values) -> None:
        for out in _tensors(tensor):
            try:
                table[id(out)] = (weakref.ref(out), *values)
            except TypeError:
                pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if func is SDPA:
            query, key = args[0], args[1]
            scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
            d = query.shape[-1]
            applied = (1 / math.sqrt(d) if scale is None else float(scale)) * self.factor(query) * self.factor(key)
            self.ratios.append(applied * math.sqrt(d) * self.folded(query, key))
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if func in _SOFTMAX and args and isinstance(args[0], torch.Tensor):
            product = self._get(self.products, args[0])
            if product is not None:
                factor, d = product
                self.ratios.append(factor * math.sqrt(d))
            return out
        first = args[0] if args else None
        if name in _MATMULS:
            if name == "baddbmm":  # (input, batch1, batch2), by position or keyword (BLOOM: alibi.baddbmm(...))
                named = dict(zip(("batch1", "batch2"), args[1:3], strict=False))
                named.update({k: v for k, v in kwargs.items() if k in ("batch1", "batch2")})
                args = (first, named.get("batch1"), named.get("batch2"))
            operands = [a for a in (args[1:] if name == "einsum" else args) if isinstance(a, torch.Tensor)][:2]
            if isinstance(out, torch.Tensor) and out.dim() >= 2 and out.shape[-1] == out.shape[-2] == self.seq_len \
                    and len(operands) == 2 and out.is_floating_point():
                a, b = operands
                d = a.shape[-1] if name != "baddbmm" else b.shape[-1]
                if name == "baddbmm":
                    a, b = args[1], args[2]
                    d = a.shape[-1]  # (the input added is a bias: ALiBi's, or zeros)
                factor = self.factor(a) * self.factor(b) * float(kwargs.get("alpha", 1.0)) * self.folded(a, b)
                self._set(self.products, out, factor, d)
            return out
        product = self._get(self.products, first)
        if product is None and name == "where" and len(args) == 3:  # torch.where(causal, scores, fill)
            product = self._get(self.products, args[1])
            first = args[1] if product is not None else first
        if name in _SCALARS and len(args) == 2:
            scalar = args[1] if isinstance(args[1], (int, float)) else (
                float(args[1]) if isinstance(args[1], torch.Tensor) and args[1].numel() == 1 else None)
            if scalar is None and isinstance(args[0], (int, float)) and isinstance(args[1], torch.Tensor):
                scalar, first = args[0], args[1]
                product = self._get(self.products, first)
            if scalar is not None and scalar != 0:
                mult = 1 / scalar if "div" in name else scalar
                if product is not None:
                    self._set(self.products, out, product[0] * mult, product[1])
                else:
                    self._set(self.factors, out, self.factor(first) * mult)
                return out
        if product is not None:  # a mask added, a fill, a view: the scale carries on
            if isinstance(out, torch.Tensor) and isinstance(first, torch.Tensor) and out.shape[-2:] == first.shape[-2:]:
                self._set(self.products, out, *product)
        elif name in _VIEWS and isinstance(first, torch.Tensor) and self.factor(first) != 1.0:
            self._set(self.factors, out, self.factor(first))
        return out


def scale_ratios(ctx: ProbeContext) -> list[float]:
    """Each attention's applied scale relative to 1/sqrt(d_head) on one full batch."""
    ids, keep = ctx.full_batch(ctx.generator(21))
    trace = ScaleTrace(ctx.seq_len)
    with torch.no_grad(), trace:
        ctx.caller(ctx.model, ids.to(ctx.device), keep.to(ctx.device) if ctx.caller.has_mask else None)
    return [float(f"{r:.4g}") for r in trace.ratios]


# The effective attention scale (the factor applied to q·k relative to 1/sqrt(d_head)) is
# the usual one within this factor.
SCALE_BAND = 1.9


def judge_scale(probe, ctx: ProbeContext, result):
    """attention-entropy's result with the effective scale measured (`extra["scale"]`): a
    fail, naming the scale, when one attention's lies outside [1/1.9, 1.9]."""
    try:
        ratios = scale_ratios(ctx)
    except Exception:  # noqa: BLE001  (no measurement: the entropy's verdict stands)
        ratios = []
    result.extra["scale"] = ratios
    if not ratios:
        result.detail += "; effective scale not measured (no scaled q·k product seen)"
        return result
    worst = max(ratios, key=lambda r: abs(math.log(max(r, 1e-12))))
    listed = ", ".join(f"{r:.3g}" for r in ratios[:6])
    if 1 / SCALE_BAND <= worst <= SCALE_BAND:
        result.detail += f"; effective scale x 1/sqrt(d_head): {listed}"
        return result
    how = "not scaled down enough" if worst > 1 else "scaled down too far"
    return probe.result("fail", result.figure, result.module,
                        f"the attention scores are {how}: the scale applied to q·k is {worst:.3g} x 1/sqrt(d_head) "
                        f"(per attention: {listed}; within [{1 / SCALE_BAND:.2g}, {SCALE_BAND}] is the usual scale); "
                        f"{result.detail}", **result.extra)


# --- injections ------------------------------------------------------------------------

@contextmanager
def _hooks(handles: list) -> Iterator[None]:
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def residuals_removed(model: nn.Module) -> Iterator[int]:
    stack = block_stack(model)
    blocks = stack[1] if stack else []

    def hook(_module, args, kwargs, output):
        x = next((a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor) and a.is_floating_point()),
                 None)
        y = output[0] if isinstance(output, tuple) else output
        if x is None or not isinstance(y, torch.Tensor):
            return None
        x, y = dense(x), dense(y)  # (torch's encoder fast path passes nested tensors)
        if y.shape != x.shape:
            return None
        return (y - x, *output[1:]) if isinstance(output, tuple) else y - x

    with _hooks([b.register_forward_hook(hook, with_kwargs=True) for b in blocks]):
        yield len(blocks)


def _token_embedding(ctx: ProbeContext) -> nn.Embedding | None:
    return next((m for m in ctx.model.modules() if isinstance(m, nn.Embedding)
                 and m.num_embeddings == ctx.vocab_size), None)


_POSITION_WORDS = ("pos", "sinus", "inv_freq", "rotary", "rope")


@contextmanager
def positions_removed(ctx: ProbeContext) -> Iterator[list[str]]:
    """Zero every positional module: the non-token `nn.Embedding`s (their outputs), the
    parameters and buffers named after positions (rotary `inv_freq` included)."""
    token = _token_embedding(ctx)
    removed: list[str] = []
    handles = []
    for name, module in ctx.model.named_modules():
        if isinstance(module, nn.Embedding) and module is not token and any(w in name.lower() for w in
                                                                              ("pos", "wpe", "position")):
            handles.append(module.register_forward_hook(lambda _m, _a, out: torch.zeros_like(out)))
            removed.append(name)
    saved: list[tuple[torch.Tensor, torch.Tensor]] = []
    owners = {name for name, m in ctx.model.named_modules() if isinstance(m, nn.Embedding)}
    for name, tensor in [*ctx.model.named_parameters(), *ctx.model.named_buffers()]:
        owner = name.rpartition(".")[0]
        if owner in owners or not tensor.is_floating_point():
            continue
        if any(w in name.lower() for w in _POSITION_WORDS) or name.rpartition(".")[2] == "pe":
            saved.append((tensor, tensor.detach().clone()))
            removed.append(name)
    try:
        with torch.no_grad():
            for tensor, _ in saved:
                tensor.zero_()
        with _hooks(handles):
            yield removed
    finally:
        with torch.no_grad():
            for tensor, copy in saved:
                tensor.copy_(copy)


@contextmanager
def batch_mixed(ctx: ProbeContext) -> Iterator[list[str]]:
    token = _token_embedding(ctx)
    if token is None:
        yield []
        return

    def hook(_module, _args, out):
        return out + out.mean(dim=0, keepdim=True)

    with _hooks([token.register_forward_hook(hook)]):
        yield ["token embedding"]


# --- running a control -----------------------------------------------------------------

def _rerun(name: str, ctx: ProbeContext) -> dict[str, Any]:
    result = PROBE_CLASSES[name]().run(ctx)
    return {"status": result.status, "figure": result.figure}


def _with_mode(mode_cls: type[_AttentionEdit], probe: str, what: str) -> Callable[[ProbeContext], dict]:
    def control(ctx: ProbeContext) -> dict[str, Any]:
        mode = mode_cls(ctx.seq_len)
        with torch.enable_grad() if probe == "attention-entropy" else _nothing(), mode:
            got = _rerun(probe, ctx)
        if not mode.edits:
            return {"injected": what, "caught": False, "figure": None,
                    "detail": "no attention computation to edit was seen (the bug could not be injected)"}
        return {"injected": what, "caught": got["status"] == "fail", "figure": got["figure"],
                "detail": f"{probe} with the bug injected: {got['status']} ({got['figure']})"}
    return control


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _with_context(manager, probe: str, what: str) -> Callable[[ProbeContext], dict]:
    def control(ctx: ProbeContext) -> dict[str, Any]:
        with manager(ctx) as touched:
            if not touched:
                return {"injected": what, "caught": False, "figure": None,
                        "detail": "nothing to inject it into was found in the model"}
            got = _rerun(probe, ctx)
        where = ", ".join(f"`{t}`" for t in touched[:4]) + (" ..." if len(touched) > 4 else "")
        return {"injected": what, "caught": got["status"] == "fail", "figure": got["figure"],
                "detail": f"{probe} with {where} removed or changed: {got['status']} ({got['figure']})"}
    return control


def _residual_control(ctx: ProbeContext) -> dict[str, Any]:
    what = "each block's residual removed (output - input)"
    with residuals_removed(ctx.model) as count:
        if not count:
            return {"injected": what, "caught": False, "figure": None, "detail": "no stack of blocks found"}
        shares = skip_shares(ctx)
    if not shares:
        return {"injected": what, "caught": False, "figure": None, "detail": "no block's skip share measured"}
    low = min(shares)
    return {"injected": what, "caught": low < SKIP_MIN, "figure": low,
            "detail": f"skip share with the residuals removed: {low} (a residual block keeps >= {SKIP_MIN})"}


def _mask_control(probe: str) -> Callable[[ProbeContext], dict]:
    """The padding mask dropped at the call (the model called without it)."""
    def control(ctx: ProbeContext) -> dict[str, Any]:
        what = "the padding mask dropped (the model called without it)"
        if not ctx.caller.has_mask:
            return {"injected": what, "caught": False, "figure": None, "detail": "the call passes no mask"}
        saved = ctx.caller
        ctx.caller = _MaskDropped(saved)  # type: ignore[assignment]
        try:
            got = _rerun(probe, ctx)
        finally:
            ctx.caller = saved
        return {"injected": what, "caught": got["status"] == "fail", "figure": got["figure"],
                "detail": f"{probe} with the mask dropped: {got['status']} ({got['figure']})"
                + ("" if got["status"] == "fail" or not ctx.causal or ctx.padding_side != "right" else
                   "; with right padding a causal model's real positions never see the pads")}
    return control


class _MaskDropped:
    """A caller that keeps its style (so the probes still build padded batches) but never
    passes the mask on."""

    def __init__(self, caller) -> None:
        self.inner = caller
        self.style, self.has_mask, self.convention = caller.style, True, caller.convention

    def __call__(self, model, ids, keep):
        return self.inner(model, ids, None)


CONTROLS: dict[str, Callable[[ProbeContext], dict[str, Any]]] = {
    "causal-leak": _with_mode(Unmask, "causal-leak", "the causal mask dropped (every query sees every key)"),
    "nan-trace": _with_mode(NegInfFill, "nan-trace", "masked scores filled with -inf"),
    "attention-entropy": _with_mode(SoftmaxOverQueries, "attention-entropy",
                                    "the attention softmax taken over the queries"),
    "position-blind": _with_context(positions_removed, "position-blind", "the positional embeddings zeroed"),
    "batch-coupling": _with_context(batch_mixed, "batch-coupling", "the batch mean added to the token embeddings"),
    "mask-leak": _mask_control("mask-leak"),
    "padding-equivalence": _mask_control("padding-equivalence"),
    "depth-growth": _residual_control,
    "norm-scale": _with_context(norms_skipped, "norm-scale",
                                "every norm inside the blocks skipped (its input passed through)"),
    "eval-determinism": _with_mode(AttentionDropout, "eval-determinism",
                                   "attention dropout left on in eval mode (p = 0.1 on the attention weights)"),
}


def run_control(name: str, ctx: ProbeContext) -> dict[str, Any] | None:
    """The probe's positive control on this model, or None when it has none. The control
    never raises: a model that cannot run it gives `caught: false` with the reason."""
    control = CONTROLS.get(name)
    if control is None:
        return None
    torch.manual_seed(ctx.seed)
    try:
        return control(ctx)
    except Exception as exc:  # noqa: BLE001  (a control the model cannot run shows no power)
        return {"injected": name, "caught": False, "figure": None,
                "detail": f"the control could not run: {type(exc).__name__}: {str(exc)[:200]}"}
