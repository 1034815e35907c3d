"""Static findings meet probe results: lint the model's source files and give each finding
a verdict — `confirmed`, `not-reproduced`, `inconclusive` or `not-checkable` — with the reason.

`not-reproduced` means the probe has shown it can see the bug on this model: its positive
control (the bug injected by the verifier, `tlint/verify/controls.py`) was caught, or the
probe measures the flagged thing directly (init-stats reads the weights, the attention's
effective scale for TL208, each block's skip share for TL203). A passing probe without that
power gives `inconclusive`, naming what it could not see.

A finding belongs to the model when it sits in a class the model instantiates (matched by
file and line range), or, for call-site rules (TL101), in a file next to the model's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tlint import bounded
from tlint.rules import ALL_RULES

# The per-rule tables, built from the rule classes (`Rule.probes`, `Rule.verify_site`; each
# fact about a rule lives on its class, rules/*.md's `- Probe:` lines are tested against it).
# Which probes can confirm which rule, in the order they are tried (README "tlint verify").
PROBES_OF_RULE: dict[str, tuple[str, ...]] = {rule.code: rule.probes for rule in ALL_RULES if rule.probes}
# Data rules: `tlint verify` leaves them to the data scan.
DATA_SCAN_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "data"}
# Call-site rules (TL101): their findings sit where the model is called, beside its files.
CALL_SITE_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "call-site"}
# Probes whose figure must stay at or above the tolerance.
LOWER_BOUND = {"position-blind", "attention-entropy"}
# Probes that read what the rule flags directly (no control needed to clear it).
DIRECT_PROBES = {"init-stats"}
# A probe's positive control speaks for these rules only (absent: for every rule it maps to).
# norm-scale's control skips every norm of the blocks: it shows the probe sees a skipped norm,
# not TL215's one attention input left raw (raw keys under normalised values barely move the
# branch), so a pass never clears TL215.
CONTROL_RULES: dict[str, set[str]] = {"depth-growth": {"TL203"}, "attention-entropy": {"TL209"}, "norm-scale": set()}
# Direct readings for one rule: (probe whose entry holds it, reader -> verdict or None).
SKIP_MIN = 0.25          # tlint.verify.depth.SKIP_MIN (no torch here)
SCALE_BAND = 1.9         # the applied scale within this factor of 1/sqrt(d_head) is the usual one
# Training-loop rules: their findings sit in the training scripts beside the model's files,
# and warmup-ab judges them with its own A/B figures.
TRAINING_RULES = {rule.code for rule in ALL_RULES if rule.verify_site == "training"}
# the rules a probe tests: run by `lint` even where they are off by default (practice rules)
PROBED_RULES = {rule.code for rule in ALL_RULES if rule.probes} | TRAINING_RULES


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


def lint(files: list[Path], classes: list[ModelClass], roots: list[Path] | None = None):
    """Diagnostics of the model's files, plus call-site and training-loop findings in the
    files beside them and in the project's files that import the model (through the import
    graph from the roots: a training script at the repository root beside the package).
    The rules a probe tests (`PROBED_RULES`: those naming a probe, and the training rules
    that the `warmup-ab` probe judges) run even where they are off by default (practice
    rules): testing them is what the probes are for; the project's `ignore` still turns them
    off."""
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    folders = {f.parent for f in files}
    around = {p.resolve() for folder in folders for p in folder.glob("*.py")} - set(files)
    if roots:
        around |= importers(files, roots) - set(files)
    result = Linter(ConfigResolver(), jobs=1, extend_select=sorted(PROBED_RULES)).run(files + sorted(around))
    model_files = {str(f) for f in files}
    kept = []
    for diag in result.diagnostics:
        if diag.suppressed:
            continue
        path = str(Path(diag.path).resolve())
        if path in model_files or diag.code in CALL_SITE_RULES or diag.code in TRAINING_RULES:
            kept.append(diag)
    return kept


_SKIP_DIRS = {"site-packages", "node_modules", "__pycache__", "build", "dist", "venv", "env"}
_MAX_FILES = 3000


def _project_files(roots: list[Path]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        stack = [root]
        while stack and len(out) < _MAX_FILES:
            folder = stack.pop()
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir():
                    if not entry.name.startswith(".") and entry.name not in _SKIP_DIRS:
                        stack.append(entry)
                elif entry.suffix == ".py":
                    out.append(entry.resolve())
    return out


def _module_name(path: Path, roots: list[Path]) -> str | None:
    for root in roots:
        try:
            parts = list(path.resolve().relative_to(root.resolve()).with_suffix("").parts)
        except ValueError:
            continue
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts) if parts else None
    return None


def _imports(path: Path, module: str | None, text: str) -> set[str]:
    """The modules a file imports (`import a.b`: a.b; `from a import b`: a and a.b; relative
    imports resolved against the file's own module)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    package = (module or "").split(".")[:-1] if path.name != "__init__.py" else (module or "").split(".")
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*anchor, *([base] if base else [])])
            if base:
                names.add(base)
            names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return names


