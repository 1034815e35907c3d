"""The bundled sample projects: the demo triggers every implemented rule exactly where
EXPECTED.txt says; the clean corpus produces no finding at all."""

from __future__ import annotations

from pathlib import Path

from tests.lintutil import found, lint_paths
from tlint.rules import ALL_RULES, ENGINE_CODES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _expected() -> set[tuple[str, int, str]]:
    out = set()
    for line in (FIXTURES / "demo" / "EXPECTED.txt").read_text().splitlines():
        if line.strip():
            where, code = line.split()
            path, lineno = where.rsplit(":", 1)
            out.add((path, int(lineno), code))
    return out


def test_demo_findings_are_exactly_the_expected_ones():
    result = lint_paths([FIXTURES / "demo"])
    assert found(result.diagnostics, FIXTURES / "demo") == _expected()


def test_demo_triggers_every_implemented_rule():
    codes = {code for _, _, code in _expected()}
    implemented = {rule.code for rule in ALL_RULES if rule.code not in ENGINE_CODES and rule.default_enabled}
    assert implemented <= codes


def test_demo_files_alone_give_the_same_findings():
    demo = FIXTURES / "demo"
    per_file = set()
    for path in sorted(demo.glob("*.py")):
        per_file |= found(lint_paths([path]).diagnostics, demo)
    assert per_file == _expected()


def test_clean_corpus_has_no_findings():
    result = lint_paths([FIXTURES / "clean"])
    assert [f"{d.path}:{d.range.start.line} {d.code} {d.message}" for d in result.diagnostics] == []
    assert len(result.files) >= 9


def test_clean_corpus_has_no_error_or_warning_with_every_rule_on():
    result = lint_paths([FIXTURES / "clean"], select=["ALL"])
    bad = [f"{d.path}:{d.range.start.line} {d.code}" for d in result.diagnostics if d.severity != "info"]
    assert bad == []
