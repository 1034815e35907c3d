"""The measurements of a sampled step (torch): the batch's real positions, per-sub-layer
activation ranges, attention mass on pad keys, gradient norms, update-to-weight ratios, and
the re-run of a batch's forward that names the first module with a non-finite output.

Hooks live only for the sampled step's forward (`StepProbe.arm` / `disarm`). Every figure
is computed on the device and moved to the host in one copy per measurement: a sampled step
reads the device a handful of times, a plain step never. The sub-layer kinds, the bounded
activations and the attention capture are the verifier's (`tlint.verify.activations`,
`tlint.verify.probes`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from tlint.verify.activations import _BOUNDED, HALF_RISK, _kind, pad_mass, per_head
from tlint.verify.probes import AttentionCall, AttentionCapture, _first_float, _tensors, block_stack

ATTENTION_SAMPLES = 8     # samples of the batch whose attention the capture recomputes
UPDATE_SAMPLE = 256       # elements of each parameter the update-to-weight ratio looks at


def unwrap(model: nn.Module) -> nn.Module:
    """The module under DistributedDataParallel / torch.compile wrappers (their forward calls it)."""
    for _ in range(4):
        inner = getattr(model, "module", None) if type(model).__name__ == "DistributedDataParallel" else None
        inner = inner if inner is not None else getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner
    return model


# --- the batch -----------------------------------------------------------------------------

_IDS_KEYS = ("input_ids", "ids", "tokens", "input", "inputs", "x")
_MASK_KEYS = ("attention_mask", "mask", "padding_mask", "key_padding_mask", "src_key_padding_mask")


def _int2d(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 2 and not value.is_floating_point()


def batch_tokens(args: Any, kwargs: dict[str, Any] | None = None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(token ids, attention mask) of a model call or a batch: keyword names first, then the
    first 2-D integer tensor and a second one of the same shape; (None, None) if none."""
    kwargs = dict(kwargs or {})
    if isinstance(args, dict):
        kwargs, args = {**args, **kwargs}, ()
    elif isinstance(args, torch.Tensor):
        args = (args,)
    elif not isinstance(args, (tuple, list)):
        args = ()
    ids = next((kwargs[k] for k in _IDS_KEYS if _int2d(kwargs.get(k))), None)
    mask = next((kwargs[k] for k in _MASK_KEYS if isinstance(kwargs.get(k), torch.Tensor)), None)
    flat = [t for item in args for t in ([item] if isinstance(item, torch.Tensor) else _tensors(item))]
    if ids is None:
        ids = next((t for t in flat if _int2d(t)), None)
    if ids is not None and mask is None:
        mask = next((t for t in flat if t is not ids and _int2d(t) and t.shape == ids.shape), None)
    if mask is not None and (mask.dim() != 2 or ids is None or mask.shape != ids.shape):
        mask = None
    if mask is not None and mask.dtype == torch.bool and mask.any() and not mask.all() and _key_padding(kwargs, mask):
        mask = ~mask  # nn.MultiheadAttention's key_padding_mask: True marks a pad
    return ids, mask


def _key_padding(kwargs: dict[str, Any], mask: torch.Tensor) -> bool:
    return any(kwargs.get(k) is mask for k in ("key_padding_mask", "src_key_padding_mask", "padding_mask"))


def real_positions(ids: torch.Tensor | None, mask: torch.Tensor | None,
                   pad_token_id: int | None) -> torch.Tensor | None:
    """Bool (batch, seq): the real tokens, from the attention mask or else the pad id."""
    if mask is not None:
        return mask.bool()
    if ids is not None and pad_token_id is not None:
        return ids != pad_token_id
    return None


# --- activations and attention of one forward ------------------------------------------------


class _PadMassCapture(AttentionCapture):
    """The verifier's attention capture, keeping no maps: each call's share of attention mass
    that real query rows put on pad keys, for the first ATTENTION_SAMPLES samples."""

    def __init__(self, keep: torch.Tensor, modules: list[str]) -> None:
        super().__init__(keep.shape[1], modules)
        self.full = keep.shape[0]
        self.keep = keep[:ATTENTION_SAMPLES]
        self.masses: dict[str, float] = {}

    def _record(self, weights, visible, max_logit) -> None:
        module = self.modules[-1] if self.modules else "(model)"
        if module in self.masses or weights.dim() < 3:
            return
        n = self.keep.shape[0]
        if weights.shape[0] % self.full == 0:  # the whole batch (heads maybe folded into it)
            weights = weights.reshape(self.full, -1, *weights.shape[-2:])[:n]
        heads = per_head(AttentionCall(module, weights, visible, max_logit), n)
        if heads is None:
            return
        mass = pad_mass(heads.float(), self.keep.to(heads.device))
        if mass is not None:
            self.masses[module] = mass

    def _record_sdpa(self, query, key, value, attn_mask=None, *args, **kwargs):
        n = self.keep.shape[0]
        if isinstance(query, torch.Tensor) and query.dim() >= 3 and query.shape[0] > n:
            if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() >= 3 and attn_mask.shape[0] == query.shape[0]:
                attn_mask = attn_mask[:n]
            query, key, value = query[:n], key[:n], value[:n]
        return super()._record_sdpa(query, key, value, attn_mask, *args, **kwargs)


