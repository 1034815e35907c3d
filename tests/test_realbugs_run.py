"""bench/realbugs runnable cases end to end: a local git repository stands in for a mirror
(a buggy and a fixed commit of a small training script that imports a module of its own
tree), a batch holds the case with its [case.run] (a size edit, a prepare helper, env),
and the runner materialises both whole trees, makes the case's venv (no pinned packages),
runs `tlint trace` from this checkout, scores the reports and records the first sight; the
failures say what failed. No network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchutil import load
from tests.test_realbugs_batches import _toml_value

# slow: each traced tree is a `tlint trace` subprocess whose child imports torch (about 7 s a tree)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_realbugs_run")]

ROOT = Path(__file__).resolve().parent.parent
rb = load("tlint_bench_realbugs", ROOT / "bench" / "realbugs.py")

HELPERS = """\
import torch


def make_model():
    return torch.nn.Linear(4, 1)
"""

BUGGY = """\
import torch

from helpers import make_model

DATA = "/nonexistent/full_dataset.txt"
data = [torch.randn(8, 4) for _ in range(int(open(DATA).read()))]
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
for x in data:
    sched.step()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""
SITE = 11  # sched.step() before the optimizer's first step
FIXED = BUGGY.replace("    sched.step()\n", "").replace("    opt.step()\n", "    opt.step()\n    sched.step()\n")
EDIT = {"path": "train.py", "line": 5, "text": 'DATA = "tiny.txt"'}

MAKE_DATA = """\
import os
import sys

if os.environ.get("TINY_MARK") != "yes":
    sys.exit("the case's env did not reach prepare")
with open(sys.argv[1], "w") as fh:
    fh.write(sys.argv[2])
"""
FAILING = "import sys\nprint('no data for you')\nsys.exit(3)\n"
SLEEPING = "import time\nprint('preparing', flush=True)\ntime.sleep(60)\n"


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()




@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    repo = tmp_path_factory.mktemp("mirrors") / "someone+steps"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "helpers.py").write_text(HELPERS)
    (repo / "train.py").write_text(BUGGY)
    _git(repo, "add", "helpers.py", "train.py")
    _git(repo, "commit", "-q", "-m", "buggy")
    buggy = _git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text(FIXED)
    _git(repo, "commit", "-q", "-am", "fix")
    # a second name for the same history (a batch takes at most 2 cases from one repository)
    _git(repo.parent, "clone", "-q", "--bare", str(repo), str(repo.parent / "someone+steps2"))
    return repo, buggy, _git(repo, "rev-parse", "HEAD")


def _batch(root: Path, buggy: str, fixed: str, cases: dict[str, dict]) -> list[str]:
    """A batch b1 under root/batches with one runnable case per entry (id: run table), the
    first two of someone/steps, the others of someone/steps2; returns the runner's arguments."""
    folder = root / "batches" / "b1"
    (folder / "prepare").mkdir(parents=True)
    (folder / "prepare" / "make_data.py").write_text(MAKE_DATA)
    (folder / "prepare" / "failing.py").write_text(FAILING)
    (folder / "prepare" / "sleeping.py").write_text(SLEEPING)
    (folder / "SEARCH-training.md").write_text("# search\n- q1\n- A1\n")
    log, text = [], ""
    for n, (cid, run) in enumerate(cases.items(), 1):
        repo = "someone/steps" if n <= 2 else "someone/steps2"
        log.append(f'[[candidate]]\nn = {n}\nrepo = "{repo}"\nref = "https://example.org/c/{n}"\n'
                   f'found_by = "q1"\nverdict = "accept"\ncriterion = "A1"\nnote = "n"\ncase = "{cid}"\n')
        case = {"id": cid, "repo": repo, "buggy": buggy, "fixed": fixed, "in_catalogue": True,
                "rule": "TL305", "kind": "script", "take": ["train.py"],
                "sites": [{"path": "train.py", "lines": [SITE]}], "source": "https://example.org/pr/1",
                "summary": "s", "recorded": "2026-12-07", "candidate": n}
        text += "[[case]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in case.items())
        text += "\n[case.run]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in run.items()) + "\n"
    (folder / "cases-training.toml").write_text(text)
    (folder / "log-training.toml").write_text("\n".join(log))
    for name in ("cases", "judgements"):
        (root / name).mkdir()
    return ["--cases-dir", str(root / "cases"), "--judgements-dir", str(root / "judgements"),
            "--batches-dir", str(root / "batches"), "--batch", "b1", "--venv-cache", str(root / "venvs")]


GOOD = {"prepare": ["python {prepare}/make_data.py tiny.txt 12"], "edits": [EDIT],
        "command": ["python", "train.py"], "steps": 4, "env": {"TINY_MARK": "yes"}}


