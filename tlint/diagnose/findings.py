"""Findings on one run's series: loss spikes, non-finite steps, divergence, a stuck loss,
gradient-norm explosions, the applied learning-rate schedule, train/eval gaps, eval worse
than train from the start, throughput drops and a high pad share.

Every test is robust to the loss's noise: a point is judged against the median and the
median absolute deviation (MAD, scaled to a standard deviation) of the points before it,
never against a mean that the outlier itself moves. Each finding carries its step range, its
size, and the likely causes, ranked by the evidence in the same run (a spike with no warmup
ranks the missing warmup first), each cause with the static rules (`tlint check`) and the
verify probes (`tlint verify --probe NAME`) that test it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from tlint.diagnose.readers import Run

WINDOW = 20  # points in a running baseline
SPIKE_SDS = 6.0  # robust standard deviations above the baseline
SPIKE_REL = 0.25  # ... and at least this share of the baseline
SPIKE_ERROR = 2.0  # a spike to this multiple of its baseline is an error
GRAD_FACTOR = 5.0  # a gradient norm this many times its baseline is an explosion
STUCK_GAIN = 0.05  # a loss that lost less than this share of its initial value is stuck
MIN_POINTS = 8  # fewer loss points: too short to judge a trend
THROUGHPUT_DROP = 0.5  # throughput under this share of its baseline
PAD_SHARE = 0.5


@dataclass
class Cause:
    cause: str
    rules: list[str]
    probes: list[str]

    def as_dict(self, rank: int) -> dict[str, Any]:
        return {"rank": rank, "cause": self.cause, "rules": self.rules, "probes": self.probes}


@dataclass
class Finding:
    kind: str
    severity: str  # info, warning, error
    first_step: int | None
    last_step: int | None
    message: str
    size: dict[str, Any] = field(default_factory=dict)
    causes: list[Cause] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        steps = None if self.first_step is None else {"first": self.first_step, "last": self.last_step}
        return {"kind": self.kind, "severity": self.severity, "steps": steps, "message": self.message,
                "size": self.size, "causes": [c.as_dict(i) for i, c in enumerate(self.causes, 1)]}


# the hypotheses, each with what tests it
NO_WARMUP = Cause("no learning-rate warmup: the first updates use the full learning rate", ["TL304"], ["warmup-ab"])
HIGH_LR = Cause("learning rate too high for this model and batch (or raised by unscaled gradient accumulation)",
                ["TL307", "TL311", "TL317"], ["warmup-ab"])
NO_CLIP = Cause("gradients not clipped (or clipped in the wrong place, or before unscaling under AMP)",
                ["TL301", "TL302", "TL303", "TL316"], ["warmup-ab"])
SCHEDULER = Cause("scheduler stepped out of order, per epoch, or sized in epochs but stepped per batch "
                  "(the schedule applied is not the one meant)", ["TL305", "TL306", "TL318"], [])
ADAM_EPS = Cause("Adam epsilon too small for the precision (updates blow up when a second moment is ~0)",
                 ["TL308"], [])
INIT = Cause("initialisation or normalisation lets activations grow with depth",
             ["TL211", "TL201", "TL202", "TL203", "TL215"], ["init-stats", "depth-growth", "norm-scale"])
NAN_MASK = Cause("a masked row with no visible key (-inf fill, fully padded sequence) turns NaN",
                 ["TL210", "TL112", "TL213"], ["nan-trace", "mask-leak"])
NAN_INPUT = Cause("non-finite values in the inputs", ["TL110"], ["nan-trace"])
LABELS = Cause("labels broken: shifted twice, or pads not ignored, or labels not paired with their inputs",
               ["TL109", "TL106", "TL108", "TL107", "TL115"], ["overfit-batch"])
LOSS_INPUT = Cause("loss computed on probabilities, or gradients never reach the weights",
                   ["TL314", "TL309", "TL310"], ["overfit-batch", "grad-flow", "optimizer-coverage"])
TOKENIZER = Cause("train and eval data tokenized or preprocessed differently", ["TL104"], ["padding-equivalence"])
EVAL_MODE = Cause("model evaluated in training mode (dropout on in eval)", ["TL312", "TL214"], ["eval-determinism"])
MASKS = Cause("padding not masked, so padded eval batches see pad tokens", ["TL101", "TL102", "TL103", "TL113"],
              ["mask-leak", "padding-equivalence"])
OVERFIT = Cause("the model memorises the training set (too little data or regularisation, too many epochs)",
                ["TL315"], [])
ANOMALY = Cause("autograd anomaly detection left on", ["TL313"], [])
PADDING = Cause("batches padded to a fixed length (compute spent on pad tokens)", ["TL111", "TL105"], [])


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def robust_sd(values: list[float]) -> float:
    """The MAD scaled to a normal distribution's standard deviation."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return 1.4826 * median([abs(v - m) for v in values])


