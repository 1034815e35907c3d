"""The house keeps itself readable: module sizes, one door for rules, no citation of files
outside the repository. (Ruff and mypy run from `.ci/run`; see pyproject.toml.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tlint"
LONG = 800  # lines; a longer module says why at its top
LIMIT = 1000  # lines; no module is longer
REASON = "Over 800 lines:"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_module_size(path: Path):
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= LIMIT, f"{path.name}: {lines} lines (the limit is {LIMIT})"
    if lines > LONG:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert REASON in doc, f"{path.name}: {lines} lines; say why at its top ({REASON!r} in the docstring)"


def test_the_engine_holds_the_run_and_nothing_else():
    """Reading and parsing, the cross-file phase, the rule context and the result types
    live in their own modules; the engine has no class but the run's."""
    tree = ast.parse((PACKAGE / "engine.py").read_text(encoding="utf-8"))
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert classes == {"Linter", "TaskOptions"}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert not functions & {"parse_source", "read_source", "prefilter_skips", "resolve_projects",
                            "unused_suppressions", "internal_error"}


_OUTSIDE = re.compile(r"\b(?:interface|verifier|style|rules)\.md\b|\bshared/spec\b|\.\./shared\b")


def _texts():
    for folder in ("tlint", "tests", "scripts", "bench"):
        yield from sorted((REPO / folder).rglob("*.py"))
    yield from sorted((REPO / "rules").glob("*.md"))
    yield REPO / "README.md"


def test_no_code_or_document_cites_a_file_outside_the_repository():
    cited = []
    for path in _texts():
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _OUTSIDE.finditer(line):
                before = line[max(0, match.start() - 6):match.start()]
                if match.group(0) == "rules.md" and before.endswith(("rules/", "*")):
                    continue  # a document of this repository (`rules/*.md`)
                cited.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)}")
    assert cited == []


def test_the_outside_citation_check_can_fail():
    assert _OUTSIDE.search("exit codes (interface.md)") and _OUTSIDE.search("see ../shared/spec/rules.md")
    assert not _OUTSIDE.search("see rules/README.md")


def test_every_rule_check_takes_a_typed_file_context():
    """`check(self, ctx: FileContext)` in every rule module: what a rule may use is typed."""
    untyped = []
    for path in sorted((PACKAGE / "rules").glob("tl*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name == "check":
                ctx = node.args.args[1] if len(node.args.args) > 1 else None
                if ctx is None or ast.unparse(ctx.annotation or ast.Constant(None)) != "FileContext":
                    untyped.append(f"{path.name}:{node.lineno}")
    assert untyped == []
