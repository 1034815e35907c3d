"""What a training run feeds its model and its loss, as plain facts for the invariants
(`tlint/runtime/invariants.py`, README "Tracing a training run"). Every function here reads
tensors without changing them (detached, under `no_grad`, on a sample of rows where a whole
tensor would cost more than the step), and returns plain values. The hooks call them at the
first steps of a run and then at one step in many (`Tracer._data_due`).

- `model_input`: the top-level model's inputs at a training forward: the token ids and the
  padding mask (by the names of the Hugging Face interface, `input_ids` and
  `attention_mask`, else the first integer matrix passed and the one 0/1 matrix of its shape
  beside it, whatever their names), whether the forward accepts a mask
  and whether it takes decoder inputs (an encoder-decoder: its targets are not its ids),
  the rows padded with the model's pad id (its `config.pad_token_id`, else a run of its
  end-of-text id at a row's end), and the float inputs holding NaN or infinity.
- `loss_input`: a cross-entropy, negative log-likelihood or binary cross-entropy call: what
  its input rows are (probabilities, log-probabilities or logits), and, measured against the
  last batch's ids, the offset at which its targets repeat the ids (1 for next-token
  prediction), the targets on padded positions that are not ignored, and the end-of-text
  tokens the loss ignores.
- `loader_order`: a training loader that reads its dataset in order (a sequential sampler):
  what that order follows (the samples' length, label or source), read as `tlint scan-data`
  reads it (`tlint/verify/scan_data.py`), with the random generators' states restored after.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

ROWS = 64          # rows of a loss input read to tell probabilities from logits
MIN_COMPARED = 16  # targets compared with the ids before an offset is named
AGREEMENT = 0.9    # share of compared targets equal to the ids at the named offset
NOT_MASKS = ("labels", "token_type_ids")  # the Hugging Face interface's other 0/1-valued matrices


@dataclass(slots=True)
class Batch:
    """The last training batch of a top-level model: what a loss is measured against."""

    ids: torch.Tensor               # (B, T) integer
    mask: torch.Tensor | None       # (B, T), 1 on real tokens
    pad: int | None
    eos: frozenset[int]
    model: str


_PARAMETERS: dict[type, frozenset[str]] = {}


def _accepts(module: torch.nn.Module, name: str) -> bool:
    """Whether the module's forward has a parameter of that name (the interface it offers)."""
    kind = type(module)
    if kind not in _PARAMETERS:
        try:
            _PARAMETERS[kind] = frozenset(inspect.signature(module.forward).parameters)
        except (TypeError, ValueError):
            _PARAMETERS[kind] = frozenset()
    return name in _PARAMETERS[kind]


def _ids(args: tuple, kwargs: dict[str, Any]) -> torch.Tensor | None:
    value = kwargs.get("input_ids")
    if value is None:
        value = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if isinstance(value, torch.Tensor) and value.dim() == 2 and not value.is_floating_point() \
            and not value.is_complex() and value.dtype != torch.bool and value.numel() > 0:
        return value
    return None


def _mask(ids: torch.Tensor, args: tuple, kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The padding mask passed with the ids, as 1 on real tokens: `attention_mask`, else the
    one 0/1 (or bool) matrix of the ids' shape among the other inputs (not the interface's
    labels or segment ids),
    turned so that its real-token value is the one every row holds (each row has a real
    token; the longest row has no padding). None when there is none or it cannot be turned."""
    named = kwargs.get("attention_mask")
    if isinstance(named, torch.Tensor) and named.shape == ids.shape:
        return named
    others = [v for k, v in kwargs.items() if k not in NOT_MASKS]
    found = [v for v in (*args, *others) if isinstance(v, torch.Tensor) and v is not ids
             and v.shape == ids.shape and not v.is_floating_point() and not v.is_complex()]
    found = [v for v in found if bool(((v == 0) | (v == 1)).all())]
    if len(found) != 1:
        return None
    ones = found[0].bool()
    ones_everywhere, zeros_everywhere = bool(ones.any(1).all()), bool((~ones).any(1).all())
    if ones_everywhere == zeros_everywhere:
        return None  # (both values in every row, or neither: not a padding mask that can be turned)
    return ones.long() if ones_everywhere else (~ones).long()


def _special(config: Any, name: str) -> list[int]:
    value = getattr(config, name, None)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _run_lengths(ids: torch.Tensor, token: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the length of the run of `token` at its end and at its start."""
    other = ids != token
    full = torch.full((ids.shape[0],), ids.shape[1], device=ids.device)

    def run(row_other: torch.Tensor) -> torch.Tensor:  # the index of the first other token, else the width
        return torch.where(row_other.any(1), row_other.float().argmax(1), full).long()

    return run(other.flip(1)), run(other)


