"""bench/realbugs batches (issue 40): the extended schema and its validation, notebooks,
out-of-catalogue scoring (described / incidental), recording first sight, and the check
that first sights are what git history says they are: on the real repository, and on
synthetic git repositories with a fake tlint (no network, no mirrors, no real tlint run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.benchutil import load

# one worker for the module: its module-scoped fixture runs once
pytestmark = pytest.mark.xdist_group("test_realbugs_batches")

ROOT = Path(__file__).resolve().parent.parent


rb = load("tlint_bench_realbugs", ROOT / "bench" / "realbugs.py")
CODES = rb.rule_codes()


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def _commit(repo: Path, message: str, *paths: str) -> str:
    _git(repo, "add", "--", *paths)
    _git(repo, "commit", "-q", "-m", message, "--", *paths)
    return _git(repo, "rev-parse", "HEAD")


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _tables(name: str, entries: list[dict]) -> str:
    return "".join(f"[[{name}]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in e.items()) + "\n"
                   for e in entries)


# --------------------------------------------------------------------------- the real repository


def test_committed_batches_are_valid():
    manifest, batches = rb.load_all(codes=CODES)  # raises ManifestError listing every problem
    ids = [c.id for c in manifest.cases] + [c.id for b in batches.values() for c in b.cases]
    assert len(ids) == len(set(ids))
    for batch in batches.values():
        for case in batch.cases:
            assert (case.rule is not None) == case.in_catalogue and case.kind in rb.KINDS


def test_real_first_sight_history():
    """Every first sight of every batch is what git history says (check_first_sight_history),
    and no recorded first sight was ever changed or removed."""
    shallow = rb.gitc(ROOT, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    try:
        problems = rb.check_first_sight_history(ROOT)
    except rb.HistoryMissing as error:
        assert shallow, error
        pytest.skip(f"shallow clone: first-sight history cannot be checked ({error})")
    assert problems == []


# --------------------------------------------------------------------------- a synthetic project

FAKE_TLINT = r'''
import json, os, re, sys
MARK = re.compile(r"#!(TL\d{3})")
paths, skip = [], False
for arg in sys.argv[2:]:
    if skip:
        skip = False
    elif arg in ("--format", "--jobs", "--extend-select", "--select"):
        skip = True
    elif not arg.startswith("--"):
        paths.append(arg)
files = []
for p in paths:
    if os.path.isdir(p):
        files += [os.path.join(d, n) for d, _, names in os.walk(p) for n in names if n.endswith((".py", ".ipynb"))]
    else:
        files.append(p)
def diag(code, path, line, cell=None):
    out = {"code": code, "name": "x", "severity": "warning", "message": "m", "path": path,
           "range": {"start": {"line": line, "column": 1}, "end": {"line": line, "column": 2}}}
    if cell is not None:
        out["cell"] = cell
    return out
diags = []
for f in sorted(files):
    text = open(f, encoding="utf-8").read()
    if f.endswith(".ipynb"):
        for n, cell in enumerate(json.loads(text)["cells"], 1):
            for i, line in enumerate("".join(cell["source"]).splitlines(), 1):
                diags += [diag(code, f, i, n) for code in MARK.findall(line)]
    else:
        for i, line in enumerate(text.splitlines(), 1):
            diags += [diag(code, f, i) for code in MARK.findall(line)]
print(json.dumps({"diagnostics": diags}))
'''

BUGGY = """\
import torch


def train(model, loader):
    opt = torch.optim.AdamW(model.parameters())
    for batch in loader:
        loss = model(batch)  #!TL304
        loss.backward()
        opt.step()  #!TL301
        opt.zero_grad()
