"""`tlint verify --format sarif|lsp`: the static findings (they have a source location) as
SARIF results and LSP diagnostics, with their verdict, probe and figure; the same findings
and positions as the JSON output (UTF-16 columns); errors as a failed SARIF invocation."""

from __future__ import annotations

import json

import pytest

from tests.cliutil import make_project, run_tlint
from tests.sarifcheck import check_sarif
from tests.test_verify_cli import CONFIG, TAGGER
from tests.torchutil import import_torch

# slow: runs the verifier on the demo's models for each output format
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_verify_formats")]

import_torch()

# The TL102 line gets an emoji before the flagged call: 2 UTF-16 units, 1 code point.
EMOJI_TAGGER = TAGGER.replace("        x = x + self.attn(h, h, h, need_weights=False)[0]",
                              '        tag = "😀"; x = x + self.attn(h, h, h, need_weights=False)[0]')
ARGS = ("verify", "--model", "proj.model:Tagger", "--probe", "mask-leak")


# duration: the verifier once per output format, shared by the module's tests
@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    assert EMOJI_TAGGER != TAGGER
    root = make_project(tmp_path_factory.mktemp("verify-formats"),
                        {"src/proj/__init__.py": "", "src/proj/model.py": EMOJI_TAGGER, "tlint.toml": CONFIG})
    runs = {fmt: run_tlint(*ARGS, "--format", fmt, cwd=root) for fmt in ("json", "sarif", "lsp")}
    return root, runs


def test_sarif_has_one_result_per_finding_with_verdict_probe_and_figure(outputs):
    _, runs = outputs
    assert runs["sarif"].returncode == runs["json"].returncode == 1, runs["sarif"].stderr
    report, log = json.loads(runs["json"].stdout), json.loads(runs["sarif"].stdout)
    check_sarif(log)
    (run,) = log["runs"]
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]
    assert run["properties"]["model"] == report["model"] and run["properties"]["summary"] == report["summary"]
    assert run["properties"]["probes"] == report["probes"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["TL102", "TL103"]
    mask_leak = report["probes"][0]
    results = {r["ruleId"]: r for r in run["results"]}
    assert len(results) == len(report["findings"]) == 2
    for finding in report["findings"]:
        result = results[finding["code"]]
        props = result["properties"]
        assert (props["verdict"], props["probe"], props["reason"]) == (finding["verdict"], finding["probe"],
                                                                        finding["reason"])
        assert props["figure"] == mask_leak["figure"] and props["tolerance"] == mask_leak["tolerance"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "src/proj/model.py", "uriBaseId": "%SRCROOT%"}
        assert loc["region"]["startLine"] == finding["range"]["start"]["line"]
        assert finding["code"] in result["message"]["text"] and finding["verdict"] in result["message"]["text"]
    assert (results["TL102"]["kind"], results["TL102"]["level"]) == ("fail", "error")  # confirmed
    assert (results["TL103"]["kind"], results["TL103"]["level"]) == ("pass", "none")   # not reproduced


def test_sarif_and_lsp_columns_count_utf16_units(outputs):
    _, runs = outputs
    report = json.loads(runs["json"].stdout)
    (tl102,) = [f for f in report["findings"] if f["code"] == "TL102"]
    column = tl102["range"]["start"]["column"]  # 1-based code points, after the emoji
    region = next(r for r in json.loads(runs["sarif"].stdout)["runs"][0]["results"]
                  if r["ruleId"] == "TL102")["locations"][0]["physicalLocation"]["region"]
    assert region["startColumn"] == column + 1
    (payload,) = [json.loads(line) for line in runs["lsp"].stdout.splitlines()]
    diag = next(d for d in payload["diagnostics"] if d["code"] == "TL102")
    assert diag["range"]["start"] == {"line": tl102["range"]["start"]["line"] - 1, "character": column}


def test_lsp_publishes_the_findings_with_verdict_severities(outputs):
    root, runs = outputs
    assert runs["lsp"].returncode == 1, runs["lsp"].stderr
    (payload,) = [json.loads(line) for line in runs["lsp"].stdout.splitlines()]
    assert payload["uri"] == (root / "src" / "proj" / "model.py").resolve().as_uri()
    by_code = {d["code"]: d for d in payload["diagnostics"]}
    assert set(by_code) == {"TL102", "TL103"}
    assert by_code["TL102"]["severity"] == 1 and by_code["TL103"]["severity"] == 3  # confirmed / cleared
    for diag in payload["diagnostics"]:
        assert diag["source"] == "tlint verify"
        assert diag["codeDescription"]["href"].endswith(".md")
        assert diag["data"]["probe"] == "mask-leak" and diag["data"]["verdict"] in diag["message"]
    lines = [d["range"]["start"]["line"] for d in payload["diagnostics"]]
    assert lines == sorted(lines)


def test_errors_in_sarif_are_a_failed_invocation(tmp_path):
    make_project(tmp_path, {"tlint.toml": CONFIG})
    proc = run_tlint("verify", "--model", "proj.model:Tagger", "--seq-len", "2", "--format", "sarif", cwd=tmp_path)
    assert proc.returncode == 2
    log = json.loads(proc.stdout)
    check_sarif(log)
    (invocation,) = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    assert "seq-len" in invocation["toolExecutionNotifications"][0]["message"]["text"]
    assert log["runs"][0]["results"] == []


def test_lsp_errors_go_to_stderr(tmp_path):
    make_project(tmp_path, {"tlint.toml": CONFIG})
    proc = run_tlint("verify", "--model", "proj.model:Tagger", "--seq-len", "2", "--format", "lsp", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and "seq-len" in proc.stderr
