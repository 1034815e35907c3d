"""The data scan's child-process side (torch): import the loader factories, draw their
first N batches, normalise each one and compute the checks of `tlint.verify.data.CHECKS`.

A batch may be a mapping (a dict, a Hugging Face BatchEncoding), a tuple or list of tensors
(`(x, y)`: nanoGPT's inputs and already-shifted targets; `(ids, mask, labels)`), one tensor
of ids, or plain Python lists of ints (ragged lists are taken as unpadded sequences)."""

from __future__ import annotations

import itertools
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import torch

from tlint.verify.data import (
    _ID_NAMES,
    _LABEL_NAMES,
    _MASK_NAMES,
    CHECKS,
    IGNORE_INDEX,
    PAD_RATIO_LIMIT,
    DataOptions,
    checked_rules,
)
from tlint.verify.data_order import structure_findings
from tlint.verify.loading import UserCodeError, _describe, _inside, import_object

_TLINT_DIR = Path(__file__).resolve().parent.parent


@dataclass
class Batch:
    ids: torch.Tensor | None                 # [B, L] long
    keep: torch.Tensor | None                # [B, L] bool, True = real token (from the mask)
    labels: torch.Tensor | None
    numeric: dict[str, torch.Tensor]         # every field that is a tensor, by name (NaN/Inf check)
    names: dict[str, str] = field(default_factory=dict)   # role -> field name
    tuple_labels: bool = False               # labels came as the second element of a tuple
    mask_note: str = ""