def test_a_runnable_case_is_traced_scored_and_first_sighted(mirror, tmp_path, capsys):
    repo, buggy, fixed = mirror
    # a project laid out like this repository, whose tlint/ is this checkout's (a link): recording
    # first sight runs the project's tlint at its HEAD
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "tlint").symlink_to(ROOT / "tlint")
    (proj / "rules").mkdir()
    (proj / "rules" / "TL305.md").write_text("# TL305\n")
    args = _batch(proj / "bench" / "realbugs", buggy, fixed, {"steps-sched-first": GOOD})
    _git(proj, "init", "-q", "-b", "main")
    _git(proj, "add", "tlint", "rules", "bench")
    _git(proj, "commit", "-q", "-m", "tool and case")
    head = _git(proj, "rev-parse", "HEAD")
    report = tmp_path / "out.json"
    rc = rb.main(["--mirrors", str(repo.parent), *args, "--json", str(report), "--record-first-sight"])
    out = capsys.readouterr().out
    assert rc == 0, out
    payload = json.loads(report.read_text())
    (case,) = payload["cases"]
    assert case["status"] == "ok", case
    # found by the trace report (run-time and static findings), gone with the fix
    assert case["found"] and case["fix_sensitive"], case
    assert case["evidence"] == "confirmed"
    assert {(h["line"], h["origin"]) for h in case["buggy_hits"]} == {(SITE, "trace:confirmed"),
                                                                     (SITE, "check:confirmed")}
    assert case["fixed_remaining"] == [] and case["run"]["fixed"]["findings"] == []
    assert case["run"]["buggy"]["steps"] == 4 and case["run"]["fixed"]["steps"] == 4
    assert payload["result"] is True and payload["batches"]["b1"]["found_now"]["all"]["found"] == 1
    assert "run-time evidence: confirmed" in out
    # the first sight: at HEAD, with its evidence, and what git history says
    text = (proj / "bench" / "realbugs" / "batches" / "b1" / "first_sight.toml").read_text()
    assert f'commit = "{head}"' in text and 'evidence = "confirmed"' in text and "fix_sensitive = true" in text
    assert rb.check_first_sight_history(proj) == []
    # the venv is cached by its pinned list, and the mirror was only read
    venvs = proj / "bench" / "realbugs" / "venvs"
    assert [p.name for p in venvs.iterdir() if p.is_dir()] == [rb.venv_key(())]
    assert _git(repo, "status", "--porcelain") == "" and sorted(p.name for p in repo.iterdir()) == [
        ".git", "helpers.py", "train.py"]


def test_a_run_that_fails_says_how(mirror, tmp_path, capsys, monkeypatch):
    repo, buggy, fixed = mirror
    cases = {
        "steps-prepare-fails": {**GOOD, "prepare": ["python {prepare}/failing.py"]},
        "steps-prepare-hangs": {**GOOD, "prepare": ["python {prepare}/sleeping.py"]},
        "steps-edit-past-the-end": {**GOOD, "edits": [{**EDIT, "line": 99}]},
        "steps-no-env": {**GOOD, "env": {}},
    }
    args = _batch(tmp_path, buggy, fixed, cases)
    report = tmp_path / "out.json"
    rc = rb.main(["--mirrors", str(repo.parent), *args, "--json", str(report), "--run-timeout", "3"])
    out = capsys.readouterr().out
    by_id = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    assert rc == 0 and json.loads(report.read_text())["result"] is False
    failing = by_id["steps-prepare-fails"]
    assert failing["status"] == "prepare-failed" and "exited 3" in failing["detail"], failing
    assert "no data for you" in failing["detail"] and failing["detail"].startswith("buggy: ")
    hangs = by_id["steps-prepare-hangs"]
    assert hangs["status"] == "timeout" and "preparing" in hangs["detail"], hangs
    assert hangs["run"]["buggy"]["seconds"] < 3 + rb.STOP_GRACE_S + 5
    assert by_id["steps-edit-past-the-end"]["status"] == "edit-failed"
    assert "train.py:99: the file has 15 lines" in by_id["steps-edit-past-the-end"]["detail"]
    assert by_id["steps-no-env"]["status"] == "prepare-failed"
    assert "the case's env did not reach prepare" in by_id["steps-no-env"]["detail"]
    assert "4 case(s) not run" in out and "    | no data for you" in out
    # no mirror; a pinned package that cannot be installed (no index: nothing is downloaded)
    args = _batch(tmp_path / "2", buggy, fixed, {"steps-bad-pin": {**GOOD, "python": ["tlint-no-such-pkg==1.0"]}})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    rb.main(["--mirrors", str(repo.parent), *args, "--json", str(report)])
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == "install-failed" and "tlint-no-such-pkg" in case["detail"], case
    rb.main(["--mirrors", str(tmp_path), *args, "--json", str(report)])
    assert json.loads(report.read_text())["cases"][0]["status"] == "missing-mirror"
    capsys.readouterr()


def test_the_venv_imports_this_checkouts_tlint(tmp_path):
    python = rb.ensure_venv((), tmp_path / "venvs")
    assert rb.ensure_venv((), tmp_path / "venvs") == python  # cached
    run = rb.Run(command=("python", "train.py"), steps=1)
    tree = tmp_path / "tree"
    tree.mkdir()
    rb.check_tlint(python, ROOT, rb.run_env(run, python, ROOT), tree)
    other = tmp_path / "other"
    (other / "tlint").mkdir(parents=True)
    (other / "tlint" / "__init__.py").write_text("")
    with pytest.raises(rb.RunFailed, match="imports tlint from") as error:
        rb.check_tlint(python, ROOT, rb.run_env(run, python, other), tree)
    assert error.value.status == "wrong-tlint"
    # a tree whose own top-level tlint would shadow the checkout's is caught too
    (tree / "tlint").mkdir()
    (tree / "tlint" / "__init__.py").write_text("")
    with pytest.raises(rb.RunFailed, match="imports tlint from"):
        rb.check_tlint(python, ROOT, rb.run_env(run, python, ROOT), tree)
    assert sys.executable != str(python)
