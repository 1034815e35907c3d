"""The real-bug benchmark's manifest, judgements and ecosystem snapshot (issue 18), checked
without network or mirrors; the runner's matching logic on a tiny synthetic git repo."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.benchutil import load

# one worker for the module: its module-scoped fixture runs once
pytestmark = pytest.mark.xdist_group("test_realbugs_manifest")

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


rb = load("tlint_bench_realbugs", BENCH / "realbugs.py")
eco = load("tlint_bench_ecosystem", BENCH / "ecosystem.py")
CODES = rb.rule_codes()


# --------------------------------------------------------------------------- committed files


def test_cases_and_judgements_are_valid():
    manifest = rb.load_manifest(codes=CODES)  # raises ManifestError listing every problem
    ids = [case.id for case in manifest.cases]
    assert len(ids) == len(set(ids))
    for case in manifest.cases:
        assert re.fullmatch(r"[0-9a-f]{40}", case.buggy) and re.fullmatch(r"[0-9a-f]{40}", case.fixed)
        assert case.rule in CODES
        assert case.family == rb.family_of(case.rule)
    for judgement in manifest.judgements.values():
        assert judgement.verdict in rb.VERDICTS and judgement.reason


def test_raw_case_files_have_full_shas_and_unique_ids():
    seen = set()
    for path in sorted(rb.CASES_DIR.glob("*.toml")):
        for case in tomllib.loads(path.read_text(encoding="utf-8")).get("case", []):
            assert case["id"] not in seen, f"{path.name}: duplicate id {case['id']}"
            seen.add(case["id"])
            for key in ("buggy", "fixed"):
                assert re.fullmatch(r"[0-9a-f]{40}", case[key]), f"{path.name}: {case['id']} {key}"


def test_ecosystem_repos_are_pinned():
    pinned = eco.load_repos()
    assert len(pinned) >= 12
    for entry in pinned:
        assert re.fullmatch(r"[0-9a-f]{40}", entry.sha)


def test_every_ecosystem_finding_is_judged():
    pinned = eco.load_repos()
    judgements = eco.load_judgements(pinned, codes=CODES)  # valid: verdicts, reasons, repos
    snapshot = json.loads(eco.SNAPSHOT_FILE.read_text(encoding="utf-8"))
    assert set(snapshot["repos"]) <= {p.repo for p in pinned}
    keys = set()
    unjudged = []
    for repo, entry in snapshot["repos"].items():
        for f in entry["findings"]:
            assert f["code"] != "TL003", f"internal error in the snapshot: {repo} {f}"
            key = (repo, f["path"], f["code"], f["line"])
            keys.add(key)
            if f["severity"] in ("error", "warning") and f["code"] not in rb.TOOL_CODES and key not in judgements:
                unjudged.append(key)
    assert not unjudged, f"unjudged ecosystem findings: {unjudged}"
    stale = sorted(set(judgements) - keys)
    assert not stale, f"judgements matching no snapshot finding: {stale}"
    for judgement in judgements.values():
        assert judgement.verdict in {"fp", "tp", "advisory"} and judgement.reason.strip()


# --------------------------------------------------------------------------- the validator


GOOD_CASE = {
    "id": "demo-no-clip", "repo": "someone/demo", "buggy": "a" * 40, "fixed": "b" * 40, "rule": "TL301",
    "take": ["train.py"], "sites": [{"path": "train.py", "lines": [10]}],
    "source": "https://github.com/someone/demo/pull/1", "summary": "no clipping", "recorded": "2026-12-01",
}


def _toml_value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _write_cases(folder: Path, name: str, cases: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join("[[case]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in c.items()) + "\n" for c in cases)
    (folder / name).write_text(text, encoding="utf-8")


def _problems(tmp_path: Path, cases: list[dict], name: str = "training.toml", judgements: str = "") -> list[str]:
    cases_dir, judgements_dir = tmp_path / "cases", tmp_path / "judgements"
    _write_cases(cases_dir, name, cases)
    judgements_dir.mkdir(exist_ok=True)
    if judgements:
        (judgements_dir / "training.toml").write_text(judgements, encoding="utf-8")
    try:
        rb.load_manifest(cases_dir, judgements_dir, CODES)
    except rb.ManifestError as error:
        return error.problems
    return []


def test_validator_accepts_a_good_case(tmp_path):
    assert _problems(tmp_path, [GOOD_CASE]) == []


@pytest.mark.parametrize("change, expected", [
    ({"buggy": "abc123"}, "40-hex"),
    ({"fixed": "A" * 40}, "40-hex"),
    ({"rule": "TL399"}, "does not exist"),
    ({"rule": "TL201"}, "family 'model'"),
    ({"sites": [{"path": "model.py", "lines": [3]}]}, "not inside take"),
    ({"sites": [{"path": "train.py", "lines": []}]}, "non-empty list of line numbers"),
    ({"source": "github.com/someone/demo"}, "http(s) URL"),
    ({"take": ["../x.py"]}, "relative paths"),
    ({"recorded": "yesterday"}, "YYYY-MM-DD"),
    ({"colour": "red"}, "unknown key"),
    ({"repo": "demo"}, "owner/name"),
])
def test_validator_rejects(tmp_path, change, expected):
    problems = _problems(tmp_path, [{**GOOD_CASE, **change}])
    assert any(expected in p for p in problems), problems


def test_validator_rejects_duplicate_ids_and_misnamed_files(tmp_path):
    problems = _problems(tmp_path, [GOOD_CASE, GOOD_CASE])
    assert any("not unique" in p for p in problems), problems
    problems = _problems(tmp_path / "other", [GOOD_CASE], name="misc.toml")
    assert any("named after its family" in p for p in problems), problems


def test_validator_checks_judgements(tmp_path):
    bad = ('[[judgement]]\ncase = "demo-no-clip"\npath = "train.py"\nline = 4\ncode = "TL301"\n'
           'verdict = "maybe"\nreason = ""\n'
           '[[judgement]]\ncase = "nobody"\npath = "train.py"\nline = 4\ncode = "TL301"\n'
           'verdict = "fp"\nreason = "x"\n')
    problems = _problems(tmp_path, [GOOD_CASE], judgements=bad)
    assert any("verdict 'maybe'" in p for p in problems), problems
    assert any("reason must be" in p for p in problems), problems
    assert any("which no cases file defines" in p for p in problems), problems


def test_paste_ready_judgement_round_trips():
    finding = {"path": "train.py", "line": 7, "code": "TL304", "severity": "warning", "message": 'say "hi"\nthere'}
    text = rb.paste_ready("case", "demo-no-clip", finding).replace('verdict = ""', 'verdict = "fp"')
    text = text.replace('reason = ""', 'reason = "a schedule elsewhere warms up"')
    raw = tomllib.loads(text)["judgement"][0]
    judgement, problems = rb.validate_judgement(raw, "pasted", "case", CODES)
    assert problems == [] and judgement.key == ("demo-no-clip", "train.py", "TL304", 7)
    empty = tomllib.loads(rb.paste_ready("case", "demo-no-clip", finding))["judgement"][0]
    assert rb.validate_judgement(empty, "pasted", "case", CODES)[1]  # unfilled: invalid


# --------------------------------------------------------------------------- line mapping


def test_map_line_through_hunks():
    hunks = [
        rb.Hunk(2, 0, 3, 2),   # two lines inserted after old line 2
        rb.Hunk(5, 1, 7, 3),   # old line 5 replaced by new lines 7-9
        rb.Hunk(8, 2, 11, 0),  # old lines 8-9 deleted (after new line 11)
    ]
    assert rb.map_line(hunks, 1) == (1, 1)
    assert rb.map_line(hunks, 2) == (2, 2)
    assert rb.map_line(hunks, 3) == (5, 5)
    assert rb.map_line(hunks, 5) == (7, 9)
    assert rb.map_line(hunks, 6) == (10, 10)
    assert rb.map_line(hunks, 8) == (11, 11)
    assert rb.map_line(hunks, 9) == (11, 11)
    assert rb.map_line(hunks, 10) == (12, 12)
    assert rb.map_line([rb.Hunk(1, 1, 0, 0)], 1) == (1, 1)  # first line deleted


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


BUGGY = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, vocab_size, d_model=256, num_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=6)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(dim=1))


def train(model, loader, epochs=3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for epoch in range(epochs):
        for ids, labels in loader:
            loss = F.cross_entropy(model(ids), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
'''
FIXED = BUGGY.replace('"""', "").replace(
    "import torch\n", '"""Training."""\n\nimport torch\n\nMAX_NORM = 1.0\n', 1).replace(
    "            optimizer.step()\n",
    "            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)\n            optimizer.step()\n")
