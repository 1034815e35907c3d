"""`tlint diagnose` on bad and hostile input: a clear one-line message and exit 2, never a
traceback; files bounded in size; `tlint check` never imports the diagnose package."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cliutil import run_tlint, tlint_env
from tests.torchutil import import_torch
from tlint.cli import main
from tlint.diagnose import findings, readers


def one_line_error(capsys, *args: str) -> str:
    code = main(["diagnose", *map(str, args)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("tlint: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def write(folder: Path, name: str, data: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return folder


@pytest.mark.parametrize("name, data, expected", [
    ("trainer_state.json", "{not json", "not valid JSON"),
    ("trainer_state.json", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ("trainer_state.json", '{"log_history": [{"step": 1, "loss": 1' + "0" * 5000 + "}]}", "not valid JSON"),
    ("trainer_state.json", '{"log_history": 3}', "no log_history list"),
    ("trainer_state.json", b"\xff\xfe\x00garbage", "not UTF-8"),
    ("trainer_state.json", '{"log_history": [{"step": "x", "loss": "y"}]}', "hold no loss"),
    ("metrics.csv", "epoch,train_loss\n0,1.0\n", "no step column"),
    ("metrics.csv", 'step,train_loss\n1,"unterminated\n', "hold no loss"),
    ("tlint-watch.jsonl", '{"event": "start"}\n[1, 2]\n', "not a tlint.watch event"),
    ("tlint-watch.jsonl", '{"event": "window", "step": 3\n', "not valid JSON"),
    ("events.out.tfevents.1.host", b"\x00" * 7 + b"garbage", "TensorBoard"),
    ("config.json", "{}", "no training log found"),
])
def test_broken_logs_exit_2_with_one_line(tmp_path, capsys, name, data, expected):
    err = one_line_error(capsys, write(tmp_path / "run", name, data))
    assert expected in err


def test_truncated_tensorboard_file(tmp_path, capsys):
    import_torch()
    from torch.utils.tensorboard import SummaryWriter  # the writer HF's callback uses

    folder = tmp_path / "tb"
    writer = SummaryWriter(str(folder))
    for step in range(1, 30):
        writer.add_scalar("train/loss", 1.0 / step, step)
    writer.close()
    events = next(folder.glob("events.out.tfevents.*"))
    data = events.read_bytes()
    events.write_bytes(data[: len(data) - 7])  # a run killed while writing: the reader keeps what is whole
    run = readers.read_run(folder)
    assert 20 < len(run.series["loss"]) < 29
    events.write_bytes(data[:40] + b"\x13" * 64 + data[104:])  # a corrupted record: the reader stops there
    assert "not a readable TensorBoard event file" in one_line_error(capsys, folder)


def test_oversized_file_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(readers, "MAX_BYTES", 1000)
    folder = write(tmp_path / "run", "trainer_state.json", json.dumps({"log_history": [{"step": 1, "loss": 1.0}] * 100}))
    assert "over the 1,000-byte limit" in one_line_error(capsys, folder)


def test_missing_path_empty_folder_and_three_runs(tmp_path, capsys):
    assert "no such file or folder" in one_line_error(capsys, tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    assert "no training log found" in one_line_error(capsys, tmp_path / "empty")
    assert "one run, or two" in one_line_error(capsys, tmp_path, tmp_path, tmp_path)


def test_symlinks_are_not_followed_out_of_the_run_folder(tmp_path, capsys):
    outside = write(tmp_path / "outside", "trainer_state.json", json.dumps({"log_history": [{"step": 1, "loss": 1}]}))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "linked").symlink_to(outside, target_is_directory=True)
    assert "no training log found" in one_line_error(capsys, tmp_path / "run")


def test_too_many_entries(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(readers, "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / f"f{i}.txt").write_text("")
    assert "more than 50 entries" in one_line_error(capsys, tmp_path)


def test_json_format_reports_the_error_in_the_document(tmp_path, capsys):
    folder = write(tmp_path / "run", "trainer_state.json", "{")
    assert main(["diagnose", str(folder), "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "schema" / "diagnose-output.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert "not valid JSON" in doc["error"] and "runs" not in doc


def test_missing_tensorboard_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    write(tmp_path / "run", "events.out.tfevents.1.host", b"")
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)
    err = one_line_error(capsys, tmp_path / "run")
    assert "needs the tensorboard package" in err and "tlint-pytorch[diagnose]" in err


def test_cli_subprocess_bad_input_has_no_traceback(tmp_path):
    folder = write(tmp_path / "run", "trainer_state.json", "[[[")
    proc = run_tlint("diagnose", str(folder), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "not valid JSON" in proc.stderr


def test_check_does_not_import_diagnose(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    code = ("import sys, tlint.cli\n"
            "code = tlint.cli.main(['check', '.', '--no-cache'])\n"
            "print(code, sorted(m for m in sys.modules if m.startswith(('tlint.diagnose', 'tensorboard', "
            "'matplotlib', 'yaml'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=tlint_env(), timeout=60)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr


def test_nan_and_huge_values_in_json_logs_are_read_as_numbers(tmp_path, capsys):
    history = [{"step": s, "loss": 2.0 - s / 100} for s in range(1, 40)]
    history[20]["loss"] = "NaN"
    text = json.dumps({"log_history": history}).replace('"NaN"', "NaN")
    text = text.replace('"loss": 1.9}', '"loss": 1e999}')  # step 10: inf
    folder = write(tmp_path / "run", "trainer_state.json", text)
    assert main(["diagnose", str(folder), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    nan = [f for f in doc["runs"][0]["findings"] if f["kind"] == "nonfinite"][0]
    assert nan["steps"] == {"first": 10, "last": 21}


def test_every_cause_names_real_rules_and_probes():
    from tlint.diagnose import findings
    from tlint.verify.options import PROBES, TRAINING_PROBES

    rules_dir = Path(__file__).resolve().parents[1] / "rules"
    codes = {p.name[:5] for p in rules_dir.glob("TL*.md")}
    causes = [v for v in vars(findings).values() if isinstance(v, findings.Cause)]
    assert len(causes) >= 15
    for cause in causes:
        assert set(cause.rules) <= codes, cause
        assert set(cause.probes) <= set(PROBES) | set(TRAINING_PROBES), cause


STATE = json.dumps({"log_history": [{"step": s, "loss": 3.0 - s / 50} for s in range(1, 30)]})


def test_yaml_is_read_with_safe_load_only(tmp_path, capsys):
    marker = tmp_path / "executed"
    folder = write(tmp_path / "run", "trainer_state.json", STATE)
    write(folder, "hparams.yaml", f"lr: !!python/object/apply:os.system ['touch {marker}']\n")
    assert "not valid YAML" in one_line_error(capsys, folder)
    assert not marker.exists()
    write(folder, "hparams.yaml", "lr: 0.001\nmodel:\n  vocab_size: 50\n")
    run = readers.read_run(folder)
    assert run.config["lr"] == 0.001 and run.vocab_size == 50


def test_without_pyyaml_the_yaml_is_skipped_with_a_note(tmp_path, monkeypatch):
    folder = write(tmp_path / "run", "trainer_state.json", STATE)
    write(folder, "hparams.yaml", "lr: 0.001\n")
    monkeypatch.setitem(sys.modules, "yaml", None)
    run = readers.read_run(folder)
    assert "lr" not in run.config and run.notes == ["hparams.yaml not read: reading YAML needs PyYAML "
                                                    "(pip install pyyaml)"]


def test_without_matplotlib_artifacts_is_one_line(tmp_path, capsys, monkeypatch):
    folder = write(tmp_path / "run", "trainer_state.json", STATE)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    err = one_line_error(capsys, folder, "--artifacts", tmp_path / "plots")
    assert "matplotlib" in err and "tlint-pytorch[plot]" in err


def test_high_pad_share_from_watch_samples(tmp_path, capsys):
    lines = []
    for step in range(1, 41):
        lines.append({"event": "window", "step": step, "time": step * 0.1, "schema": 1, "first_step": step,
                      "losses": [3.0 - step / 40], "nonfinite_steps": [], "lr": [1e-4]})
        if step % 5 == 0:
            lines.append({"event": "sample", "step": step, "time": step * 0.1, "schema": 1, "loss": 1.0,
                          "grad_norm": {"total": 1.0, "layers": {}}, "lr": [1e-4], "update_ratio": None,
                          "amp": None, "pad_share": 0.75, "activations": [], "attention_pad_mass": {}})
    path = tmp_path / "tlint-watch.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    assert main(["diagnose", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (pad,) = [f for f in doc["runs"][0]["findings"] if f["kind"] == "pad-share"]
    assert pad["size"]["median"] == 0.75 and pad["steps"] == {"first": 5, "last": 40}
    assert "TL111" in pad["causes"][0]["rules"]


def test_a_data_set_csv_in_the_run_folder_is_not_read_as_a_log(tmp_path, capsys):
    folder = write(tmp_path / "run", "train.csv", "step,loss\n1,5\n")
    assert "no training log found" in one_line_error(capsys, folder)
    write(folder, "progress.csv", "step,loss\n" + "".join(f"{s},{3 - s / 50}\n" for s in range(1, 30)))
    assert [Path(s).name for s in readers.read_run(folder).sources] == ["progress.csv"]
    assert [Path(s).name for s in readers.read_run(folder / "train.csv").sources] == ["train.csv"]  # named: read


@pytest.mark.parametrize("vocab, end, severity", [(None, 3.0, "error"), (None, 2.9, "warning"), (1000, 2.9, "warning"),
                                                  (20, 2.9, "error")])
def test_stuck_loss_severity(tmp_path, capsys, vocab, end, severity):
    """Error near ln(vocabulary) (ln 20 = 3.0), or when it never fell and no vocabulary is
    known; a plateau far from ln(vocabulary) (a fine-tune) is a warning."""
    history = [{"step": s, "loss": 3.0 + (end - 3.0) * s / 40 + 0.005 * (-1) ** s} for s in range(1, 41)]
    folder = write(tmp_path / "run", "trainer_state.json", json.dumps({"log_history": history}))
    if vocab:
        write(folder, "config.json", json.dumps({"vocab_size": vocab}))
    main(["diagnose", str(folder), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    (stuck,) = [f for f in doc["runs"][0]["findings"] if f["kind"] == "stuck-loss"]
    assert stuck["severity"] == severity


def test_diagnose_is_linear_in_train_times_eval_steps(tmp_path):
    """20,000 train and 20,000 eval entries: the train level at each evaluation is a binary
    search, not a scan of every train point (a scan is quadratic: minutes here)."""
    history = []
    for step in range(1, 20_001):
        history.append({"step": step, "loss": 3.0 - step / 20_000, "learning_rate": 1e-4})
        history.append({"step": step, "eval_loss": 3.1 - step / 20_000})
    folder = write(tmp_path / "run", "trainer_state.json", json.dumps({"log_history": history}))
    start = time.perf_counter()
    found = findings.diagnose(readers.read_run(folder))
    assert time.perf_counter() - start < 15
    assert not any(f.kind in ("train-eval-gap", "stuck-loss", "divergence") for f in found)


class _Clock:
    """A clock one second later at each read."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_a_log_over_its_time_budget_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(readers, "FILE_SECONDS", 50.0)
    monkeypatch.setattr(readers, "time", _Clock())
    folder = write(tmp_path / "run", "trainer_state.json", STATE)
    assert main(["diagnose", str(folder)]) in (0, 1)  # 29 entries fit in 50 s
    capsys.readouterr()
    history = [{"step": s, "loss": 1.0} for s in range(1, 200)]
    folder = write(tmp_path / "run2", "trainer_state.json", json.dumps({"log_history": history}))
    err = one_line_error(capsys, folder)
    assert "reading took over 50 s, the time budget for one file" in err


