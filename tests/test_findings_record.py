"""The CHANGELOG says which rules gained or lost findings (scripts/findings_record.py):
this tree's findings on the corpus are the recorded ones, every rule whose findings
differ from the last release's is named under `### Findings` in the CHANGELOG's top
section, and then the version is not the release's."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import tlint

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import findings_record

REPO = Path(__file__).resolve().parent.parent


def _entry(code: str, path: str = "a.py", line: int = 1, message: str = "m") -> dict:
    return {"path": path, "line": line, "code": code, "message": message}


def test_changes_per_rule_ignore_moved_lines():
    before = [_entry("TL101"), _entry("TL101", line=5, message="n"), _entry("TL301", "b.py")]
    after = [_entry("TL101", line=9), _entry("TL301", "b.py"), _entry("TL301", "c.py"), _entry("TL304")]
    assert findings_record.changes(before, after) == {"TL101": (0, 1), "TL301": (1, 0), "TL304": (1, 0)}
    assert findings_record.changes(before, list(reversed(before))) == {}
    assert findings_record.changelog_lines({"TL101": (2, 1), "TL304": (1, 0)}) == [
        "- TL101 gains 2 findings and loses 1 finding on fixtures/: WHY",
        "- TL304 gains 1 finding on fixtures/: WHY",
    ]


def test_the_record_is_current():
    record = findings_record.load()
    unrecorded = findings_record.changes(record["current"]["findings"], findings_record.findings())
    assert not unrecorded, (
        "the findings on fixtures/ changed:\n" + "\n".join(findings_record.changelog_lines(unrecorded))
        + "\nrun python scripts/findings_record.py --write, and say why under ### Findings in CHANGELOG.md")


def _top_findings_section() -> str:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    top = changelog.split("\n## ", 2)[1]  # the first version section: the unreleased one
    return top.split("\n### Findings\n", 1)[1].split("\n### ", 1)[0] if "\n### Findings\n" in top else ""


def test_changelog_names_each_rule_that_gained_or_lost_findings_since_the_release():
    record = findings_record.load()
    delta = findings_record.changes(record["released"]["findings"], record["current"]["findings"])
    section = _top_findings_section()
    entries = [line for line in section.splitlines() if line.startswith("- ")]
    for code, (gained, lost) in delta.items():
        named = [line for line in entries if re.search(rf"\b{code}\b", line)]
        assert named, f"CHANGELOG.md's top section does not say that {code} gained {gained} / lost {lost} findings"
        assert any((not gained or "gain" in line) and (not lost or "lose" in line or "lost" in line)
                   for line in named), f"{code} gained {gained} and lost {lost} findings: {named}"
    if delta:
        assert tlint.__version__ != record["released"]["version"], "findings changed: bump tlint.__version__"


def test_check_fails_on_unrecorded_findings(tmp_path, capsys):
    record = findings_record.load()
    record["current"]["findings"] = record["current"]["findings"][1:]
    stale = tmp_path / "record.json"
    stale.write_text(json.dumps(record), encoding="utf-8")
    assert findings_record.main(["--check", "--record", str(stale)]) == 1
    dropped = findings_record.load()["current"]["findings"][0]["code"]
    assert f"- {dropped} gains 1 finding on fixtures/" in capsys.readouterr().err
    assert findings_record.main(["--check"]) == 0
