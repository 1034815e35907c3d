"""Static findings meet probe results: lint the model's source files and give each finding
a verdict — `confirmed`, `not-reproduced` or `not-checkable` — with the reason.

A finding belongs to the model when it sits in a class the model instantiates (matched by
file and line range), or, for call-site rules (TL101), in a file next to the model's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tlint.rules import ALL_RULES

# The per-rule tables, built from the rule classes (`Rule.probes`, `Rule.verify_site`; each
# fact about a rule lives on its class, rules/*.md's `- Probe:` lines are tested against it).
# Which probes can confirm which rule, in the order they are tried (README "tlint verify").
PROBES_OF_RULE: dict[str, tuple[str, ...]] = {rule.code: rule.probes for rule in ALL_RULES if rule.probes}
# Data rules: `tlint verify` leaves them to the data scan.
DATA_SCAN_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "data"}
# Call-site rules (TL101): their findings sit where the model is called, beside its files.
CALL_SITE_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "call-site"}
# Training-loop rules: their findings sit in the training scripts beside the model's files,
# and warmup-ab judges them with its own A/B figures.
TRAINING_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "training"}


@dataclass
class ModelClass:
    name: str
    file: Path
    start: int
    end: int
    paths: list[str]


def model_classes(result: dict[str, Any]) -> list[ModelClass]:
    return [ModelClass(c["name"], Path(c["file"]), c["start"], c["end"], c["paths"]) for c in result["classes"]]


def source_files(classes: list[ModelClass], roots: list[Path]) -> list[Path]:
    """The user's files among those defining the model's classes (not torch's)."""
    files = {c.file for c in classes if _inside(c.file, roots)}
    return sorted(files)


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def lint(files: list[Path], classes: list[ModelClass]):
    """Diagnostics of the model's files, plus call-site findings in the files beside them."""
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    folders = {f.parent for f in files}
    siblings = sorted({p.resolve() for folder in folders for p in folder.glob("*.py")} - set(files))
    result = Linter(ConfigResolver(), jobs=1).run(files + siblings)
    model_files = {str(f) for f in files}
    kept = []
    for diag in result.diagnostics:
        if diag.suppressed:
            continue
        path = str(Path(diag.path).resolve())
        if path in model_files or diag.code in CALL_SITE_RULES or diag.code in TRAINING_RULES:
            kept.append(diag)
    return kept


def verdicts(diagnostics, classes: list[ModelClass], probes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {p["probe"]: p for p in probes}
    out = []
    for diag in diagnostics:
        owner = _owner(diag, classes)
        if owner is not None and not owner.paths and diag.code not in CALL_SITE_RULES:
            continue  # a class of the same file that this model does not use
        verdict, probe, reason = _verdict(diag, classes, by_name)
        entry = {"code": diag.code, "path": diag.path, "range": diag.range.to_json(), "verdict": verdict,
                 "probe": probe, "reason": reason}
        out.append(entry)
    return out


def _owner(diag, classes: list[ModelClass]) -> ModelClass | None:
    path = Path(diag.path).resolve()
    line = diag.range.start.line
    inside = [c for c in classes if c.file == path and c.start <= line <= c.end]
    return min(inside, key=lambda c: c.end - c.start) if inside else None


def _verdict(diag, classes: list[ModelClass], probes: dict[str, dict]) -> tuple[str, str | None, str]:
    wanted = PROBES_OF_RULE.get(diag.code, ())
    if diag.code in DATA_SCAN_RULES:
        return "not-checkable", None, "checked by the data scan: `tlint scan-data` or `tlint verify --data`"
    if not wanted:
        return "not-checkable", None, f"no runtime probe can test {diag.code}"
    owner = _owner(diag, classes)
    ran = [probes[name] for name in wanted if name in probes]
    if not ran:
        return ("not-checkable", wanted[0],
                f"needs the {' or '.join(wanted)} probe, not run (not built yet or not selected)")
    if diag.code == "TL101":
        return _unmasked_call(probes.get("mask-leak"))
    if diag.code in TRAINING_RULES:
        return _warmup_verdict(diag.code, probes["warmup-ab"])
    if "mask-leak" in wanted and owner is not None:
        own = _own_leak(probes.get("mask-leak"), owner)
        if own is not None:
            return own
    for result in ran:
        if result["status"] == "fail":
            return "confirmed", result["probe"], _because(result, owner)
    passed = [r for r in ran if r["status"] == "pass"]
    if passed:
        result = passed[0]
        return "not-reproduced", result["probe"], (f"{result['probe']} passes: {result['figure']} within "
                                                   f"{result['tolerance']} ({result['unit']})")
    return "not-checkable", ran[0]["probe"], "; ".join(f"{r['probe']} skipped: {r['detail']}" for r in ran)


def _because(result: dict, owner: ModelClass | None) -> str:
    reason = f"{result['probe']} fails: {result['figure']} > {result['tolerance']} ({result['unit']})"
    module = result.get("module")
    if module and owner is not None:
        if any(module == p or module.startswith(p + ".") for p in owner.paths if p != "(model)"):
            return f"{reason}; it first shows in `{module}`, an instance of {owner.name}"
        if "(model)" in owner.paths:
            return f"{reason}; it first shows in `{module}`, inside {owner.name} (the model itself)"
        return f"{reason}; it first shows in `{module}` (the share of {owner.name} is not isolated)"
    return reason


def _own_leak(mask_leak: dict | None, owner: ModelClass) -> tuple[str, str, str] | None:
    """The flagged class's instances tested on their own: noise at pad positions of their
    hidden-state inputs, masks unchanged (None when no instance takes such inputs)."""
    if mask_leak is None or mask_leak["status"] == "skip":
        return None
    own = mask_leak.get("extra", {}).get("own", {})
    figures = {path: own[path] for path in owner.paths if path in own}
    if not figures:
        return None
    path, figure = max(figures.items(), key=lambda item: item[1])
    tolerance = mask_leak["tolerance"]
    if figure > tolerance:
        return "confirmed", "mask-leak", (f"`{path}` ({owner.name}) leaks on its own: noise at pad positions of "
                                          f"its input moves its output at real positions by {figure:.4g} "
                                          f"(> {tolerance}, relative to its output's RMS)")
    overall = "" if mask_leak["status"] == "pass" else f"; the model's leak comes from `{mask_leak['module']}`"
    return "not-reproduced", "mask-leak", (f"{owner.name} does not leak on its own: noise at pad positions of its "
                                           f"input moves its output at real positions by {figure:.4g} "
                                           f"(within {tolerance}){overall}")


def _unmasked_call(mask_leak: dict | None) -> tuple[str, str, str]:
    """TL101 replays the flagged call: ids without a mask."""
    if mask_leak is None:
        return "not-checkable", "mask-leak", "mask-leak was not run"
    figure = mask_leak.get("extra", {}).get("unmasked")
    if figure is None:
        return "not-checkable", "mask-leak", "forward cannot be called with ids alone, as the flagged call does"
    tolerance = mask_leak["tolerance"]
    if figure > tolerance:
        return "confirmed", "mask-leak", (f"called with ids alone, as at this call site, real positions change "
                                          f"by {figure:.4g} (> {tolerance}) when only pad tokens change")
    return "not-reproduced", "mask-leak", (f"called with ids alone, real positions change by {figure:.4g} "
                                           f"(within {tolerance}): pad tokens do not leak")


def _warmup_verdict(code: str, result: dict) -> tuple[str, str, str]:
    """TL307 (high LR): the configured run (no warmup, no clipping) is unstable. TL304 (no
    warmup): it is, and the warmup run is not. TL301 (no clipping): it is and the clipped run
    is not, or its gradient norm spikes above 10x its median."""
    if result["status"] == "skip":
        return "not-checkable", "warmup-ab", f"warmup-ab skipped: {result['detail']}"
    extra = result.get("extra", {})
    runs = extra.get("runs", {})
    plain = runs.get("plain", {})
    figures = (f"max loss spike {result['figure']} of the initial loss (tolerance {result['tolerance']}), final "
               f"loss {plain.get('final', float('nan')):.4g}" + (", diverged" if plain.get("diverged") else "")
               + (f" ({extra['optimizer']})" if extra.get("optimizer") else ""))
    unstable = result["status"] == "fail"
    if code == "TL307":
        if unstable:
            return "confirmed", "warmup-ab", f"the configured learning rate is unstable without warmup: {figures}"
        return "not-reproduced", "warmup-ab", f"the configured learning rate trains stably here: {figures}"
    if code == "TL304":
        warm = runs.get("warmup", {})
        if extra.get("needs_warmup"):
            return "confirmed", "warmup-ab", (f"without warmup {figures}; with warmup the spike is "
                                              f"{warm.get('spike', 0):.3g}")
        why = "warmup does not fix it" if unstable else "the configured run is stable without warmup"
        return "not-reproduced", "warmup-ab", f"{why}: {figures}"
    grad_spike = extra.get("grad_spike", 0.0)
    if extra.get("needs_clipping") or grad_spike > 10:
        return "confirmed", "warmup-ab", (f"without clipping {figures}; gradient norm peaks at {grad_spike:.3g}x "
                                          f"its median; with clipping the spike is "
                                          f"{runs.get('clip', {}).get('spike', 0):.3g}")
    why = "clipping does not fix it" if unstable else "no loss or gradient-norm spike without clipping"
    return "not-reproduced", "warmup-ab", f"{why}: {figures}; gradient norm peaks at {grad_spike:.3g}x its median"
