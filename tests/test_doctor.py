"""`tlint doctor`: one report from check, scan-data, verify and diagnose on the demo, ranked;
`--no-run` runs no user code (and needs no torch); bad input is exit 2 with a message; the
HTML file is self-contained and every image in it decodes in a real headless Chromium."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tlint.cli import main
from tlint.doctor.steps import Results

# slow: runs the whole procedure on the demo (verify, scan-data, a training run) and opens its report in a browser
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_doctor")]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from doctor_screenshot import spiky_run  # noqa: E402  (the README example's run folder, also the screenshot's)

DEMO = ROOT / "fixtures" / "demo"
SCHEMA = ROOT / "schema" / "doctor-output.schema.json"


def validate(document: dict) -> None:
    import jsonschema

    jsonschema.validate(document, json.loads(SCHEMA.read_text()))


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "TLINT_NO_CACHE": "1"}


# duration: the whole procedure once for the module (verify, scan-data, a run read back), shared by its tests
@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    """doctor on a copy of the demo with a run folder in it: one run of the whole procedure
    (its JSON, its stderr, its HTML file beside the project), shared by the tests below (the
    HTML test among them)."""
    from tests.torchutil import import_torch

    import_torch()
    tmp = tmp_path_factory.mktemp("doctor")
    project = tmp / "demo"
    shutil.copytree(DEMO, project)
    spiky_run(project / "runs" / "lr-high")
    proc = subprocess.run([sys.executable, "-m", "tlint", "doctor", str(project), "--format", "json", "--no-cache",
                           "--html", str(tmp / "report.html")], capture_output=True, text=True, env=env(), cwd=tmp,
                          timeout=600)
    return proc, json.loads(proc.stdout), project


def test_doctor_on_the_demo_gives_one_report_with_every_part(demo_report):
    proc, doc, project = demo_report
    validate(doc)
    assert proc.returncode == 1 == doc["exit_code"], proc.stderr
    assert "Traceback" not in proc.stderr
    steps = {s["step"]: s for s in doc["steps"]}
    assert [s["step"] for s in doc["steps"]] == ["check", "scan-data", "verify", "trace", "diagnose"]
    assert steps.pop("trace")["status"] == "skipped"  # (the demo configures no training command)
    assert all(s["status"] == "ran" for s in steps.values()), steps
    assert steps["check"]["summary"]["findings"] == len(doc["parts"]["check"]["diagnostics"]) > 40
    assert steps["scan-data"]["summary"]["failed"] > 0
    probes = {p["probe"]: p for p in doc["parts"]["verify"]["probes"]}
    assert {"mask-leak", "attention-maps", "activation-ranges", "overfit-batch", "warmup-ab"} <= set(probes)
    assert set(probes["overfit-batch"]["loss_curves"]) == {"overfit", "control"}
    # the clean-data A/B: data-ab-model (a small GPT-2) trained on the demo's LM batches, as they come
    # (a NaN sentence weight in every batch: the loss is NaN at step 1) and cleaned (it learns)
    ab = probes["data-ab"]
    assert ab["status"] == "fail" and ab["figure"] == 1.0, ab["detail"]
    assert ab["detail"].endswith("the model trained: GPT2LMHeadModel of data-ab-model `lm_config:small_gpt2`")
    assert ab["ab"]["model"]["class"] == "GPT2LMHeadModel" and ab["ab"]["kind"] == "next-token"
    assert ab["ab"]["cleaning"]["rows_dropped"] == 2 and [r["lost"] for r in ab["ab"]["runs"]] == [1.0, 1.0]
    user, cleaned = ab["curves"]["user"], ab["curves"]["cleaned"]
    assert user["diverged_at"] == 1 and user["train_loss"] == [None]
    assert cleaned["eval_steps"] == list(range(0, 41, 5)) and len(cleaned["train_loss"]) == 40
    assert cleaned["eval_loss"][0] == user["eval_loss"][0] and cleaned["eval_loss"][-1] < 0.8 * cleaned["eval_loss"][0]
    assert set(ab["loss_curves"]) == {"user train (diverged at step 1)", "user eval", "cleaned train", "cleaned eval"}
    assert {(c["check"], c["loader"]) for c in ab["data_checks"] if c["cleaned"]} >= {
        ("nan-inf", "train"), ("label-alignment", "train"), ("eos-masked", "train"), ("tokenizer-agreement", "train+eval")}
    assert steps["verify"]["summary"]["by_stage"]["ab"] == {"pass": 0, "fail": 1, "skip": 0}
    assert doc["parts"]["diagnose"]["runs"][0]["path"].endswith("lr-high")
    # the ranked items carry every kind of evidence
    sources = {e["source"] for item in doc["items"] for e in item["evidence"]}
    assert sources == {"check", "scan-data", "verify", "diagnose"}
    items = doc["items"]
    assert [i["rank"] for i in items] == list(range(1, len(items) + 1))
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    by_code = {i["codes"][0]: i for i in items if i["codes"] and not i["title"].startswith(("data", "probe", "loss"))}
    # TL102: the static finding (file:line), the confirmed verdict, the failing probe's figure
    tl102 = by_code["TL102"]
    assert tl102["impact"] == "high" and tl102["runtime"] == "confirmed"
    assert {"path": "demo/model.py", "line": 17} == {k: tl102["evidence"][0][k] for k in ("path", "line")}
    leak = next(e for e in tl102["evidence"] if e.get("probe") == "mask-leak" and e.get("status") == "fail")
    assert leak["figure"] > leak["tolerance"]
    # a failing data check with no static finding in the loaders' files stands alone, naming its rules
    nan = next(i for i in items if i["title"] == "data check nan-inf fails")
    assert nan["stage"] == "data" and nan["codes"] == ["TL110", "TL112"] and nan["impact"] == "high"
    assert any("TL112 at demo/data.py:91" in e["text"] for e in nan["evidence"])
    # the A/B is an item of its own, and evidence on the data checks whose bugs its cleaning removes (only)
    ab_item = next(i for i in items if i["title"] == "probe data-ab fails")
    assert ab_item["stage"] == "ab" and ab_item["impact"] == "high"
    assert any(e.get("probe") == "data-ab" for e in nan["evidence"])
    pad_ratio = next(i for i in items if i["title"] == "data check pad-ratio fails")
    assert not any(e.get("probe") == "data-ab" for e in pad_ratio["evidence"])
    # the run's loss spike: an item with its steps, and evidence on the static finding of its first cause
    spike = next(i for i in items if i["stage"] == "logs" and "loss-spike" in i["title"])
    assert spike["evidence"][0]["steps"] == {"first": 4, "last": 8} and spike["impact"] == "high"
    assert "TL304" in spike["fix"]
    tl304 = by_code["TL304"]
    assert any(e["source"] == "diagnose" and e["cause"] == 1 for e in tl304["evidence"])
    # static-only findings rank below the ones seen at run time
    static_only = [i for i in items if {e["source"] for e in i["evidence"]} == {"check"}]
    assert static_only and max(i["score"] for i in static_only) < tl102["score"]
    # user code is announced before it runs
    assert doc["user_code"] and "tlint doctor: runs your code" in proc.stderr
    assert "model:build_model" in proc.stderr and "loaders:train_loader" in proc.stderr
    assert "the model factory lm_config:small_gpt2 (data-ab-model: the data A/B)" in proc.stderr


def test_the_text_report_shows_the_ranked_items_with_evidence_and_fix(demo_report):
    from tlint.doctor.report import render_text

    _, doc, _ = demo_report
    out = io.StringIO()
    render_text(doc, out)
    text = out.getvalue()
    for part in ("check", "scan-data", "verify", "diagnose", "ranked by likely impact", "fix: ",
                 "demo/model.py:17", "probe mask-leak", "check nan-inf (train loader)", "lr-high steps 4-8"):
        assert part in text, part
    assert text.index("TL102") < text.index("TL313")  # confirmed before static-only info


MARKER_FACTORY = '''
import pathlib, sys
pathlib.Path({marker!r}).write_text("ran")
print("FACTORY-RAN", file=sys.stderr, flush=True)

def build():
    raise RuntimeError("the factory refuses")

def loader():
    raise RuntimeError("the loader refuses")
'''


def marker_project(tmp_path: Path) -> tuple[Path, Path]:
    project, marker = tmp_path / "proj", tmp_path / "marker.txt"
    project.mkdir()
    (project / "factory.py").write_text(MARKER_FACTORY.format(marker=str(marker)))
    (project / "tlint.toml").write_text('[verify]\nmodel = "factory:build"\ndataloader = "factory:loader"\n')
    spiky_run(project / "out" / "run1" / "checkpoint-40")
    return project, marker


def test_no_run_runs_no_user_code(tmp_path, capsys):
    project, marker = marker_project(tmp_path)
    code = main(["doctor", str(project), "--no-run", "--format", "json", "--no-cache"])
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    assert not marker.exists()
    steps = {s["step"]: s for s in doc["steps"]}
    assert steps["scan-data"]["status"] == steps["verify"]["status"] == "skipped"
    assert "--no-run" in steps["verify"]["reason"] and doc["user_code"] == []
    assert steps["check"]["status"] == steps["diagnose"]["status"] == "ran"  # reading files is not running them
    assert doc["parts"]["diagnose"]["runs"][0]["path"].endswith("run1")  # checkpoint-N counts as its run
    assert code == 1  # the run's loss spike is an error


# duration: runs the user's code for real, after the notice, in a child process
def test_without_no_run_the_code_runs_after_the_notice_and_a_failing_step_is_exit_2(tmp_path):
    from tests.torchutil import import_torch

    import_torch()
    project, marker = marker_project(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "tlint", "doctor", str(project), "--verbose", "--no-cache"],
                          capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    assert marker.exists()  # the positive control of the test above
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout
    notice = proc.stderr.index("tlint doctor: runs your code")
    assert notice < proc.stderr.index("FACTORY-RAN")
    # both steps that run user code failed, are reported, and the others still ran
    assert "scan-data  error" in proc.stdout and "verify     error" in proc.stdout
    assert "the loader refuses" in proc.stdout and "the factory refuses" in proc.stdout
    assert "loss-spike in run" in proc.stdout


BLOCK_TORCH = '''
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked by the test")
        return None

sys.meta_path.insert(0, Block())
from tlint.cli import main
code = main(sys.argv[1:])
assert "torch" not in sys.modules
sys.exit(code)
'''


def test_no_run_works_without_torch(tmp_path):
    project = tmp_path / "demo"
    shutil.copytree(DEMO, project)
    spiky_run(project / "runs" / "a")
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, "doctor", str(project), "--no-run", "--format", "json",
                           "--no-cache"], capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    validate(doc)
    assert [s["status"] for s in doc["steps"]] == ["ran", "skipped", "skipped", "skipped", "ran"]
    assert doc["items"] and doc["items"][0]["impact"] == "high"


def test_a_configured_model_without_torch_is_a_step_error_not_a_traceback(tmp_path):
    project, marker = marker_project(tmp_path)
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH.replace("assert \"torch\" not in sys.modules", ""),
                           "doctor", str(project), "--format", "json", "--no-cache"],
                          capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    doc = json.loads(proc.stdout)
    validate(doc)
    steps = {s["step"]: s for s in doc["steps"]}
    for name in ("scan-data", "verify"):
        assert steps[name]["status"] == "error" and "pip install torch" in steps[name]["reason"]
    assert steps["check"]["status"] == steps["diagnose"]["status"] == "ran"
    assert proc.returncode == 2 == doc["exit_code"] and not marker.exists()


@pytest.mark.parametrize("setup, args, message", [
    (None, ["missing-folder"], "no such file or folder"),
    ("extend-select = [\"TL999\"]\n", [], "TL999"),
    ("[verify]\nmodel = 3\n", [], "`model` in [tool.tlint.verify] must be a non-empty string"),
    ("[verify]\nmodel = \"not a dotted path\"\n", [], "dotted path"),
    (None, ["--config", "nowhere.toml"], "config file not found"),
    (None, ["--html", "nowhere/report.html"], "does not exist (--html)"),
])
def test_bad_input_is_exit_2_with_a_message(tmp_path, capsys, monkeypatch, setup, args, message):
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.py").write_text("x = 1\n")
    if setup is not None:
        (project / "tlint.toml").write_text(setup)
    path = args[0] if args and not args[0].startswith("-") else str(project)
    flags = [a for a in args if a != path]
    assert main(["doctor", path, *flags, "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.startswith("tlint: error: ")
    assert main(["doctor", path, *flags, "--no-cache", "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    assert message in doc["error"]["message"]


def test_a_named_run_that_cannot_be_read_is_exit_2_and_a_found_one_is_a_note(tmp_path, capsys):
    project = tmp_path / "proj"
    (project / "logs" / "broken").mkdir(parents=True)
    (project / "logs" / "broken" / "trainer_state.json").write_text("{not json")
    (project / "a.py").write_text("x = 1\n")
    assert main(["doctor", str(project), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    step = doc["steps"][-1]
    assert step["status"] == "skipped" and "not valid JSON" in step["summary"]["notes"][0]
    assert main(["doctor", str(project), "--run", str(project / "logs" / "broken"), "--format", "json",
                 "--no-cache"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"][-1]["status"] == "error" and doc["exit_code"] == 2
    # a run named with --run is diagnosed instead of the ones found, wherever it lies
    elsewhere = spiky_run(tmp_path / "elsewhere" / "run")
    assert main(["doctor", str(project), "--run", str(elsewhere), "--format", "json", "--no-cache"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [r["path"] for r in doc["parts"]["diagnose"]["runs"]] == [str(elsewhere)]
    assert any(i["stage"] == "logs" and "loss-spike" in i["title"] for i in doc["items"])


def test_run_folders_are_found_outermost_first(tmp_path):
    from tlint.doctor.plan import find_runs

    (tmp_path / "a" / "checkpoint-10").mkdir(parents=True)
    (tmp_path / "a" / "checkpoint-10" / "trainer_state.json").write_text("{}")
    (tmp_path / "b" / "version_0").mkdir(parents=True)
    (tmp_path / "b" / "version_0" / "metrics.csv").write_text("step,loss\n")
    (tmp_path / "b" / "version_0" / "tb").mkdir()
    (tmp_path / "b" / "version_0" / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "tlint-watch.jsonl").write_text("")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "metrics.csv").write_text("")
    assert find_runs(tmp_path) == [tmp_path / "a", tmp_path / "b" / "version_0"]


def test_ranking_puts_what_was_seen_at_run_time_first():
    from tlint.doctor.ranking import rank
    from tlint.doctor.steps import Results

    def diag(code, line, severity="error"):
        return {"code": code, "severity": severity, "path": "m.py", "message": f"{code} here",
                "range": {"start": {"line": line, "column": 1}, "end": {"line": line, "column": 2}}}

    results = Results(check={"diagnostics": [diag("TL102", 3), diag("TL208", 9, "warning"), diag("TL211", 5, "warning"),
                                             diag("TL304", 20, "warning"), diag("TL313", 30, "info")]})
    results.verify = {"model": {}, "findings": [
        {"code": "TL102", "path": "m.py", "range": {"start": {"line": 3}}, "verdict": "confirmed", "probe": "mask-leak",
         "reason": "leaks"},
        {"code": "TL208", "path": "m.py", "range": {"start": {"line": 9}}, "verdict": "not-reproduced",
         "probe": "attention-entropy", "reason": "scale 1.0"}],
        "probes": [{"probe": "mask-leak", "status": "fail", "figure": 1.2, "tolerance": 1e-4, "unit": "x", "detail": "d"},
                   {"probe": "causal-leak", "status": "fail", "figure": 0.5, "tolerance": 1e-4, "unit": "x",
                    "detail": "future leaks"}]}
    results.diagnose = {"runs": [{"path": "run", "findings": [
        {"kind": "loss-spike", "severity": "error", "steps": {"first": 4, "last": 8}, "message": "spike",
         "causes": [{"rank": 1, "cause": "no warmup", "rules": ["TL304"], "probes": ["warmup-ab"]}]}]}]}
    items = rank(results)
    order = [i["codes"][0] if i["codes"] else i["title"] for i in items]
    scores = {o: i["score"] for o, i in zip(order, items)}
    assert order[0] == "TL102" and scores["TL102"] == 6           # error, confirmed
    assert scores["probe causal-leak fails"] == 6                   # a failing probe no finding explains
    assert scores["TL304"] == 4 and scores["TL211"] == 2            # warning + the run's spike vs. static only
    assert scores["TL208"] == 0                                     # a warning the verifier did not reproduce
    assert order[-1] == "TL208"
    leak = next(i for i in items if i["codes"] == ["TL102"])
    assert [e["source"] for e in leak["evidence"]] == ["check", "verify", "verify"]


def test_every_rule_check_and_probe_has_a_fix():
    from tlint.doctor.fixes import CHECK_FIXES, PROBE_FIXES, RULE_FIXES
    from tlint.rules import ALL_RULES
    from tlint.verify.data import CHECKS
    from tlint.verify.options import PROBES, TRAINING_PROBES

    assert {r.code for r in ALL_RULES} <= set(RULE_FIXES)
    assert set(CHECKS) <= set(CHECK_FIXES)
    assert set(PROBES) | set(TRAINING_PROBES) <= set(PROBE_FIXES)


def test_the_progress_display_follows_the_steps_and_the_probes():
    from tlint.doctor.progress import Display

    out = io.StringIO()
    display = Display(enabled=True, stream=out)
    display.begin("verify (your model)", total=2)
    display.stage({"event": "start", "probe": "mask-leak"})
    display.stage({"event": "done", "probe": "mask-leak"})
    display.update({"event": "progress", "probe": "overfit-batch", "done": 3, "total": 10, "what": "overfit"})
    display.close()  # the verifier closes its bar after each child: the display goes on
    assert display.progress is not None
    display.end("1 of 2 failed")
    display.finish()
    assert "verify (your model): 1 of 2 failed" in out.getvalue()
    quiet = io.StringIO()
    off = Display(enabled=False, stream=quiet)
    off.begin("check")
    off.end("done")
    off.finish()
    assert quiet.getvalue() == ""


# --- the HTML file -------------------------------------------------------------------------


def png_1x1() -> bytes:
    """A valid 1x1 grey PNG, written by hand (no image library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))