STILL = BUGGY.replace("import torch\n", "import torch\n# a comment line\n", 1)


def _line(text: str, needle: str) -> int:
    return text.splitlines().index(needle) + 1


STEP = "            optimizer.step()"
BACKWARD = "            loss.backward()"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A git repo: train.py buggy (no clipping), then fixed (4 lines added above, a clip
    inserted), then a later commit that adds an unrelated file; plus a 'non-fix' commit
    that only shifts the buggy code down one line, and a rename."""
    repo = tmp_path_factory.mktemp("mirrors") / "someone+demo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(BUGGY)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "buggy")
    buggy = _git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text(FIXED)
    _git(repo, "commit", "-q", "-am", "fix")
    fixed = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", buggy)
    (repo / "train.py").write_text(STILL)
    _git(repo, "commit", "-q", "-am", "not a fix")
    still = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", buggy)
    _git(repo, "mv", "train.py", "loop.py")
    _git(repo, "commit", "-q", "-m", "rename")
    renamed = _git(repo, "rev-parse", "HEAD")
    return repo, {"buggy": buggy, "fixed": fixed, "still": still, "renamed": renamed}


def _case(shas, fixed_key: str, lines=None) -> rb.Case:
    lines = lines or (_line(BUGGY, STEP),)
    return rb.Case(id="demo-no-clip", repo="someone/demo", buggy=shas["buggy"], fixed=shas[fixed_key],
                   rule="TL301", take=("train.py",), sites=(rb.Site("train.py", tuple(lines)),),
                   source="https://example.org/1", summary="s", recorded="2026-12-01", family="training",
                   file="t")


def test_diff_mapping_on_a_real_repo(synthetic):
    repo, shas = synthetic
    gitdir = repo / ".git"
    diffs = rb.diff_between(gitdir, shas["buggy"], shas["fixed"], ("train.py",))
    # 4 lines above (docstring, blank, MAX_NORM, blank) and the clip: the step moves by 5
    step, backward = _line(BUGGY, STEP), _line(BUGGY, BACKWARD)
    assert _line(FIXED, STEP) == step + 5
    assert rb.map_site(diffs, "train.py", step) == ("train.py", step + 5, step + 5)
    assert rb.map_site(diffs, "train.py", backward) == ("train.py", backward + 4, backward + 4)
    assert rb.map_site(diffs, "train.py", 1) == ("train.py", 3, 3)
    diffs = rb.diff_between(gitdir, shas["buggy"], shas["renamed"], (".",))
    assert rb.map_site(diffs, "train.py", step) == ("loop.py", step, step)


def _finding(path, line, code="TL301", severity="warning"):
    return rb.Finding(path, line, line, 1, code, severity, "m")


def test_found_and_fix_sensitive_logic(synthetic):
    repo, shas = synthetic
    gitdir = repo / ".git"
    case = _case(shas, "fixed")
    diffs = rb.diff_between(gitdir, case.buggy, case.fixed, case.take)
    judgements = {("demo-no-clip", "train.py", "TL304", 9): rb.Judgement(
        "demo-no-clip", "train.py", 9, "TL304", "fp", "warmup elsewhere", "j")}
    s = _line(BUGGY, STEP)  # the site; it maps to s + 5 on the fixed tree
    # within 3 lines: found; gone on the fixed tree: fix-sensitive
    out = rb.evaluate(case, [_finding("train.py", s + 3)], [_finding("train.py", 9, "TL304")], diffs, judgements)
    assert out["found"] and out["fix_sensitive"]
    assert [f["verdict"] for f in out["judged"]] == ["fp"] and out["unjudged"] == []
    # 4 lines away (or in another file): not found
    for finding in (_finding("train.py", s + 4), _finding("train.py", s - 4), _finding("other.py", s)):
        out = rb.evaluate(case, [finding], [], diffs, {})
        assert not out["found"] and not out["fix_sensitive"]
    # still there within 3 lines of the mapped line on the fixed tree: not fix-sensitive
    for line in (s + 2, s + 5, s + 8):
        out = rb.evaluate(case, [_finding("train.py", s)], [_finding("train.py", line)], diffs, {})
        assert out["found"] and not out["fix_sensitive"], line
        assert out["unjudged"] and out["unjudged"][0]["line"] == line
    # beyond it (mapped line + 4, or the unmapped line - 3): fix-sensitive
    for line in (s + 9, s - 3):
        out = rb.evaluate(case, [_finding("train.py", s)], [_finding("train.py", line)], diffs, {})
        assert out["fix_sensitive"], line
    # another rule near the site does not count against fix-sensitivity; info is not judged
    out = rb.evaluate(case, [_finding("train.py", s)],
                      [_finding("train.py", s + 5, "TL304"), _finding("train.py", s + 5, "TL316", "info")], diffs, {})
    assert out["fix_sensitive"] and len(out["unjudged"]) == 1 and len(out["info"]) == 1
    # the site mapped to a renamed file outside take cannot be checked
    renamed = _case(shas, "renamed")
    diffs = rb.diff_between(gitdir, renamed.buggy, renamed.fixed, (".",))
    out = rb.evaluate(renamed, [_finding("train.py", s)], [], diffs, {}, fixed_take=("train.py",))
    assert out["found"] and not out["fix_sensitive"] and out["unchecked_sites"] == ["loop.py"]


def test_run_case_end_to_end(synthetic, tmp_path):
    """tlint itself on the synthetic trees: found on the buggy one, gone on the fix, still
    there on a commit that only moved the code; the mirror is left as it was."""
    repo, shas = synthetic
    mirrors = repo.parent
    command = rb.tlint_command(None)
    before = _git(repo, "status", "--porcelain")
    result = rb.run_case(_case(shas, "fixed"), mirrors, command, {})
    assert result["status"] == "ok", result
    assert result["found"] and result["fix_sensitive"], result
    result = rb.run_case(_case(shas, "still"), mirrors, command, {})
    assert result["found"] and not result["fix_sensitive"], result
    assert [f["line"] for f in result["fixed_remaining"]] == [_line(STILL, STEP)]
    assert "TL301" in [f["code"] for f in result["info"]]  # a practice rule's finding: info, not judged
    assert _git(repo, "status", "--porcelain") == before
    missing = rb.run_case(_case({**shas, "fixed": "c" * 40}, "fixed"), mirrors, command, {})
    assert missing["status"] == "missing-commit"
    assert rb.run_case(_case(shas, "fixed"), tmp_path, command, {})["status"] == "missing-mirror"


# --------------------------------------------------------------------------- tool failures


FAKE_TLINT = '''\
import json, sys
mode = sys.argv[1]
paths = [a for a in sys.argv[2:] if a.endswith(".py")]
def diag(code, path):
    return {"code": code, "name": "x", "severity": "error", "message": "boom", "path": path,
            "range": {"start": {"line": 1, "column": 1}, "end": {"line": 1, "column": 1}}}
if mode == "garbage":
    print("Traceback (most recent call last):")
    sys.exit(0)
if mode == "no-diagnostics":
    print(json.dumps({"tool": "tlint"}))
    sys.exit(0)
if mode == "exit2":
    print(json.dumps({"diagnostics": []}))
    sys.exit(2)
if mode == "clean":
    print(json.dumps({"diagnostics": []}))
    sys.exit(0)
print(json.dumps({"diagnostics": [diag({"tl003": "TL003", "tl001": "TL001"}[mode], p) for p in paths]}))
'''


@pytest.fixture(scope="module")
def fake_tlint(tmp_path_factory):
    """A stand-in for tlint: `fake(mode)` is a --tlint command line that fails in that way."""
    script = tmp_path_factory.mktemp("fake") / "fake_tlint.py"
    script.write_text(FAKE_TLINT)
    return lambda mode: shlex.join([sys.executable, str(script), mode])


def _manifest_dir(tmp_path: Path, shas: dict) -> tuple[Path, Path]:
    cases_dir, judgements_dir = tmp_path / "cases", tmp_path / "judgements"
    case = {**GOOD_CASE, "buggy": shas["buggy"], "fixed": shas["fixed"],
            "sites": [{"path": "train.py", "lines": [_line(BUGGY, STEP)]}]}
    _write_cases(cases_dir, "training.toml", [case])
    judgements_dir.mkdir()
    return cases_dir, judgements_dir


@pytest.mark.parametrize("mode, expected", [
    ("exit2", "tlint exited 2"),
    ("tl003", "internal error: train.py:1 TL003"),
    ("tl001", "parse error on a file Python compiles: train.py:1 TL001"),
    ("garbage", "not its JSON"),
    ("no-diagnostics", "not its JSON"),
])
def test_a_crashing_tlint_is_not_a_result(synthetic, fake_tlint, tmp_path, capsys, monkeypatch, mode, expected):
    repo, shas = synthetic
    cases_dir, judgements_dir = _manifest_dir(tmp_path, shas)
    order = []
    real_run_case = rb.run_case
    monkeypatch.setattr(rb, "tlint_commit", lambda spec: order.append("commit") or "abc+dirty")
    monkeypatch.setattr(rb, "run_case", lambda *a, **k: order.append("run") or real_run_case(*a, **k))
    out = tmp_path / "out.json"
    rc = rb.main(["--mirrors", str(repo.parent), "--tlint", fake_tlint(mode), "--json", str(out),
                  "--cases-dir", str(cases_dir), "--judgements-dir", str(judgements_dir)])
    printed = capsys.readouterr().out
    assert rc == 1, printed
    assert "NOT A RESULT: 1 tool failures" in printed
    assert expected in printed
    payload = json.loads(out.read_text())
    assert payload["result"] is False and payload["tool_failures"] == 1
    case = payload["cases"][0]
    assert case["status"] == "tool-failure" and case["tool_failures"], case
    assert {f["side"] for f in case["tool_failures"]} == {"buggy", "fixed"}
    assert payload["figures"]["total"] == {"cases": 1, "run": 0, "found": 0, "fix_sensitive": 0}
    assert payload["tlint_commit"] == "abc+dirty" and order == ["commit", "run"]  # read when the run starts


def test_a_clean_tlint_run_is_a_result(synthetic, fake_tlint, tmp_path, capsys):
    repo, shas = synthetic
    cases_dir, judgements_dir = _manifest_dir(tmp_path, shas)
    out = tmp_path / "out.json"
    rc = rb.main(["--mirrors", str(repo.parent), "--tlint", fake_tlint("clean"), "--json", str(out),
                  "--cases-dir", str(cases_dir), "--judgements-dir", str(judgements_dir)])
    printed = capsys.readouterr().out
    assert rc == 0 and "NOT A RESULT" not in printed, printed
    payload = json.loads(out.read_text())
    assert payload["result"] is True and payload["tool_failures"] == 0
    assert payload["cases"][0]["status"] == "ok" and not payload["cases"][0]["found"]


def test_tool_failures_tell_parse_errors_python_shares(tmp_path):
    (tmp_path / "good.py").write_text("x = 1\n")
    (tmp_path / "py2.py").write_text("print 'hello'\n")
    (tmp_path / "nul.py").write_bytes(b"x = 1\0\n")
    findings = [_finding("good.py", 1, "TL001", "error"), _finding("py2.py", 1, "TL001", "error"),
                _finding("nul.py", 1, "TL001", "error"), _finding("gone.py", 1, "TL001", "error"),
                _finding("py2.py", 1, "TL003", "error"), _finding("good.py", 1, "TL002"),
                _finding("good.py", 1, "TL301")]
    kinds = [(f["path"], f["kind"]) for f in rb.tool_failures(findings, tmp_path)]
    assert kinds == [("good.py", "parse-error-python-compiles"), ("gone.py", "parse-error-no-such-file"),
                     ("py2.py", "internal-error")]


def test_ecosystem_refuses_to_snapshot_a_crash(synthetic, fake_tlint, tmp_path, capsys):
    repo, shas = synthetic
    repos_file = tmp_path / "repos.toml"
    repos_file.write_text(f'[[repo]]\nrepo = "someone/demo"\nsha = "{shas["fixed"]}"\nstyle = "demo"\n'
                          'take = ["train.py"]\n')
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text('{"repos": {}}\n')
    out = tmp_path / "eco.json"
    common = ["--mirrors", str(repo.parent), "--repos-file", str(repos_file), "--snapshot-file", str(snapshot),
              "--judgements-file", str(tmp_path / "none.toml"), "--json", str(out), "--update"]
    rc = eco.main([*common, "--tlint", fake_tlint("tl003")])
    captured = capsys.readouterr()
    assert rc == 1, captured.out
    assert "NOT A RESULT: 1 tool failures" in captured.out and "refusing --update" in captured.err
    assert snapshot.read_text() == '{"repos": {}}\n'
    payload = json.loads(out.read_text())
    assert payload["result"] is False and payload["results"][0]["status"] == "tool-failure"
    rc = eco.main([*common, "--tlint", fake_tlint("clean")])
    captured = capsys.readouterr()
    assert rc == 0 and "NOT A RESULT" not in captured.out, captured.out
    assert json.loads(snapshot.read_text())["repos"]["someone/demo"]["findings"] == []
    assert json.loads(out.read_text())["result"] is True


# --------------------------------------------------------------------------- the per-family table


def _ok(cid, family, rule, judged=(), unjudged=0, info=0):
    finding = {"path": "a.py", "line": 1, "end_line": 1, "column": 1, "code": rule, "severity": "warning",
               "message": "m"}
    return {"id": cid, "repo": "o/n", "rule": rule, "family": family, "status": "ok", "found": True,
            "fix_sensitive": False, "judged": [{**finding, "verdict": v} for v in judged],
            "unjudged": [finding] * unjudged, "info": [{**finding, "severity": "info"}] * info, "tool": [],
            "buggy_rule_findings": [], "fixed_remaining": [], "unchecked_sites": []}


def test_fixed_tree_verdicts_per_family():
    results = [
        _ok("a", "data", "TL101", judged=("tp", "fp", "fp"), info=2),
        _ok("b", "data", "TL102", judged=("advisory",), unjudged=1),
        _ok("c", "training", "TL301", judged=("fp",), info=1),
        {"id": "d", "repo": "o/n", "rule": "TL201", "family": "model", "status": "tool-failure",
         "detail": "x", "tool_failures": [{"side": "buggy", "kind": "tlint-failed", "detail": "tlint exited 2"}]},
    ]
    figures = rb.tally(results)
    assert figures["fixed_tree_verdicts_per_family"] == {
        "data": {"tp": 1, "fp": 2, "advisory": 1, "unjudged": 1, "info": 2},
        "model": {"tp": 0, "fp": 0, "advisory": 0, "unjudged": 0, "info": 0},
        "training": {"tp": 0, "fp": 1, "advisory": 0, "unjudged": 0, "info": 1},
    }
    assert figures["fixed_tree_verdicts_total"] == {"tp": 1, "fp": 3, "advisory": 1, "unjudged": 1, "info": 3}
    assert figures["per_family"]["model"] == {"cases": 1, "run": 0, "found": 0, "fix_sensitive": 0}
    buffer = io.StringIO()
    assert rb.render(results, figures, buffer) == (1, 1)
    text = buffer.getvalue()
    assert "fixed-tree findings by family" in text
    assert re.search(r"^data\s+1\s+2\s+1\s+1\s+2$", text, re.M), text
    assert re.search(r"^total\s+1\s+3\s+1\s+1\s+3$", text, re.M), text
    assert "NOT A RESULT: 1 tool failures" in text and "d: buggy: tlint exited 2" in text