def test_yaml_through_the_c_loader_within_a_time_budget(tmp_path, monkeypatch):
    """A 200,000-key hparams.yaml: the C loader where PyYAML has it, and the budget checked
    on each node, so a slow configuration is skipped with a note and the logs are still
    diagnosed."""
    yaml = pytest.importorskip("yaml")
    loader = readers._yaml_loader(yaml, readers.Budget(tmp_path))
    assert issubclass(loader, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    folder = write(tmp_path / "run", "trainer_state.json", STATE)
    write(folder, "hparams.yaml", "model:\n" + "".join(f"  key_{i}: {i}\n" for i in range(200_000)))
    monkeypatch.setattr(readers, "FILE_SECONDS", 0.3)
    start = time.perf_counter()
    run = readers.read_run(folder)
    assert time.perf_counter() - start < 10
    assert run.notes == ["hparams.yaml not read: reading it took over 0.3 s"] and run.series["loss"]


def test_a_run_folder_named_like_mathtext_is_drawn_as_written(tmp_path, capsys):
    """`$\\frac$` in a run folder's name is text in the plots' titles and legends, for
    `diagnose --artifacts` and `doctor --html` alike (as mathtext it does not parse)."""
    pytest.importorskip("matplotlib")
    project = tmp_path / "proj"
    run = write(project / "a$\\frac$b", "trainer_state.json", STATE)
    (project / "a.py").write_text("x = 1\n")
    assert main(["diagnose", str(run), "--artifacts", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr()
    assert "wrote" in out.out and "error" not in out.err
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["diagnose-a_frac_b.png"]
    page = tmp_path / "report.html"
    assert main(["doctor", str(project), "--no-run", "--no-cache", "--html", str(page)]) == 0
    out = capsys.readouterr()
    assert f"wrote {page}" in out.out and "bug in tlint" not in out.out + out.err
    assert "a$\\frac$b" in page.read_text(encoding="utf-8")