def test_the_html_report_is_self_contained_and_every_image_decodes_in_chromium(demo_report, tmp_path):
    from tests.browserutil import decoded_images, screenshot

    _, doc, project = demo_report
    page = project.parent / "report.html"
    assert doc["html"] == str(page)
    text = page.read_text(encoding="utf-8")
    for fetch in ("<script", "<link", "@import", "url(", "src=\"http", "href=\"http", "<iframe"):
        assert fetch not in text, fetch
    sources = re.findall(r'<img src="([^"]*)"', text)
    assert sources and all(src.startswith("data:image/png;base64,") for src in sources)
    # every part of the report: ranked items, data checks and lengths, probes, activation
    # table, attention maps, the training probes' loss curves, the run's table and plots
    for part in ("Ranked by likely impact", "<h2>Data</h2>", "Activation ranges (real positions)",
                 "<h3>Attention maps</h3>", "Training dynamics and A/B", "<h2>Run logs</h2>", "fix:</b>"):
        assert part in text, part
    alts = re.findall(r'<img src="[^"]*" alt="([^"]*)"', text)
    assert "length histogram, train loader" in alts and "loss curves of overfit-batch" in alts
    assert "loss curves of data-ab" in alts  # the A/B's curves: user data (diverged) and cleaned
    assert sum(a.startswith("attention map attention-sample") for a in alts) == 4  # 2 layers x 2 samples
    assert any(a.startswith("run plot diagnose-lr-high") for a in alts)
    assert "tlint-doctor-" not in text  # the temporary folder of the maps is not named
    assert decoded_images(page, tmp_path) == {"total": len(sources), "decoded": len(sources), "broken": []}
    import matplotlib.image

    shot = matplotlib.image.imread(screenshot(page, tmp_path / "shot.png", 1200, 1600))
    assert shot.shape[:2] == (1600, 1200) and shot[..., :3].std() > 0.05  # drawn, not a blank page


