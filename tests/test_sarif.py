"""`tlint check --format sarif`: a SARIF 2.1.0 log valid against the official OASIS schema
(tests/sarif-schema-2.1.0.json), that carries every diagnostic of the JSON output, its
fixes and its rules' documents, and counts columns in UTF-16 code units."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from tests.cliutil import REPO, SYNTAX_ERROR, main_in, make_project, run_tlint
from tests.sarifcheck import SCHEMA_PATH, check_sarif
from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range
from tlint.docs import rule_doc
from tlint.reporters import OutputReport, SourceLines, render
from tlint.reporters.sarif import artifact_location, error_log


def _diag(code="TL101", name="missing-attention-mask", severity="error", path="a.py", start=(1, 1), end=(1, 1),
          fix=None, suppressed=False) -> Diagnostic:
    return Diagnostic(code, name, severity, "msg", path, Range(Position(*start), Position(*end)), fix,
                      suppressed=suppressed)


def _sarif(report: OutputReport) -> dict:
    stream = io.StringIO()
    render("sarif", report, stream)
    return json.loads(stream.getvalue())


def test_demo_project_sarif_is_valid_and_matches_the_json_output():
    sarif = run_tlint("check", "fixtures/demo", "--format", "sarif", cwd=REPO)
    plain = run_tlint("check", "fixtures/demo", "--format", "json", cwd=REPO)
    assert sarif.returncode == plain.returncode == 1, sarif.stderr
    log, doc = json.loads(sarif.stdout), json.loads(plain.stdout)
    check_sarif(log)
    (run,) = log["runs"]
    assert run["tool"]["driver"]["name"] == "tlint" and run["columnKind"] == "utf16CodeUnits"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == REPO.as_uri() + "/"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(doc["summary"]["by_code"])
    for rule in rules:
        assert rule["helpUri"].endswith(f"/rules/{rule['id']}-{rule['name']}.md")
        assert rule["shortDescription"]["text"] and rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    levels = {"error": "error", "warning": "warning", "info": "note"}
    assert len(run["results"]) == len(doc["diagnostics"])
    for result, entry in zip(run["results"], doc["diagnostics"]):
        loc = result["locations"][0]["physicalLocation"]
        assert result["ruleId"] == entry["code"] and result["level"] == levels[entry["severity"]]
        assert result["message"]["text"] == entry["message"]
        assert loc["artifactLocation"] == {"uri": entry["path"], "uriBaseId": "%SRCROOT%"}
        start, end = entry["range"]["start"], entry["range"]["end"]
        assert (loc["region"]["startLine"], loc["region"]["endLine"]) == (start["line"], end["line"])
        assert (REPO / entry["path"]).read_text(encoding="utf-8").isascii()  # so columns agree
        assert (loc["region"]["startColumn"], loc["region"]["endColumn"]) == (start["column"], end["column"])


def test_sarif_columns_are_utf16_code_units(tmp_path):
    make_project(tmp_path, {"bad.py": SYNTAX_ERROR, "good.py": "x = 1\n"})
    proc = run_tlint("--format", "sarif", ".", cwd=tmp_path)
    assert proc.returncode == 1
    log = json.loads(proc.stdout)
    check_sarif(log)
    (result,) = log["runs"][0]["results"]
    # `x = "😀" +` then the error at code-point column 10: 9 code points in, the emoji is two
    # UTF-16 units, so the 1-based UTF-16 column is 11.
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 1, "startColumn": 11, "endLine": 1, "endColumn": 11}
    assert result["ruleId"] == "TL001" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "bad.py", "uriBaseId": "%SRCROOT%"}
    assert log["runs"][0]["properties"] == {"files": 2, "parseErrors": 1}


def test_no_findings_is_an_empty_valid_log(tmp_path):
    make_project(tmp_path, {"good.py": "x = 1\n"})
    proc = run_tlint("check", "--format", "sarif", ".", cwd=tmp_path)
    assert proc.returncode == 0
    log = json.loads(proc.stdout)
    check_sarif(log)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


def test_fixes_suppressions_rule_indices_and_levels():
    source = 'a = "😀"; b = 1\nc = 2\n'
    fix = Fix("safe", (Edit(Range(Position(1, 10), Position(1, 15)), "b = 2"),))
    report = OutputReport([_diag(code="TL201", name="x", severity="warning", start=(1, 10), end=(1, 15), fix=fix),
                     _diag(code="TL002", name="unused-suppression", severity="info", start=(2, 1), end=(2, 6)),
                     _diag(start=(2, 1), end=(2, 2), suppressed=True)],
                    ["a.py"], 0, SourceLines({"a.py": source}))
    log = _sarif(report)
    check_sarif(log)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["TL002", "TL101", "TL201"]
    first, second, third = run["results"]
    assert [r["ruleIndex"] for r in run["results"]] == [2, 0, 1]
    assert [r["level"] for r in run["results"]] == ["warning", "note", "error"]
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 1, "startColumn": 11, "endLine": 1, "endColumn": 16}
    (change,) = first["fixes"][0]["artifactChanges"]
    assert change["replacements"] == [{"deletedRegion": {"startLine": 1, "startColumn": 11, "endLine": 1,
                                                         "endColumn": 16}, "insertedContent": {"text": "b = 2"}}]
    assert "fixes" not in second and "suppressions" not in second
    assert third["suppressions"] == [{"kind": "inSource"}]


def test_structural_check_rejects_broken_logs():
    good = error_log("config", "bad key")
    check_sarif(good)
    assert good["runs"][0]["invocations"][0]["executionSuccessful"] is False
    run = good["runs"][0]
    for broken in ({**good, "version": "2.0.0"}, {**good, "extra": 1},
                   {**good, "runs": [{**run, "results": [{"ruleId": "TL101", "level": "fatal",
                                                          "message": {"text": "x"}}]}]},
                   {**good, "runs": [{**run, "results": [{"ruleId": "TL101", "message": {"markdown": "x"}}]}]},
                   {**good, "runs": [{**run, "results": [{"ruleId": "TL101", "message": {"text": "x"}, "locations": [
                       {"physicalLocation": {"artifactLocation": {"uri": "a.py"}, "region": {"startLine": 0}}}]}]}]},
                   {**good, "runs": [{**run, "results": [{"ruleId": "TL101", "message": {"text": "x"},
                                                          "fixes": [{"description": {"text": "y"}}]}]}]}):
        with pytest.raises(jsonschema.ValidationError):
            check_sarif(broken)
    with pytest.raises(AssertionError):
        check_sarif({**good, "runs": []})
    mismatched = {**good, "runs": [{**good["runs"][0], "tool": {"driver": {"name": "tlint", "rules": [{"id": "TL102"}]}},
                                    "results": [{"ruleId": "TL101", "ruleIndex": 0, "message": {"text": "x"}}]}]}
    with pytest.raises(AssertionError):
        check_sarif(mismatched)


def test_artifact_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert artifact_location("src/my file.py") == {"uri": "src/my%20file.py", "uriBaseId": "%SRCROOT%"}
    assert artifact_location(str(tmp_path / "a.py")) == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    elsewhere = Path(tmp_path.anchor) / "elsewhere" / "b.py"
    assert artifact_location(str(elsewhere)) == {"uri": elsewhere.as_uri()}


def test_unreadable_source_still_renders():
    log = _sarif(OutputReport([_diag(path="gone.py", start=(3, 4), end=(3, 9))], ["gone.py"], 0))
    check_sarif(log)
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startColumn"] == 4


def test_vendored_schema_is_the_official_errata01_schema():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    notice = SCHEMA_PATH.with_name("SARIF-SCHEMA-LICENSE.txt").read_text(encoding="utf-8")
    assert "OASIS Open" in notice and "All Rights Reserved" in notice


def test_check_with_a_fix_is_valid_with_rule_help_and_artifact_changes(tmp_path, capsys, monkeypatch):
    source = 'import torch\n\nx = "😀"  # tlint: ignore[TL101]\n# tlint: ignore\ny = 2\n'
    make_project(tmp_path, {"a.py": source})
    proc = main_in(tmp_path, "check", "--extend-select", "TL002", "--no-cache", "--format", "sarif", "a.py",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr  # TL002 is info
    log = json.loads(proc.stdout)
    check_sarif(log)
    (run,) = log["runs"]
    assert run["columnKind"] == "utf16CodeUnits"
    (rule,) = run["tool"]["driver"]["rules"]
    assert rule["id"] == "TL002" and rule["help"]["markdown"] == rule["help"]["text"] == rule_doc("TL002")
    assert rule["fullDescription"]["text"].startswith("Reports a `# tlint: ignore[...]`")
    first, second = run["results"]
    (fix,) = first["fixes"]
    assert fix["description"]["text"] == "Remove the unused suppression"
    assert fix["properties"] == {"applicability": "safe"}
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    # `x = "😀"` before the comment: the emoji is two UTF-16 units, so code-point columns 8
    # (the spaces before the `#`) and 32 (the end of the line) are UTF-16 columns 9 and 33.
    assert change["replacements"] == [{"deletedRegion": {"startLine": 3, "startColumn": 9, "endLine": 3,
                                                         "endColumn": 33}, "insertedContent": {"text": ""}}]
    (change,) = second["fixes"][0]["artifactChanges"]  # a whole comment line
    assert change["replacements"][0]["deletedRegion"] == {"startLine": 4, "startColumn": 1, "endLine": 5,
                                                          "endColumn": 1}
