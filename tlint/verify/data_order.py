"""The data scan's loader-order check, its statistics: does the order of a dataset read in
turn follow the samples' length, label or source? Rank correlation (Spearman) and grouping of
neighbours, each with a permutation p-value from a fixed seed (tlint/verify/scan_data.py reads
the items)."""

from __future__ import annotations

from typing import Any

import torch

ORDER_P = 1e-3         # a correlation this unlikely under a random order is structure
ORDER_PERMUTATIONS = 2000


def _ranks(values: list[float]) -> torch.Tensor:
    """Average ranks (ties share their mean rank)."""
    x = torch.tensor(values, dtype=torch.float64)
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(len(values), dtype=torch.float64)
    for value in set(values):
        tied = x == value
        if int(tied.sum()) > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def _permutations(n: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.stack([torch.randperm(n, generator=gen) for _ in range(ORDER_PERMUTATIONS)])


def _rank_trend(values: list[float]) -> tuple[float, float] | None:
    """(Spearman's rho between position and value, its permutation p-value); None when the
    values are all equal."""
    if len(set(values)) < 2:
        return None
    ranks = _ranks(values)
    ranks = ranks - ranks.mean()
    ranks = ranks / ranks.norm().clamp_min(1e-12)
    place = torch.arange(len(values), dtype=torch.float64)
    place = place - place.mean()
    place = place / place.norm()
    rho = float(ranks @ place)
    shuffled = ranks[_permutations(len(values))] @ place
    p = (1 + int((shuffled.abs() >= abs(rho) - 1e-12).sum())) / (1 + ORDER_PERMUTATIONS)
    return rho, p


def _grouping(values: list[Any]) -> tuple[float, float] | None:
    """(changes between neighbours / the changes a random order gives, its permutation
    p-value) of a categorical value; None with fewer than two categories."""
    codes = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if len(codes) < 2:
        return None
    x = torch.tensor([codes[v] for v in values])
    observed = int((x[1:] != x[:-1]).sum())
    shuffled = x[_permutations(len(values))]
    changes = (shuffled[:, 1:] != shuffled[:, :-1]).sum(dim=1)
    expected = float(changes.float().mean())
    p = (1 + int((changes <= observed).sum())) / (1 + ORDER_PERMUTATIONS)
    return observed / max(expected, 1e-12), p


def structure_findings(structure: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(what the order follows, what was measured) over the items spread over the dataset."""
    follows: list[str] = []
    measured: list[str] = []
    n = len(structure.get("lengths", []))
    if "concat" in structure:
        sizes = structure["concat"]
        follows.append(f"source: a ConcatDataset of {len(sizes)} datasets ({', '.join(map(str, sizes))} samples) "
                       "read in order trains on each one whole, then the next")
    trend = _rank_trend(structure.get("lengths", []))
    if trend is not None:
        rho, p = trend
        text = f"length: Spearman {rho:+.2f} with the position (p {p:.2g})"
        (follows if p < ORDER_P and abs(rho) >= 0.5 else measured).append(text)
    elif n:
        measured.append(f"length: all {structure['lengths'][0]}")
    labels = structure.get("labels", [])
    if labels:
        few = len(set(labels)) <= 32 and all(float(v).is_integer() for v in labels)
        got = _grouping(labels) if few else _rank_trend(labels)
        if got is not None:
            figure, p = got
            text = (f"label: {figure:.2f} of the label changes a random order gives (p {p:.2g})" if few
                    else f"label: Spearman {figure:+.2f} with the position (p {p:.2g})")
            strong = figure <= 0.5 if few else abs(figure) >= 0.5
            (follows if p < ORDER_P and strong else measured).append(text)
    if structure.get("sources") and "concat" not in structure:
        got = _grouping(structure["sources"])
        if got is not None:
            ratio, p = got
            text = f"source: {ratio:.2f} of the source changes a random order gives (p {p:.2g})"
            (follows if p < ORDER_P and ratio <= 0.5 else measured).append(text)
    return follows, measured
