"""Fresh-sample precision (issue 40): the pool, the seeded draw, the thresholds, the skips and
the figures of bench/ecosystem_sample.py, on synthetic mirrors and a fake tlint (no network)."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchutil import load

# one worker for the module: its module-scoped fixture runs once
pytestmark = pytest.mark.xdist_group("test_ecosystem_sample")

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


eco = load("tlint_bench_ecosystem", BENCH / "ecosystem.py")
es = load("tlint_bench_ecosystem_sample", BENCH / "ecosystem_sample.py")


# --------------------------------------------------------------------------- the committed pool


def test_the_pool_file_is_valid():
    pool = es.load_pool(judged=es.judged_batch0(), minimum=300)  # raises, listing every problem
    assert len(pool) >= 300
    assert all(re.fullmatch(r"[0-9a-f]{40}", e.sha) for e in pool)
    assert len({e.repo.lower() for e in pool}) == len(pool)
    judged = {p.repo.lower() for p in eco.load_repos()} | es.judged_batch0()
    assert not [e.repo for e in pool if e.repo.lower() in judged]
    queries = {q for q, _ in es.read_queries()}
    assert {e.found_by for e in pool} <= queries


def test_the_pool_is_rebuilt_from_the_recorded_answers(tmp_path):
    entries, dropped = es.build_pool(es.read_queries(), es.judged_batch0())
    out = tmp_path / "pool.toml"
    es.write_pool(entries, out, dropped)
    assert out.read_text(encoding="utf-8") == es.POOL_FILE.read_text(encoding="utf-8")


def test_the_filter_rules():
    queries = [("q1", [("a/x", "1" * 40), ("A/y", "2" * 40), ("b/judged", "3" * 40)]),
               ("q2", [("a/X", "4" * 40), ("c/z", "5" * 40)])]
    entries, dropped = es.build_pool(queries, {"b/judged"})
    assert [(e.repo, e.sha, e.found_by) for e in entries] == [("a/x", "1" * 40, "q1"), ("c/z", "5" * 40, "q2")]
    assert dropped == {"F1-duplicate": 1, "F2-judged": 1, "F3-same-owner": 1}


# --------------------------------------------------------------------------- the draw


POOL = [es.PoolEntry(f"owner{i:02d}/repo", f"{i:040x}", "q1") for i in range(40)]


def test_the_draw_is_fixed_by_the_seed_and_leaves_out_the_judged():
    one = es.draw_order(POOL, 20261207, set())
    assert one == es.draw_order(POOL, 20261207, set())
    assert one != es.draw_order(POOL, 20261208, set())
    assert sorted(one, key=lambda e: e.repo) == POOL
    excluded = {one[0].repo.lower(), one[5].repo.lower()}
    fewer = es.draw_order(POOL, 20261207, excluded)
    assert fewer == [e for e in one if e.repo.lower() not in excluded]  # same order, less the judged


def test_earlier_samples_and_realbugs_cases_are_excluded(tmp_path):
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "sample-1.toml").write_text(f'[[draw]]\nrepo = "{POOL[3].repo}"\n')
    (samples / "sample-2.toml").write_text(f'[[draw]]\nrepo = "{POOL[4].repo}"\n')
    repos = tmp_path / "repos.toml"
    repos.write_text(f'[[repo]]\nrepo = "{POOL[7].repo.upper()}"\n')
    realbugs = tmp_path / "realbugs"
    (realbugs / "cases").mkdir(parents=True)
    (realbugs / "cases" / "data.toml").write_text(f'[[case]]\nrepo = "{POOL[8].repo}"\n')
    (realbugs / "batches" / "b1").mkdir(parents=True)
    (realbugs / "batches" / "b1" / "cases-model.toml").write_text(f'[[case]]\nrepo = "{POOL[9].repo}"\n')
    excluded = es.exclusions(POOL, samples, 2, repos, realbugs)
    assert excluded == sorted([POOL[3].repo, POOL[7].repo, POOL[8].repo, POOL[9].repo])


# --------------------------------------------------------------------------- linting a draw


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


TRAINS = "import torch\n\n\ndef step(model, batch, optimizer):\n    loss = model(**batch).loss\n    loss.backward()\n"
MODEL = "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        self.attention = nn.MultiheadAttention(8, 2)\n"
NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": ["from transformers import Trainer\n", "Trainer(model).train()\n"]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
REPOS = {
    "a/one": {"train.py": TRAINS + MODEL.replace("import torch.nn as nn\n", "")},  # 1 file
    "b/two": {"train.py": TRAINS, "model.py": MODEL},                                # 2 files
    "c/plain": {"main.py": "print('hello')\n"},                                       # no torch
    "d/inference": {"run.py": MODEL},                                                # attention, no training
    "e/notebook": {"finetune.ipynb": NOTEBOOK, "notes/README.txt": "x\n"},           # 1 notebook
    "f/three": {"a.py": TRAINS, "b.py": MODEL, "c/d.py": TRAINS},                    # 3 files
}


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    """One git repository per REPOS entry under MIRRORS/owner+name; returns (MIRRORS, {repo: sha})."""
    base = tmp_path_factory.mktemp("mirrors")
    shas = {}
    for repo, files in REPOS.items():
        folder = base / repo.replace("/", "+")
        folder.mkdir()
        _git(folder, "init", "-q", "-b", "main")
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        _git(folder, "add", ".")
        _git(folder, "commit", "-q", "-m", "x")
        shas[repo] = _git(folder, "rev-parse", "HEAD")
    return base, shas


FAKE_TLINT = '''\
import json, os, sys
args = sys.argv[1:]
assert args[:2] == ["check", "--format"] and args[-1] == "." and "--jobs" in args, args
select_all = "--select" in args and args[args.index("--select") + 1] == "ALL"
def diag(code, severity, path):
    return {"code": code, "name": "x", "severity": severity, "message": "m " + code, "path": path,
            "range": {"start": {"line": 1, "column": 1}, "end": {"line": 1, "column": 1}}}
out = []
for folder, dirs, files in os.walk("."):
    dirs[:] = sorted(d for d in dirs if d != ".git")
    for name in sorted(files):
        if name.endswith((".py", ".ipynb")):
            path = os.path.join(folder, name)[2:]
            out.append(diag("TL301", "warning", path))
            out.append(diag("TL316", "info", path))
            if select_all:
                out.append(diag("TL399", "error", path))
print(json.dumps({"diagnostics": out}))
'''


@pytest.fixture(scope="module")
def fake_tlint(tmp_path_factory):
    """A stand-in for tlint: one TL301 warning and one TL316 info per linted file, and one
    more error per file under --select ALL."""
    script = tmp_path_factory.mktemp("fake") / "fake_tlint.py"
    script.write_text(FAKE_TLINT)
    return shlex.join([sys.executable, str(script)])


def _draw(shas: dict, repos: list[str]) -> list[dict]:
    return [{"order": i, "repo": r, "sha": shas.get(r, "f" * 40), "found_by": "q1"} for i, r in enumerate(repos, 1)]


def _sample(draw, n, min_findings):
    return {"sample": 1, "seed": 1, "n": n, "min_findings": min_findings, "state": "drawn", "pool_size": 9,
            "excluded": [], "draw": draw}


UNFETCHABLE = {"x/missing": "No snapshot of that repository can be had here."}


def _run(mirrors, fake_tlint, sample, extension=(), unfetchable=UNFETCHABLE):
    base, _ = mirrors
    return es.run_sample(sample, list(extension), base, es._rb().tlint_command(fake_tlint), "abc",
                         log=lambda *_: None, unfetchable=unfetchable)


def test_draws_continue_until_both_thresholds(mirrors, fake_tlint):
    _, shas = mirrors
    order = ["c/plain", "a/one", "x/missing", "b/two", "d/inference", "e/notebook", "f/three"]
    # 2 linted after b/two, and 1 + 2 = 3 default findings: stop there
    result = _run(mirrors, fake_tlint, _sample(_draw(shas, order), 2, 3))
    assert [d["repo"] for d in result["draw"]] == order[:4]
    assert result["summary"]["linted"] == 2 and result["summary"]["complete"] == "true"
    # the findings threshold keeps drawing past N linted repositories
    result = _run(mirrors, fake_tlint, _sample(_draw(shas, order), 2, 5))
    assert [d["repo"] for d in result["draw"]] == order
    assert result["summary"] == {"complete": "true", "drawn": 7, "linted": 4, "skipped": 3, "tool_failures": 0,
                                 "default_findings": 7, "all_findings": 14}
    # and N keeps drawing past enough findings
    result = _run(mirrors, fake_tlint, _sample(_draw(shas, order), 3, 1))
    assert [d["repo"] for d in result["draw"]] == order[:6]
    # the recorded draw runs out: it goes on with the rest of the seed's order
    extension = [es.PoolEntry("e/notebook", shas["e/notebook"], "q7"), es.PoolEntry("f/three", shas["f/three"], "q2")]
    result = _run(mirrors, fake_tlint, _sample(_draw(shas, order[:2]), 2, 1), extension)
    assert [(d["order"], d["repo"], d["found_by"]) for d in result["draw"]] == [
        (1, "c/plain", "q1"), (2, "a/one", "q1"), (3, "e/notebook", "q7")]
    # the pool runs out first: written, but not complete
    result = _run(mirrors, fake_tlint, _sample(_draw(shas, ["a/one"]), 2, 1))
    assert result["summary"]["complete"] == "false"


def test_skips_and_findings_are_recorded(mirrors, fake_tlint):
    _, shas = mirrors
    draw = _draw(shas, ["c/plain", "x/missing", "d/inference", "b/two", "e/notebook"])
    draw.insert(2, {"order": 3, "repo": "a/one", "sha": "e" * 40, "found_by": "q1"})  # not in the mirror
    result = _run(mirrors, fake_tlint, _sample(draw, 2, 1))
    status = {d["repo"]: (d["status"], d.get("reason", "").split(":")[0]) for d in result["draw"]}
    assert status == {"c/plain": ("skipped", "no-transformer-training-code"),
                      "x/missing": ("skipped", "missing-mirror"), "a/one": ("skipped", "missing-commit"),
                      "d/inference": ("skipped", "no-transformer-training-code"),
                      "b/two": ("linted", ""), "e/notebook": ("linted", "")}
    two = next(d for d in result["draw"] if d["repo"] == "b/two")
    assert (two["files"], two["default_findings"], two["all_findings"], two["default_info"]) == (2, 2, 4, 2)
    rows = [(f["repo"], f["path"], f["code"], f["run"], f["verdict"]) for f in result["finding"]]
    assert ("e/notebook", "finetune.ipynb", "TL301", "default", "") in rows
    assert ("b/two", "model.py", "TL399", "all", "") in rows
    assert not [f for f in result["finding"] if f["severity"] == "info"]
    missing = next(d for d in result["draw"] if d["repo"] == "x/missing")
    assert missing["reason"] == "missing-mirror: No snapshot of that repository can be had here."
    # a mirror missing for no stated reason (not fetched yet) stops the run: nothing is recorded
    with pytest.raises(es.NotFetched, match="x/missing"):
        _run(mirrors, fake_tlint, _sample(draw, 2, 1), unfetchable={})
    # the file round-trips and stays unjudged
    text = es.render_sample(result)
    again = es.load_sample_text(text)
    assert again["draw"] == result["draw"] and len(again["finding"]) == len(result["finding"])
    assert {f["verdict"] for f in again["finding"]} == {""}


def test_the_command_line_writes_the_draw_then_lints_it(mirrors, fake_tlint, tmp_path, capsys):
    base, shas = mirrors
    pool = tmp_path / "pool.toml"
    entries = sorted([es.PoolEntry(r, s, "q1") for r, s in shas.items()], key=lambda e: e.repo)
    es.write_pool(entries, pool, {})
    samples = tmp_path / "samples"
    none = tmp_path / "none"
    common = ["--pool-file", str(pool), "--samples-dir", str(samples), "--repos-file", str(none / "r.toml"),
              "--realbugs-dir", str(none)]
    assert eco.main(["--sample", "2", "--seed", "7", "--draw", *common]) == 0
    printed = capsys.readouterr().out
    expected = es.draw_order(entries, 7, set())
    assert [line.split()[1:] for line in printed.splitlines()[1:]] == [[e.repo, e.sha] for e in expected]
    assert eco.main(["--sample", "2", "--seed", "7", "--min-findings", "2", "--write-draw", "--draw-size", "3",
                     *common]) == 0
    drawn = es.load_sample(samples / "sample-1.toml")
    assert drawn["state"] == "drawn" and [d["repo"] for d in drawn["draw"]] == [e.repo for e in expected[:3]]
    lint = ["--sample", "2", "--seed", "7", "--mirrors", str(base), "--tlint", fake_tlint, *common]
    assert eco.main(lint) == 2  # the draw is not committed
    assert "not committed" in capsys.readouterr().err
    first = base / expected[0].repo.replace("/", "+")
    first.rename(first.with_name("away"))  # the first drawn repository is not fetched: stop, write nothing
    try:
        assert eco.main([*lint, "--allow-uncommitted-draw"]) == 3
    finally:
        first.with_name("away").rename(first)
    assert "stopped, nothing written" in capsys.readouterr().err
    assert es.load_sample(samples / "sample-1.toml")["state"] == "drawn"
    assert eco.main([*lint, "--allow-uncommitted-draw"]) == 0
    linted = es.load_sample(samples / "sample-1.toml")
    assert linted["state"] == "linted" and linted["tlint_commit"] == ""  # a command: commit unknown
    assert [d["repo"] for d in linted["draw"]] == [e.repo for e in expected[:len(linted["draw"])]]
    assert linted["summary"]["linted"] >= 2 and linted["summary"]["default_findings"] >= 2
    assert eco.main([*lint, "--allow-uncommitted-draw"]) == 2  # linted once
    assert "already linted" in capsys.readouterr().err
    # a second sample leaves out what the first drew
    assert eco.main(["--sample", "1", "--seed", "7", "--draw", *common]) == 0
    second = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert not set(second) & {d["repo"] for d in linted["draw"]}
    assert eco.main(["--report", "--sample-id", "1", *common]) == 1
    assert "NOT A RESULT" in capsys.readouterr().out


# --------------------------------------------------------------------------- the figures


def test_wilson_interval_on_known_values():
    lo, hi = es.wilson(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = es.wilson(0, 10)
    assert round(lo, 6) == 0 and round(hi, 4) == 0.2775
    lo, hi = es.wilson(10, 10)
    assert round(lo, 4) == 0.7225 and round(hi, 6) == 1
    lo, hi = es.wilson(15, 30)
    assert (round(lo, 4), round(hi, 4)) == (0.3315, 0.6685)
    assert es.wilson(0, 0) is None


def _judged(verdicts: list[str], run="default") -> list[dict]:
    return [{"repo": "a/b", "path": "t.py", "line": i, "code": "TL301", "severity": "warning", "message": "m",
             "run": run, "verdict": v, "reason": "r" if v else ""} for i, v in enumerate(verdicts, 1)]


def _linted(findings):
    return {"sample": 1, "seed": 1, "n": 1, "min_findings": 1, "state": "linted", "date": "2026-12-07",
            "tlint_commit": "0123456789abcdef", "pool_size": 1, "excluded": [], "draw": [],
            "summary": {"drawn": 1, "linted": 1, "skipped": 0, "tool_failures": 0}, "finding": findings}


def test_report_refuses_unjudged_findings():
    sample = _linted(_judged(["tp", "fp", ""]) + _judged(["tp"], "all"))
    out = io.StringIO()
    assert es.report(sample, out) == 1
    assert "NOT A RESULT: 1 unjudged findings" in out.getvalue() and "first-sight precision" not in out.getvalue()
    out = io.StringIO()
    assert es.headline([sample], out) == 1 and "NOT A RESULT" in out.getvalue()


def test_report_and_headline_figures():
    sample = _linted(_judged(["tp"] * 8 + ["fp"] * 2 + ["advisory"] * 2) + _judged(["tp", "fp", "fp", "fp"], "all"))
    out = io.StringIO()
    assert es.report(sample, out) == 0
    text = out.getvalue()
    assert "first-sight precision tp/(tp+fp) = 80 % (95 % Wilson 49 %-94 %); advisory share 17 %" in text
    assert "= 25 %" in text and "NOT A RESULT" not in text
    figs = es.figures(sample)
    assert figs["default"]["tp"] == 8 and figs["default"]["advisory_share"] == 2 / 12
    out = io.StringIO()
    assert es.headline([sample], out) == 0
    rows = out.getvalue().splitlines()
    assert len(rows) == 4 and "**80 %** (49 %–94 %)" in rows[2] and "`--select ALL`" in rows[3]


def test_a_verdict_needs_a_known_value_and_a_reason():
    bad = _linted(_judged(["maybe"]))
    with pytest.raises(es.SampleError, match="verdict 'maybe'"):
        es.load_sample_text(es.render_sample({**bad, "summary": {}}))
    no_reason = _linted([{**_judged(["tp"])[0], "reason": ""}])
    with pytest.raises(es.SampleError, match="one-line reason"):
        es.load_sample_text(es.render_sample({**no_reason, "summary": {}}))
