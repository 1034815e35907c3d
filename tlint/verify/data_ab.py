"""The data A/B probe `data-ab` (README "tlint verify", the data A/B probe): is the data
pipeline at fault? The model is trained a fixed number of steps from the same initial weights
twice, once on batches from the user's loader as they come and once on the same batches
cleaned, and both runs are scored on the same cleaned evaluation batches. When the cleaned run
ends clearly better, the data is what holds training back, and the data scan's failing checks
(the same functions as `tlint scan-data`, `tlint/verify/scan_data.py`, run on the same batches)
say what to fix.

Cleaning (`clean`): rows with a NaN/Inf in any floating field are dropped; the attention mask
is recomputed from the pad id (with pad id = EOS id, the first pad-id token after the text is
the real EOS); labels are re-derived from the ids, -100 at padding; an eval loader whose padding
side or pad id differs from the train loader's is re-padded the train loader's way (a different
vocabulary cannot be mapped: its batches are replaced by held-out train batches).

What a run trains on: a causal LM whose output is per-position logits over the vocabulary
learns the next token (labels of a mapping batch are shifted by the loss, the Hugging Face
convention; the `y` of an `(x, y)` tuple is already shifted, nanoGPT's); a model whose output
is (batch, classes) learns per-sample integer labels. A float field of one value per sample
named like `weight` weights each sample's loss (so a NaN there reaches the loss, as it does
in the user's training). A batch without labels trains the causal LM on its ids, with the
loader's mask deciding what is ignored.

Figures: `STEPS` optimiser steps per run (the configured optimiser, its learning rate
replaced by `lr` when given, else AdamW at 1e-3), dropout off, the batches cycled in an order
drawn from the seed; two seeds (`ctx.seed`, `ctx.seed + 1`), each running both arms from the
same initial weights. The figure is the share of the cleaned run's eval-loss drop that the
user-data run misses, (user - cleaned) / (initial - cleaned), the smaller of the two seeds'
(1.0 when the user-data run diverges); the probe fails when it exceeds both `THRESHOLD` (25 %)
and `NOISE_FACTOR` (3) times the seed-to-seed spread of the final eval losses in the same
unit. A pass needs its positive control (`DataABProbe.control`: the cleaned batches with a
data bug planted must miss more than the same limit), else the probe skips as inconclusive.
When cleaning changes nothing, one run is trained and the probe passes with 0.

The eval batches: the first `EVAL_BATCHES` of `eval-dataloader`, else the last third of the
first `TRAIN_BATCHES + EVAL_BATCHES` train batches (at most `EVAL_BATCHES`), held out."""

from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from tlint.verify.probes import Probe, ProbeContext, ProbeResult, dense
from tlint.verify.training_probes import (
    TrainingSettings,
    _trainable,
    _Weights,
    make_optimizer,
    settings_of,
)

STEPS = 40           # optimiser steps of each run
EVAL_EVERY = 5       # the eval loss is measured at step 0, every EVAL_EVERY steps and at the end
TRAIN_BATCHES = 8    # at most this many batches of the train loader are trained on
EVAL_BATCHES = 4     # and at most this many scored
THRESHOLD = 0.25     # the user data must lose more than this share of what the cleaned run learned ...
NOISE_FACTOR = 3.0   # ... and more than this many times the seed-to-seed spread (same unit)
MIN_LEARNED = 0.01   # the cleaned run must lower the eval loss by 1 % of its start, or nothing is compared
DEFAULT_LR = 1e-3    # AdamW's learning rate when no optimiser and no lr is configured
IGNORE = -100
_WEIGHT_WORDS = ("weight",)


class Unusable(Exception):
    """The batches or the model's output are not something the probe can train on: skip."""


@dataclass
class Rows:
    """One batch as the probe trains on it."""

    ids: torch.Tensor                    # (B, L) long
    keep: torch.Tensor | None            # (B, L) bool, True = real token; None: no mask passed
    labels: torch.Tensor | None          # (B, L) long (next token) or (B,) (classification); None: from the ids
    weights: torch.Tensor | None = None  # (B,) float sample weights
    shifted: bool = False                # labels already shifted by one (an `(x, y)` tuple)

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class Cleaning:
    """What cleaning changed, counted over the batches the runs use."""

    rows: int = 0
    rows_dropped: int = 0
    dropped_by_field: dict[str, int] = field(default_factory=dict)
    mask_changed: int = 0          # positions whose mask value changed
    targets_changed: int = 0       # positions whose training target changed
    eval_rows_dropped: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.rows_dropped or self.mask_changed or self.targets_changed)

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "rows_dropped": self.rows_dropped, "dropped_by_field": self.dropped_by_field,
                "mask_changed": self.mask_changed, "targets_changed": self.targets_changed,
                "eval_rows_dropped": self.eval_rows_dropped, "notes": self.notes}


