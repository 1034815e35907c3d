"""`tlint diagnose` on real Hugging Face Trainer runs (a tiny GPT-2, 40 steps each, made once
per module): a healthy run, a run whose learning rate is high enough to spike with no
warmup, a run whose labels are shifted twice, and a good/bad pair differing in one setting.
Plus hand-made logs for what a short CPU run cannot show reliably (NaN steps, a throughput
drop, divergence, eval gaps) and hostile input."""

from __future__ import annotations

import json
import math
import pickle
import shutil
from pathlib import Path

import pytest

from tests.diagnoseutil import diagnose_json, hf_run, kinds, losses, pairs_shifted_twice
from tlint.diagnose.readers import read_run

# slow: trains tiny GPT-2 runs with the Hugging Face Trainer to read their logs
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_diagnose")]

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "diagnose-output.schema.json"


def validate(document: dict) -> None:
    import jsonschema

    jsonschema.validate(document, json.loads(SCHEMA.read_text()))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    return {
        "healthy": hf_run(base / "healthy"),
        "spike": hf_run(base / "spike", lr=0.5, warmup=0),
        "stuck": hf_run(base / "stuck", data=pairs_shifted_twice),
        "bad": hf_run(base / "bad", lr=0.3),  # the healthy run with one setting changed
    }


def test_healthy_run_has_no_error_finding_and_its_schedule_is_read(runs, capsys):
    code, doc = diagnose_json(capsys, runs["healthy"])
    validate(doc)
    assert code == 0 and doc["exit_code"] == 0
    assert not [f for f in doc["runs"][0]["findings"] if f["severity"] == "error"]
    run = doc["runs"][0]
    assert run["steps"] == {"first": 1, "last": 40, "logged": 40}
    assert run["vocab_size"] == 100  # from config.json
    assert {"loss", "eval_loss", "grad_norm", "lr", "throughput"} <= set(run["series"])
    schedule = kinds(doc)["lr-schedule"][0]["size"]
    assert schedule["warmup_steps"] == 8 and schedule["peak"] == pytest.approx(3e-3)
    assert schedule["decay"] == "linear" and schedule["final"] < 0.1 * schedule["peak"]
    assert "stuck-loss" not in kinds(doc) and "loss-spike" not in kinds(doc)


def test_high_learning_rate_spike_is_found_at_its_steps_with_missing_warmup_first(runs, capsys):
    code, doc = diagnose_json(capsys, runs["spike"])
    validate(doc)
    assert code == 1
    loss = losses(runs["spike"])
    spiked = [s for s in sorted(loss) if loss[s] > 1.5 * loss[1]]  # well above the first step's loss
    peak_step = max(loss, key=loss.get)
    spike = kinds(doc)["loss-spike"][0]
    assert spike["severity"] == "error"
    assert spike["steps"]["first"] == spiked[0] == 2  # the first update at lr 0.5 makes it
    assert spike["steps"]["last"] >= spiked[-1] - 2 and spike["size"]["peak_step"] == peak_step
    assert spike["size"]["peak"] == pytest.approx(loss[peak_step])
    first = spike["causes"][0]
    assert first["rules"] == ["TL304"] and "warmup-ab" in first["probes"] and "warmup" in first["cause"]
    assert "TL307" in spike["causes"][1]["rules"]
    assert kinds(doc)["lr-schedule"][0]["size"]["warmup_steps"] == 0
    grad = kinds(doc)["grad-explosion"][0]
    assert grad["steps"]["first"] <= spike["steps"]["first"] and spike["size"]["grad_norm_first"]


def test_labels_shifted_twice_give_a_stuck_loss_near_ln_vocab(runs, capsys):
    code, doc = diagnose_json(capsys, runs["stuck"])
    validate(doc)
    assert code == 1
    stuck = kinds(doc)["stuck-loss"][0]
    assert stuck["severity"] == "error" and stuck["steps"] == {"first": 1, "last": 40}
    assert stuck["size"]["ln_vocab"] == pytest.approx(math.log(100))
    assert "ln(vocabulary 100)" in stuck["message"]
    assert "TL109" in stuck["causes"][0]["rules"] and "overfit-batch" in stuck["causes"][0]["probes"]


