"""`tlint diagnose` on real Lightning runs (CSVLogger's metrics.csv and hparams.yaml, the
learning rate from LearningRateMonitor) and on tlint.watch's JSON Lines from a watched run
(LightningCallback writes tlint-watch.jsonl next to the CSV)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tests.diagnoseutil import diagnose_json, kinds, lightning_run, pairs_shifted_twice
from tests.test_diagnose import validate
from tlint.diagnose.readers import read_run

# slow: trains Lightning runs to read their logs
# one worker for the module: its module-scoped fixture runs once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_diagnose_frameworks")]

pytest.importorskip("lightning")


@pytest.fixture(scope="module")
def lit(tmp_path_factory):
    base = tmp_path_factory.mktemp("lit")
    return {"healthy": lightning_run(base / "healthy", watch=True),
            "spike": lightning_run(base / "spike", lr=0.5, warmup=0),
            "stuck": lightning_run(base / "stuck", data=pairs_shifted_twice)}


def csv_losses(run: Path) -> dict[int, float]:
    with open(run / "metrics.csv", newline="") as handle:
        return {int(r["step"]): float(r["train_loss"]) for r in csv.DictReader(handle) if r["train_loss"]}


def test_lightning_healthy_run(lit, capsys):
    code, doc = diagnose_json(capsys, lit["healthy"])
    validate(doc)
    assert code == 0 and not [f for f in doc["runs"][0]["findings"] if f["severity"] != "info"]
    run = read_run(lit["healthy"])
    assert dict(run.series["loss"]) == csv_losses(lit["healthy"])  # the CSV's steps, not the watch's
    assert run.config["lr"] == 0.003 and run.config["warmup"] == 8  # hparams.yaml through yaml.safe_load
    schedule = kinds(doc)["lr-schedule"][0]["size"]
    assert schedule["warmup_steps"] == 7 and schedule["peak"] == pytest.approx(3e-3)  # lr-AdamW, from step 0
    assert schedule["decay"] == "linear"
    assert {"grad_norm", "pad_share", "eval_loss"} <= set(doc["runs"][0]["series"])


def test_lightning_spike_found_with_missing_warmup_first(lit, capsys):
    code, doc = diagnose_json(capsys, lit["spike"])
    validate(doc)
    assert code == 1
    loss = csv_losses(lit["spike"])
    spike = kinds(doc)["loss-spike"][0]
    first = min(s for s in loss if loss[s] > 1.5 * loss[0])
    assert spike["steps"]["first"] == first == 1 and spike["size"]["peak_step"] == max(loss, key=loss.get)
    assert spike["causes"][0]["rules"] == ["TL304"]


def test_lightning_labels_shifted_twice_give_a_stuck_loss(lit, capsys):
    """The data pipeline shifts the labels and the model shifts them again: the loss stays
    near ln(vocabulary), which hparams.yaml's `vocab_size` gives."""
    code, doc = diagnose_json(capsys, lit["stuck"])
    validate(doc)
    assert code == 1
    stuck = kinds(doc)["stuck-loss"][0]
    loss = csv_losses(lit["stuck"])
    assert stuck["severity"] == "error" and stuck["steps"] == {"first": min(loss), "last": max(loss)} == \
        {"first": 0, "last": 39}
    assert stuck["size"]["vocab_size"] == 100 and stuck["size"]["ln_vocab"] == pytest.approx(math.log(100))
    assert "TL109" in stuck["causes"][0]["rules"] and "overfit-batch" in stuck["causes"][0]["probes"]
    # the healthy run with the same settings learns: no stuck loss there
    assert "stuck-loss" not in kinds(diagnose_json(capsys, lit["healthy"])[1])


def test_lightning_watch_scalars_share_the_module_steps(lit):
    """LightningCallback logs `tlint/*` at Lightning's step numbers: the gradient norm the
    watch sampled at its step s (from 1) is the CSV's row s - 1, where the module's own
    `train_loss` of that optimizer step is."""
    run = lit["healthy"]
    with open(run / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    ours = {int(r["step"]): float(r["tlint/grad_norm"]) for r in rows if r.get("tlint/grad_norm")}
    events = [json.loads(line) for line in (run / "tlint-watch.jsonl").read_text().splitlines()]
    samples = {e["step"]: e["grad_norm"]["total"] for e in events if e["event"] == "sample"}
    assert ours == pytest.approx({s - 1: g for s, g in samples.items()}) and 0 in ours
    series = read_run(run).series
    assert set(dict(series["grad_norm"])) <= set(dict(series["loss"]))  # same x axis in the plots


def test_lightning_pair_names_the_hyperparameters_that_differ(lit, capsys):
    doc = diagnose_json(capsys, lit["healthy"], lit["spike"])[1]
    comparison = doc["comparison"]
    assert {d["key"]: (d["a"], d["b"]) for d in comparison["config_differences"]} == {"lr": (0.003, 0.5),
                                                                                    "warmup": (8, 0)}
    assert comparison["separation"]["step"] == 1 and comparison["separation"]["worse"] == "b"


def test_watch_json_lines_from_the_watched_run(lit, capsys):
    jsonl = lit["healthy"] / "tlint-watch.jsonl"
    code, doc = diagnose_json(capsys, jsonl)
    validate(doc)
    run = read_run(jsonl)
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    windows = [e for e in events if e["event"] == "window"]
    expected = {w["first_step"] + i: v for w in windows for i, v in enumerate(w["losses"])}
    assert dict(run.series["loss"]) == pytest.approx(expected) and len(expected) == 40
    samples = {e["step"]: e for e in events if e["event"] == "sample"}
    assert dict(run.series["grad_norm"]) == pytest.approx({s: e["grad_norm"]["total"] for s, e in samples.items()})
    assert dict(run.series["pad_share"]) == pytest.approx({s: e["pad_share"] for s, e in samples.items()})
    assert run.config["watch.framework"] == "lightning"
    assert [w["kind"] for w in doc["runs"][0]["watch_findings"]] == [e["kind"] for e in events
                                                                        if e["event"] == "finding"]
    assert kinds(doc)["lr-schedule"][0]["size"]["warmup_steps"] == 7


def test_watch_json_lines_with_non_finite_steps(tmp_path, capsys):
    """A window whose nonfinite_steps name steps 13 and 14 (their losses written as null)."""
    import jsonschema

    from tlint.watch import SCHEMA_PATH

    schema = json.loads(Path(SCHEMA_PATH).read_text())
    events = [{"event": "start", "step": None, "time": 0.0, "schema": 1, "framework": "plain", "every": 10,
               "world_size": 1, "model": "M", "parameters": 10, "param_groups": 1, "optimizer": "AdamW",
               "nan_check": "step", "amp": False}]
    for end in (10, 20):
        losses = [3.0 - 0.01 * s for s in range(end - 9, end + 1)]
        bad = [s for s in (13, 14) if end - 9 <= s <= end]
        for s in bad:
            losses[s - (end - 9)] = None
        events.append({"event": "window", "step": end, "time": float(end), "schema": 1, "first_step": end - 9,
                       "losses": losses, "nonfinite_steps": bad, "lr": [1e-4] * 10})
    for event in events:
        jsonschema.validate(event, schema)
    path = tmp_path / "tlint-watch.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    code, doc = diagnose_json(capsys, path)
    assert code == 1
    nan = kinds(doc)["nonfinite"][0]
    assert nan["steps"] == {"first": 13, "last": 14} and "13-14" in nan["message"]
    assert math.isnan(dict(read_run(path).series["loss"])[13])