def test_the_browser_check_catches_a_broken_image(tmp_path):
    from tests.browserutil import decoded_images
    from tlint.doctor.html import image_tag

    good = png_1x1()
    pixels = good.index(b"IDAT") + 4
    bad_pixels = good[:pixels] + bytes(len(good) - pixels - 16) + good[-16:]  # header fine, pixel data zeroed
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body>" + image_tag(good, "good")
                    + image_tag(b"\x89PNG\r\n\x1a\nnot really a png", "corrupt") + image_tag(bad_pixels, "pixels")
                    + '<img src="data:image/png;base64,AAAA" alt="truncated"></body></html>')
    assert decoded_images(page, tmp_path) == {"total": 4, "decoded": 1,
                                              "broken": ["corrupt", "pixels", "truncated"]}


def test_text_from_the_project_is_escaped_in_the_html(tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.py").write_text("x = 1\n")
    spiky_run(project / "<img src=x onerror=alert(1)>")
    page = tmp_path / "r.html"
    assert main(["doctor", str(project), "--no-run", "--no-cache", "--html", str(page)]) == 1
    assert f"wrote {page}" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    assert "<img src=x" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert oct(page.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_missing_browser_fails_the_html_test_where_required(monkeypatch, tmp_path):
    import tests.browserutil as browser

    monkeypatch.setattr(browser, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(browser.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="Chromium is not installed"):
        browser.chromium()
    monkeypatch.delenv(browser.REQUIRE_ENV)
    with pytest.raises(pytest.skip.Exception):
        browser.chromium()


def data_ab_results() -> Results:
    """What doctor gets from a failing `data-ab` (the curves in the probe's own shape, from
    its `Run.to_json`) next to the data scan's failing nan-inf check."""
    from tests.torchutil import import_torch

    import_torch()
    from tlint.verify.data_ab import Run

    user = Run(train_loss=[4.2, math.inf], eval_steps=[0], eval_loss=[4.17], diverged_at=1)
    steps = list(range(0, 41, 5))
    cleaned = Run(train_loss=[4.2 - 0.05 * i for i in range(40)], eval_steps=steps,
                  eval_loss=[4.17 - 0.04 * s for s in steps])
    nan_check = {"check": "nan-inf", "loader": "train", "status": "fail", "rules": ["TL110", "TL112"], "figure": 2,
                 "unit": "batches", "tolerance": 0, "detail": "2 batches with a NaN", "extra": {}}
    probe = {"probe": "data-ab", "status": "fail", "figure": 1.0, "tolerance": 0.25, "unit": "share lost",
             "module": None, "detail": "the data pipeline is at fault: the cleaned run ends clearly better",
             "extra": {"data_checks": [{k: nan_check[k] for k in ("check", "loader", "rules", "detail")}],
                       "curves": {"user": user.to_json(), "cleaned": cleaned.to_json()}}}
    return Results(scan={"checks": [nan_check], "findings": []},
                   verify={"model": {"class": "GPT2LMHeadModel", "factory": "m:build", "parameters": 1000,
                                     "call": "ids"}, "probes": [probe], "findings": []})


def test_a_failing_data_ab_is_the_ab_item_and_joins_the_data_checks_it_names():
    from tlint.doctor.ranking import rank

    items = rank(data_ab_results())
    ab = next(i for i in items if i["title"] == "probe data-ab fails")
    assert ab["stage"] == "ab" and ab["impact"] == "high" and "data pipeline" in ab["fix"]
    nan = next(i for i in items if i["title"] == "data check nan-inf fails")
    assert [e.get("probe") or e.get("check") for e in nan["evidence"]] == ["nan-inf", "data-ab"]


def test_the_ab_loss_curves_are_drawn_in_the_html(tmp_path, monkeypatch):
    from tests.browserutil import decoded_images
    from tlint.doctor.html import write_html
    from tlint.doctor.report import curves

    results = data_ab_results()
    found = curves(results.verify["probes"][0]["extra"])
    assert set(found) == {"user train (diverged at step 1)", "user eval", "cleaned train", "cleaned eval"}
    assert found["cleaned eval"]["steps"] == list(range(0, 41, 5))
    assert found["user train (diverged at step 1)"]["loss"] == [4.2, None]
    doc = {"path": "proj", "config": None, "version": "0", "user_code": [], "exit_code": 1, "notes": [], "steps": [],
           "items": [], "summary": {"items": 0, "high": 0, "medium": 0, "low": 0}}
    page = tmp_path / "ab.html"
    import matplotlib.axes

    marks: list[tuple] = []
    draw = matplotlib.axes.Axes.annotate
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate",
                        lambda ax, text, xy, *a, **k: (marks.append((text, xy[0])), draw(ax, text, xy, *a, **k))[1])
    write_html(doc, results, page, tmp_path)
    assert marks == [("user train: non-finite loss at step 1", 1)]  # where the user-data run diverged
    text = page.read_text(encoding="utf-8")
    assert 'alt="loss curves of data-ab"' in text and "Training dynamics and A/B" in text
    assert decoded_images(page, tmp_path) == {"total": 1, "decoded": 1, "broken": []}


BLOCK_MATPLOTLIB = BLOCK_TORCH.replace('name == "torch" or name.startswith("torch.")',
                                       'name == "matplotlib" or name.startswith("matplotlib.")')


def test_without_matplotlib_the_html_says_so_and_keeps_the_tables(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.py").write_text("x = 1\n")
    spiky_run(project / "runs" / "a")
    page = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-c", BLOCK_MATPLOTLIB, "doctor", str(project), "--no-run", "--no-cache",
                           "--html", str(page)], capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    text = page.read_text(encoding="utf-8")
    assert "<img" not in text and "<h2>Run logs</h2>" in text and "loss-spike" in text
    assert "no run plots" in text and "matplotlib" in text