def _stats(kind_module: nn.Module, tensor: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """[count, nonfinite, min, max, std, saturated share] over the real positions, on the device."""
    t = tensor.detach().float()
    where = torch.isfinite(t)
    if keep is not None and t.dim() >= 2 and t.shape[:2] == keep.shape:
        real = keep.to(t.device).reshape(*keep.shape, *([1] * (t.dim() - 2))).expand_as(t)
        nonfinite = (~where & real).sum()
        where = where & real
        count = real.sum()
    else:
        nonfinite = (~where).sum()
        count = torch.tensor(t.numel(), device=t.device)
    n = where.sum().clamp(min=1)
    low = torch.where(where, t, torch.inf).amin()
    high = torch.where(where, t, -torch.inf).amax()
    mean = torch.where(where, t, 0.0).sum() / n
    var = torch.where(where, (t - mean) ** 2, 0.0).sum() / (n - 1).clamp(min=1)
    bounds = next((b for cls, b in _BOUNDED.items() if isinstance(kind_module, cls)), None)
    if bounds is not None:
        margin = 0.01 * (bounds[1] - bounds[0])
        saturated = (t <= bounds[0] + margin) | (t >= bounds[1] - margin)
    else:
        saturated = t.abs() > HALF_RISK
    share = (saturated & where).sum() / n
    return torch.stack([count.float(), nonfinite.float(), low, high, var.sqrt(), share.float()])


def _round(value: float) -> float | None:
    return float(f"{value:.4g}") if math.isfinite(value) else None


class StepProbe:
    """Hooks for the forward of one sampled step: the top-level call's batch, per-sub-layer
    activation statistics and the attention mass on pad keys. Removed after that forward."""

    def __init__(self, model: nn.Module, pad_token_id: int | None, attention: bool = True) -> None:
        self.model, self.pad_token_id, self.attention = model, pad_token_id, attention
        stack = block_stack(model)
        blocks = {id(b) for b in stack[1]} if stack else set()
        paths: list[str] = []
        self.kinds = {name: kind for name, module in model.named_modules()
                      if (kind := _kind(name, module, blocks, paths))}
        self.handles: list[Any] = []
        self.stack: list[str] = []
        self.capture: _PadMassCapture | None = None
        self.keep: torch.Tensor | None = None
        self.ids: torch.Tensor | None = None
        self.raw: dict[str, tuple[nn.Module, torch.Tensor]] = {}
        self.done = False
        self.batch: Any = None   # a batch given by the framework (Lightning) before the forward

    def arm(self) -> None:
        self.disarm()
        self.done, self.raw, self.keep, self.ids = False, {}, None, None
        for name, module in self.model.named_modules():
            self.handles.append(module.register_forward_pre_hook(self._enter(name), with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._leave(name)))

    @property
    def armed(self) -> bool:
        return bool(self.handles)

    def disarm(self) -> None:
        self._exit_capture()
        for handle in self.handles:
            handle.remove()
        self.handles, self.stack = [], []

    def _exit_capture(self) -> None:
        if self.capture is not None:
            capture, self.capture = self.capture, None
            capture.__exit__(None, None, None)
            self.masses = capture.masses

    def _enter(self, name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
            if self.done or (not self.stack and not self.model.training):
                return  # (an evaluation forward between training steps is not the step's)
            if not self.stack:  # the top-level call of this step
                ids, mask = batch_tokens(args, kwargs)
                if ids is None and self.batch is not None:
                    ids, mask = batch_tokens(self.batch)
                self.ids = ids
                self.keep = real_positions(ids, mask, self.pad_token_id)
                self.masses = {}
                if self.attention and self.keep is not None and self.keep.dim() == 2:
                    self.capture = _PadMassCapture(self.keep, self.stack)
                    self.capture.__enter__()
            self.stack.append(name or "(model)")
        return hook

    def _leave(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, _args: Any, output: Any) -> None:
            if self.done or not self.stack:
                return
            if self.stack:
                self.stack.pop()
            kind = self.kinds.get(name)
            if kind and name not in self.raw:
                tensor = _first_float(output)
                if tensor is not None:
                    self.raw[name] = (module, tensor.detach())
            if not self.stack:
                self.done = True
                self._exit_capture()
        return hook

    def activations(self) -> list[dict[str, Any]]:
        """The activation rows of the forward (one copy to the host), flags set."""
        if not self.raw:
            return []
        names = list(self.raw)
        keep = self.keep
        rows = torch.stack([_stats(m, t, keep) for m, t in self.raw.values()]).cpu().tolist()
        self.raw = {}
        out = []
        for name, (count, nonfinite, low, high, std, share) in zip(names, rows):
            if count == 0:
                continue
            finite = count - nonfinite
            row = {"module": name or "(model)", "kind": self.kinds[name], "min": _round(low) if finite else None,
                   "max": _round(high) if finite else None, "std": _round(std) if finite else None,
                   "saturated": _round(share) if finite else None, "nonfinite": int(nonfinite),
                   "zero_variance": bool(finite > 1 and high == low)}
            out.append(row)
        return out


# --- gradients, weights, learning rates -----------------------------------------------------


def layer_of(model: nn.Module) -> Callable[[str], str]:
    """Maps a parameter name to its layer: the block it lies in, else its module's path."""
    stack = block_stack(model)
    prefix = stack[0] + "." if stack else None

    def layer(name: str) -> str:
        if prefix and name.startswith(prefix):
            return prefix + name[len(prefix):].split(".", 1)[0]
        return name.rpartition(".")[0] or name
    return layer


def _local(t: torch.Tensor) -> torch.Tensor:
    to_local = getattr(t, "to_local", None)  # a DTensor's shard (FSDP2)
    return to_local() if callable(to_local) else t


def grad_norms(named: list[tuple[str, nn.Parameter]], layer: Callable[[str], str], scale: float,
               reduce: Callable[[torch.Tensor], torch.Tensor] | None) -> tuple[float, dict[str, float]] | None:
    """(total norm, per-layer norms) of the current gradients divided by `scale`; squared sums
    are summed across ranks by `reduce` where the gradients are sharded (as the framework's
    clipping does)."""
    pairs = [(n, _local(p.grad)) for n, p in named if p.grad is not None]
    if not pairs:
        return None
    norms = torch._foreach_norm([g for _, g in pairs])
    device = norms[0].device
    squares = torch.stack([v.float().to(device) for v in norms]) ** 2
    layers: dict[str, list[int]] = {}
    for i, (name, _) in enumerate(pairs):
        layers.setdefault(layer(name), []).append(i)
    index = torch.tensor([j for idx in layers.values() for j in idx], device=device)
    owner = torch.tensor([k for k, idx in enumerate(layers.values()) for _ in idx], device=device)
    per_layer = torch.zeros(len(layers), device=device).index_add_(0, owner, squares[index])
    if reduce is not None:
        per_layer = reduce(per_layer)
    values = (per_layer.sum().unsqueeze(0).sqrt().tolist() + per_layer.sqrt().tolist())
    values = [v / scale for v in values]
    return values[0], dict(zip(layers, values[1:]))


def _sample(p: torch.Tensor) -> torch.Tensor:
    flat = _local(p.detach()).reshape(-1)
    stride = max(1, flat.numel() // UPDATE_SAMPLE)
    return flat[::stride][:UPDATE_SAMPLE].float()


class UpdateRatio:
    """Update-to-weight ratio per parameter group, ||Δw|| / ||w||, estimated on a strided
    sample of at most 256 elements of each parameter (no copy of the parameters)."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.before: list[list[torch.Tensor]] | None = None

    def snapshot(self) -> None:
        self.before = [[_sample(p).clone() for p in g["params"]] for g in self.optimizer.param_groups]

    def ratios(self) -> list[float | None] | None:
        if self.before is None:
            return None
        sums = []
        for group, before in zip(self.optimizer.param_groups, self.before):
            after = [_sample(p) for p in group["params"]]
            if not after:
                sums.append(torch.zeros(2))
                continue
            delta = sum(((a - b) ** 2).sum() for a, b in zip(after, before))
            weight = sum((b ** 2).sum() for b in before)
            sums.append(torch.stack([torch.as_tensor(delta), torch.as_tensor(weight)]).cpu())
        self.before = None
        out: list[float | None] = []
        for d, w in torch.stack(sums).tolist():
            out.append(_round(math.sqrt(d) / math.sqrt(w)) if w > 0 else None)
        return out


def learning_rates(optimizer: torch.optim.Optimizer) -> list[Any]:
    return [g.get("lr") for g in optimizer.param_groups]


def as_float(value: Any) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


# --- the re-run that finds where a non-finite value starts ------------------------------------


class _Found(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _finite(value: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in _tensors(value) if t.is_floating_point())


def first_nonfinite_module(model: nn.Module, run: Callable[[], Any]) -> tuple[str | None, bool]:
    """Re-runs a forward (`run`) with hooks, without gradients: the first module (in the order
    calls finish, so the innermost) whose inputs are finite and whose output is not (where
    the non-finite value starts), and whether the forward produced a non-finite value."""
    handles = []

    def hook(name: str) -> Callable[..., None]:
        def check(_module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            if not _finite(output) and _finite(args) and _finite(kwargs):
                raise _Found(name or "(model)")
        return check

    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(hook(name), with_kwargs=True))
    try:
        with torch.no_grad():
            out = run()
        return None, not _finite(out)
    except _Found as hit:
        return hit.name, True
    finally:
        for handle in handles:
            handle.remove()


def nonfinite_parameters(named: Iterable[tuple[str, nn.Parameter]], limit: int = 5) -> list[str]:
    bad = []
    for name, p in named:
        if not bool(torch.isfinite(p.detach()).all()):
            bad.append(name)
            if len(bad) >= limit:
                break
    return bad
