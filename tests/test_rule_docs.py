"""Every rule document's Bad/Good examples are executed, with derived variants."""

from __future__ import annotations

import pytest

from tests.doc_examples import examples, expected_lines, rule_documents, variants
from tests.lintutil import found, lint_tree
from tlint.rules import ALL_RULES, ENGINE_CODES

DOCS = rule_documents()
CASES = []
for code, path in DOCS.items():
    for example in examples(path):
        CASES.append(pytest.param(example, id=f"{code}-{example.kind}{example.number}"))


def test_every_rule_has_a_document_with_all_sections():
    sections = ["## What it does", "## Why it hurts training", "## Bad example", "## Good example",
                "## Known limits", "## How `tlint verify` confirms it"]
    for rule in ALL_RULES:
        path = DOCS.get(rule.code)
        assert path is not None, f"rules/{rule.code}-{rule.name}.md is missing"
        assert path.name == f"{rule.code}-{rule.name}.md"
        text = path.read_text(encoding="utf-8")
        assert text.startswith(f"# {rule.code} {rule.name}\n")
        positions = [text.find(s) for s in sections]
        assert all(p >= 0 for p in positions), (rule.code, [s for s, p in zip(sections, positions) if p < 0])
        assert positions == sorted(positions), f"{rule.code}: sections out of order"
        if rule.code not in ENGINE_CODES:
            kinds = {e.kind for e in examples(path)}
            assert kinds == {"bad", "good"}, f"{rule.code} needs Bad and Good examples"


@pytest.mark.parametrize("example", CASES)
def test_example(example, tmp_path):
    expected = expected_lines(example.files, example.code)
    if example.kind == "bad":
        assert expected, "a Bad example must mark its finding with `# expect: CODE`"
    diagnostics = lint_tree(tmp_path, example.files, select=[example.code])
    got = {f for f in found(diagnostics, tmp_path) if f[2] == example.code}
    assert got == expected


VARIANT_CASES = []
for code, path in DOCS.items():
    for example in examples(path):
        if example.kind == "bad" and example.vary and code not in ENGINE_CODES:
            for name, files in variants(example.files).items():
                VARIANT_CASES.append(pytest.param(example, name, files, id=f"{code}-bad{example.number}-{name}"))


@pytest.mark.parametrize(("example", "variant", "files"), VARIANT_CASES)
def test_bad_example_variant_still_flagged(example, variant, files, tmp_path):
    expected = expected_lines(files, example.code)
    diagnostics = lint_tree(tmp_path, files, select=[example.code])
    got = {f for f in found(diagnostics, tmp_path) if f[2] == example.code}
    assert got == expected, f"variant {variant}:\n" + "\n".join(files.values())
