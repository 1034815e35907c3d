"""Each fact about a rule lives on its class (`tlint.rules.base.Rule`), and everything else
agrees with it: the registry (`tlint.rules.RULE_MODULES`, one module, one rule), the header
lines of its document (`rules/TLNNN-name.md`), the verifier's tables, and the imports (no
rule imports another rule, `tlint.verify` or torch)."""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

from tlint.rules import ALL_RULES, BY_CODE, ENGINE_CODES, RULE_MODULES, rule_of_module, rules_defined_in, the_rule
from tlint.rules.base import KINDS, SEVERITY_OF_KIND, VERIFY_SITES, Rule

REPO = Path(__file__).resolve().parent.parent
RULES_PACKAGE = REPO / "tlint" / "rules"
VIEWS_PACKAGE = REPO / "tlint" / "views"
DOCS = REPO / "rules"
HEADER_KEYS = ["Kind", "Severity", "Default", "Probe", "Options"]


# --- the registry: one entry per rule ------------------------------------------------------

def rule_module_files() -> list[Path]:
    return sorted(RULES_PACKAGE.glob("tl*.py"))


def test_every_rule_module_is_listed_and_defines_exactly_one_registered_rule():
    for path in rule_module_files():
        assert path.stem in RULE_MODULES, f"{path.name} is not listed in tlint.rules.RULE_MODULES"
        module = importlib.import_module(f"tlint.rules.{path.stem}")
        defined = rules_defined_in(module)
        assert len(defined) == 1, f"{path.name} defines {len(defined)} Rule subclasses: {defined}"
        assert defined[0] in ALL_RULES, f"{path.name}: {defined[0].__name__} is not registered"


def test_every_registered_rule_comes_from_a_listed_module_named_after_it():
    assert len(set(RULE_MODULES)) == len(RULE_MODULES)
    assert len(ALL_RULES) == len(RULE_MODULES)
    files = {path.stem for path in rule_module_files()}
    for name, rule in zip(RULE_MODULES, ALL_RULES):
        assert name in files, f"RULE_MODULES lists {name}, which is no tlint/rules/tl*.py file"
        assert rule.__module__ == f"tlint.rules.{name}"
        assert name == f"{rule.code.lower()}_{rule.name.replace('-', '_')}", name


def test_registry_order_and_lookups():
    codes = [rule.code for rule in ALL_RULES]
    assert codes == sorted(codes) and len(set(codes)) == len(codes)
    assert ENGINE_CODES == {"TL001", "TL002", "TL003"}
    for rule in ALL_RULES:
        assert BY_CODE[rule.code] is rule
        assert re.fullmatch(r"TL\d{3}", rule.code) and re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.name)


def _module(name: str, *classes: type) -> types.ModuleType:
    module = types.ModuleType(name)
    for cls in classes:
        cls.__module__ = name
        setattr(module, cls.__name__, cls)
    module.Rule = Rule  # imported, not defined: does not count
    return module


def test_a_module_with_no_rule_or_two_rules_is_an_error():
    class One(Rule):
        code, name, kind, summary = "TL998", "one", "defect", "One."

    class Two(Rule):
        code, name, kind, summary = "TL999", "two", "defect", "Two."

    assert the_rule(_module("fake_one", One)) is One
    with pytest.raises(ImportError, match="exactly one Rule subclass, found none"):
        the_rule(_module("fake_none"))
    with pytest.raises(ImportError, match="exactly one Rule subclass, found One, Two"):
        the_rule(_module("fake_two", One, Two))

    class Elsewhere(Rule):
        code, name, kind, summary = "TL997", "elsewhere", "defect", "Elsewhere."
        verify_site = "nowhere"

    with pytest.raises(ImportError, match="verify_site"):
        the_rule(_module("fake_site", Elsewhere))
    with pytest.raises(ModuleNotFoundError):
        rule_of_module("tl000_no_such_rule")


# --- the kind: one meaning, one severity, one default -----------------------------------------

@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_every_rule_has_a_kind_that_gives_its_severity_and_default(rule):
    assert "kind" in vars(rule), f"{rule.code} sets no kind"
    assert rule.kind in KINDS
    assert rule.severity == SEVERITY_OF_KIND[rule.kind]
    if rule.kind == "practice":
        assert not rule.default_enabled, f"{rule.code}: a practice rule is on by default"


def test_a_rule_without_a_kind_or_with_a_severity_of_its_own_is_an_error():
    class NoKind(Rule):
        code, name, summary = "TL996", "no-kind", "No kind."

    with pytest.raises(ImportError, match="does not set kind"):
        the_rule(_module("fake_no_kind", NoKind))

    class OddKind(Rule):
        code, name, kind, summary = "TL995", "odd-kind", "style", "Odd."

    with pytest.raises(ImportError, match="kind 'style' is not one of"):
        the_rule(_module("fake_odd_kind", OddKind))
    with pytest.raises(TypeError, match="sets `severity`"):
        type("OwnSeverity", (Rule,), {"code": "TL994", "name": "own", "kind": "defect", "severity": "error"})
    with pytest.raises(TypeError, match="practice rule is off by default"):
        type("OnPractice", (Rule,), {"code": "TL993", "name": "on", "kind": "practice", "default_enabled": True})
    practice = type("Practice", (Rule,), {"code": "TL992", "name": "advice", "kind": "practice"})
    assert (practice.severity, practice.default_enabled) == ("info", False)