def step_ranges(steps: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7" (at most 8 ranges shown)."""
    parts: list[str] = []
    start = prev = None
    for s in steps:
        if start is None:
            start = prev = s
        elif prev is not None and s == prev + 1:
            prev = s
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = s
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts[:8]) + (f", ... ({len(parts) - 8} more)" if len(parts) > 8 else "")


def finite(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in points if math.isfinite(v)]


def outliers(points: list[tuple[int, float]], threshold) -> list[tuple[int, float, float]]:
    """(step, value, baseline) for each point above `threshold(baseline values)`; the baseline
    is the last WINDOW points that were not outliers themselves."""
    base: list[float] = []
    out = []
    for step, value in points:
        if base:
            limit, level = threshold(base[-WINDOW:])
            if value > limit:
                out.append((step, value, level))
                continue
        base.append(value)
    return out


def groups(hits: list[tuple[int, float, float]], points: list[tuple[int, float]],
           gap: int = 2) -> list[list[tuple[int, float, float]]]:
    """Outliers in runs of consecutive logged points (up to `gap` normal points between)."""
    index = {s: i for i, (s, _) in enumerate(points)}
    out: list[list[tuple[int, float, float]]] = []
    for hit in hits:
        if out and index[hit[0]] - index[out[-1][-1][0]] <= gap + 1:
            out[-1].append(hit)
        else:
            out.append([hit])
    return out


def _spike_limit(base: list[float]) -> tuple[float, float]:
    level = median(base)
    return level + max(SPIKE_SDS * robust_sd(base), SPIKE_REL * abs(level), 1e-8), level


def _grad_limit(base: list[float]) -> tuple[float, float]:
    level = median(base)
    return max(level * GRAD_FACTOR, level + SPIKE_SDS * robust_sd(base), 1e-12), level


@dataclass
class Schedule:
    warmup_steps: int
    peak: float
    peak_step: int
    final: float
    decay: str  # none, linear, cosine, step, other
    constant: bool

    @property
    def warmup(self) -> bool:
        return self.warmup_steps > 0


def diagnose(run: Run) -> list[Finding]:
    loss = run.series.get("loss", [])
    good = finite(loss)
    schedule = lr_schedule(run.series.get("lr", []))
    findings: list[Finding] = []
    if schedule is not None:
        findings.append(_schedule_finding(schedule, run.series["lr"]))
    bad = [s for s, v in loss if not math.isfinite(v)]
    bad_grad = [s for s, v in run.series.get("grad_norm", []) if not math.isfinite(v)]
    grads = _grad_explosions(run)
    spikes = _spikes(good, schedule, grads)
    findings.extend(grads)
    findings.extend(spikes)
    if bad or bad_grad:
        findings.append(_nonfinite(bad, bad_grad, loss, spikes, grads, schedule))
    findings.extend(_trend(good, run, schedule, bool(spikes)))
    findings.extend(_eval(good, run.series.get("eval_loss", [])))
    findings.extend(_throughput(run.series.get("throughput", [])))
    findings.extend(_pad_share(run.series.get("pad_share", [])))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (order[f.severity], f.first_step if f.first_step is not None else -1))
    return findings