def run_scan(options: DataOptions) -> dict[str, Any]:
    from tlint.verify.loading import import_roots

    roots = import_roots(options)  # type: ignore[arg-type]  # (root and python_path are all it reads)
    sys.dont_write_bytecode = True
    for entry in reversed([str(p) for p in roots]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    random.seed(options.seed)
    torch.manual_seed(options.seed)
    torch.set_num_threads(1)
    try:
        train = _draw(options.dataloader, "dataloader", options, roots)
        evaluation = _draw(options.eval_dataloader, "eval-dataloader", options, roots) \
            if options.eval_dataloader else None
    except UserCodeError as exc:
        return {"error": {"kind": exc.kind, "message": str(exc)}}
    checks = _checks(train, "train", options)
    if evaluation is not None:
        checks += _checks(evaluation, "eval", options)
    checks.append(_tokenizer_agreement(train, evaluation))
    order = list(CHECKS)
    checks.sort(key=lambda c: (order.index(c["check"]), c["loader"] != "train"))
    # (`__file__` is set: `_users_file` keeps only modules with one)
    files = sorted({str(Path(m.__file__).resolve()) for m in list(sys.modules.values())  # type: ignore[arg-type]
                    if _users_file(getattr(m, "__file__", None), roots)})
    scan = {"loader": options.dataloader, "batches": len(train.batches),
            "samples": sum(_size(b) for b in train.batches)}
    if evaluation is not None:
        scan.update(eval_loader=options.eval_dataloader, eval_batches=len(evaluation.batches),
                    eval_samples=sum(_size(b) for b in evaluation.batches))
    return {"scan": scan, "checks": checks, "files": files}


def _users_file(file: str | None, roots: list[Path]) -> bool:
    """A module file of the user's project: under the config's folder or python-path, not
    tlint's, and not an installed package (a virtual environment inside the project)."""
    from tlint.config import DEFAULT_EXCLUDE

    if not file or not file.endswith(".py"):
        return False
    path = Path(file).resolve()
    if not _inside(path, roots) or _inside(path, [_TLINT_DIR]):
        return False
    skip = {*DEFAULT_EXCLUDE, "site-packages", "dist-packages"}
    root = next(r.resolve() for r in roots if _inside(path, [r.resolve()]))
    return not any(part in skip for part in path.relative_to(root).parts)


@dataclass
class Drawn:
    spec: str
    batches: list[Batch]
    tokenizer: Any
    order: dict[str, Any] | None = None  # the sampling order of a DataLoader (`_sample_order`)


def _draw(spec: str, setting: str, options: DataOptions, roots: list[Path]) -> Drawn:
    obj = import_object(spec, setting, roots)
    loader = obj
    if callable(obj) and not _iterable(obj):
        try:
            loader = obj()
        except BaseException as exc:  # noqa: BLE001 - user code: anything can happen
            raise UserCodeError("factory", f"building the data loader with `{spec}` raised "
                                f"{_describe(exc, roots)}. `{setting}` must name a callable that takes no "
                                "arguments and returns an iterable of batches (e.g. a DataLoader)") from None
    if not _iterable(loader):
        raise UserCodeError("factory", f"`{setting} = \"{spec}\"` gave a {type(loader).__name__}, which is not "
                            "iterable: return a DataLoader or another iterable of batches")
    batches = []
    index = 0
    try:
        for index, raw in enumerate(itertools.islice(iter(loader), options.batches)):
            batches.append(_normalise(raw, options, spec, index))
    except UserCodeError:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code: anything can happen
        raise UserCodeError("loader", f"iterating `{spec}` raised at batch {index}: {_describe(exc, roots)}") from None
    if not batches:
        raise UserCodeError("loader", f"`{spec}` yielded no batch: nothing to scan")
    return Drawn(spec, batches, _find_tokenizer(loader), _sample_order(loader, options))


ORDER_MIN_SAMPLES = 8  # fewer drawn indices cannot tell a shuffle from dataset order
ORDER_SPREAD = 64      # dataset items read, spread over the whole dataset, to see what its order follows
# Per-sample fields that name where a sample comes from.
_SOURCE_NAMES = ("source", "domain", "dataset", "corpus", "origin", "lang", "language", "task", "split")


def _sample_order(loader: Any, options: DataOptions) -> dict[str, Any]:
    """Which dataset indices a torch DataLoader draws for its first batches: its batch
    sampler's (or, with `batch_size=None`, its sampler's) first `options.batches` batches,
    flattened; when they are 0, 1, 2, ... (the dataset read in order), what that order
    follows (`order_structure`). A `skip` reason instead when the order cannot be seen: not
    a DataLoader, an IterableDataset (the stream decides), a sampler that raises, or too few
    samples."""
    from torch.utils.data import DataLoader, IterableDataset

    if not isinstance(loader, DataLoader):
        return {"skip": f"the loader is a {type(loader).__name__}, not a torch DataLoader: its sampling order "
                        "is not visible"}
    if isinstance(loader.dataset, IterableDataset):
        return {"skip": "the dataset is an IterableDataset: its order is the stream's, not a sampler's"}
    sampler = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
    indices: list[int] = []
    try:
        for drawn in itertools.islice(iter(sampler), options.batches):
            if isinstance(drawn, (list, tuple)):
                indices.extend(int(i) for i in drawn)
            else:
                indices.append(int(drawn))
    except BaseException as exc:  # noqa: BLE001 - user code: anything can happen
        return {"skip": f"iterating the loader's sampler raised {type(exc).__name__}"}
    if len(indices) < ORDER_MIN_SAMPLES:
        return {"skip": f"only {len(indices)} samples drawn: too few to tell a shuffle from dataset order"}
    order: dict[str, Any] = {"indices": indices, "sampler": type(sampler).__name__ if loader.batch_sampler is None
                             else type(getattr(loader.batch_sampler, "sampler", loader.batch_sampler)).__name__}
    if indices == list(range(len(indices))):
        order["structure"] = order_structure(loader, options)
    return order


def order_structure(loader: Any, options: DataOptions) -> dict[str, Any]:
    """What the dataset's own order follows: up to ORDER_SPREAD items spread evenly over the
    whole dataset (a prefix of a sorted file may hold one length only), each collated alone
    by the loader's `collate_fn` and read like a batch: its real length, its label when it
    has one per sample, and its source (the sub-dataset of a `ConcatDataset`, or a per-sample
    field named like `source`, `domain`, `lang`)."""
    import bisect

    from torch.utils.data import ConcatDataset

    dataset = loader.dataset
    try:
        size = len(dataset)
    except TypeError:
        return {"note": "the dataset has no length: its order cannot be read across it"}
    count = min(size, ORDER_SPREAD)
    positions = sorted({round(i * (size - 1) / max(count - 1, 1)) for i in range(count)})
    out: dict[str, Any] = {"positions": positions, "lengths": [], "labels": [], "sources": []}
    if isinstance(dataset, ConcatDataset) and sum(len(d) > 0 for d in dataset.datasets) >= 2:  # type: ignore[arg-type]
        out["concat"] = [len(d) for d in dataset.datasets]  # type: ignore[arg-type]
        out["sources"] = [bisect.bisect_right(dataset.cumulative_sizes, i) for i in positions]
    pad = options.pad_token_id
    collate = loader.collate_fn
    try:
        for index in positions:
            item = dataset[index]
            source = _source_field(item)
            batch = _normalise(collate([item]) if collate is not None else item, options, "the dataset", index)
            if batch.ids is None:
                break
            if batch.keep is not None:
                length = int(batch.keep[0].sum())
            elif pad is not None:
                length = int((batch.ids[0] != pad).sum())
            else:
                length = int(batch.ids.shape[-1])
            out["lengths"].append(length)
            label = batch.labels
            if label is not None and label.numel() == 1:
                out["labels"].append(float(label.reshape(-1)[0]))
            if "concat" not in out and source is not None:
                out["sources"].append(source)
    except BaseException as exc:  # noqa: BLE001 - user code: anything can happen
        out["note"] = f"reading dataset items one by one raised {type(exc).__name__}"
    for key in ("labels", "sources"):
        if len(out[key]) != len(out["lengths"]) and "concat" not in out:
            out[key] = []
    return out


def _source_field(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return None
    for name in _SOURCE_NAMES:
        value = item.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
        if torch.is_tensor(value) and value.numel() == 1:
            return value.item()
    return None


def _iterable(obj: Any) -> bool:
    if isinstance(obj, type):
        return False
    try:
        iter(obj)
    except TypeError:
        return False
    return True


def _find_tokenizer(loader: Any) -> Any:
    collate = getattr(loader, "collate_fn", None)
    for holder in (loader, collate, getattr(collate, "__self__", None), getattr(loader, "dataset", None)):
        for name in ("tokenizer", "processing_class"):
            tok = getattr(holder, name, None)
            if tok is None and isinstance(getattr(holder, "keywords", None), dict):  # functools.partial
                tok = holder.keywords.get(name)  # type: ignore[union-attr]  # (not None: it has keywords)
            if tok is not None and hasattr(tok, "pad_token_id"):
                return tok
    return None


def _size(batch: Batch) -> int:
    if batch.ids is not None:
        return int(batch.ids.shape[0]) if batch.ids.dim() > 1 else 1
    return 0


# --- normalising a batch ---------------------------------------------------------------

def _tensor(value: Any) -> torch.Tensor | list | None:
    """A tensor; a list of lists of different lengths is returned as is (ragged)."""
    if torch.is_tensor(value):
        return value
    if type(value).__module__ == "numpy":
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            return None
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) for v in value) and len({len(v) for v in value}) > 1:
            return list(value)
        try:
            return torch.tensor(value)
        except (TypeError, ValueError, RuntimeError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(value)
    return None


def _is_ints(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _normalise(raw: Any, options: DataOptions, spec: str, index: int) -> Batch:
    named: dict[str, Any]
    roles: dict[str, str] = {}
    tuple_labels = False
    if isinstance(raw, Mapping):
        named = {str(k): v for k, v in raw.items()}
        for role, names in (("ids", _ID_NAMES), ("mask", _MASK_NAMES), ("labels", _LABEL_NAMES)):
            wanted = options.fields.get(role)
            if wanted is not None:
                if wanted not in named:
                    raise UserCodeError("batch", f"batch {index} of `{spec}` has no field `{wanted}` (`fields.{role}` "
                                        f"in [tool.tlint.verify]); its fields are {', '.join(sorted(named))}")
                roles[role] = wanted
            else:
                found = next((n for n in names if n in named), None)
                if found is not None:
                    roles[role] = found
    elif torch.is_tensor(raw) or (isinstance(raw, list) and raw and all(_is_ints(v) or isinstance(v, list)
                                                                         and all(_is_ints(x) for x in v)
                                                                         for v in raw)):
        named, roles = {"batch": raw}, {"ids": "batch"}
    elif isinstance(raw, (tuple, list)) and raw:
        named = {f"[{i}]": v for i, v in enumerate(raw)}
        roles["ids"] = "[0]"
        rest = [f"[{i}]" for i in range(1, len(raw))]
        if len(rest) == 1 and _looks_like_mask(_tensor(named[rest[0]]), _tensor(named["[0]"])):
            roles["mask"] = rest[0]  # (ids, mask)
        elif len(rest) == 1:
            roles["labels"], tuple_labels = rest[0], True
        elif len(rest) >= 2:
            first = _tensor(named["[0]"])
            mask_field = next((n for n in rest if _looks_like_mask(_tensor(named[n]), first)), None)
            if mask_field is not None:
                roles["mask"] = mask_field
                rest.remove(mask_field)
            roles["labels"] = rest[-1]  # (ids, mask, labels), (ids, mask, token_type_ids, labels)
    else:
        raise UserCodeError("batch", f"batch {index} of `{spec}` is a {type(raw).__name__}: expected a mapping "
                            "(input_ids, attention_mask, labels, ...), a tuple (x, y), a tensor of ids or lists of "
                            "token ids")
    if "ids" not in roles:
        raise UserCodeError("batch", f"batch {index} of `{spec}` has no token-id field (looked for "
                            f"{', '.join(_ID_NAMES)}; its fields are {', '.join(sorted(named))}): name it with "
                            "`fields = { ids = \"...\" }` in [tool.tlint.verify]")
    numeric: dict[str, torch.Tensor] = {}
    for name, value in named.items():
        tensor = _tensor(value)
        if torch.is_tensor(tensor):
            numeric[name] = tensor
    ids = _tensor(named[roles["ids"]])
    keep, note = None, ""
    if isinstance(ids, list):  # unpadded lists of token ids: pad here, the lengths are the mask
        pad = options.pad_token_id if options.pad_token_id is not None else 0
        width = max(len(row) for row in ids)
        keep = torch.tensor([[True] * len(row) + [False] * (width - len(row)) for row in ids])
        ids = torch.tensor([list(row) + [pad] * (width - len(row)) for row in ids])
        note = "unpadded lists: the lengths serve as the mask"
    if not torch.is_tensor(ids) or ids.is_complex() or ids.dim() > 2:
        raise UserCodeError("batch", f"`{roles['ids']}` in batch {index} of `{spec}` is not a batch of token ids "
                            f"(a {type(named[roles['ids']]).__name__}); name the ids field with `fields = "
                            "{ ids = \"...\" }` in [tool.tlint.verify]")
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    ids = torch.nan_to_num(ids.detach().cpu().double(), nan=-1).long() if ids.is_floating_point() \
        else ids.detach().cpu().long()
    if "mask" in roles and keep is None:
        mask = _tensor(named[roles["mask"]])
        if torch.is_tensor(mask):
            mask = mask.detach().cpu()
            if mask.dim() == 1:
                mask = mask.unsqueeze(0)
            if mask.dtype == torch.bool and "pad" in roles["mask"]:
                keep, note = ~mask, f"`{roles['mask']}` read as True = padding (ignore)"
            else:
                keep = mask != 0
            if ids is not None and keep.shape != ids.shape:
                keep = None
    labels = _tensor(named[roles["labels"]]) if "labels" in roles else None
    labels = labels.detach().cpu() if torch.is_tensor(labels) else None
    if labels is not None and labels.dim() == 1 and ids is not None and ids.shape[0] == 1 and labels.shape[0] > 1:
        labels = labels.unsqueeze(0)
    return Batch(ids, keep, labels, numeric, roles, tuple_labels, note)


def _looks_like_mask(tensor: Any, ids: Any) -> bool:
    if not torch.is_tensor(tensor) or not torch.is_tensor(ids) or tensor.shape != ids.shape:
        return False
    return tensor.dtype == torch.bool or bool(((tensor == 0) | (tensor == 1)).all())


# --- the checks ------------------------------------------------------------------------

def _entry(check: str, loader: str, status: str, figure: float | None, unit: str, detail: str,
           field_: str | None = None, extra: dict | None = None) -> dict[str, Any]:
    rules = checked_rules()[check]
    return {"check": check, "loader": loader, "status": status, "rule": rules[0] if rules else None,
            "rules": list(rules),
            "figure": figure, "unit": unit, "field": field_, "detail": detail, "extra": extra or {}}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


@dataclass
class _Facts:
    pad_id: int | None
    pad_source: str
    eos_id: int | None
    shift: int | None = None


def _checks(drawn: Drawn, loader: str, options: DataOptions) -> list[dict[str, Any]]:
    batches = drawn.batches
    facts = _Facts(*_pad_id(drawn, options), _eos_id(drawn, options))
    out = [_nan_inf(batches, loader), _mask_pad(batches, loader, facts), _pad_ratio(batches, loader, facts)]
    alignment = _label_alignment(batches, loader, options, facts)
    out += [alignment, _label_pad(batches, loader, facts), _eos_masked(batches, loader, facts),
            _lengths(batches, loader, facts)]
    if loader == "train":  # evaluation reads in order on purpose
        out.append(_loader_order(drawn.order, loader))
    return out


def _pad_id(drawn: Drawn, options: DataOptions) -> tuple[int | None, str]:
    if options.pad_token_id is not None:
        return options.pad_token_id, "configured"
    tok_pad = getattr(drawn.tokenizer, "pad_token_id", None)
    if isinstance(tok_pad, int):
        return tok_pad, "the loader's tokenizer"
    seen: Counter[int] = Counter()
    for b in drawn.batches:
        if b.ids is not None and b.keep is not None:
            seen.update(b.ids[~b.keep].tolist())
    if seen:
        return seen.most_common(1)[0][0], "the token at masked positions"
    return None, "unknown"


def _eos_id(drawn: Drawn, options: DataOptions) -> int | None:
    if options.eos_token_id is not None:
        return options.eos_token_id
    tok_eos = getattr(drawn.tokenizer, "eos_token_id", None)
    return tok_eos if isinstance(tok_eos, int) else None


def _nan_inf(batches: list[Batch], loader: str) -> dict[str, Any]:
    per_field: dict[str, list[int]] = {}
    bad_batches = 0
    for b in batches:
        bad = False
        for name, tensor in b.numeric.items():
            if not (tensor.is_floating_point() or tensor.is_complex()):
                continue
            counts = per_field.setdefault(name, [0, 0, 0])
            nan, inf = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
            if nan or inf:
                counts[0] += 1
                counts[1] += nan
                counts[2] += inf
                bad = True
        bad_batches += bad
    if not per_field:
        return _entry("nan-inf", loader, "pass", 0, "batches with a non-finite value",
                      "no floating-point field (integer ids and masks cannot hold NaN/Inf)")
    worst = max(per_field, key=lambda n: per_field[n][0])
    table = {n: {"batches": c[0], "nan": c[1], "inf": c[2]} for n, c in sorted(per_field.items())}
    if bad_batches:
        parts = [f"`{n}`: {c[0]} of {len(batches)} batches ({c[1]} NaN, {c[2]} Inf)"
                 for n, c in sorted(per_field.items()) if c[0]]
        return _entry("nan-inf", loader, "fail", bad_batches, "batches with a non-finite value",
                      "; ".join(parts) + ": clean or impute the data (dropna/fillna/nan_to_num) before it reaches "
                      "a tensor", worst, {"per_field": table})
    return _entry("nan-inf", loader, "pass", 0, "batches with a non-finite value",
                  f"floating-point fields {', '.join(f'`{n}`' for n in sorted(per_field))} are finite",
                  None, {"per_field": table})


def _mask_pad(batches: list[Batch], loader: str, facts: _Facts) -> dict[str, Any]:
    unit = "positions with mask 1 on a pad token or 0 on a real one"
    # (batches with ids and a mask: mypy does not narrow the list by its filter)
    masked: list[_Masked] = [b for b in batches if b.ids is not None and b.keep is not None]  # type: ignore[misc]
    if not masked:
        return _entry("mask-pad-agreement", loader, "skip", None, unit, "the batches carry no attention mask")
    if facts.pad_id is None:
        return _entry("mask-pad-agreement", loader, "skip", None, unit, "the pad token id is unknown: set "
                      "`pad-token-id`")
    check_ones = facts.pad_id != facts.eos_id  # pad == EOS: a real EOS is a pad-id token with mask 1
    ones = sum(int((b.keep & (b.ids == facts.pad_id)).sum()) for b in masked) if check_ones else 0
    zeros = sum(int((~b.keep & (b.ids != facts.pad_id)).sum()) for b in masked)
    total = sum(b.ids.numel() for b in masked)
    field_ = masked[0].names.get("mask")
    note = "" if check_ones else "; pad id = EOS id, so only mask 0 on real tokens is counted"
    note += f"; {masked[0].mask_note}" if masked[0].mask_note else ""
    detail = (f"{ones} positions with mask 1 on the pad token {facts.pad_id} ({facts.pad_source}), {zeros} with "
              f"mask 0 on a real token, of {total}{note}")
    status = "fail" if ones or zeros else "pass"
    if status == "fail":
        detail += ": the mask and the padding disagree, so the model attends to padding or ignores real tokens"
    return _entry("mask-pad-agreement", loader, status, ones + zeros, unit, detail, field_)


def _pad_positions(b: Batch, facts: _Facts) -> torch.Tensor | None:
    if b.ids is None:
        return None
    if b.keep is not None:
        return ~b.keep
    if facts.pad_id is not None and facts.pad_id != facts.eos_id:
        return b.ids == facts.pad_id
    return None


def _pad_ratio(batches: list[Batch], loader: str, facts: _Facts) -> dict[str, Any]:
    unit = "share of positions that are padding"
    ratios, pads, total = [], 0, 0
    for b in batches:
        pad = _pad_positions(b, facts)
        if pad is None:
            continue
        ratios.append(round(float(pad.float().mean()), 4) if pad.numel() else 0.0)
        pads += int(pad.sum())
        total += pad.numel()
    if not total:
        return _entry("pad-ratio", loader, "skip", None, unit, "no attention mask and no known pad id (or pad id = "
                      "EOS id): padding cannot be told apart; set `pad-token-id`")
    overall = pads / total
    worst = max(range(len(ratios)), key=ratios.__getitem__)
    detail = (f"overall {_pct(overall)}; per batch {_pct(min(ratios))} to {_pct(max(ratios))} (highest: batch "
              f"{worst})")
    if overall > PAD_RATIO_LIMIT:
        detail += (f", above {_pct(PAD_RATIO_LIMIT)}: most compute goes to padding; pad each batch to its longest "
                   "sequence (dynamic padding, e.g. DataCollatorWithPadding) and bucket sequences of similar length "
                   "(group_by_length=True or a length-grouped sampler)")
    return _entry("pad-ratio", loader, "fail" if overall > PAD_RATIO_LIMIT else "pass", round(overall, 4), unit,
                  detail, None, {"per_batch": ratios})


if TYPE_CHECKING:
    class _TokenLabelled(Batch):
        """A batch with per-token labels (`_token_labels`)."""

        ids: torch.Tensor
        labels: torch.Tensor

    class _Masked(Batch):
        """A batch with ids and a mask."""

        ids: torch.Tensor
        keep: torch.Tensor


def _token_labels(b: Batch) -> TypeGuard[_TokenLabelled]:
    return b.ids is not None and b.labels is not None and b.labels.shape == b.ids.shape and not \
        b.labels.is_floating_point()


def _shift_rates(batches: Sequence[Batch], facts: _Facts) -> dict[int, float]:
    rates = {}
    for k in (0, 1, 2):
        hit = seen = 0
        for b in batches:
            if not _token_labels(b) or b.ids.shape[1] <= k:
                continue
            length = b.ids.shape[1]
            labels, target = b.labels[:, : length - k], b.ids[:, k:]
            valid = labels != IGNORE_INDEX
            pad = _pad_positions(b, facts)
            if pad is not None:
                valid &= ~pad[:, k:]
            hit += int((valid & (labels == target)).sum())
            seen += int(valid.sum())
        if seen:
            rates[k] = hit / seen
    return rates


def _label_alignment(batches: list[Batch], loader: str, options: DataOptions, facts: _Facts) -> dict[str, Any]:
    unit = "positions the labels are shifted by (label at t = token t + shift)"
    with_labels = [b for b in batches if _token_labels(b)]
    if not with_labels:
        return _entry("label-alignment", loader, "skip", None, unit, "no per-token integer labels of the inputs' "
                      "shape (sequence-level or no labels)")
    field_ = with_labels[0].names.get("labels")
    rates = _shift_rates(with_labels, facts)
    found = [k for k, r in sorted(rates.items()) if r >= 0.9]
    shown = ", ".join(f"shift {k}: {_pct(r)}" for k, r in sorted(rates.items()))
    if not found:
        return _entry("label-alignment", loader, "skip", None, unit, f"the labels match the inputs at no shift of 0, "
                      f"1 or 2 ({shown}): not language-model labels", field_)
    shift = facts.shift = found[0]
    if options.causal is False:
        return _entry("label-alignment", loader, "skip", shift, unit, f"not a causal LM (`causal = false`); labels "
                      f"match the inputs at shift {shift}", field_)
    tuple_style = with_labels[0].tuple_labels
    if tuple_style:
        ok = shift in (0, 1)
        detail = {0: "(x, y) with y equal to x: the model must shift internally",
                  1: "(x, y) with y = x shifted by one: targets ready for a model that does not shift (nanoGPT "
                     "convention)",
                  2: "(x, y) with y = x shifted by two: a shift too many, the model learns the token after next"}[shift]
    else:
        ok = shift == 0
        detail = {0: "labels equal the inputs: the model shifts them (the Hugging Face convention)",
                  1: "labels are the inputs shifted by one: a model that shifts internally (Hugging Face "
                     "*ForCausalLM/*LMHeadModel) shifts again and learns the token after next; pass the unshifted "
                     "ids as labels",
                  2: "labels are the inputs shifted by two: shifted twice before the model"}[shift]
    return _entry("label-alignment", loader, "pass" if ok else "fail", shift, unit, f"{detail} ({shown})", field_,
                  {"rates": {str(k): r for k, r in rates.items()}})


def _default_shift(batches: Sequence[Batch], facts: _Facts) -> int:
    if facts.shift is not None:
        return facts.shift
    return 1 if batches and batches[0].tuple_labels else 0


def _label_pad(batches: list[Batch], loader: str, facts: _Facts) -> dict[str, Any]:
    unit = "pad positions whose label is not -100"
    with_labels = [b for b in batches if _token_labels(b)]
    if not with_labels:
        return _entry("label-pad-ignored", loader, "skip", None, unit, "no per-token labels")
    k = _default_shift(with_labels, facts)
    bad = pads = 0
    for b in with_labels:
        pad = _pad_positions(b, facts)
        if pad is None:
            return _entry("label-pad-ignored", loader, "skip", None, unit, "padding cannot be told apart (no mask, "
                          "pad id unknown or equal to the EOS id)")
        length = b.ids.shape[1]
        target_pad = pad[:, k:]
        labels = b.labels[:, : length - k]
        pads += int(target_pad.sum())
        bad += int((target_pad & (labels != IGNORE_INDEX)).sum())
    field_ = with_labels[0].names.get("labels")
    if not pads:
        return _entry("label-pad-ignored", loader, "pass", 0, unit, "no padding in the scanned batches", field_)
    detail = f"{bad} of {pads} pad positions carry a label other than -100"
    if bad:
        detail += ": the loss trains the model to predict padding; set labels[labels == pad_id] = -100 (or mask " \
                  "by attention_mask)"
    return _entry("label-pad-ignored", loader, "fail" if bad else "pass", bad, unit, detail, field_)


def _eos_masked(batches: list[Batch], loader: str, facts: _Facts) -> dict[str, Any]:
    unit = "real EOS tokens labelled -100"
    if facts.eos_id is None:
        return _entry("eos-masked", loader, "skip", None, unit, "the EOS token id is unknown: set `eos-token-id`")
    with_labels = [b for b in batches if _token_labels(b)]
    if not with_labels:
        return _entry("eos-masked", loader, "skip", None, unit, "no per-token labels")
    k = _default_shift(with_labels, facts)
    masked = total = 0
    for b in with_labels:
        length = b.ids.shape[1]
        eos = b.ids[:, k:] == facts.eos_id
        if b.keep is not None:
            eos &= b.keep[:, k:]
        total += int(eos.sum())
        masked += int((eos & (b.labels[:, : length - k] == IGNORE_INDEX)).sum())
    field_ = with_labels[0].names.get("labels")
    if not total:
        return _entry("eos-masked", loader, "skip", None, unit, f"no EOS token (id {facts.eos_id}) at a real "
                      "position in the scanned batches", field_)
    detail = f"{masked} of {total} real EOS tokens (id {facts.eos_id}) are labelled -100"
    if masked:
        detail += ": the model never learns to stop; give padding its own token (add_special_tokens({'pad_token': " \
                  "...})) or mask labels by attention_mask, not by the pad id"
    return _entry("eos-masked", loader, "fail" if masked else "pass", masked, unit, detail, field_)


def _lengths(batches: list[Batch], loader: str, facts: _Facts) -> dict[str, Any]:
    lengths: list[int] = []
    padded = 0
    for b in batches:
        if b.ids is None:
            continue
        pad = _pad_positions(b, facts)
        real = (~pad).sum(dim=1) if pad is not None else torch.full((b.ids.shape[0],), b.ids.shape[1])
        lengths += [int(x) for x in real]
        padded = max(padded, b.ids.shape[1])
    unit = "mean real tokens per sample"
    if not lengths:
        return _entry("length-histogram", loader, "skip", None, unit, "no token ids")
    lengths.sort()
    low, high = lengths[0], lengths[-1]
    n_bins = min(10, high - low + 1)
    width = max(1, -(-(high - low + 1) // n_bins))
    bins = []
    for start in range(low, high + 1, width):
        end = min(start + width - 1, high)
        bins.append([start, end, sum(start <= x <= end for x in lengths)])
    mean = sum(lengths) / len(lengths)
    detail = (f"min {low}, median {lengths[len(lengths) // 2]}, max {high} over {len(lengths)} samples; longest "
              f"padded batch {padded}")
    return _entry("length-histogram", loader, "pass", round(mean, 2), unit, detail, None, {"bins": bins})


def _observed(drawn: Drawn) -> dict[str, Any]:
    """Vocabulary size, pad id and padding side: the tokenizer's when the loader exposes one,
    else what the batches show."""
    tok = drawn.tokenizer
    info: dict[str, Any] = {}
    if tok is not None:
        try:
            info["vocab size"] = len(tok)
        except TypeError:
            info["vocab size"] = getattr(tok, "vocab_size", None)
        info["pad id"] = getattr(tok, "pad_token_id", None)
        info["padding side"] = getattr(tok, "padding_side", None)
        info["checkpoint"] = getattr(tok, "name_or_path", None)
        return {k: v for k, v in info.items() if v not in (None, "")}
    pads: Counter = Counter()
    sides: Counter = Counter()
    for b in drawn.batches:
        if b.ids is None or b.keep is None:
            continue
        pads.update(b.ids[~b.keep].tolist())
        for row in b.keep:
            if not row.all() and row.any():
                sides["left" if not row[0] else "right" if not row[-1] else "inside"] += 1
    if pads:
        info["pad id"] = pads.most_common(1)[0][0]
    if sides:
        info["padding side"] = sides.most_common(1)[0][0]
    return info


def _loader_order(order: dict[str, Any] | None, loader: str) -> dict[str, Any]:
    """Batch order vs dataset order: the train loader draws indices 0, 1, 2, ... in turn, and
    that order follows the samples' length, label or source (a pre-shuffled dataset read in
    order passes)."""
    unit = "samples drawn in dataset order when that order follows length, label or source"
    if order is None or "skip" in order:
        return _entry("loader-order", loader, "skip", None, unit,
                      order["skip"] if order else "the loader's sampling order was not recorded")
    indices: list[int] = order["indices"]
    in_order = indices == list(range(len(indices)))
    runs = sum(1 for a, b in zip(indices, indices[1:]) if b == a + 1)
    shown = ", ".join(str(i) for i in indices[:8]) + (", ..." if len(indices) > 8 else "")
    extra = {"indices": indices[:64], "sampler": order["sampler"]}
    if not in_order:
        return _entry("loader-order", loader, "pass", 0, unit,
                      f"the first batches draw dataset items {shown} ({order['sampler']}; {runs} of "
                      f"{len(indices) - 1} consecutive pairs in order): not the dataset's order", extra=extra)
    structure = order.get("structure") or {}
    follows, measured = structure_findings(structure)
    spread = len(structure.get("positions", []))
    extra["structure"] = {k: structure[k] for k in ("positions", "lengths", "labels", "sources", "concat", "note")
                          if k in structure}
    read = f"the {len(indices)} samples of the first batches are dataset items {shown} in turn ({order['sampler']})"
    over = f"{spread} items spread over the dataset" if spread else "no dataset item"
    if follows:
        return _entry("loader-order", loader, "fail", len(indices), unit,
                      f"{read}, and that order follows the samples' {'; '.join(follows)} (over {over}): every "
                      "epoch sees the same sequence of batches, each drawn from one part of that order; pass "
                      "shuffle=True (or a random sampler)", extra=extra)
    seen = "; ".join(measured) if measured else "no length, label or source to compare"
    note = f"; {structure['note']}" if structure.get("note") else ""
    return _entry("loader-order", loader, "pass", 0, unit,
                  f"{read}, but that order follows no length, label or source ({seen}; over {over}{note}): a "
                  "dataset shuffled beforehand may be read in order", extra=extra)


def _tokenizer_agreement(train: Drawn, evaluation: Drawn | None) -> dict[str, Any]:
    unit = "settings that differ between the train and eval loaders"
    if evaluation is None:
        return _entry("tokenizer-agreement", "train+eval", "skip", None, unit, "no `eval-dataloader` configured")
    a, b = _observed(train), _observed(evaluation)
    shared = [k for k in a if k in b]
    if not shared:
        return _entry("tokenizer-agreement", "train+eval", "skip", None, unit, "neither the loaders' tokenizers nor "
                      "their padding show a comparable setting")
    differ = [k for k in shared if a[k] != b[k]]
    if differ:
        detail = "; ".join(f"{k}: {a[k]!r} (train) vs {b[k]!r} (eval)" for k in differ) + \
            ": evaluation sees differently tokenized or padded inputs than training"
    else:
        detail = "same " + ", ".join(f"{k} ({a[k]!r})" for k in shared)
    source = "tokenizers" if train.tokenizer is not None and evaluation.tokenizer is not None else "batches"
    return _entry("tokenizer-agreement", "train+eval", "fail" if differ else "pass", len(differ), unit,
                  f"{detail} (from the {source})")
