"""`tlint diagnose a b` compares the settings the runs actually used: the logged
learning-rate curve as well as the recorded configuration, in each log format it reads (a
Hugging Face `trainer_state.json`, Lightning's `metrics.csv` with and without
`hparams.yaml`, tlint.watch's JSON Lines). "No difference" is said only when something was
compared and nothing differs; runs that record nothing to compare say so."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.diagnoseutil import diagnose_json


def falling(step: int) -> float:
    return 2.0 + 3.0 * math.exp(-step / 30) + 0.02 * math.sin(step * 1.7)


def trainer_state(folder: Path, lr: float | None, steps: int = 20) -> Path:
    folder.mkdir(parents=True)
    history = [{"step": s, "loss": falling(s), **({"learning_rate": lr} if lr is not None else {})}
               for s in range(1, steps + 1)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history, "global_step": steps}))
    return folder


def lightning(folder: Path, lr: float, hparams: str | None = None, start: int = 0) -> Path:
    folder.mkdir(parents=True)
    rows = ["step,train_loss,lr-AdamW"] + [f"{s},{falling(s)},{lr}" for s in range(start, start + 30)]
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    if hparams is not None:
        (folder / "hparams.yaml").write_text(hparams)
    return folder


def text(capsys, *runs: Path) -> str:
    from tlint.cli import main

    main(["diagnose", *map(str, runs)])
    return capsys.readouterr().out


def test_trainer_states_whose_rates_differ_200000_times(tmp_path, capsys):
    """Only the logged rate differs: the arguments are in training_args.bin, never opened."""
    good, bad = trainer_state(tmp_path / "good", 5e-4), trainer_state(tmp_path / "bad", 1e2)
    (good / "training_args.bin").write_bytes(b"\x80\x04not opened")
    _, doc = diagnose_json(capsys, good, bad)
    (curve,) = doc["comparison"]["curve_differences"]
    assert (curve["key"], curve["a"], curve["b"], curve["step"]) == ("learning rate (logged)", 5e-4, 1e2, 1)
    assert math.isclose(curve["ratio"], 2e5)
    out = text(capsys, good, bad)
    assert "learning rate (logged) differs at step 1: a 0.0005, b 100 (b/a = 2e+05)" in out
    assert "no difference" not in out


def test_the_same_rate_is_no_difference_and_says_what_was_compared(tmp_path, capsys):
    a, b = trainer_state(tmp_path / "a", 5e-4), trainer_state(tmp_path / "b", 5e-4 * (1 + 1e-5))
    _, doc = diagnose_json(capsys, a, b)
    assert doc["comparison"]["curve_differences"] == []
    assert doc["comparison"]["compared"] == {"recorded_settings": 0, "logged_curves": ["learning rate (logged)"]}
    assert "no difference in what both runs recorded (learning rate (logged))" in text(capsys, a, b)


def test_runs_that_record_nothing_to_compare_say_so(tmp_path, capsys):
    a, b = trainer_state(tmp_path / "a", None), trainer_state(tmp_path / "b", None)
    out = text(capsys, a, b)
    assert "their settings cannot be compared" in out and "no difference" not in out


def test_lightning_csv_with_its_hyperparameters_and_without(tmp_path, capsys):
    a = lightning(tmp_path / "a", 3e-3, "lr: 0.003\nbatch_size: 8\n")
    b = lightning(tmp_path / "b", 0.5, "lr: 0.5\nbatch_size: 8\n")
    _, doc = diagnose_json(capsys, a, b)
    comparison = doc["comparison"]
    assert [d["key"] for d in comparison["config_differences"]] == ["lr"]
    assert [(c["a"], c["b"], c["step"]) for c in comparison["curve_differences"]] == [(3e-3, 0.5, 0)]
    c, d = lightning(tmp_path / "c", 3e-3), lightning(tmp_path / "d", 0.5, start=100)  # no common step
    _, doc = diagnose_json(capsys, c, d)
    assert [(x["a"], x["b"], x["step"]) for x in doc["comparison"]["curve_differences"]] == [(3e-3, 0.5, None)]
    assert "learning rate (logged) differs (no common logged step): a 0.003, b 0.5" in text(capsys, c, d)


def test_watch_json_lines_rates(tmp_path, capsys):
    def watched(name: str, lr: float) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        events = [{"event": "start", "step": None, "time": 1.0, "schema": 1, "framework": "plain", "every": 50},
                  {"event": "window", "step": 10, "time": 2.0, "schema": 1, "first_step": 1,
                   "losses": [falling(s) for s in range(1, 11)], "nonfinite_steps": [], "lr": [lr] * 10}]
        (folder / "tlint-watch.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
        return folder

    _, doc = diagnose_json(capsys, watched("a", 1e-3), watched("b", 1e-3 / 4))
    assert [(c["a"], c["b"], c["step"]) for c in doc["comparison"]["curve_differences"]] == [(1e-3, 2.5e-4, 1)]