def lr_schedule(points: list[tuple[int, float]]) -> Schedule | None:
    points = finite(points)
    if len(points) < 2:
        return None
    values = [v for _, v in points]
    peak = max(values)
    peak_at = values.index(peak)
    if peak <= 0:
        return Schedule(0, peak, points[peak_at][0], values[-1], "none", True)
    rising = peak_at > 0 and values[0] < 0.5 * peak
    warmup = points[peak_at][0] - points[0][0] if rising else 0
    tail = values[peak_at:]
    final = values[-1]
    constant = max(values) - min(values) <= 1e-6 * peak
    if len(tail) < 3 or final >= 0.98 * peak:
        decay = "none"
    else:
        decay = _decay_shape(tail)
    return Schedule(warmup, peak, points[peak_at][0], final, decay, constant)


def _decay_shape(tail: list[float]) -> str:
    distinct = len({round(v / tail[0], 6) for v in tail})
    if distinct <= max(3, len(tail) // 10) and len(tail) >= 10:
        return "step"
    top, low = tail[0], tail[-1]
    n = len(tail) - 1
    lin = sum((v - (top + (low - top) * i / n)) ** 2 for i, v in enumerate(tail))
    cos = sum((v - (low + (top - low) * (1 + math.cos(math.pi * i / n)) / 2)) ** 2 for i, v in enumerate(tail))
    if min(lin, cos) > 0.01 * n * (top - low) ** 2:
        return "other"
    return "linear" if lin <= cos else "cosine"


def _schedule_finding(s: Schedule, points: list[tuple[int, float]]) -> Finding:
    first, last = points[0][0], points[-1][0]
    if s.constant:
        text = f"constant learning rate {s.peak:.3g}, no warmup"
    else:
        warm = f"warmup over {s.warmup_steps} steps to" if s.warmup else "no warmup; starts at its peak"
        decay = "no decay" if s.decay == "none" else f"{s.decay} decay to {s.final:.3g} by step {last}"
        text = f"learning rate: {warm} {s.peak:.3g} (step {s.peak_step}), {decay}"
    size = {"warmup_steps": s.warmup_steps, "peak": s.peak, "peak_step": s.peak_step, "final": s.final,
            "decay": s.decay, "constant": s.constant}
    causes = [] if s.warmup else [NO_WARMUP]
    return Finding("lr-schedule", "info", first, last, text, size, causes)


def _spikes(points: list[tuple[int, float]], schedule: Schedule | None, grads: list[Finding]) -> list[Finding]:
    hits = outliers(points, _spike_limit)
    out = []
    for group in groups(hits, points):
        first, last = group[0][0], group[-1][0]
        peak = max(group, key=lambda h: h[1])
        ratio = peak[1] / peak[2] if peak[2] > 0 else math.inf
        severity = "error" if ratio >= SPIKE_ERROR else "warning"
        preceded = [g for g in grads if g.first_step is not None and g.first_step <= first
                    and (g.last_step or g.first_step) >= first - 5]
        text = (f"loss spike at steps {first}-{last}: peak {peak[1]:.4g} at step {peak[0]}, "
                f"{ratio:.2f}x its baseline {peak[2]:.4g}")
        if preceded:
            text += f"; the gradient norm exploded at step {preceded[0].first_step}, at or before the spike"
        causes = _instability_causes(schedule, bool(preceded), early=_early(first, points))
        size = {"peak": peak[1], "peak_step": peak[0], "baseline": peak[2], "ratio": ratio,
                "points": len(group), "grad_norm_first": bool(preceded)}
        out.append(Finding("loss-spike", severity, first, last, text, size, causes))
    return out


def _early(step: int, points: list[tuple[int, float]]) -> bool:
    """In the first tenth of the run (or its first 100 steps): where warmup matters."""
    if not points:
        return False
    span = points[-1][0] - points[0][0]
    return step - points[0][0] <= max(100, span // 10)


def _instability_causes(schedule: Schedule | None, grad_first: bool, early: bool) -> list[Cause]:
    causes: list[Cause] = []
    if schedule is not None and not schedule.warmup and early:
        causes.append(NO_WARMUP)
    causes.append(HIGH_LR)
    if grad_first:
        causes.append(NO_CLIP)
    if schedule is None or schedule.warmup or not early:
        causes.append(NO_WARMUP)
    if not grad_first:
        causes.append(NO_CLIP)
    causes += [ADAM_EPS, INIT, SCHEDULER]
    return causes


def _grad_explosions(run: Run) -> list[Finding]:
    points = finite(run.series.get("grad_norm", []))
    out = []
    for group in groups(outliers(points, _grad_limit), points):
        first, last = group[0][0], group[-1][0]
        peak = max(group, key=lambda h: h[1])
        ratio = peak[1] / peak[2] if peak[2] > 0 else math.inf
        text = (f"gradient norm explosion at steps {first}-{last}: {peak[1]:.4g} at step {peak[0]}, "
                f"{ratio:.1f}x its baseline {peak[2]:.4g}")
        out.append(Finding("grad-explosion", "warning", first, last, text,
                           {"peak": peak[1], "peak_step": peak[0], "baseline": peak[2], "ratio": ratio,
                            "points": len(group)},
                           [NO_CLIP, HIGH_LR, NO_WARMUP, INIT, ADAM_EPS]))
    return out


def _nonfinite(bad: list[int], bad_grad: list[int], loss: list[tuple[int, float]], spikes: list[Finding],
               grads: list[Finding], schedule: Schedule | None) -> Finding:
    steps = sorted(set(bad) | set(bad_grad))
    parts = []
    if bad:
        parts.append(f"loss non-finite at {len(bad)} logged step(s): {step_ranges(bad)}")
    if bad_grad:
        parts.append(f"gradient norm non-finite at {len(bad_grad)} step(s): {step_ranges(bad_grad)}")
    first = steps[0]
    blew_up = [f for f in spikes + grads if f.first_step is not None and f.first_step < first]
    if blew_up:
        parts.append(f"after a {blew_up[0].kind} at step {blew_up[0].first_step}")
        causes = _instability_causes(schedule, bool(grads), early=_early(first, finite(loss)))[:3]
        causes += [NAN_MASK, NAN_INPUT]
    else:
        causes = [NAN_MASK, NAN_INPUT, ADAM_EPS, NO_CLIP, HIGH_LR]
    size = {"loss_steps": len(bad), "grad_norm_steps": len(bad_grad), "first": first,
            "logged_steps": len(loss)}
    return Finding("nonfinite", "error", first, steps[-1], "; ".join(parts), size, causes)


def _level(values: list[float]) -> float:
    return median(values)


def _trend(points: list[tuple[int, float]], run: Run, schedule: Schedule | None, spiked: bool) -> list[Finding]:
    if len(points) < MIN_POINTS:
        return []
    values = [v for _, v in points]
    k = max(3, len(values) // 10)
    start = _level(values[:3])
    end = _level(values[-k:])
    smooth = [_level(values[i:i + 5]) for i in range(0, len(values) - 4)]
    low = min(smooth)
    low_step = points[smooth.index(low) + 2][0]
    out = []
    first, last = points[0][0], points[-1][0]
    size: dict[str, Any] = {"initial": start, "final": end, "lowest": low, "lowest_step": low_step}
    if end > 1.5 * low and end > start and low > 0:
        text = (f"loss diverged: down to {low:.4g} around step {low_step}, then up to {end:.4g} by step {last} "
                f"({end / low:.2f}x)")
        out.append(Finding("divergence", "error", low_step, last, text, size,
                           _instability_causes(schedule, bool(run.series.get("grad_norm")), early=False)))
    elif end >= (1 - STUCK_GAIN) * start:
        vocab = run.vocab_size
        ln_v = math.log(vocab) if vocab else None
        near = ln_v is not None and abs(end - ln_v) <= 0.1 * ln_v
        text = f"loss stuck near its initial value: {start:.4g} at step {first}, {end:.4g} by step {last}"
        if near and ln_v is not None:
            text += (f", near ln(vocabulary {vocab}) = {ln_v:.4g}: the model predicts no better than "
                     "uniform guessing (labels or data broken)")
        size.update({"vocab_size": vocab, "ln_vocab": ln_v})
        causes = [LABELS, LOSS_INPUT]
        if spiked:
            causes = _instability_causes(schedule, False, early=True)[:2] + causes
        else:
            causes += [TOKENIZER, HIGH_LR]
        flat = vocab is None and end >= 0.99 * start  # no vocabulary to compare with: an error when it never fell
        out.append(Finding("stuck-loss", "error" if near or flat else "warning", first, last, text, size, causes))
    return out


def _eval(train: list[tuple[int, float]], evals: list[tuple[int, float]]) -> list[Finding]:
    evals = finite(evals)
    if not evals or not train:
        return []
    # the train level at an evaluation: the median of the last 5 train points at or before
    # its step (both series are sorted by step: one binary search per evaluation)
    steps = [s for s, _ in train]
    gaps = []
    for step, value in evals:
        end = bisect.bisect_right(steps, step)
        if end:
            level = _level([v for _, v in train[max(0, end - 5):end]])
            gaps.append((step, value, level, value - level))
    if not gaps:
        return []
    out = []
    first = gaps[0]
    margin = max(0.1, 0.1 * abs(first[2]))
    if first[3] > margin and all(g[3] > 0 for g in gaps):
        text = (f"eval loss worse than train from the first evaluation: {first[1]:.4g} vs {first[2]:.4g} at step "
                f"{first[0]} (+{first[3]:.3g}), and at every later evaluation")
        out.append(Finding("eval-worse-from-start", "warning", first[0], gaps[-1][0], text,
                           {"eval": first[1], "train": first[2], "gap": first[3], "evaluations": len(gaps)},
                           [TOKENIZER, EVAL_MODE, MASKS]))
    elif len(gaps) >= 2:
        last = gaps[-1]
        grow_margin = max(0.1, 0.1 * abs(last[2]))
        if last[3] > grow_margin and last[3] > first[3] + grow_margin:
            opened = next(g for g in gaps if g[3] > first[3] + grow_margin)
            text = (f"train/eval gap opens: eval {last[1]:.4g} vs train {last[2]:.4g} at step {last[0]} "
                    f"(gap {last[3]:.3g}, was {first[3]:.3g} at step {first[0]}); eval loss lowest at step "
                    f"{min(gaps, key=lambda g: g[1])[0]}")
            out.append(Finding("train-eval-gap", "warning", opened[0], last[0], text,
                               {"gap": last[3], "initial_gap": first[3], "eval": last[1], "train": last[2],
                                "best_eval_step": min(gaps, key=lambda g: g[1])[0]},
                               [OVERFIT, EVAL_MODE, TOKENIZER]))
    return out


def _throughput(points: list[tuple[int, float]]) -> list[Finding]:
    points = [(s, v) for s, v in finite(points) if v > 0]
    if len(points) < MIN_POINTS:
        return []
    inverted = [(s, 1.0 / v) for s, v in points]  # time per step: a drop in throughput is a rise in time

    def limit(base: list[float]) -> tuple[float, float]:
        level = median(base)
        return level / THROUGHPUT_DROP, level

    out = []
    for group in groups(outliers(inverted, limit), inverted, gap=1):
        if len(group) < 3:
            continue  # one slow step: an evaluation, a checkpoint, a busy machine
        first, last = group[0][0], group[-1][0]
        base = 1.0 / group[0][2]
        worst = min(1.0 / h[1] for h in group)
        share = median([1.0 / h[1] for h in group]) / base
        text = (f"throughput drop at steps {first}-{last}: {share:.0%} of its baseline {base:.4g}/s "
                f"(lowest {worst:.4g}/s)")
        out.append(Finding("throughput-drop", "warning", first, last, text,
                           {"baseline": base, "lowest": worst, "share": share, "points": len(group)},
                           [ANOMALY, PADDING]))
    return out


def _pad_share(points: list[tuple[int, float]]) -> list[Finding]:
    points = finite(points)
    if not points:
        return []
    level = median([v for _, v in points])
    if level < PAD_SHARE:
        return []
    return [Finding("pad-share", "warning", points[0][0], points[-1][0],
                    f"batches are {level:.0%} padding (median of {len(points)} sampled steps)",
                    {"median": level, "samples": len(points)}, [PADDING])]
