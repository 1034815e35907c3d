"""Two runs: the first step where their losses separate beyond noise, the differences
between their recorded configurations, and the differences between the settings they
actually applied as their logs show them (the logged learning-rate curve, which a run
records even when its arguments are only in a pickle that is never opened).

Noise is each run's own step-to-step scatter: the robust standard deviation (MAD) of its
loss around a 5-point running median, the two combined in quadrature. The runs separate at
the first common step from which the difference of their 3-point running medians stays
above SEPARATION_SDS noise (and 2 % of the loss) for SUSTAIN consecutive common steps.
"""

from __future__ import annotations

import math
from typing import Any

from tlint.diagnose.findings import finite, median, robust_sd
from tlint.diagnose.readers import RUN_IDENTITY, Run

SEPARATION_SDS = 3.0
SUSTAIN = 3
REL_FLOOR = 0.02
CURVE_TOLERANCE = 1e-3  # relative: two logged rates closer than this are the same rate
# the logged series that are settings the run applied, not measurements of it
APPLIED = {"lr": "learning rate (logged)"}


def _running_median(values: list[float], width: int) -> list[float]:
    half = width // 2
    return [median(values[max(0, i - half):i + half + 1]) for i in range(len(values))]


def noise(values: list[float]) -> float:
    if len(values) < 5:
        return 0.0
    smooth = _running_median(values, 5)
    return robust_sd([v - s for v, s in zip(values, smooth)])


def separation(a: Run, b: Run) -> dict[str, Any] | None:
    """The first step where the losses separate, or None when they never do (or share too few
    steps to tell)."""
    la, lb = dict(finite(a.series.get("loss", []))), dict(finite(b.series.get("loss", [])))
    steps = sorted(set(la) & set(lb))
    if len(steps) < SUSTAIN + 2:
        return None
    va, vb = [la[s] for s in steps], [lb[s] for s in steps]
    sigma = math.hypot(noise(va), noise(vb))
    diff = [x - y for x, y in zip(_running_median(va, 3), _running_median(vb, 3))]
    raw = [x - y for x, y in zip(va, vb)]
    for i in range(len(steps) - SUSTAIN + 1):
        window = range(i, i + SUSTAIN)
        limits = [max(SEPARATION_SDS * sigma, REL_FLOOR * min(abs(va[j]), abs(vb[j]))) for j in window]
        if all(abs(diff[j]) > lim and abs(raw[j]) > lim for j, lim in zip(window, limits)) and \
                len({math.copysign(1, diff[j]) for j in window}) == 1:
            tail = raw[i:]
            return {"step": steps[i], "difference": raw[i], "final_difference": raw[-1], "noise": sigma,
                    "worse": "a" if median(tail) > 0 else "b", "common_steps": len(steps)}
    return None


def compared_settings(a: Run, b: Run) -> int:
    """How many recorded settings a comparison looks at (either run; the run-identity keys
    left out)."""
    return sum(key.rsplit(".", 1)[-1] not in RUN_IDENTITY for key in set(a.config) | set(b.config))


def config_differences(a: Run, b: Run) -> tuple[list[dict[str, Any]], list[str]]:
    """(settings whose recorded values differ, the run-identity keys left out)."""
    out = []
    skipped = []
    for key in sorted(set(a.config) | set(b.config)):
        leaf = key.rsplit(".", 1)[-1]
        if leaf in RUN_IDENTITY:
            if a.config.get(key) != b.config.get(key):
                skipped.append(key)
            continue
        if (key not in a.config or key not in b.config) and key.startswith("watch."):
            continue  # tlint.watch's own metadata, when one run was watched and the other not
        if key not in a.config or key not in b.config:
            out.append({"key": key, "a": a.config.get(key), "b": b.config.get(key),
                        "recorded": "a" if key in a.config else "b"})
        elif a.config[key] != b.config[key]:
            out.append({"key": key, "a": a.config[key], "b": b.config[key], "recorded": "both"})
    return out, skipped


def _apart(x: float, y: float) -> bool:
    scale = max(abs(x), abs(y))
    return scale > 0 and abs(x - y) > CURVE_TOLERANCE * scale


def curve_differences(a: Run, b: Run) -> tuple[list[dict[str, Any]], list[str]]:
    """(the applied settings whose logged curves differ, the curves both runs logged). At the
    first common step where the curves part; with no common step, their first and largest
    values. Each difference: key, a, b, step (None when compared without common steps),
    ratio (b / a, when a is not 0)."""
    out, compared = [], []
    for series, label in APPLIED.items():
        ca, cb = dict(finite(a.series.get(series, []))), dict(finite(b.series.get(series, [])))
        if not ca or not cb:
            continue
        compared.append(label)
        common = sorted(set(ca) & set(cb))
        found: tuple[float, float, int | None] | None = None
        for step in common:
            if _apart(ca[step], cb[step]):
                found = (ca[step], cb[step], step)
                break
        if not common:
            firsts = (ca[min(ca)], cb[min(cb)])
            tops = (max(ca.values()), max(cb.values()))
            if _apart(*firsts):
                found = (*firsts, None)
            elif _apart(*tops):
                found = (*tops, None)
        if found is not None:
            va, vb, where = found
            out.append({"key": label, "a": va, "b": vb, "step": where, "ratio": vb / va if va else None})
    return out, compared