# --- the documents' header lines -----------------------------------------------------------

def header(path: Path) -> dict[str, str]:
    """`- Key: value` lines between the title and the first section (continuation lines,
    indented, joined with single spaces), in order."""
    lines = path.read_text(encoding="utf-8").split("\n## ", 1)[0].splitlines()[1:]
    items: dict[str, str] = {}
    key = None
    for line in lines:
        if line.startswith("- "):
            key, _, value = line[2:].partition(": ")
            assert key not in items, f"{path.name}: `- {key}:` twice"
            items[key] = value.strip()
        elif line.startswith("  ") and key is not None:
            items[key] += " " + line.strip()
        else:
            assert not line.strip(), f"{path.name}: unexpected header line {line!r}"
    return items


def _split_remark(value: str) -> tuple[str, str | None]:
    """`main (remark)` -> (main, remark); a value without a trailing remark -> (value, None)."""
    match = re.fullmatch(r"(.*?) \((.*)\)", value)
    return (match.group(1), match.group(2)) if match else (value, None)


def expected_probe(rule: type[Rule]) -> str:
    words = list(rule.probes) + (["data-scan"] if rule.verify_site == "data" else [])
    return ", ".join(words) or "none"


def documented_options(value: str, rule: type[Rule]) -> dict[str, str]:
    """{option: its parenthesised description} of an Options line: "none", "none (remark)",
    "the shared `x` option in `[tool.tlint]` (...)", or "`[tool.tlint.rules.<name>]` `a` (...),
    `b` (...)"."""
    if _split_remark(value)[0] == "none" or value.startswith("the shared "):
        return {}
    table = f"`[tool.tlint.rules.{rule.name}]` "
    assert value.startswith(table), f"{rule.code}: Options must start with {table!r} or say none: {value!r}"
    options: dict[str, str] = {}
    depth, ticked, last, text = 0, False, None, ""
    for char in value[len(table):]:
        if char == "`" and depth == 0:
            ticked = not ticked
            if ticked:
                text = ""
            else:
                last = text
                options[last] = ""
            continue
        if ticked:
            text += char
        elif char == "(":
            depth += 1
            if depth == 1:
                continue
        elif char == ")":
            depth -= 1
            if depth == 0:
                continue
        if depth > 0:
            assert last is not None, f"{rule.code}: a description before any option name"
            options[last] += char
    return options


def test_every_document_belongs_to_a_registered_rule():
    for path in sorted(DOCS.glob("TL*.md")):
        code = path.name.split("-", 1)[0]
        assert code in BY_CODE, f"{path.name}: no rule {code} is registered"
        rule = BY_CODE[code]
        assert path.name == f"{rule.code}-{rule.name}.md"
        assert path.read_text(encoding="utf-8").startswith(f"# {rule.code} {rule.name}\n")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_document_header_matches_the_rule_class(rule):
    path = DOCS / f"{rule.code}-{rule.name}.md"
    assert path.is_file(), f"{path.name} is missing"
    items = header(path)
    assert list(items) == HEADER_KEYS, f"{path.name}: header lines {list(items)}, want {HEADER_KEYS}"

    assert items["Kind"] == rule.kind
    assert items["Severity"] == rule.severity

    default, remark = _split_remark(items["Default"])
    assert default == ("enabled" if rule.default_enabled else "disabled"), items["Default"]
    if not rule.default_enabled:
        preset = " or `--extend-select practice`" if rule.kind == "practice" else ""
        assert remark == f"enable with `--extend-select {rule.code}`{preset}", items["Default"]

    assert _split_remark(items["Probe"])[0] == expected_probe(rule), (
        f"{path.name}: `- Probe: {items['Probe']}` but the class says {expected_probe(rule)!r}")

    options = documented_options(items["Options"], rule)
    assert sorted(options) == sorted(rule.options), f"{path.name}: documented options {sorted(options)}"
    for name, description in options.items():
        default = re.search(r"default `([^`]*)`", description)
        assert default is not None, f"{path.name}: `{name}` does not give its default"
        assert ast.literal_eval(default.group(1)) == rule.options[name], f"{path.name}: `{name}` default"


