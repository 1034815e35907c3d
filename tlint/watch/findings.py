"""What the watch says: the `Finding` record, the tlint rule and the next command each kind
relates to, and the detectors that need no torch (the loss-spike test against a robust
running baseline, sustained gradient-norm growth, the applied schedule's notes).

A finding is `warning` or `error` only for an observed problem; observations that are not
problems by themselves (no warmup in the applied schedule, a learning rate above the usual
range) are `info` notes, quoted as context in the message of a warning raised next to them."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from tlint.runtime.invariants import RULES, Violation

SEVERITIES = ("info", "warning", "error")

# kind: (rule it relates to, what to run next)
KINDS: dict[str, tuple[str | None, str]] = {
    "nonfinite-loss": ("TL210", "tlint verify --probe nan-trace; tlint check --select TL110,TL210,TL308"),
    "nonfinite-grad": ("TL301", "tlint verify --probe nan-trace; tlint check --select TL301,TL303,TL308"),
    "loss-spike": ("TL307", "tlint check --select TL301,TL304,TL307; tlint verify --probe warmup-ab"),
    "grad-norm-growth": ("TL301", "tlint check --select TL301,TL302,TL307; tlint verify --probe warmup-ab"),
    "pad-share": ("TL111", "tlint scan-data; tlint check --select TL105,TL111"),
    "saturated-sublayer": ("TL211", "tlint verify --probe activation-ranges"),
    "constant-sublayer": ("TL211", "tlint verify --probe activation-ranges"),
    "attention-on-padding": ("TL101", "tlint verify --probe attention-maps; tlint check --select TL101,TL102,TL103"),
    "no-warmup": ("TL304", "tlint check --select TL304; tlint verify --probe warmup-ab"),
    "high-learning-rate": ("TL307", "tlint check --select TL307"),
    "amp-skipped-steps": ("TL303", "tlint check --select TL303"),
    "loss-divergence": ("TL307", "lower the learning rate; tlint check --select TL304,TL307,TL301"),
    "grad-norm-explosion": ("TL301", "lower the learning rate; tlint check --select TL301,TL307"),
    "update-ratio": ("TL307", "lower the learning rate; tlint check --select TL307"),
}
# the training-step invariants (tlint.runtime.invariants, shared with `tlint trace`): kind =
# the rule's name, severity the invariant's
for _code, _name in RULES.items():
    KINDS[_name] = (_code, f"tlint check --select {_code}; tlint trace -- python YOUR_SCRIPT.py")

# Thresholds (README "Watching a training run").
PAD_SHARE_LIMIT = 0.5          # pad tokens in the batch
ATTENTION_PAD_LIMIT = 0.01     # share of real queries' attention mass on pad keys
SATURATED_LIMIT = 0.5          # share of a sub-layer's values saturated
SPIKE_HISTORY = 64             # finite losses the spike baseline keeps
SPIKE_MIN_HISTORY = 10         # steps seen before the spike test speaks
SPIKE_MADS = 6.0               # robust standard deviations above the median ...
SPIKE_RELATIVE = 0.25          # ... and at least this share of the median above it
GROWTH_SAMPLES = 5             # sampled gradient norms, each larger than the one before ...
GROWTH_FACTOR = 8.0            # ... the last this many times the first
DIVERGE_FACTOR = 10.0          # a loss this many times the first step's ...
DIVERGE_CHANCE = 2.0           # ... (a mean cross-entropy over V classes: at most this many times ln V, at least ln V)
DIVERGE_STEPS = 3              # ... on this many steps in a row: the run diverges
EARLY_READS = 16               # the first steps' losses are read every step (absolute checks from step 1)
EXPLOSION_FACTOR = 1000.0      # a sampled gradient norm this many times the first sampled one
UPDATE_RATIO_LIMIT = 1.0       # ||Δw|| / ||w|| of the largest parameter group in one step
WARMUP_STEPS = 10              # applied learning rates looked at for a warmup
HIGH_LR_ADAM = 1e-3            # TL307's default for a transformer trained from scratch


@dataclass
class Finding:
    step: int | None
    kind: str
    severity: str               # "info" | "warning" | "error"
    rule: str | None            # the related tlint rule code
    message: str
    next: str = ""              # what to run next
    rank: int = 0               # the process that saw it (distributed runs)
    data: dict[str, Any] = field(default_factory=dict)
    count: int = 1              # times seen (a finding repeated on later samples is counted, not repeated)
    last_step: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["last_step"] = self.last_step if self.last_step is not None else self.step
        return out

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "end"
        rule = f" [{self.rule}]" if self.rule else ""
        rank = f" (rank {self.rank})" if self.rank else ""
        return f"{self.severity}: {where}{rank}: {self.kind}{rule}: {self.message}"


def make(step: int | None, kind: str, severity: str, message: str, rule: str | None = None,
         **data: Any) -> Finding:
    default_rule, next_run = KINDS[kind]
    return Finding(step, kind, severity, rule if rule is not None else default_rule, message, next_run,
                   data={k: v for k, v in data.items() if v is not None})


def from_violation(step: int, violation: Violation) -> Finding:
    """A training-step invariant's violation as a watch finding (at the user's line)."""
    where = f"{violation.site}: " if violation.site else ""
    return make(step, violation.name, violation.severity, where + violation.message,
                path=violation.site.path if violation.site else None,
                line=violation.site.line if violation.site else None)


def fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


class SpikeTest:
    """A loss spike: a finite loss above median + max(6 robust SDs, 25 % of |median|) of the
    last 64 finite losses (robust SD: 1.4826 × the median absolute deviation), once at least
    10 losses were seen. One finding per episode: the next spike needs the loss back under
    the threshold first."""

    def __init__(self) -> None:
        self.history: deque[float] = deque(maxlen=SPIKE_HISTORY)
        self.in_spike = False

    def threshold(self) -> tuple[float, float] | None:
        if len(self.history) < SPIKE_MIN_HISTORY:
            return None
        values = list(self.history)
        mid = median(values)
        mad = median(abs(v - mid) for v in values)
        return mid, mid + max(SPIKE_MADS * 1.4826 * mad, SPIKE_RELATIVE * abs(mid), 1e-8)

    def see(self, loss: float) -> tuple[float, float] | None:
        """(baseline median, threshold) when `loss` starts a spike, else None."""
        if not math.isfinite(loss):
            return None
        bound = self.threshold()
        spiked = bound is not None and loss > bound[1]
        started = spiked and not self.in_spike
        self.in_spike = spiked
        self.history.append(loss)
        return bound if started else None


class DivergenceTest:
    """A diverging run, judged from step 1 against absolute bounds (no running baseline,
    which a run diverging from its first steps never has): the loss above a threshold on
    DIVERGE_STEPS steps in a row. The threshold is DIVERGE_FACTOR × the first step's loss
    (taken before any update); when the number of classes V is known and the first loss
    looks like a mean cross-entropy over them (at most 1.5 × ln V, the loss of a uniform
    guess), it is min(that, DIVERGE_CHANCE × ln V), and never below ln V: a fine-tune that
    starts far below chance is judged against chance, not against its small start. One
    finding per episode."""

    def __init__(self, classes: int | None = None) -> None:
        self.classes = classes if isinstance(classes, int) and classes > 1 else None
        self.first: float | None = None
        self.run: list[int] = []  # the steps in a row above the threshold
        self.reported = False

    def threshold(self) -> tuple[float, str] | None:
        first = self.first
        if first is None or first <= 0:
            return None
        bound, why = DIVERGE_FACTOR * first, f"{DIVERGE_FACTOR:g} × the first step's loss {fmt(first)}"
        if self.classes is not None:
            chance = math.log(self.classes)
            if first <= 1.5 * chance:
                if DIVERGE_CHANCE * chance < bound:
                    bound = DIVERGE_CHANCE * chance
                    why = f"{DIVERGE_CHANCE:g} × ln V = {fmt(bound)} for V = {self.classes} classes"
                if bound < chance:
                    bound, why = chance, f"ln V = {fmt(chance)}, a uniform guess over V = {self.classes} classes"
        return bound, why

    def see(self, step: int, loss: float) -> tuple[float, str, int] | None:
        """(threshold, why, first step of the run) when `loss` at `step` completes
        DIVERGE_STEPS steps in a row above the threshold, else None."""
        if not math.isfinite(loss):
            self.run = []
            return None
        if self.first is None:
            self.first = loss
            return None
        bound = self.threshold()
        if bound is None or loss <= bound[0]:
            self.run = []
            self.reported = False
            return None
        self.run.append(step)
        if len(self.run) >= DIVERGE_STEPS and not self.reported:
            self.reported = True
            return bound[0], bound[1], self.run[0]
        return None


def explosion(norms: list[tuple[int, float]]) -> tuple[int, float] | None:
    """(first step, first norm) when the last sampled gradient norm is EXPLOSION_FACTOR
    times the first finite, non-zero one or more."""
    if len(norms) < 2:
        return None
    first_step, first = norms[0]
    last = norms[-1][1]
    if first > 0 and math.isfinite(last) and last >= EXPLOSION_FACTOR * first:
        return first_step, first
    return None


def growth(norms: list[tuple[int, float]]) -> tuple[int, float, float] | None:
    """(first step, first norm, last norm) when the last GROWTH_SAMPLES sampled gradient
    norms each rose and the last is GROWTH_FACTOR times the first."""
    if len(norms) < GROWTH_SAMPLES:
        return None
    tail = norms[-GROWTH_SAMPLES:]
    values = [v for _, v in tail]
    if not all(math.isfinite(v) for v in values) or values[0] <= 0:
        return None
    if all(b > a for a, b in zip(values, values[1:])) and values[-1] >= GROWTH_FACTOR * values[0]:
        return tail[0][0], values[0], values[-1]
    return None


def schedule_notes(lrs: list[float], top: float, optimizer_name: str, step: int) -> list[Finding]:
    """Info notes on the applied learning rates (group 0): `lrs` from step 1 on, `top` the
    largest applied so far."""
    notes = []
    early = lrs[:WARMUP_STEPS]
    if len(early) >= WARMUP_STEPS and early[0] > 0 and early[-1] <= early[0] * 1.0001:
        notes.append(make(step, "no-warmup", "info",
                          f"no warmup seen in the applied schedule: the learning rate of step 1 ({fmt(early[0])}) "
                          f"is not below that of step {len(early)} ({fmt(early[-1])})", first_lr=early[0]))
    top = max([top, *lrs])
    if "adam" in optimizer_name.lower() and top > HIGH_LR_ADAM:
        notes.append(make(step, "high-learning-rate", "info",
                          f"learning rate {fmt(top)} above the usual range for {optimizer_name} on a transformer "
                          f"trained from scratch (≤ {HIGH_LR_ADAM:g})", lr=top))
    return notes