def _padding(ids: torch.Tensor, pad: list[int], eos: list[int]) -> tuple[int | None, int, str | None]:
    """(the pad id, rows padded, side) of a batch: runs of the pad id at a row's end (or start)
    in rows of unequal lengths; without a pad id, runs of two or more end-of-text ids."""
    if ids.shape[0] < 2:
        return None, 0, None
    for token, least in [(t, 1) for t in pad] + [(t, 2) for t in eos if t not in pad]:
        right, left = _run_lengths(ids, token)
        for runs, side in ((right, "right"), (left, "left")):
            padded = int((runs >= least).sum())
            if padded and len(set(runs.tolist())) > 1:
                return token, padded, side
    return None, 0, None


def model_input(module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Batch | None]:
    """The facts of a training forward's inputs, and the batch a loss is measured against."""
    mapping = next((a for a in args if isinstance(a, Mapping) and "input_ids" in a), None)
    if mapping is not None and "input_ids" not in kwargs:  # (a batch dict passed whole: `model(batch)`)
        kwargs = {**{k: v for k, v in mapping.items() if isinstance(k, str)}, **kwargs}
    with torch.no_grad():
        config = getattr(module, "config", None)
        pad, eos = _special(config, "pad_token_id"), _special(config, "eos_token_id")
        ids = _ids(args, kwargs)
        mask = _mask(ids, args, kwargs) if ids is not None else None
        nonfinite = []
        named = [(f"argument {i + 1}", a) for i, a in enumerate(args)] + list(kwargs.items())
        for name, value in named:
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() \
                    and not bool(torch.isfinite(value).all()):
                nonfinite.append(name)
        facts: dict[str, Any] = {"name": type(module).__name__, "nonfinite": nonfinite,
                                 "has_mask": kwargs.get("attention_mask") is not None or mask is not None,
                                 "accepts_mask": _accepts(module, "attention_mask"),
                                 "decoder": (kwargs.get("decoder_input_ids") is not None
                                             or _accepts(module, "decoder_input_ids"))}
        batch = None
        if ids is not None:
            token, rows, side = _padding(ids, pad, eos)
            facts.update(pad_id=token, padded_rows=rows, side=side, rows=int(ids.shape[0]))
            batch = Batch(ids.detach(), mask.detach() if mask is not None else None,
                          pad[0] if pad else None, frozenset(eos), type(module).__name__)
        return facts, batch