@dataclass
class Facts:
    pad: int | None
    eos: int | None
    side: str


@dataclass
class Run:
    """One arm of one seed."""

    train_loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    diverged_at: int | None = None
    stopped: str = ""

    @property
    def final(self) -> float:
        if self.diverged_at is not None or not self.eval_loss:
            return math.inf
        return self.eval_loss[-1]

    def to_json(self) -> dict[str, Any]:
        return {"train_loss": [_num(v) for v in self.train_loss], "eval_steps": self.eval_steps,
                "eval_loss": [_num(v) for v in self.eval_loss], "final_eval_loss": _num(self.final),
                "diverged_at": self.diverged_at}


def _num(value: float) -> float | None:
    """A figure for JSON: 4 significant digits; None when not finite."""
    return float(f"{value:.4g}") if math.isfinite(value) else None


# --- reading the loader ----------------------------------------------------------------------

def _data_options(ctx: ProbeContext, data: dict[str, Any]):
    from tlint.verify.data import DataOptions

    known = set(DataOptions.__dataclass_fields__)
    return DataOptions(**{k: v for k, v in data.items() if k in known})


def _draw(ctx: ProbeContext, data: dict[str, Any]):
    """The train (and eval) loaders' first batches, normalised as the data scan does, drawn
    under the run's seed (a shuffling DataLoader draws the same batches every time)."""
    from tlint.verify.loading import import_roots
    from tlint.verify.scan_data import _draw as draw

    options = _data_options(ctx, data)
    roots = import_roots(options)
    for entry in reversed([str(p) for p in roots]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    random.seed(ctx.seed)
    torch.manual_seed(ctx.seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(ctx.seed)
    train = draw(options.dataloader, "dataloader", options, roots)
    evaluation = draw(options.eval_dataloader, "eval-dataloader", options, roots) if options.eval_dataloader else None
    return options, train, evaluation


def scan_checks(options, train, evaluation) -> list[dict[str, Any]]:
    """The data scan's checks on the drawn batches (`tlint scan-data`'s own functions)."""
    from tlint.verify.scan_data import _checks, _tokenizer_agreement

    checks = _checks(train, "train", options)
    if evaluation is not None:
        checks += _checks(evaluation, "eval", options)
    checks.append(_tokenizer_agreement(train, evaluation))
    return checks


def _facts(drawn, options) -> Facts:
    from tlint.verify.scan_data import _eos_id, _observed, _pad_id

    pad, _ = _pad_id(drawn, options)
    side = options.padding_side or _observed(drawn).get("padding side")
    return Facts(pad, _eos_id(drawn, options), side if side in ("left", "right") else "right")


# --- cleaning ---------------------------------------------------------------------------------

def recompute_keep(ids: torch.Tensor, facts: Facts) -> torch.Tensor | None:
    """The mask the pad id implies: True at real tokens. With pad id = EOS id, only the run of
    pad-id tokens on the padding side is padding, and on the right the first of that run is the
    sequence's real EOS. None when the pad id is unknown."""
    if facts.pad is None:
        return None
    is_pad = ids == facts.pad
    if facts.eos is None or facts.eos != facts.pad:
        return ~is_pad
    if facts.side == "left":
        run = is_pad.long().cumprod(dim=1).bool()          # the leading run of pad ids
        return ~run
    run = is_pad.flip(1).long().cumprod(dim=1).flip(1).bool()  # the trailing run
    first = run & ~torch.cat([torch.zeros_like(run[:, :1]), run[:, :-1]], dim=1)
    return ~(run & ~first)


def _bad_rows(batch, size: int, counts: dict[str, int]) -> torch.Tensor:
    """Rows with a NaN/Inf in any floating field (one value or more per row)."""
    bad = torch.zeros(size, dtype=torch.bool)
    for name, tensor in batch.numeric.items():
        if not tensor.is_floating_point() or tensor.dim() == 0 or tensor.shape[0] != size:
            continue
        rows = ~torch.isfinite(tensor.reshape(size, -1)).all(dim=1)
        if rows.any():
            counts[name] = counts.get(name, 0) + int(rows.sum())
            bad |= rows
    return bad


def _weights(batch, size: int) -> torch.Tensor | None:
    for name, tensor in batch.numeric.items():
        if tensor.is_floating_point() and tensor.dim() == 1 and tensor.shape[0] == size \
                and any(word in name.lower() for word in _WEIGHT_WORDS) and name not in batch.names.values():
            return tensor.float()
    return None


def as_rows(batch) -> Rows:
    """A normalised batch (scan_data.Batch) as the user's training sees it."""
    ids = batch.ids
    size = int(ids.shape[0])
    labels = batch.labels
    if labels is not None and labels.is_floating_point():
        raise Unusable(f"the labels `{batch.names.get('labels')}` are floating-point, not class or token ids")
    return Rows(ids, batch.keep, None if labels is None else labels.long(), _weights(batch, size), batch.tuple_labels)


def _repad(ids: torch.Tensor, keep: torch.Tensor, pad: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's real tokens moved to the other side of its padding."""
    out_ids, out_keep = torch.full_like(ids, pad), torch.zeros_like(keep)
    width = ids.shape[1]
    for i in range(ids.shape[0]):
        real = ids[i][keep[i]]
        n = len(real)
        where = slice(0, n) if side == "right" else slice(width - n, width)
        out_ids[i, where], out_keep[i, where] = real, True
    return out_ids, out_keep


def clean(batch, user: Rows, facts: Facts, kind: str, cleaning: Cleaning, *, evaluation: bool = False,
          target: Facts | None = None) -> Rows | None:
    """The cleaned rows of one batch (None when every row is dropped). `target`: the train
    loader's padding, which an eval batch is re-padded to."""
    size = user.size
    bad = _bad_rows(batch, size, cleaning.dropped_by_field if not evaluation else {})
    if evaluation:
        cleaning.eval_rows_dropped += int(bad.sum())
    else:
        cleaning.rows += size
        cleaning.rows_dropped += int(bad.sum())
    if bad.all():
        return None
    good = ~bad
    ids = user.ids[good]
    user_keep = None if user.keep is None else user.keep[good]
    keep = recompute_keep(ids, facts)
    if keep is None:
        keep = user_keep
    if target is not None and keep is not None and target.pad is not None \
            and (target.side != facts.side or target.pad != facts.pad):
        ids, keep = _repad(ids, keep, target.pad, target.side)
    weights = None if user.weights is None else user.weights[good]
    if kind == "classification":
        assert user.labels is not None  # (checked: classification needs labels)
        labels = user.labels[good]
    else:
        labels = ids if keep is None else ids.masked_fill(~keep, IGNORE)
    rows = Rows(ids, keep, labels, weights, shifted=False)
    if not evaluation:
        if user_keep is not None and keep is not None:
            cleaning.mask_changed += int((user_keep != keep).sum())
        elif (user_keep is None) != (keep is None):
            cleaning.mask_changed += int(ids.numel() - (keep if keep is not None else user_keep).sum())  # type: ignore[union-attr]
        if kind == "next-token":
            before = _targets(Rows(ids, user_keep, None if user.labels is None else user.labels[good], None,
                                   user.shifted))
            cleaning.targets_changed += int((before != _targets(rows)).sum())
    return rows


def _targets(rows: Rows) -> torch.Tensor:
    """The next-token target of positions 0 .. L-2 (IGNORE where none)."""
    if rows.labels is None:  # no labels: the ids, the mask deciding what is ignored
        labels = rows.ids if rows.keep is None else rows.ids.masked_fill(~rows.keep, IGNORE)
        return labels[:, 1:]
    if rows.shifted:
        return rows.labels[:, :-1]
    return rows.labels[:, 1:]


# --- the task ---------------------------------------------------------------------------------

class Task:
    """How the model is called on rows and what its loss is."""

    def __init__(self, ctx: ProbeContext, kind: str, classes: int) -> None:
        self.ctx, self.kind, self.classes = ctx, kind, classes

    def output(self, rows: Rows) -> torch.Tensor:
        ctx = self.ctx
        keep = rows.keep.to(ctx.device) if rows.keep is not None and ctx.caller.has_mask else None
        return dense(ctx.caller(ctx.model, rows.ids.to(ctx.device), keep)).float()

    def per_sample(self, rows: Rows) -> tuple[torch.Tensor, torch.Tensor]:
        """(each sample's summed loss, its number of scored targets)."""
        out = self.output(rows)
        if self.kind == "classification":
            assert rows.labels is not None
            labels = rows.labels.to(out.device)
            return F.cross_entropy(out, labels, reduction="none"), torch.ones(len(labels), device=out.device)
        if rows.shifted:
            assert rows.labels is not None
            logits, targets = out, rows.labels.to(out.device)
        else:
            logits = out[:, :-1]
            labels = rows.labels if rows.labels is not None else (
                rows.ids if rows.keep is None else rows.ids.masked_fill(~rows.keep, IGNORE))
            targets = labels[:, 1:].to(out.device)
        token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE,
                                reduction="none").reshape(targets.shape)
        return token.sum(dim=1), (targets != IGNORE).sum(dim=1).float()

    def train_loss(self, rows: Rows) -> torch.Tensor:
        """The mean loss over scored targets; with sample weights, each sample's mean loss
        weighted (a NaN weight gives a NaN loss, as in the user's training)."""
        total, count = self.per_sample(rows)
        if rows.weights is None:
            return total.sum() / count.sum().clamp_min(1)
        weights = rows.weights.to(total.device)
        scored = count > 0
        per = total / count.clamp_min(1)
        return (weights * per)[scored].sum() / weights[scored].sum()

    def eval_loss(self, batches: list[Rows]) -> float:
        """The unweighted mean loss over every scored target of the eval batches."""
        total = count = 0.0
        with torch.no_grad():
            for rows in batches:
                loss, n = self.per_sample(rows)
                total += float(loss.sum())
                count += float(n.sum())
        return total / count if count else math.nan


def _check_ids(rows: Rows, vocab: int, where: str) -> None:
    low, high = int(rows.ids.min()), int(rows.ids.max())
    if low < 0 or high >= vocab:
        raise Unusable(f"{where} holds token ids from {low} to {high}, outside the model's vocabulary of {vocab}: "
                       "the loader's tokenizer and the model disagree (set `vocab-size`, or check the tokenizer)")


def decide_kind(ctx: ProbeContext, first: Rows) -> tuple[str, int]:
    """('next-token' | 'classification', classes) from the model's output on the first
    batch and its labels; Unusable when neither fits."""
    task = Task(ctx, "next-token", 0)
    with torch.no_grad():
        out = task.output(first)
    shape = tuple(out.shape)
    labels = first.labels
    per_token = out.dim() == 3 and out.shape[:2] == first.ids.shape
    if per_token and out.shape[-1] == ctx.vocab_size:
        if not ctx.causal:
            raise Unusable(f"the model is not causal and its output {shape} is per token: a masked LM's labels "
                           "cannot be re-derived from the ids (set `causal = true` for a causal LM)")
        if labels is not None and labels.shape != first.ids.shape:
            raise Unusable(f"the labels {tuple(labels.shape)} are not per token like the ids "
                           f"{tuple(first.ids.shape)}, and the model's output {shape} is next-token logits")
        return "next-token", ctx.vocab_size
    if out.dim() == 2 and out.shape[0] == first.size and out.shape[1] >= 2:
        if labels is None or labels.shape != (first.size,):
            raise Unusable(f"the model's output {shape} is one prediction per sample, but the batches carry no "
                           "per-sample integer labels (one per row)")
        return "classification", int(out.shape[1])
    raise Unusable(f"the model's output {shape} is neither next-token logits over its vocabulary of "
                   f"{ctx.vocab_size} (batch, seq, vocab) for a causal LM nor (batch, classes) for per-sample labels")


def _check_labels(rows: Rows, kind: str, classes: int, where: str) -> None:
    if rows.labels is None:
        return
    valid = rows.labels[rows.labels != IGNORE]
    if valid.numel() and (int(valid.min()) < 0 or int(valid.max()) >= classes):
        what = "vocabulary" if kind == "next-token" else "classes"
        raise Unusable(f"{where} holds labels from {int(valid.min())} to {int(valid.max())}, outside the model's "
                       f"{what} of {classes} (and not -100)")


# --- the probe --------------------------------------------------------------------------------

NOT_CONFIGURED = ("no `dataloader` configured: set `dataloader = \"pkg.mod:train_loader\"` (and `eval-dataloader`) "
                  "in [tool.tlint.verify], or give --dataloader, so the probe can train on the loader's batches")


class DataABProbe(Probe):
    """Same initial weights, same steps, two training sets: the loader's batches as they come
    and the same batches cleaned (see the module docstring); both scored on the same cleaned
    eval batches under two seeds. Fails when the user-data run misses more than 25 % of the
    cleaned run's eval-loss drop and more than 3x the seed-to-seed spread: the data pipeline is
    at fault, and the data scan's failing checks are named."""

    name = "data-ab"
    tolerance = THRESHOLD
    unit = ("share of the cleaned run's eval-loss drop that the user-data run misses, (user - cleaned) / (initial - "
            "cleaned), smaller of two seeds")

    def run(self, ctx: ProbeContext) -> ProbeResult:
        from tlint.verify.loading import UserCodeError

        data = getattr(ctx, "data", None)
        if not data or not data.get("dataloader"):
            return self.skip(NOT_CONFIGURED)
        if not _trainable(ctx.model):
            return self.skip("the model has no trainable parameter")
        settings = settings_of(ctx)
        started = time.monotonic()
        try:
            options, train, evaluation = _draw(ctx, data)
        except UserCodeError as exc:
            return self.skip(f"could not run: the data loader: {exc}")
        checks = scan_checks(options, train, evaluation)
        failing = [{"check": c["check"], "loader": c["loader"], "rules": c["rules"], "detail": c["detail"],
                    "cleaned": c["check"] in CLEANED_CHECKS} for c in checks if c["status"] == "fail"]
        extra: dict[str, Any] = {"data_checks": failing}
        try:
            with _Weights(ctx.model) as weights:
                ctx.model.eval()  # dropout off: the arms differ only in their data
                return self.compare(ctx, settings, options, train, evaluation, weights, started, extra)
        except Unusable as exc:
            return self.result("skip", None, detail=f"{exc}", **extra)
        except UserCodeError as exc:
            return self.result("skip", None, detail=f"could not run: {exc}", **extra)

    def compare(self, ctx: ProbeContext, settings: TrainingSettings, options, train, evaluation, weights,
                started: float, extra: dict[str, Any]) -> ProbeResult:
        train_facts = _facts(train, options)
        drawn = train.batches[:TRAIN_BATCHES + EVAL_BATCHES]
        user = [as_rows(b) for b in drawn]
        for i, rows in enumerate(user):
            _check_ids(rows, ctx.vocab_size, f"train batch {i}")
        kind, classes = decide_kind(ctx, user[0])
        for i, rows in enumerate(user):
            _check_labels(rows, kind, classes, f"train batch {i}")
        if kind == "classification" and any(r.labels is None or r.labels.shape != (r.size,) for r in user):
            raise Unusable("not every batch carries per-sample labels")
        cleaning = Cleaning()
        notes = cleaning.notes
        eval_source, eval_rows = self.eval_batches(ctx, options, train, evaluation, train_facts, kind, classes,
                                                   cleaning)
        pairs = list(zip(drawn, user))
        if eval_rows is None:  # held-out train batches: the last third of those drawn, at most EVAL_BATCHES
            held = max(1, min(EVAL_BATCHES, len(pairs) // 3)) if len(pairs) >= 2 else 0
            train_part = pairs[: min(TRAIN_BATCHES, len(pairs) - held)]
            eval_part = pairs[len(pairs) - held:] if held else pairs
            if not held:
                notes.append("one train batch and no usable eval loader: scored on that batch itself")
            eval_rows = [r for b, u in eval_part
                         if (r := clean(b, u, train_facts, kind, cleaning, evaluation=True)) is not None]
            eval_source = (f"{len(eval_part)} held-out batch{'es' if len(eval_part) > 1 else ''} of "
                           f"{options.dataloader}, cleaned ({eval_source})")
        else:
            train_part = pairs[:TRAIN_BATCHES]
        if not eval_rows:
            raise Unusable("every evaluation row has a NaN/Inf: nothing to score the runs on")
        user_rows = [u for _, u in train_part]
        cleaned = [r for b, u in train_part if (r := clean(b, u, train_facts, kind, cleaning)) is not None]
        if not cleaned:
            raise Unusable("every training row has a NaN/Inf: the cleaned run has nothing to train on")
        if train_facts.pad is None:
            notes.append("the pad id is unknown (no `pad-token-id`, no tokenizer on the loader, no masked position): "
                         "the loader's mask is kept")
        task = Task(ctx, kind, classes)
        seeds = (ctx.seed, ctx.seed + 1)
        what = ""
        identical = not cleaning.changed
        arms = ("user",) if identical else ("user", "cleaned")
        total_runs = len(arms) * (1 if identical else len(seeds)) + (0 if identical else 1)  # + the control
        budget = started + settings.max_seconds
        runs: dict[tuple[str, int], Run] = {}
        steps = STEPS
        index = 0
        for seed in seeds[: 1 if identical else len(seeds)]:
            for arm in arms:
                weights.reset()
                torch.manual_seed(seed)
                optimizer, what = self.optimizer(ctx, settings)
                remaining = total_runs - index
                deadline = time.monotonic() + (budget - time.monotonic()) / remaining
                order = _order(len(user_rows), steps, seed)
                batches = user_rows if arm == "user" else cleaned
                run = self.train(task, batches, order, eval_rows, optimizer, steps, deadline,
                                 lambda step, i=index, a=arm: settings.progress(
                                     self.name, i * STEPS + step, total_runs * STEPS, a))
                runs[(arm, seed)] = run
                index += 1
                if run.stopped:  # runs of different lengths do not compare
                    return self.result("skip", None, detail=f"max-seconds ({settings.max_seconds:g} s) ran out: the "
                                       f"{arm} run of seed {seed} {run.stopped}; the A/B needs every run to take its "
                                       f"{steps} steps (raise `max-seconds`, or lower the batch sizes)", **extra)
        base = (f"{what}; {steps} steps on {len(user_rows)} train batch{'es' if len(user_rows) > 1 else ''} of "
                f"{options.dataloader}, {kind} loss; scored on {eval_source}")
        extra.update(kind=kind, optimizer=what, steps=steps, seeds=list(seeds[: 1 if identical else 2]),
                     cleaning=cleaning.to_json(), eval_source=eval_source, threshold=THRESHOLD,
                     noise_factor=NOISE_FACTOR)
        first = runs[("user", seeds[0])]
        if identical:
            extra["curves"] = {"user": first.to_json(), "cleaned": first.to_json()}
            extra["runs"] = [{"seed": seeds[0], "user": _num(first.final), "cleaned": _num(first.final),
                              "lost": 0.0}]
            extra.update(initial_eval_loss=_num(first.eval_loss[0]), noise=0.0, lost=0.0)
            note = f"; {'; '.join(notes)}" if notes else ""
            return self.result("pass", 0.0, detail=f"cleaning changed nothing in the {cleaning.rows} training rows "
                               "(no NaN/Inf row, the mask agrees with the pad id, the labels are the ids with "
                               f"padding -100): the cleaned run is the same run; {base}; final eval loss "
                               f"{first.final:.4g}{note}", **extra)
        initial = first.eval_loss[0]  # the same weights and eval batches in every run
        if not math.isfinite(initial):
            raise Unusable(f"the model's eval loss at its initial weights is {initial}: nothing to compare")
        shares: list[float] = []
        per_seed: list[dict[str, Any]] = []
        for seed in seeds:
            u, c = runs[("user", seed)].final, runs[("cleaned", seed)].final
            if not math.isfinite(c):
                raise Unusable(f"the cleaned run diverged too (seed {seed}): the learning rate is unstable here, "
                               "so the data A/B cannot compare (run `--probe warmup-ab`)")
            learned = initial - c
            if learned < MIN_LEARNED * initial:
                raise Unusable(f"the cleaned run barely learned in {steps} steps (seed {seed}: eval loss "
                               f"{initial:.4g} -> {c:.4g}), so the A/B has nothing to compare: raise `lr` (or the "
                               f"optimiser's learning rate); {base}")
            share = float(f"{min(1.0, (u - c) / learned) if math.isfinite(u) else 1.0:.4g}")
            shares.append(share)
            per_seed.append({"seed": seed, "user": _num(u), "cleaned": _num(c), "lost": share})
        noise = _spread([runs[("cleaned", s)].final for s in seeds], [runs[("user", s)].final for s in seeds],
                        initial)
        figure = min(shares)
        limit = max(THRESHOLD, NOISE_FACTOR * noise)
        self.tolerance = float(f"{limit:.4g}")
        extra.update(initial_eval_loss=_num(initial), noise=_num(noise), lost=_num(figure), runs=per_seed,
                     curves={"user": first.to_json(), "cleaned": runs[("cleaned", seeds[0])].to_json()})
        changed = self.describe(cleaning)
        figures = "; ".join(f"seed {seed}: user data {self.loss_text(runs[('user', seed)])}, cleaned "
                            f"{runs[('cleaned', seed)].final:.4g} (the user-data run misses {share:.0%} of the "
                            "cleaned run's drop)" for seed, share in zip(seeds, shares))
        limits = (f"fails above {THRESHOLD:.0%} and {NOISE_FACTOR:g}x the seed spread {noise:.1%} "
                  f"(seeds {seeds[0]}, {seeds[1]})")
        note = f"; {'; '.join(notes)}" if notes else ""
        detail = f"{base}; cleaning: {changed}; eval loss {initial:.4g} at step 0, at the end {figures}; {limits}{note}"
        if figure > limit:
            fixed, other = split_checks(failing_checks(extra))
            named = (f"{_names(fixed)} (the cleaning fixes these)" if fixed
                     else "none of those the cleaning fixes (it changed what no check flags)")
            if other:
                named += f"; also failing: {_names(other)}"
            return self.result("fail", figure, detail=f"the data pipeline is at fault: the cleaned run ends clearly "
                               f"better on the same cleaned eval batches (the user-data run misses {figure:.0%} of its "
                               f"eval-loss drop); the data scan's failing checks: {named}; {detail}", **extra)
        control = self.control(task, cleaned, kind, eval_rows, ctx, settings, weights, seeds[0], steps, budget,
                               runs[("cleaned", seeds[0])], initial, limit, total_runs)
        extra["control"] = control
        if not control["caught"]:
            return self.result("skip", None, detail=f"inconclusive: the cleaned data does not train clearly better, "
                               f"but neither would the data with a planted bug ({control['detail']}), so this A/B "
                               f"cannot see a data bug with this model, optimiser and step count (raise `lr`); "
                               f"{detail}", **extra)
        return self.result("pass", figure, detail=f"the cleaned data does not train clearly better: {detail}; "
                           f"control: {control['detail']}", **extra)

    def control(self, task: Task, cleaned: list[Rows], kind: str, eval_rows: list[Rows], ctx: ProbeContext,
                settings: TrainingSettings, weights, seed: int, steps: int, budget: float, reference: Run,
                initial: float, limit: float, total_runs: int) -> dict[str, Any]:
        """The positive control of a pass: the cleaned batches with a data bug planted (next
        token: the labels shifted one position further, so the loss's own shift makes the model
        learn the token after next, label-alignment's bug; per-sample labels: each row given the
        next row's label), trained like the cleaned run of the first seed. Caught when it misses
        more than the probe's limit of the cleaned run's eval-loss drop."""
        planted = []
        for rows in cleaned:
            assert rows.labels is not None  # (the cleaned rows always carry labels)
            if kind == "classification":
                labels = rows.labels.roll(1) if rows.size > 1 else (rows.labels + 1) % task.classes
            else:
                labels = torch.full_like(rows.labels, IGNORE)
                labels[:, :-1] = rows.labels[:, 1:]
            planted.append(Rows(rows.ids, rows.keep, labels, rows.weights, shifted=False))
        injected = ("labels shifted one position further" if kind == "next-token"
                    else "each row given the next row's label")
        weights.reset()
        torch.manual_seed(seed)
        optimizer, _ = self.optimizer(ctx, settings)
        run = self.train(task, planted, _order(len(planted), steps, seed), eval_rows, optimizer, steps, budget,
                         lambda step: settings.progress(self.name, (total_runs - 1) * STEPS + step,
                                                        total_runs * STEPS, "control"))
        if run.stopped or len(run.train_loss) < steps and run.diverged_at is None:
            return {"injected": injected, "caught": False, "figure": None,
                    "detail": f"{injected}: {run.stopped or 'stopped early'}"}
        learned = initial - reference.final
        share = 1.0 if not math.isfinite(run.final) else min(1.0, (run.final - reference.final) / learned)
        caught = share > limit
        return {"injected": injected, "caught": caught, "figure": _num(share),
                "detail": f"{injected}: eval loss {self.loss_text(run)}, the planted run misses {share:.0%} of the "
                          f"cleaned run's drop ({'caught' if caught else 'not caught'}, limit {limit:.0%})"}

    def eval_batches(self, ctx: ProbeContext, options, train, evaluation, train_facts: Facts, kind: str,
                     classes: int, cleaning: Cleaning) -> tuple[str, list[Rows] | None]:
        """The cleaned eval loader's batches (re-padded the train loader's way when the two
        differ in padding side or pad id); None when there is no eval loader, or one whose
        vocabulary differs (its ids mean other tokens): held-out train batches are used."""
        if evaluation is None:
            return "no eval-dataloader", None
        from tlint.verify.scan_data import _observed

        seen_train, seen_eval = _observed(train), _observed(evaluation)
        for key in ("vocab size", "checkpoint"):
            if key in seen_train and key in seen_eval and seen_train[key] != seen_eval[key]:
                cleaning.notes.append(f"the eval loader's {key} {seen_eval[key]!r} differs from the train loader's "
                                      f"{seen_train[key]!r}: its ids cannot be mapped, so it is not used")
                return "the eval loader's vocabulary differs", None
        facts = _facts(evaluation, options)
        if (facts.side, facts.pad) != (train_facts.side, train_facts.pad):
            cleaning.notes.append(f"eval batches re-padded from {facts.side} padding with pad id {facts.pad} to the "
                                  f"train loader's {train_facts.side} padding with pad id {train_facts.pad}")
        rows = []
        for i, batch in enumerate(evaluation.batches[:EVAL_BATCHES]):
            user = as_rows(batch)
            _check_ids(user, ctx.vocab_size, f"eval batch {i}")
            if kind == "classification" and (user.labels is None or user.labels.shape != (user.size,)):
                raise Unusable(f"eval batch {i} carries no per-sample labels")
            if kind == "classification":  # (a causal LM's eval labels are re-derived from the ids)
                _check_labels(user, kind, classes, f"eval batch {i}")
            cleaned = clean(batch, user, facts, kind, cleaning, evaluation=True, target=train_facts)
            if cleaned is not None:
                rows.append(cleaned)
        count = min(len(evaluation.batches), EVAL_BATCHES)
        return f"{count} batch{'es' if count > 1 else ''} of {options.eval_dataloader}, cleaned", rows

    def optimizer(self, ctx: ProbeContext, settings: TrainingSettings) -> tuple[torch.optim.Optimizer, str]:
        if settings.optimizer_factory is None and settings.lr is None:
            params = [p for _, p in _trainable(ctx.model)]
            return torch.optim.AdamW(params, lr=DEFAULT_LR), (f"AdamW, lr {DEFAULT_LR:g} (no `optimizer` or `lr` "
                                                              "configured)")
        return make_optimizer(ctx, settings)

    def train(self, task: Task, batches: list[Rows], order: list[int], eval_rows: list[Rows],
              optimizer: torch.optim.Optimizer, steps: int, deadline: float, on_step) -> Run:
        """`steps` optimiser steps over `batches` in `order`; the eval loss at step 0, every
        EVAL_EVERY steps and at the end. A non-finite training loss ends the run: the next
        step would put NaN into every weight (an unguarded `optimizer.step()`)."""
        run = Run()
        run.eval_steps.append(0)
        run.eval_loss.append(task.eval_loss(eval_rows))
        for step in range(steps):
            if time.monotonic() >= deadline:
                run.stopped = f"stopped after {step} of {steps} steps (max-seconds)"
                break
            optimizer.zero_grad(set_to_none=True)
            loss = task.train_loss(batches[order[step]])
            value = float(loss.detach())
            run.train_loss.append(value)
            if not math.isfinite(value):
                run.diverged_at = step + 1
                break
            loss.backward()
            optimizer.step()
            on_step(step + 1)
            if (step + 1) % EVAL_EVERY == 0 or step + 1 == steps:
                run.eval_steps.append(step + 1)
                run.eval_loss.append(task.eval_loss(eval_rows))
        return run

    @staticmethod
    def loss_text(run: Run) -> str:
        if run.diverged_at is not None:
            return f"diverged (non-finite training loss at step {run.diverged_at})"
        return f"{run.final:.4g}"

    @staticmethod
    def describe(cleaning: Cleaning) -> str:
        parts = []
        if cleaning.rows_dropped:
            fields = ", ".join(f"`{k}`: {v}" for k, v in sorted(cleaning.dropped_by_field.items()))
            parts.append(f"{cleaning.rows_dropped} of {cleaning.rows} rows dropped for NaN/Inf ({fields})")
        if cleaning.mask_changed:
            parts.append(f"{cleaning.mask_changed} mask positions recomputed from the pad id")
        if cleaning.targets_changed:
            parts.append(f"{cleaning.targets_changed} training targets re-derived from the ids")
        if cleaning.eval_rows_dropped:
            parts.append(f"{cleaning.eval_rows_dropped} eval rows dropped for NaN/Inf")
        return ", ".join(parts) or "nothing"


def failing_checks(extra: dict[str, Any]) -> list[dict[str, Any]]:
    return list(extra.get("data_checks", []))


def _order(batches: int, steps: int, seed: int) -> list[int]:
    """The batch of each step: the batches in a seeded random order, again for each pass."""
    gen = torch.Generator().manual_seed(seed * 1000 + 90)
    order: list[int] = []
    while len(order) < steps:
        order += torch.randperm(batches, generator=gen).tolist()
    return order[:steps]


def _spread(cleaned: list[float], user: list[float], initial: float) -> float:
    """The seed-to-seed spread of the final eval losses, in the figure's unit: the larger of
    the two arms' |a - b|, over what the cleaned run learned on average (an arm that diverged
    is left out)."""
    learned = initial - sum(cleaned) / len(cleaned)
    spreads = [max(pair) - min(pair) for pair in (cleaned, user) if all(math.isfinite(v) for v in pair)]
    return max(spreads, default=0.0) / learned if learned > 0 else 0.0


# The checks whose bugs the cleaning removes (the others, such as loader-order or pad-ratio, it cannot).
CLEANED_CHECKS = ("nan-inf", "mask-pad-agreement", "label-alignment", "label-pad-ignored", "eos-masked",
                  "tokenizer-agreement")


def split_checks(checks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    fixed = [c for c in checks if c["check"] in CLEANED_CHECKS]
    return fixed, [c for c in checks if c["check"] not in CLEANED_CHECKS]


def _names(checks: list[dict[str, Any]]) -> str:
    return ", ".join(f"{c['check']} ({c['loader']}{', ' + '/'.join(c['rules']) if c['rules'] else ''})"
                     for c in checks)


def _register() -> None:
    from tlint.verify.training_probes import TRAINING_PROBE_CLASSES

    TRAINING_PROBE_CLASSES[DataABProbe.name] = DataABProbe


_register()

