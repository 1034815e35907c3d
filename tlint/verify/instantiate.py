"""`tlint verify` with no model configured: lint the given paths (or the config's folder),
and build each class that holds a finding a probe can test, when its constructor needs no
argument; run the probes its findings map to and give each finding a verdict.

Each class is built and probed in its own child process (the same isolation as a configured
model: temporary working directory, no bytecode, `python-path`), under one shared `timeout`.
A class that needs arguments, is not an nn.Module, does not take token ids, or fails to load
gives its findings `not-checkable` with the reason; it is not a usage error. No torch here."""

from __future__ import annotations

import ast
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tlint import bounded
from tlint.verify.options import NO_MODEL, PROBES, OptionsError, VerifyOptions


def verify_flagged(options: VerifyOptions, paths: list[Path], verbose: bool = False
                   ) -> tuple[dict[str, Any], list[dict], list[dict]]:
    """(model summary, probe entries, findings) in the shapes the reporters take."""
    from tlint.verify.command import VerifyError, run_worker
    from tlint.verify.matching import PROBES_OF_RULE, model_classes, verdicts

    roots = [Path(options.root), *(Path(p) for p in options.python_path)]
    targets = [p.resolve() for p in paths] or [Path(options.root)]
    diagnostics = [d for d in _lint(targets) if d.code in PROBES_OF_RULE]
    if not diagnostics:
        where = ", ".join(str(t) for t in targets)
        raise OptionsError(f"{NO_MODEL}: no `model` is configured and `tlint check` found no finding a probe can "
                           f"test in {where}. Give `--model pkg.module:factory` or set `model = "
                           "\"pkg.module:factory\"` in [tool.tlint.verify] (a callable returning a torch.nn.Module, "
                           "or an nn.Module class; `model-kwargs` are passed to it)", kind="usage")
    by_class: dict[tuple[str, str], list] = {}
    findings: list[dict] = []
    for diag in diagnostics:
        owner, reason = _owner(Path(diag.path).resolve(), diag.range.start.line, roots)
        if owner is None:
            findings.append(_not_checkable(diag, None, reason))
        else:
            by_class.setdefault(owner, []).append(diag)
    deadline = time.monotonic() + options.timeout
    models: list[dict[str, Any]] = []
    probes: list[dict] = []
    for (module, qualname), diags in sorted(by_class.items()):
        wanted = {name for d in diags for name in PROBES_OF_RULE[d.code]}
        selected = [name for name in PROBES if name in wanted and name in options.probes]
        if not selected:
            for diag in diags:
                needs = " or ".join(PROBES_OF_RULE[diag.code])
                findings.append(_not_checkable(diag, PROBES_OF_RULE[diag.code][0],
                                               f"needs the {needs} probe, not run (not built yet or not selected)"))
            continue
        spec = f"{module}:{qualname}"
        run_options = replace(options, model=spec, model_kwargs={}, instantiate=True, probes=selected)
        try:
            result = run_worker(run_options, verbose=verbose, deadline=deadline)
        except VerifyError as exc:
            for diag in diags:
                reason = str(exc) if exc.kind == "arguments" else f"{qualname} could not be verified on its own: {exc}"
                findings.append(_not_checkable(diag, None, reason))
            continue
        findings.extend(verdicts(diags, model_classes(result), result["probes"]))
        models.append(result["model"])
        probes.extend({**entry, "detail": f"[{qualname}] {entry['detail']}".rstrip()} for entry in result["probes"])
    findings.sort(key=lambda f: (f["path"], f["range"]["start"]["line"], f["range"]["start"]["column"], f["code"]))
    if not models:  # nothing was built: no probe ran, so nothing was verified
        reasons = list(dict.fromkeys(f["reason"] for f in findings))
        raise OptionsError(f"{NO_MODEL}: no `model` is configured and none of the {len(findings)} findings a probe "
                           f"can test sits in a class the verifier could build alone ({reasons[0]}"
                           + (f"; and {len(reasons) - 1} more reasons" if len(reasons) > 1 else "") + "). Give "
                           "`--model pkg.module:factory` or set `model = \"pkg.module:factory\"` in "
                           "[tool.tlint.verify] (a callable returning a torch.nn.Module, or an nn.Module class; "
                           "`model-kwargs` are passed to it)", kind="usage")
    return _summary(models), probes, findings


def _lint(targets: list[Path]):
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    result = Linter(ConfigResolver(), jobs=1).run(targets)
    return [d for d in result.diagnostics if not d.suppressed]


def _not_checkable(diag, probe: str | None, reason: str) -> dict[str, Any]:
    return {"code": diag.code, "path": diag.path, "range": diag.range.to_json(), "verdict": "not-checkable",
            "probe": probe, "reason": reason}


def _summary(models: list[dict[str, Any]]) -> dict[str, Any]:
    """One `model` entry for the classes that were built (the verifier's JSON schema has one)."""
    if not models:
        return {"factory": "(none: no model configured, no flagged class could be built alone)", "class": "(none)",
                "parameters": 0, "call": "", "convention": "", "causal": False, "vocab_size": None}

    def joined(key: str) -> str:
        return ", ".join(dict.fromkeys(str(m[key]) for m in models))

    return {"factory": joined("factory"), "class": joined("class"),
            "parameters": sum(m["parameters"] for m in models), "call": joined("call"),
            "convention": "; ".join(dict.fromkeys(m["convention"] for m in models)),
            "causal": any(m["causal"] for m in models), "vocab_size": joined("vocab_size")}


def _owner(path: Path, line: int, roots: list[Path]) -> tuple[tuple[str, str] | None, str]:
    """((module, class qualname), "") of the innermost class around `line`, importable from
    the roots; else (None, why not)."""
    try:
        tree = ast.parse(bounded.read_text(path, bounded.SOURCE_BYTES))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        return None, f"cannot read {path.name}: {exc}"
    found = _enclosing_class(tree, line)
    if found is None:
        return None, "not inside a class: set `model` in [tool.tlint.verify] (or --model) to verify it"
    qualname, nested_in_function = found
    if nested_in_function:
        return None, f"{qualname} is defined inside a function and cannot be imported: set `model` to a factory"
    module = _module_name(path, roots)
    if module is None:
        return None, (f"{path.name} cannot be imported as a module from the config's folder or `python-path` "
                      "(add its import root to `python-path`)")
    return (module, qualname), ""


def _enclosing_class(tree: ast.AST, line: int) -> tuple[str, bool] | None:
    best: tuple[str, bool] | None = None

    def visit(node: ast.AST, prefix: str, in_function: bool) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            start, end = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
            if start is None or end is None or not start <= line <= end:
                continue
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                best = (name, in_function)
                visit(child, name + ".", in_function)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{prefix}{child.name}.<locals>.", True)
            else:
                visit(child, prefix, in_function)

    visit(tree, "", False)
    return best


def _module_name(path: Path, roots: list[Path]) -> str | None:
    """The dotted module name of `path` under the deepest root that holds it."""
    for root in sorted((r.resolve() for r in roots), key=lambda r: len(r.parts), reverse=True):
        if root not in path.parents:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None