def _rows(function: str, input: torch.Tensor) -> torch.Tensor | None:
    """Up to ROWS rows of class scores (the class axis last)."""
    if input.dim() == 0 or not input.is_floating_point():
        return None
    if function in ("cross_entropy", "nll_loss"):
        rows = input.unsqueeze(0) if input.dim() == 1 else input.movedim(1, -1).reshape(-1, input.shape[1])
        if rows.shape[-1] < 2:
            return None
    else:
        rows = input.reshape(-1, 1)
    step = max(1, rows.shape[0] // ROWS)
    return rows[::step][:ROWS].detach().float()


def form(function: str, input: torch.Tensor) -> str | None:
    """`probabilities`, `log-probabilities` or `logits` (None: nothing to read)."""
    with torch.no_grad():
        rows = _rows(function, input)
        if rows is None or rows.numel() == 0 or not bool(torch.isfinite(rows).all()):
            return None
        if function.startswith("binary_cross_entropy"):
            if rows.numel() >= 16 and bool(((rows >= 0) & (rows <= 1)).all()) and bool((rows.max() - rows.min()) > 0):
                return "probabilities"
            return "logits"
        if bool((rows >= 0).all()) and float((rows.sum(-1) - 1).abs().max()) < 1e-3:
            return "probabilities"
        if bool((rows <= 1e-6).all()) and float(torch.logsumexp(rows, -1).abs().max()) < 1e-3:
            return "log-probabilities"
        return "logits"


def _among(values: torch.Tensor, tokens: frozenset[int]) -> torch.Tensor:
    """Where `values` holds one of `tokens`."""
    return torch.isin(values, torch.tensor(sorted(tokens), dtype=values.dtype, device=values.device))


def _targets(target: torch.Tensor, batch: Batch) -> torch.Tensor | None:
    """The targets as (B, T') rows of the batch, T' within 2 of the batch's length."""
    if target.is_floating_point() or target.dtype == torch.bool or target.device != batch.ids.device:
        return None
    rows, width = batch.ids.shape
    if target.numel() == 0 or target.numel() % rows:
        return None
    length = target.numel() // rows
    if not width - 2 <= length <= width:
        return None
    return target.reshape(rows, length)


def loss_input(function: str, input: Any, target: Any, ignore_index: int, batch: Batch | None) -> dict[str, Any]:
    """The facts of one loss call (targets measured against `batch` where they match it)."""
    facts: dict[str, Any] = {"function": function, "form": None, "offset": None}
    if not isinstance(input, torch.Tensor):
        return facts
    facts["form"] = form(function, input)
    if batch is None or not isinstance(target, torch.Tensor) or function not in ("cross_entropy", "nll_loss"):
        return facts
    with torch.no_grad():
        targets = _targets(target, batch)
        if targets is None:
            return facts
        ids, mask = batch.ids, batch.mask
        real = mask.bool() if mask is not None else (ids != batch.pad if batch.pad is not None
                                                     and batch.pad not in batch.eos else None)
        valid = targets != ignore_index
        best: tuple[float, int, int] | None = None
        agreements = {}
        for k in (0, 1, 2):
            span = min(targets.shape[1], ids.shape[1] - k)
            if span <= 0:
                continue
            compared = valid[:, :span]
            if real is not None:
                compared = compared & real[:, k:k + span]
            n = int(compared.sum())
            if n < MIN_COMPARED:
                continue
            share = float(((targets[:, :span] == ids[:, k:k + span]) & compared).sum()) / n
            agreements[k] = share
            if best is None or share > best[0]:
                best = (share, k, n)
        facts["agreement"] = {str(k): round(v, 3) for k, v in agreements.items()}
        if best is None or best[0] < AGREEMENT or any(v > 0.5 for kk, v in agreements.items() if kk != best[1]):
            return facts  # no offset, or more than one (runs of one token)
        share, k, n = best
        facts.update(offset=k, compared=n)
        span = min(targets.shape[1], ids.shape[1] - k)
        t, i, v = targets[:, :span], ids[:, k:k + span], valid[:, :span]
        if real is not None:
            r = real[:, k:k + span]
            padded = ~r & v
            # the first padded position of a right-padded row may carry the end-of-text label
            if batch.eos:
                eos_t = _among(t, batch.eos)
                boundary = ~r & torch.cat([torch.ones_like(r[:, :1]), r[:, :-1]], 1)
                padded &= ~(boundary & eos_t)
            facts["pad_targets"] = int(padded.sum())
            facts["padded_positions"] = int((~r).sum())
        if batch.eos and (mask is not None or not (batch.pad is None or batch.pad in batch.eos)):
            eos_i, eos_t = _among(i, batch.eos), _among(t, batch.eos)
            on_real = eos_i & real[:, k:k + span] if real is not None else eos_i
            facts["eos_ignored"] = int((on_real & ~v).sum())
            facts["eos_targets"] = int((eos_t & v).sum())
        return facts


def loader_order(loader: Any, pad: int | None, eos: frozenset[int]) -> dict[str, Any] | None:
    """What a training loader's order follows, when it reads its dataset in order; None when
    its sampler draws in another order (a shuffle, or a sampler of its own)."""
    import random
    import sys

    from torch.utils.data import SequentialSampler

    batch_sampler = getattr(loader, "batch_sampler", None)
    sampler = getattr(batch_sampler, "sampler", None) if batch_sampler is not None else getattr(loader, "sampler", None)
    if not isinstance(sampler, SequentialSampler):
        return None
    from tlint.verify.data import DataOptions
    from tlint.verify.data_order import structure_findings
    from tlint.verify.scan_data import order_structure

    numpy = sys.modules.get("numpy")
    states = (random.getstate(), torch.get_rng_state(), numpy.random.get_state() if numpy is not None else None)
    try:
        structure = order_structure(loader, DataOptions(dataloader="", root="", pad_token_id=pad,
                                                        eos_token_id=min(eos) if eos else None))
    finally:
        random.setstate(states[0])
        torch.set_rng_state(states[1])
        if numpy is not None:
            numpy.random.set_state(states[2])
    follows, measured = structure_findings(structure)
    return {"follows": follows, "measured": measured, "items": len(structure.get("lengths", [])),
            "sampler": type(sampler).__name__}