def test_good_bad_pair_separation_step_and_the_one_setting(runs, capsys):
    code, doc = diagnose_json(capsys, runs["healthy"], runs["bad"])
    validate(doc)
    comparison = doc["comparison"]
    assert [d["key"] for d in comparison["config_differences"]] == ["learning_rate"]
    diff = comparison["config_differences"][0]
    assert (diff["a"], diff["b"]) == (pytest.approx(3e-3), pytest.approx(0.3))
    assert "output_dir" in comparison["ignored_keys"] or "logging_dir" in comparison["ignored_keys"]
    good, bad = losses(runs["healthy"]), losses(runs["bad"])
    assert good[1] == bad[1]  # same seed and data: identical until the first update
    obvious = next(s for s in sorted(good) if bad[s] > good[s] + 0.5)
    sep = comparison["separation"]
    assert 2 <= sep["step"] <= obvious and sep["worse"] == "b"
    assert sep["difference"] < 0 and abs(sep["difference"]) > 2 * sep["noise"]
    same = diagnose_json(capsys, runs["healthy"], runs["healthy"])[1]["comparison"]
    assert same["separation"] is None and same["config_differences"] == [] and same["curve_differences"] == []
    (curve,) = comparison["curve_differences"]  # the rate each run applied, as its logs show it
    assert curve["key"] == "learning rate (logged)" and curve["b"] / curve["a"] > 10


def test_text_report_names_findings_causes_and_the_comparison(runs, capsys):
    from tlint.cli import main

    assert main(["diagnose", str(runs["healthy"]), str(runs["spike"])]) == 1
    out = capsys.readouterr().out
    assert "loss-spike: loss spike at steps 2-" in out and "TL304, verify --probe warmup-ab" in out
    assert "losses separate at step" in out and "learning_rate" in out and "warmup_steps" in out


def test_tensorboard_events_alone_give_the_same_losses(runs, tmp_path):
    folder = tmp_path / "tb-only"
    shutil.copytree(runs["spike"] / "runs", folder)
    run = read_run(folder)
    assert [s for s in run.sources if "tfevents" in s] and not run.notes
    from_tb = dict(run.series["loss"])
    for step, value in losses(runs["spike"]).items():
        assert from_tb[step] == pytest.approx(value, rel=1e-6)
    assert run.config["learning_rate"] == 0.5 and run.config["warmup_steps"] == 0  # the Trainer's recorded args
    assert run.vocab_size == 100  # the recorded model config


def test_nothing_in_the_run_folder_is_unpickled(runs, tmp_path, capsys):
    folder = tmp_path / "run"
    shutil.copytree(runs["healthy"], folder)
    marker = tmp_path / "unpickled"

    class Boom:
        def __reduce__(self):
            return (Path.touch, (marker,))

    for name in ("training_args.bin", "pytorch_model.bin", "optimizer.pt", "rng_state.pth"):
        (folder / name).write_bytes(pickle.dumps(Boom()))
    code, doc = diagnose_json(capsys, folder)
    assert code == 0 and not marker.exists()
    assert not [s for s in doc["runs"][0]["sources"] if s.endswith((".bin", ".pt", ".pth"))]


# hand-made logs


def state(tmp_path: Path, history: list[dict], name: str = "run") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": len(history)}))
    return folder


def falling(step: int) -> float:
    return 2.0 + 3.0 * math.exp(-step / 30) + 0.02 * math.sin(step * 1.7)


def test_nan_steps_are_found_with_their_range(tmp_path, capsys):
    history = [{"step": s, "loss": math.nan if s in (30, 31, 32, 45) else falling(s), "learning_rate": 1e-4,
                "grad_norm": math.inf if s == 31 else 1.0} for s in range(1, 61)]
    code, doc = diagnose_json(capsys, state(tmp_path, history))
    validate(doc)
    assert code == 1
    nan = kinds(doc)["nonfinite"][0]
    assert nan["steps"] == {"first": 30, "last": 45} and nan["size"]["loss_steps"] == 4
    assert "30-32, 45" in nan["message"] and "gradient norm non-finite at 1 step(s): 31" in nan["message"]
    assert "nan-trace" in nan["causes"][0]["probes"]
    assert "TL210" in nan["causes"][0]["rules"]