def importers(files: list[Path], roots: list[Path], depth: int = 3) -> set[Path]:
    """The project's files that import the model's modules, directly or through up to
    `depth` modules between (the import graph, read with `ast`, from the roots)."""
    wanted = {name for f in files if (name := _module_name(f, roots))}
    if not wanted:
        return set()
    texts: dict[Path, str] = {}
    for path in _project_files(roots):
        try:
            texts[path] = bounded.read_text(path, bounded.SOURCE_BYTES, errors="replace")
        except OSError:
            continue
    parsed: dict[Path, tuple[str | None, set[str]]] = {}
    found: set[Path] = set()
    for _ in range(depth):
        leaves = {name.rpartition(".")[2] for name in wanted}
        new = set()
        for path, text in texts.items():
            if path in found or not any(leaf in text for leaf in leaves):
                continue  # (a file that never spells the module's name cannot import it: not parsed)
            if path not in parsed:
                module = _module_name(path, roots)
                parsed[path] = (module, _imports(path, module, text))
            if parsed[path][1] & wanted:
                new.add(path)
        if not new:
            break
        found |= new
        wanted |= {module for p in new if (module := parsed[p][0])}
    return found


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
    direct = DIRECT_MEASURES.get(diag.code)
    measured = None
    if direct is not None and direct[0] in probes and probes[direct[0]]["status"] != "skip":
        measured = direct[1](probes[direct[0]])
        if measured is not None and measured[0] == "confirmed":  # the direct reading names the cause
            return measured
    for result in ran:
        if result["status"] == "fail":
            return "confirmed", result["probe"], _because(result, owner)
    if measured is not None:
        return measured
    passed = [r for r in ran if r["status"] == "pass"]
    if passed:
        return _cleared(diag.code, passed)
    return "not-checkable", ran[0]["probe"], "; ".join(f"{r['probe']} skipped: {r['detail']}" for r in ran)


def _passes(result: dict) -> str:
    bound = "at or above" if result["probe"] in LOWER_BOUND else "within"
    return f"{result['probe']} passes: {result['figure']} {bound} {result['tolerance']} ({result['unit']})"


def _cleared(code: str, passed: list[dict]) -> tuple[str, str, str]:
    """`not-reproduced` when a passing probe has the power to see the bug here (a caught
    positive control, or a direct reading), else `inconclusive` naming what is missing."""
    missing = []
    for result in passed:
        if result["probe"] in DIRECT_PROBES:
            return "not-reproduced", result["probe"], f"{_passes(result)}; it reads the flagged thing directly"
        control = result.get("control")
        applies = CONTROL_RULES.get(result["probe"])
        if control is None or (applies is not None and code not in applies):
            missing.append(f"{result['probe']} has no positive control for {code}")
            continue
        if control["caught"]:
            return "not-reproduced", result["probe"], (f"{_passes(result)}; its positive control "
                                                       f"({control['injected']}) was caught ({control['figure']}), "
                                                       "so it would see the bug")
        missing.append(f"{result['probe']}'s positive control ({control['injected']}) was not caught: "
                       f"{control['detail']}")
    result = passed[0]
    return "inconclusive", result["probe"], (f"{_passes(result)}, but it cannot show the bug is absent here: "
                                             + "; ".join(missing))