def test_header_checks_can_fail():
    class Fake(Rule):
        code, name, kind, summary = "TL998", "fake-rule", "defect", "Fake."
        options = {"model-names": [], "max-lr": 1e-3}

    value = ("`[tool.tlint.rules.fake-rule]` `model-names` (list of words, e.g. `[\"a\"]`; default `[]`), "
             "`max-lr` (default `1e-3`: a (nested) remark)")
    assert documented_options(value, Fake) == {"model-names": "list of words, e.g. `[\"a\"]`; default `[]`",
                                               "max-lr": "default `1e-3`: a (nested) remark"}
    assert documented_options("none (a remark)", Fake) == {}
    with pytest.raises(AssertionError):
        documented_options("`[tool.tlint.rules.other]` `x` (default `1`)", Fake)
    Fake.probes, Fake.verify_site = ("mask-leak", "grad-flow"), "model"
    assert expected_probe(Fake) == "mask-leak, grad-flow"
    Fake.probes, Fake.verify_site = (), "data"
    assert expected_probe(Fake) == "data-scan"
    assert _split_remark("data-scan (pad ratio)") == ("data-scan", "pad ratio")


# --- what the verifier reads: names it knows, tables built from the classes -----------------

def test_verify_attributes_name_known_probes_and_checks():
    from tlint.verify.data import CHECKS, checked_rules
    from tlint.verify.options import PROBES, TRAINING_PROBES

    for rule in ALL_RULES:
        assert isinstance(rule.probes, tuple) and len(set(rule.probes)) == len(rule.probes), rule.code
        for probe in rule.probes:
            assert probe in PROBES or probe in TRAINING_PROBES, f"{rule.code}: no probe {probe!r}"
        assert rule.verify_site in VERIFY_SITES, rule.code
        assert rule.data_check is None or rule.data_check in CHECKS, f"{rule.code}: no data check {rule.data_check!r}"
        if rule.verify_site == "training":  # judged with warmup-ab's A/B figures
            assert "warmup-ab" in rule.probes, rule.code
        if rule.produced_by_engine:
            assert not rule.probes and rule.data_check is None, rule.code
    tested = checked_rules()
    assert list(tested) == list(CHECKS)
    assert {code for codes in tested.values() for code in codes} == {r.code for r in ALL_RULES if r.data_check}


def test_verifier_tables_are_built_from_the_classes():
    from tlint.verify import matching

    assert matching.PROBES_OF_RULE == {r.code: r.probes for r in ALL_RULES if r.probes}
    assert matching.DATA_SCAN_RULES == {r.code for r in ALL_RULES if r.verify_site == "data"}
    assert matching.CALL_SITE_RULES == {r.code for r in ALL_RULES if r.verify_site == "call-site"}
    assert matching.TRAINING_RULES == {r.code for r in ALL_RULES if r.verify_site == "training"}


# --- imports: no rule imports another rule, tlint.verify or torch ----------------------------

def imported_modules(source: str, package: str) -> set[str]:
    """Every module an `import`/`from ... import` of `source` names (a module of `package`),
    `from a import b` counted as both `a` and `a.b`; relative imports resolved."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


_FORBIDDEN = re.compile(r"tlint\.rules\.tl\d.*|tlint\.verify(\..*)?|torch(\..*)?")


def forbidden_imports(source: str, package: str) -> list[str]:
    return sorted(m for m in imported_modules(source, package) if _FORBIDDEN.fullmatch(m))


@pytest.mark.parametrize("path", [*rule_module_files(), RULES_PACKAGE / "base.py", *sorted(VIEWS_PACKAGE.glob("*.py"))],
                         ids=lambda path: f"{path.parent.name}/{path.name}")
def test_no_rule_or_view_imports_a_rule_the_verifier_or_torch(path):
    package = f"tlint.{path.parent.name}"
    bad = forbidden_imports(path.read_text(encoding="utf-8"), package)
    assert not bad, f"{path.relative_to(REPO)} imports {', '.join(bad)}: shared helpers belong in tlint/views/"


def test_registry_imports_neither_the_verifier_nor_torch():
    bad = forbidden_imports((RULES_PACKAGE / "__init__.py").read_text(encoding="utf-8"), "tlint.rules")
    assert not bad


def test_forbidden_imports_are_found():
    package = "tlint.rules"
    assert forbidden_imports("from tlint.rules.tl205_positional_encoding_unused import is_positional_name", package)
    assert forbidden_imports("def f():\n    from tlint.rules.tl103_unused_mask_argument import _strings\n", package)
    assert forbidden_imports("from . import tl205_positional_encoding_unused", package)
    assert forbidden_imports("from .tl205_positional_encoding_unused import x", package)
    assert forbidden_imports("from tlint.rules import tl205_positional_encoding_unused", package)
    assert forbidden_imports("from tlint import verify", package)
    assert forbidden_imports("import tlint.verify.matching", package)
    assert forbidden_imports("import torch.nn as nn", package)
    assert forbidden_imports("from torch import nn", package)
    assert not forbidden_imports("from tlint.rules.base import Rule\nfrom tlint.views.vocabulary import "
                                 "is_positional_name\nimport torchvision_like_name_not_torch", package)
    assert not forbidden_imports("from .base import Rule", package)