def test_throughput_drop_in_a_lightning_style_csv(tmp_path, capsys):
    folder = tmp_path / "csv"
    folder.mkdir()
    rows = ["step,epoch,train_loss,throughput"]
    for s in range(1, 101):
        rows.append(f"{s},0,{falling(s):.5f},{(200.0 if s < 60 else 80.0) + (s % 3)}")
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    code, doc = diagnose_json(capsys, folder)
    validate(doc)
    assert code == 0  # a warning
    drop = kinds(doc)["throughput-drop"][0]
    assert drop["steps"] == {"first": 60, "last": 100} and drop["severity"] == "warning"
    assert drop["size"]["share"] == pytest.approx(81 / 201, abs=0.02)
    assert "TL313" in drop["causes"][0]["rules"]


def test_one_slow_step_is_not_a_throughput_drop(tmp_path, capsys):
    folder = tmp_path / "csv"
    folder.mkdir()
    rows = ["step,train_loss,throughput"] + [f"{s},{falling(s)},{20.0 if s in (30, 60) else 200.0}"
                                             for s in range(1, 101)]
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    assert "throughput-drop" not in kinds(diagnose_json(capsys, folder)[1])


def test_divergence(tmp_path, capsys):
    history = [{"step": s, "loss": falling(s) if s <= 50 else falling(50) + 0.1 * (s - 50)} for s in range(1, 101)]
    code, doc = diagnose_json(capsys, state(tmp_path, history))
    assert code == 1
    div = kinds(doc)["divergence"][0]
    assert 45 <= div["steps"]["first"] <= 55 and div["steps"]["last"] == 100


def test_eval_worse_from_start_and_a_growing_gap(tmp_path, capsys):
    train = [{"step": s, "loss": falling(s)} for s in range(1, 101)]
    mismatch = train + [{"step": s, "eval_loss": falling(s) + 1.5} for s in range(20, 101, 20)]
    doc = diagnose_json(capsys, state(tmp_path, mismatch, "mismatch"))[1]
    validate(doc)
    worse = kinds(doc)["eval-worse-from-start"][0]
    assert worse["steps"] == {"first": 20, "last": 100} and worse["size"]["gap"] == pytest.approx(1.5, abs=0.15)
    assert "TL104" in worse["causes"][0]["rules"]
    overfit = train + [{"step": s, "eval_loss": falling(s) + (0.0 if s <= 40 else 0.02 * (s - 40))}
                       for s in range(20, 101, 20)]
    doc = diagnose_json(capsys, state(tmp_path, overfit, "overfit"))[1]
    assert "eval-worse-from-start" not in kinds(doc)
    gap = kinds(doc)["train-eval-gap"][0]
    assert gap["steps"]["last"] == 100 and gap["size"]["best_eval_step"] <= 60


def test_artifacts_write_readable_pngs_for_each_run_and_the_pair(runs, tmp_path, capsys):
    import matplotlib.image

    folder = tmp_path / "plots"
    code, doc = diagnose_json(capsys, runs["healthy"], runs["spike"], "--artifacts", folder)
    validate(doc)
    names = sorted(Path(p).name for p in doc["artifacts"])
    assert names == ["diagnose-a-healthy.png", "diagnose-b-spike.png", "diagnose-comparison.png"]
    for path in doc["artifacts"]:
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = matplotlib.image.imread(path)
        assert image.shape[0] >= 500 and image.shape[1] >= 1000
        assert image[..., :3].std() > 0.05  # drawn on, not blank
    (tmp_path / "file").write_text("")
    from tlint.cli import main

    assert main(["diagnose", str(runs["healthy"]), "--artifacts", str(tmp_path / "file" / "sub")]) == 2
    assert "cannot create the artifacts folder" in capsys.readouterr().err