def _skip_share(depth: dict) -> tuple[str, str, str] | None:
    """TL203: each block's skip share (depth-growth's extra `skip`)."""
    shares = depth.get("extra", {}).get("skip") or []
    if not shares:
        return None
    low = min(range(len(shares)), key=lambda i: shares[i])
    stack = depth.get("extra", {}).get("stack", "blocks")
    figures = ", ".join(f"{v:.2f}" for v in shares)
    if shares[low] < SKIP_MIN:
        return "confirmed", "depth-growth", (f"block `{stack}.{low}` has no residual path: a small change of its "
                                             f"input reaches its output with cosine {shares[low]:.3g} (< {SKIP_MIN}; "
                                             f"a residual block passes it through, ~1); per block: {figures}")
    control = depth.get("control")
    if control is not None and control["caught"]:
        return "not-reproduced", "depth-growth", (f"every block passes a change of its input through (skip share "
                                                  f">= {SKIP_MIN}: {figures}); with the residuals removed it "
                                                  f"falls to {control['figure']}")
    return None


def _scale(entropy: dict) -> tuple[str, str, str] | None:
    """TL208: the attention's effective scale relative to 1/sqrt(d_head) (attention-entropy's
    extra `scale`), tracked through the products that make the scores."""
    ratios = entropy.get("extra", {}).get("scale") or []
    if not ratios:
        return None
    worst = max(ratios, key=lambda r: abs(math.log(max(r, 1e-12))))
    listed = ", ".join(f"{r:.3g}" for r in ratios[:6])
    if not 1 / SCALE_BAND <= worst <= SCALE_BAND:
        how = "not scaled down" if worst > 1 else "scaled down too far"
        return "confirmed", "attention-entropy", (f"the attention scores are {how}: the scale applied to q·k is "
                                                  f"{worst:.3g} x 1/sqrt(d_head) (per attention: {listed}); "
                                                  "the entropy at init does not show it, the scale does")
    return "not-reproduced", "attention-entropy", (f"the attention scores are scaled by 1/sqrt(d_head) (applied "
                                                   f"scale / 1/sqrt(d_head): {listed}), measured on the products "
                                                   "that make them")


def _because(result: dict, owner: ModelClass | None) -> str:
    bound = "<" if result["probe"] in LOWER_BOUND else ">"
    reason = f"{result['probe']} fails: {result['figure']} {bound} {result['tolerance']} ({result['unit']})"
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
    read = mask_leak.get("extra", {}).get("own_reads", {}).get(path)
    if read is None or read <= tolerance:
        return "inconclusive", "mask-leak", (f"{owner.name} does not leak on its own ({figure:.4g}, within "
                                             f"{tolerance}), but noise at its real positions does not move its output "
                                             f"either ({read}): the test cannot see a leak through it{overall}")
    return "not-reproduced", "mask-leak", (f"{owner.name} does not leak on its own: noise at pad positions of its "
                                           f"input moves its output at real positions by {figure:.4g} "
                                           f"(within {tolerance}), noise at the real positions by {read:.4g}{overall}")


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
    if mask_leak.get("extra", {}).get("pads_unseen"):
        return "inconclusive", "mask-leak", (f"called with ids alone, real positions change by {figure:.4g} (within "
                                             f"{tolerance}), but with right padding a causal model's real positions "
                                             "never see the pads: a missing mask cannot show here (try "
                                             "`padding-side = \"left\"`)")
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


DIRECT_MEASURES = {"TL203": ("depth-growth", _skip_share), "TL208": ("attention-entropy", _scale)}