"""
SITE = 9  # opt.step()
FIXED = BUGGY.replace("import torch\n", "import torch\n\nCLIP = 1.0\n").replace(
    "        opt.step()  #!TL301\n", "        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)\n        opt.step()\n")


def _notebook(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": [line + "\n" for line in text.splitlines()]} for text in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


NB_BUGGY = _notebook(["import torch", "x = 1\ny = x * 2  #!TL205\nprint(y)"])
NB_FIXED = _notebook(["import torch\nimport math", "x = 1\ny = x * 3\nprint(y)"])


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """someone/demo: train.py and demo.ipynb, buggy then fixed."""
    repo = tmp_path_factory.mktemp("mirrors") / "someone+demo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(BUGGY)
    (repo / "demo.ipynb").write_text(NB_BUGGY)
    (repo / "big.bin").write_text("not linted\n")
    buggy = _commit(repo, "buggy", "train.py", "demo.ipynb", "big.bin")
    (repo / "train.py").write_text(FIXED)
    (repo / "demo.ipynb").write_text(NB_FIXED)
    fixed = _commit(repo, "fix", "train.py", "demo.ipynb")
    return repo, buggy, fixed


def _cases(buggy: str, fixed: str) -> list[dict]:
    common = {"repo": "someone/demo", "buggy": buggy, "fixed": fixed, "source": "https://example.org/pr/1",
              "summary": "s", "recorded": "2026-12-07"}
    return [
        {"id": "demo-no-clip", **common, "in_catalogue": True, "rule": "TL301", "kind": "script",
         "take": ["train.py"], "sites": [{"path": "train.py", "lines": [SITE]}], "candidate": 1},
        {"id": "demo-step-order", **common, "in_catalogue": False, "kind": "script", "take": ["train.py"],
         "sites": [{"path": "train.py", "lines": [SITE]}], "candidate": 3},
    ]


LOG = [
    {"n": 1, "repo": "someone/demo", "ref": "https://example.org/c/1", "found_by": "q1", "verdict": "accept",
     "criterion": "A1", "note": "n", "case": "demo-no-clip"},
    {"n": 2, "repo": "other/thing", "ref": "https://example.org/c/2", "found_by": "q1", "verdict": "reject",
     "criterion": "R1", "note": "a crash"},
    {"n": 3, "repo": "someone/demo", "ref": "https://example.org/c/3", "found_by": "q2", "verdict": "accept",
     "criterion": "A1", "note": "n", "case": "demo-step-order"},
]
DESCRIBED = [
    {"case": "demo-step-order", "path": "train.py", "line": SITE, "code": "TL301", "describes": True,
     "reason": "it names the missing clip"},
    {"case": "demo-step-order", "path": "train.py", "line": 7, "code": "TL304", "describes": False,
     "reason": "another matter"},
]


def _write_batch(folder: Path, cases: list[dict], log: list[dict] = LOG, family: str = "training") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SEARCH-training.md").write_text("# search\n- q1: fix gradient\n- A1 accept, R1 reject\n")
    (folder / f"cases-{family}.toml").write_text(_tables("case", cases))
    (folder / f"log-{family}.toml").write_text(_tables("candidate", log))


@pytest.fixture
def project(tmp_path, mirror):
    """A git repository laid out like this one: a fake tlint package, rules/, and
    bench/realbugs/{cases,judgements,batches/b1}."""
    repo, buggy, fixed = mirror
    proj = tmp_path / "proj"
    (proj / "tlint").mkdir(parents=True)
    (proj / "tlint" / "__init__.py").write_text("")
    (proj / "tlint" / "__main__.py").write_text(FAKE_TLINT)
    (proj / "rules").mkdir()
    (proj / "rules" / "TL301.md").write_text("# TL301\n")
    bench = proj / "bench" / "realbugs"
    (bench / "cases").mkdir(parents=True)
    (bench / "judgements").mkdir()
    _write_batch(bench / "batches" / "b1", _cases(buggy, fixed))
    _git(proj, "init", "-q", "-b", "main")
    _commit(proj, "tool", "tlint", "rules")
    args = ["--mirrors", str(repo.parent), "--cases-dir", str(bench / "cases"),
            "--judgements-dir", str(bench / "judgements")]
    return proj, bench / "batches" / "b1", args


def _main(args: list[str], capsys) -> tuple[int, str, str]:
    rc = rb.main(args)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_record_first_sight_and_its_history(project, capsys, tmp_path):
    proj, b1, args = project
    record = [*args, "--batch", "b1", "--record-first-sight"]
    # the cases are not committed yet: refused
    rc, out, err = _main(record, capsys)
    assert rc == 2 and "is not committed as it is" in err, err
    adding = _commit(proj, "batch 1 cases", "bench")
    # the near findings of the out-of-catalogue case are unjudged: not a result, refused, nothing written
    rc, out, err = _main(record, capsys)
    assert rc == 2 and "not a result" in err, err
    assert "[[near]]" in out and 'case = "demo-step-order"' in out and "NOT A RESULT" in out
    assert not (b1 / "first_sight.toml").exists()
    # judged (described.toml need not be committed): recorded at HEAD
    (b1 / "described.toml").write_text(_tables("near", DESCRIBED))
    rc, out, err = _main(record, capsys)
    assert rc == 0, err
    entries = {e["case"]: e for e in tomllib.loads((b1 / "first_sight.toml").read_text())["first_sight"]}
    assert set(entries) == {"demo-no-clip", "demo-step-order"}
    assert all(e["commit"] == adding for e in entries.values())
    assert entries["demo-no-clip"]["found"] and entries["demo-no-clip"]["fix_sensitive"]
    assert entries["demo-no-clip"]["rule"] == "TL301" and "near" not in entries["demo-no-clip"]
    out_case = entries["demo-step-order"]
    assert out_case["found"] and out_case["fix_sensitive"] and out_case["in_catalogue"] is False
    assert {(n["code"], n["describes"]) for n in out_case["near"]} == {("TL301", True), ("TL304", False)}
    text = (b1 / "first_sight.toml").read_text()
    # every case recorded: nothing to do; naming a recorded case: refused; the file unchanged
    rc, out, err = _main(record, capsys)
    assert rc == 0 and "nothing to record" in out
    rc, out, err = _main([*record, "--case", "demo-no-clip"], capsys)
    assert rc == 2 and "has a first sight already" in err
    assert (b1 / "first_sight.toml").read_text() == text
    # a normal run: first sight and found now per batch, in the JSON too; the headline
    report = tmp_path / "out.json"
    rc, out, err = _main([*args, "--tlint", str(proj), "--json", str(report), "--headline"], capsys)
    assert rc == 0, err
    payload = json.loads(report.read_text())
    assert payload["result"] is True
    first, now = payload["batches"]["b1"]["first_sight"], payload["batches"]["b1"]["found_now"]
    assert first["in_catalogue"] == {"cases": 1, "found": 1, "fix_sensitive": 1}
    assert first["outside"] == {"cases": 1, "found": 1, "fix_sensitive": 1}
    assert now["all"] == {"cases": 2, "found": 2, "fix_sensitive": 2}
    assert "| b1 | 2 | 1/1 (100 %) | 1/1 (100 %) | 2/2 (100 %) |" in out, out
    assert "| found now (tlint" in out
    rc, out, err = _main([*args, "--headline"][2:], capsys)  # without --mirrors: first sight only
    assert rc == 0 and "| **all batches** | 2 |" in out and "not run" in out
    # committed: the history checker agrees
    _commit(proj, "first sight", "bench")
    assert rb.check_first_sight_history(proj) == []
    # (a) a first sight changed later: reported (and a removal too)
    (b1 / "first_sight.toml").write_text(text.replace("found = true", "found = false", 1))
    problems = rb.check_first_sight_history(proj)
    assert any("the working tree changes the first sight of demo-no-clip" in p for p in problems), problems
    _commit(proj, "rewrite history", "bench")
    problems = rb.check_first_sight_history(proj)
    assert any("changes the first sight of demo-no-clip" in p and "working tree" not in p for p in problems)
    (b1 / "first_sight.toml").write_text("")
    _commit(proj, "drop", "bench")
    assert any("removes the first sight of demo-step-order" in p for p in rb.check_first_sight_history(proj))
    # tlint/ dirty: refused
    (proj / "tlint" / "extra.py").write_text("x = 1\n")
    rc, out, err = _main(record, capsys)
    assert rc == 2 and "uncommitted changes" in err


def test_a_tool_change_between_adding_and_recording_is_reported(project, capsys):
    proj, b1, args = project
    adding = _commit(proj, "batch 1 cases", "bench")
    (proj / "rules" / "TL301.md").write_text("# TL301, widened\n")
    changed = _commit(proj, "a rule change", "rules")
    (b1 / "described.toml").write_text(_tables("near", DESCRIBED))
    rc, out, err = _main([*args, "--batch", "b1", "--record-first-sight"], capsys)
    assert rc == 2 and "changed since the commit that added it" in out and "can get one" in err, err
    assert not (b1 / "first_sight.toml").exists()
    # (b) written by hand at a later commit: the history check reports it
    entry = {"case": "demo-no-clip", "commit": changed, "found": True, "fix_sensitive": True,
             "recorded": "2026-12-07"}
    (b1 / "first_sight.toml").write_text(_tables("first_sight", [entry]))
    _commit(proj, "first sight", "bench")
    problems = rb.check_first_sight_history(proj)
    assert len(problems) == 1 and "tlint/ or rules/ changed between" in problems[0] and "rules/TL301.md" in problems[0]
    # a first sight before the case was committed, or at a commit that is not in history
    early = {**entry, "commit": _git(proj, "rev-parse", f"{adding}~1")}
    (b1 / "first_sight.toml").write_text(_tables("first_sight", [entry, {**early, "case": "demo-step-order"}]))
    _commit(proj, "more", "bench")
    problems = rb.check_first_sight_history(proj)
    assert any("demo-step-order" in p and "before the case was committed" in p for p in problems), problems
    history = rb.History(proj)
    assert rb.check_entry(history, "bench/realbugs/batches/b1", {**entry, "commit": "f" * 40})[0].endswith(
        "does not exist")


def test_shallow_clone_says_so(project, tmp_path):
    proj, b1, args = project
    _commit(proj, "cases", "bench")
    head = _git(proj, "rev-parse", "HEAD")
    (b1 / "first_sight.toml").write_text(_tables("first_sight", [
        {"case": "demo-no-clip", "commit": head, "found": True, "fix_sensitive": True, "recorded": "2026-12-07"}]))
    _commit(proj, "first sight", "bench")
    (proj / "rules" / "TL301.md").write_text("later\n")
    _commit(proj, "later", "rules")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{proj}", str(clone)], check=True,
                   capture_output=True)
    with pytest.raises(rb.HistoryMissing):
        rb.check_first_sight_history(clone)


# --------------------------------------------------------------------------- validation


def _batch_problems(tmp_path: Path, cases: list[dict], log: list[dict] = LOG, extra: dict | None = None,
                    b0_ids: dict | None = None) -> list[str]:
    folder = tmp_path / "batches" / "b1"
    _write_batch(folder, cases, log)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    problems: list[str] = []
    rb.load_batches(tmp_path / "batches", CODES, dict(b0_ids or {}), problems)
    return problems


def test_batch_validator_accepts_good_files(tmp_path):
    extra = {"described.toml": _tables("near", DESCRIBED)}
    assert _batch_problems(tmp_path, _cases("a" * 40, "b" * 40), extra=extra) == []


@pytest.mark.parametrize("index, change, expected", [
    (0, {"in_catalogue": False}, "rule is given only when in_catalogue = true"),
    (1, {"in_catalogue": True}, "in_catalogue = true needs rule"),
    (1, {"in_catalogue": "no"}, "in_catalogue 'no' must be true or false"),
    (0, {"kind": "tutorial"}, "kind 'tutorial' must be one of library, script, notebook"),
    (0, {"candidate": 2}, "does not say verdict = \"accept\" with case = \"demo-no-clip\""),
    (0, {"candidate": 9}, "candidate 9 is not in log-training.toml"),
    (0, {"rule": "TL101"}, "family 'data'"),
    (0, {"sites": [{"path": "train.py", "cell": 2, "lines": [3]}]}, "cell is for a notebook"),
    (0, {"repo": "someone/other"}, "the case is someone/other"),
])
def test_batch_validator_rejects_cases(tmp_path, index, change, expected):
    cases = _cases("a" * 40, "b" * 40)
    cases[index] = {**cases[index], **change}
    problems = _batch_problems(tmp_path, cases)
    assert any(expected in p for p in problems), problems


def test_batch_validator_rejects_logs_and_verdicts(tmp_path):
    cases = _cases("a" * 40, "b" * 40)
    gap = [LOG[0], {**LOG[2], "n": 4}]
    problems = _batch_problems(tmp_path / "1", cases, log=gap)
    assert any("n = 4 but it is entry 2" in p for p in problems), problems
    orphan = [*LOG, {**LOG[0], "n": 4, "case": "demo-ghost"}]
    problems = _batch_problems(tmp_path / "2", cases, log=orphan)
    assert any("accepted as case 'demo-ghost'" in p for p in problems), problems
    rejected = [LOG[0], {**LOG[1], "case": "x"}, LOG[2]]
    assert any("a rejected candidate has no case" in p for p in _batch_problems(tmp_path / "3", cases, log=rejected))
    third = {**cases[0], "id": "demo-third", "candidate": 4}
    log4 = [*LOG, {**LOG[0], "n": 4, "case": "demo-third"}]
    problems = _batch_problems(tmp_path / "4", [*cases, third], log=log4)
    assert any("3 cases from someone/demo" in p and "at most 2" in p for p in problems), problems
    problems = _batch_problems(tmp_path / "5", cases, b0_ids={"demo-no-clip": "cases/training.toml"})
    assert any("'demo-no-clip' is not unique (also in cases/training.toml)" in p for p in problems), problems
    bad_near = [{**DESCRIBED[0], "case": "demo-no-clip"}, {**DESCRIBED[1], "describes": "maybe", "reason": ""},
                DESCRIBED[0], DESCRIBED[0]]
    problems = _batch_problems(tmp_path / "6", cases, extra={"described.toml": _tables("near", bad_near)})
    assert any("is in the catalogue" in p for p in problems), problems
    assert any("describes 'maybe' must be true or false" in p for p in problems), problems
    assert any("judged twice" in p for p in problems), problems
    fs = {"case": "demo-no-clip", "commit": "c" * 40, "found": False, "fix_sensitive": True, "recorded": "2026-12-07"}
    problems = _batch_problems(tmp_path / "7", cases, extra={"first_sight.toml": _tables("first_sight", [
        fs, fs, {**fs, "case": "nobody", "commit": "abc"}])})
    assert any("fix_sensitive = true needs found = true" in p for p in problems), problems
    assert any("given twice" in p for p in problems), problems
    assert any("'nobody' is not a case of this batch" in p for p in problems), problems
    assert any("must be a full 40-hex" in p for p in problems), problems
    (tmp_path / "8" / "batches" / "b1").mkdir(parents=True)
    problems = _batch_problems(tmp_path / "8", cases)
    (tmp_path / "8" / "batches" / "b1" / "SEARCH-training.md").unlink()
    (tmp_path / "8" / "batches" / "misc").mkdir()
    problems = []
    rb.load_batches(tmp_path / "8" / "batches", CODES, {}, problems)
    assert any("no SEARCH*.md" in p for p in problems) and any("named b1, b2" in p for p in problems), problems


RUN = {"python": ["datasets==2.19.0"], "prepare": ["python {prepare}/make_data.py data.txt"],
       "edits": [{"path": "train.py", "line": 3, "text": "n_layer = 2"}],
       "fixed_edits": [{"path": "train.py", "line": 4, "text": "n_layer = 2"}],
       "command": ["python", "train.py", "--max_steps", "8"], "steps": 5, "env": {"WANDB_MODE": "disabled"}}


def _run_problems(tmp_path: Path, run: dict, helper: bool = True) -> list[str]:
    cases = _cases("a" * 40, "b" * 40)
    cases[0] = {**cases[0], "run": run}
    helpers = tmp_path / "batches" / "b1" / "prepare"
    if helper:
        helpers.mkdir(parents=True, exist_ok=True)
        (helpers / "make_data.py").write_text("print('tiny data')\n")
    return _batch_problems(tmp_path, cases)


def test_a_runnable_case_carries_its_run_table(tmp_path):
    assert _run_problems(tmp_path, RUN) == []
    raw = {**_cases("a" * 40, "b" * 40)[0], "run": RUN}
    case, problems = rb.validate_case(raw, "t", "training", CODES, batch="b1")
    assert problems == [] and case.run.steps == 5 and case.run.command[0] == "python"
    assert case.run.edits_for("buggy")[0].line == 3 and case.run.edits_for("fixed")[0].line == 4
    assert case.run.env == (("WANDB_MODE", "disabled"),)
    minimal = {"command": ["python", "-m", "pkg.train"], "steps": 1}
    case, problems = rb.validate_case({**raw, "run": minimal}, "t", "training", CODES, batch="b1")
    assert problems == [] and case.run.edits == () and case.run.edits_for("fixed") == ()
    case, _ = rb.validate_case({k: v for k, v in raw.items() if k != "run"}, "t", "training", CODES, batch="b1")
    assert case.run is None
    # batch 0's schema has no run table
    b0 = {k: v for k, v in raw.items() if k not in ("in_catalogue", "kind", "candidate")}
    assert any("unknown key(s): run" in p for p in rb.validate_case(b0, "t", "training", CODES)[1])


@pytest.mark.parametrize("change, expected", [
    ({"command": ["bash", "train.sh"]}, "run.command must be a non-empty list of strings starting with \"python\""),
    ({"command": []}, "run.command must be"),
    ({"steps": 0}, "run.steps 0 must be the number of optimizer steps"),
    ({"python": ["datasets"]}, "pinned PyPI requirements"),
    ({"python": ["datasets>=2"]}, "pinned PyPI requirements"),
    ({"prepare": ["bash make_data.sh"]}, "must run a tlint-authored helper"),
    ({"prepare": ["python scripts/download.py"]}, "must run a tlint-authored helper"),
    ({"prepare": ["python {prepare}/../x.py"]}, "must run a tlint-authored helper"),
    ({"prepare": ["python {prepare}/absent.py"]}, "which is not a file in"),
    ({"edits": [{"path": "train.py", "line": 3}]}, "exactly the keys path, line and text"),
    ({"edits": [{"path": "/etc/x", "line": 3, "text": "x"}]}, "must be a relative file path"),
    ({"edits": [{"path": "train.py", "line": 0, "text": "x"}]}, "line 0 must be a line number"),
    ({"edits": [{"path": "train.py", "line": 3, "text": "a\nb"}]}, "text must be one line"),
    ({"edits": [{"path": "t.py", "line": 3, "text": "a"}, {"path": "t.py", "line": 3, "text": "b"}]},
     "t.py:3 is edited twice"),
    ({"env": {"lower": "1"}}, "run.env must be a table of environment variables"),
    ({"retries": 3}, "unknown key(s): retries"),
])
def test_run_table_is_validated(tmp_path, change, expected):
    problems = _run_problems(tmp_path, {**RUN, **change})
    assert any(expected in p for p in problems), problems


def test_run_table_needs_command_and_steps_and_edits_beside_fixed_edits(tmp_path):
    problems = _run_problems(tmp_path / "1", {"python": []})
    assert any("missing key(s): command, steps" in p for p in problems), problems
    only_fixed = {k: v for k, v in RUN.items() if k != "edits"}
    problems = _run_problems(tmp_path / "2", only_fixed)
    assert any("fixed_edits is given only beside run.edits" in p for p in problems), problems
    problems = _run_problems(tmp_path / "3", "python train.py")
    assert any("run must be a table" in p for p in problems), problems


def test_batch_flags(project, capsys):
    proj, b1, args = project
    rc, out, err = _main([*args, "--batch", "b7"], capsys)
    assert rc == 2 and "unknown batch" in err
    rc, out, err = _main([*args, "--record-first-sight"], capsys)
    assert rc == 2 and "needs --batch ID" in err
    rc, out, err = _main([*args, "--batch", "b1", "--fetch-list"], capsys)
    assert rc == 0 and out == "someone/demo\n"


# --------------------------------------------------------------------------- scoring


def _case(buggy: str, fixed: str, index: int) -> rb.Case:
    raw = _cases(buggy, fixed)[index]
    case, problems = rb.validate_case(raw, "t", "training", CODES, batch="b1")
    assert problems == []
    return case


def _finding(line, code, path="train.py", cell=None):
    return rb.Finding(path, line, line, 1, code, "warning", "m", cell)


def test_out_of_catalogue_found_means_described(mirror):
    repo, buggy, fixed = mirror
    case = _case(buggy, fixed, 1)
    diffs = rb.diff_between(repo / ".git", buggy, fixed, case.take)
    described = {d.key: d for d in (rb.Described(**{k: v for k, v in e.items()}) for e in DESCRIBED)}
    mapped = SITE + 2  # two lines inserted above; the site's line is replaced by two
    # an incidental finding only: not found; an unjudged one: listed, not found
    out = rb.evaluate(case, [_finding(7, "TL304")], [], diffs, {}, described=described)
    assert not out["found"] and [f["code"] for f in out["incidental"]] == ["TL304"] and not out["near_unjudged"]
    out = rb.evaluate(case, [_finding(SITE + 1, "TL210")], [], diffs, {}, described=described)
    assert not out["found"] and out["near_unjudged"][0]["code"] == "TL210"
    # 4 lines away: not near; tool codes never near
    out = rb.evaluate(case, [_finding(SITE + 4, "TL301"), _finding(SITE, "TL003")], [], diffs, {}, described=described)
    assert out["near"] == [] and out["near_unjudged"] == []
    # the describing finding: found; still near the mapped site on the fixed tree: not fix-sensitive
    buggy_findings = [_finding(SITE, "TL301"), _finding(7, "TL304")]
    out = rb.evaluate(case, buggy_findings, [_finding(mapped, "TL304")], diffs, {}, described=described)
    assert out["found"] and out["fix_sensitive"]  # another code near the fixed site does not count
    out = rb.evaluate(case, buggy_findings, [_finding(mapped + 1, "TL301")], diffs, {}, described=described)
    assert out["found"] and not out["fix_sensitive"]
    assert out["fixed_findings"] == 1 and out["judged"] == [] and out["unjudged"] == []  # counted, not judged


def test_notebooks_are_materialised_and_scored(mirror, tmp_path):
    repo, buggy, fixed = mirror
    gitdir = repo / ".git"
    assert [p for p, _ in rb.tree_files(gitdir, buggy, (".",))] == ["train.py"]  # batch 0, bench/ecosystem.py
    assert [p for p, _ in rb.tree_files(gitdir, buggy, (".",), rb.LINTED_SUFFIXES)] == ["demo.ipynb", "train.py"]
    missing, absent = rb.materialise(gitdir, buggy, ["."], tmp_path / "tree", rb.LINTED_SUFFIXES)
    assert (tmp_path / "tree" / "demo.ipynb").read_text() == NB_BUGGY and not (tmp_path / "tree" / "big.bin").exists()
    # a site given as a line of the .ipynb file itself (as GitHub shows it) or as cell + line
    file_line = NB_BUGGY.splitlines().index('    "y = x * 2  #!TL205\\n",') + 1
    assert rb.notebook_file_lines(tmp_path / "tree" / "demo.ipynb")[file_line] == (2, 2)
    mirrors = repo.parent
    script = tmp_path / "fake.py"
    script.write_text(FAKE_TLINT)
    command = ([sys.executable, str(script)], {})
    for site in ({"path": "demo.ipynb", "lines": [file_line]}, {"path": "demo.ipynb", "cell": 2, "lines": [2]}):
        raw = {**_cases(buggy, fixed)[0], "id": "demo-nb", "rule": "TL205", "kind": "notebook",
               "take": ["demo.ipynb"], "sites": [site]}
        case, problems = rb.validate_case(raw, "t", "model", CODES, batch="b1")
        assert problems == [], problems
        result = rb.run_case(case, mirrors, command, {})
        assert result["status"] == "ok", result
        assert result["found"] and result["fix_sensitive"], result
        assert result["buggy_hits"][0]["cell"] == 2 and result["buggy_hits"][0]["line"] == 2
    # the fixed notebook: one line added in cell 1, so cell 2's line 2 moves down by one
    table = rb.notebook_lines(tmp_path / "tree" / "demo.ipynb")
    assert table[1] == [0, 2]
    bad = {"path": "demo.ipynb", "lines": [1]}
    case, _ = rb.validate_case({**_cases(buggy, fixed)[0], "id": "demo-nb", "rule": "TL205", "take": ["demo.ipynb"],
                                "sites": [bad]}, "t", "model", CODES, batch="b1")
    assert rb.run_case(case, mirrors, command, {})["status"] == "missing-path"


# --------------------------------------------------------------------------- runnable cases (no trace run)


def test_a_case_added_before_a_tool_change_is_set_aside_and_the_others_recorded(project, capsys):
    proj, b1, args = project
    cases = _cases(*[_git(Path(args[1]) / "someone+demo", "rev-parse", ref) for ref in ("HEAD~1", "HEAD")])
    _write_batch(b1, cases[:1], LOG[:2])
    _commit(proj, "the first case", "bench")
    (proj / "rules" / "TL301.md").write_text("# TL301, widened\n")
    _commit(proj, "a rule change", "rules")
    record = [*args, "--batch", "b1", "--record-first-sight"]
    # its only case can no longer get a first sight: nothing can be recorded
    rc, out, err = _main(record, capsys)
    assert rc == 2 and "no first sight for demo-no-clip: tlint/ or rules/ changed since" in out, (out, err)
    assert "no case of b1 without a first sight can get one" in err and not (b1 / "first_sight.toml").exists()
    # a second case added after the change: it is recorded, the first one listed and left without
    _write_batch(b1, cases, LOG)
    (b1 / "described.toml").write_text(_tables("near", DESCRIBED))
    second = _commit(proj, "the second case", "bench")
    rc, out, err = _main(record, capsys)
    assert rc == 0, err
    assert "no first sight for demo-no-clip" in out and "recorded the first sight of 1 case(s)" in out
    entries = tomllib.loads((b1 / "first_sight.toml").read_text())["first_sight"]
    assert [(e["case"], e["commit"]) for e in entries] == [("demo-step-order", second)]
    # named, the set-aside case is a reason to refuse
    rc, out, err = _main([*record, "--case", "demo-no-clip"], capsys)
    assert rc == 2 and "case demo-no-clip: tlint/ or rules/ changed since" in err, err
    _commit(proj, "first sight", "bench")
    assert rb.check_first_sight_history(proj) == []


def test_edits_replace_whole_lines(tmp_path):
    (tmp_path / "a.py").write_bytes(b"one\r\ntwo\r\nthree")
    rb.apply_edits(tmp_path, (rb.Edit("a.py", 2, "TWO = 2"), rb.Edit("a.py", 3, "3")))
    assert (tmp_path / "a.py").read_bytes() == b"one\r\nTWO = 2\r\n3"
    with pytest.raises(rb.RunFailed, match="a.py:4: the file has 3 lines"):
        rb.apply_edits(tmp_path, (rb.Edit("a.py", 4, "x"),))
    with pytest.raises(rb.RunFailed, match="b.py:1: the tree has no such file") as error:
        rb.apply_edits(tmp_path, (rb.Edit("b.py", 1, "x"),))
    assert error.value.status == "edit-failed"


def test_venv_key_is_the_pinned_list():
    assert rb.venv_key(["b==1", "A==2"]) == rb.venv_key(("a==2", "b==1"))
    assert rb.venv_key(["a==2"]) != rb.venv_key(["a==3"]) != rb.venv_key([])


def test_run_bounded_keeps_the_tail_and_stops_the_group(tmp_path):
    status, out = rb.run_bounded([sys.executable, "-c", "print('x' * 200000); print('end')"], tmp_path,
                                 dict(os.environ), 60)
    assert status == 0 and len(out) == rb.OUTPUT_TAIL_BYTES and out.endswith(b"end\n")
    # past the limit: the command and what it started in its group are stopped
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              "time.sleep(60)']); print(p.pid, flush=True); time.sleep(60)")
    status, out = rb.run_bounded([sys.executable, "-c", script], tmp_path, dict(os.environ), 1.5)
    assert status is None
    grandchild = int(out.split()[0])
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(grandchild, 0)
            __import__("time").sleep(0.1)
    status, out = rb.run_bounded(["/no/such/program"], tmp_path, dict(os.environ), 5)
    assert status == 127 and b"could not be started" in out


REPORT = {"findings": [
    {"code": "TL305", "severity": "error", "message": "ran first", "path": "train.py", "line": 11, "static": "confirmed"},
    {"code": "TL310", "severity": "error", "message": "zeroed", "path": "pkg/loop.py", "line": 40, "static": "new"},
    {"code": "TL310", "severity": "error", "message": "elsewhere", "path": "/usr/lib/x.py", "line": 3, "static": "new"},
    {"code": "TL214", "severity": "error", "message": "no site", "path": None, "line": None, "static": "new"}],
    "check": {"files": ["train.py"], "findings": [
        {"code": "TL305", "severity": "error", "message": "static", "path": "train.py", "line": 11,
         "verdict": "confirmed"},
        {"code": "TL312", "severity": "warning", "message": "eval", "path": "train.py", "line": 30,
         "verdict": "refuted"}]}}


def test_trace_reports_are_scored_like_check_findings(tmp_path, mirror):
    report = {**REPORT, "findings": [*REPORT["findings"], {**REPORT["findings"][1], "path": str(tmp_path / "a.py")}]}
    findings = rb.trace_findings(report, tmp_path)
    assert [(f.path, f.line, f.origin) for f in findings] == [
        ("train.py", 11, "trace:confirmed"), ("pkg/loop.py", 40, "trace:new"), ("a.py", 40, "trace:new"),
        ("train.py", 11, "check:confirmed"), ("train.py", 30, "check:refuted")]
    repo, buggy, fixed = mirror
    diffs = rb.diff_between(repo / ".git", buggy, fixed, ("train.py",))

    def score(rule, line, path="train.py", in_catalogue=True, described=None):
        raw = {**_cases(buggy, fixed)[0], "rule": rule, "sites": [{"path": path, "lines": [line]}],
               "take": ["train.py", "pkg"]}
        if not in_catalogue:
            raw = {k: v for k, v in raw.items() if k != "rule"} | {"in_catalogue": False}
        case, problems = rb.validate_case(raw, "t", "training", CODES, batch="b2")
        assert problems == [], problems
        out = rb.evaluate(case, findings, [], diffs, {}, described=described)
        return out, rb.run_evidence(out["buggy_hits"])

    out, evidence = score("TL305", 9)
    assert out["found"] and evidence == "confirmed" and len(out["buggy_hits"]) == 2
    assert score("TL310", 38, "pkg/loop.py")[1] == "new"
    out, evidence = score("TL312", 33)  # refuted by the run, reported by check: found, static only
    assert out["found"] and evidence == "static-only"
    assert score("TL312", 34) == (score("TL312", 34)[0], None) and not score("TL312", 34)[0]["found"]
    # outside the catalogue: the near findings, run-time ones included, are judged in described.toml
    verdict = rb.Described("demo-no-clip", "pkg/loop.py", 40, "TL310", True, "it is the bug")
    out, evidence = score(None, 41, "pkg/loop.py", False, {verdict.key: verdict})
    assert out["found"] and evidence == "new" and out["near_unjudged"] == []
    out, _ = score(None, 41, "pkg/loop.py", False, {})
    assert not out["found"] and [f["origin"] for f in out["near_unjudged"]] == ["trace:new"]


FAKE_PYTHON = r'''
import json, os, sys
if sys.argv[1:4] == ["-m", "tlint", "trace"]:
    out = sys.argv[sys.argv.index("-o") + 1]
    report = os.environ.get("FAKE_REPORT")
    if report is not None:
        open(out, "w").write(report)
    print("the script's last words")
    sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
print("prepared", *sys.argv[1:])
'''


@pytest.mark.parametrize("report, exit_code, status, detail", [
    ({"findings": [], "steps": 5, "stopped": True, "error": None}, 0, None, None),
    ({"findings": [], "steps": 2, "stopped": False, "error": None}, 0, "too-few-steps",
     "the script ended after 2 optimizer step(s), fewer than the case's steps = 5"),
    ({"findings": [], "steps": 1, "stopped": False, "error": {"kind": "script", "message": "ValueError: x"}}, 2,
     "trace-failed", "tlint trace exited 2 (script: ValueError: x)"),
    (None, 2, "trace-failed", "tlint trace exited 2 without its JSON report"),
    ("not json", 1, "trace-failed", "without its JSON report"),
])
def test_trace_tree_reads_the_report_and_says_what_failed(tmp_path, monkeypatch, report, exit_code, status, detail):
    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\n{FAKE_PYTHON}")
    python.chmod(0o755)
    (tmp_path / "prepare").mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    run = rb.Run(command=("python", "train.py"), steps=5, prepare=("python {prepare}/make.py 'a b' 3",))
    env = dict(os.environ, FAKE_EXIT=str(exit_code))
    if report is not None:
        env["FAKE_REPORT"] = report if isinstance(report, str) else json.dumps(report)
    if status is None:
        assert rb.trace_tree(run, tree, python, env, tmp_path / "prepare", tmp_path / "r.json", 60)["steps"] == 5
        return
    with pytest.raises(rb.RunFailed) as error:
        rb.trace_tree(run, tree, python, env, tmp_path / "prepare", tmp_path / "r.json", 60)
    assert error.value.status == status and detail in error.value.detail, error.value.detail
    assert "the script's last words" in error.value.detail


def test_a_batch_file_may_be_named_after_its_search(tmp_path):
    folder = tmp_path / "batches" / "b2"
    cases = _cases("a" * 40, "b" * 40)
    _write_batch(folder, cases[:1], LOG[:2])  # cases-training.toml: demo-no-clip, candidate 1
    other = {**cases[1], "candidate": 1}
    hf_log = [{**LOG[2], "n": 1}]
    (folder / "cases-hf.toml").write_text(_tables("case", [other]))
    (folder / "log-hf.toml").write_text(_tables("candidate", hf_log))
    problems: list[str] = []
    batches = rb.load_batches(tmp_path / "batches", CODES, {}, problems)
    assert problems == []
    by_id = {c.id: c for c in batches["b2"].cases}
    assert (by_id["demo-no-clip"].part, by_id["demo-no-clip"].family) == ("training", "training")
    assert (by_id["demo-step-order"].part, by_id["demo-step-order"].family) == ("hf", rb.OTHER_FAMILY)
    # an out-of-catalogue case may name its family; an in-catalogue one takes its rule's
    (folder / "cases-hf.toml").write_text(_tables("case", [{**other, "family": "data"}]))
    assert {c.id: c.family for c in rb.load_batches(tmp_path / "batches", CODES, {}, [])["b2"].cases}[
        "demo-step-order"] == "data"
    inside = {**other, "in_catalogue": True, "rule": "TL305"}
    (folder / "cases-hf.toml").write_text(_tables("case", [inside]))
    assert {c.id: c.family for c in rb.load_batches(tmp_path / "batches", CODES, {}, [])["b2"].cases}[
        "demo-step-order"] == "training"
    for bad, expected in (({**inside, "family": "data"}, "differs from the case's 'training'"),
                          ({**other, "family": "hf"}, "family 'hf' must be one of")):
        (folder / "cases-hf.toml").write_text(_tables("case", [bad]))
        problems = []
        rb.load_batches(tmp_path / "batches", CODES, {}, problems)
        assert any(expected in p for p in problems), problems
    # the log of a part is its own: the case's candidate is looked up in log-hf.toml only
    (folder / "cases-hf.toml").write_text(_tables("case", [{**other, "candidate": 2}]))
    problems = []
    rb.load_batches(tmp_path / "batches", CODES, {}, problems)
    assert any("candidate 2 is not in log-hf.toml" in p for p in problems), problems
    assert any("log-hf.toml: candidate 1 is accepted as case 'demo-step-order'" in p for p in problems), problems
    (folder / "cases-HF.toml").write_text("")
    problems = []
    rb.load_batches(tmp_path / "batches", CODES, {}, problems)
    assert any("cases-HF.toml: a batch holds cases-<part>.toml" in p for p in problems), problems


def test_a_runnable_first_sight_keeps_its_evidence(tmp_path):
    case = _case("a" * 40, "b" * 40, 0)
    result = {"id": case.id, "found": True, "fix_sensitive": True, "in_catalogue": True, "rule": "TL301",
              "runnable": True, "evidence": "new"}
    text = rb.first_sight_entry(result, "c" * 40, "2026-12-07")
    assert 'evidence = "new"' in text
    (tmp_path / "first_sight.toml").write_text(text)
    problems: list[str] = []
    assert rb.validate_first_sight(tmp_path / "first_sight.toml", {case.id: case}, CODES, problems)
    assert problems == []
    (tmp_path / "first_sight.toml").write_text(text.replace('"new"', '"seen"'))
    rb.validate_first_sight(tmp_path / "first_sight.toml", {case.id: case}, CODES, problems)
    assert any("evidence 'seen' must be one of confirmed, new, static-only" in p for p in problems), problems
    assert "evidence" not in rb.first_sight_entry({**result, "evidence": None, "found": False}, "c" * 40, "2026-12-07")


def test_a_cases_pythonpath_comes_before_the_checkout(tmp_path):
    """A tree whose script imports its own package from the tree sets PYTHONPATH = "."; the
    checkout whose tlint is under test is still on the path, after it."""
    python = tmp_path / "venv" / "bin" / "python"
    with_path = rb.Run(command=("python", "train.py"), steps=1, env=(("PYTHONPATH", "."),))
    env = rb.run_env(with_path, python, tmp_path / "checkout")
    assert env["PYTHONPATH"] == os.pathsep.join([".", str(tmp_path / "checkout")])
    without = rb.run_env(rb.Run(command=("python", "train.py"), steps=1), python, tmp_path / "checkout")
    assert env["PATH"].split(os.pathsep)[0] == str(python.parent) and without["PYTHONPATH"] == str(tmp_path / "checkout")
