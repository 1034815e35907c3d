"""The run memo (tlint/memo.py): a warm run with nothing changed answers from one file,
byte-identical to a cold run, and any change the run depends on is a miss."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tlint.memo
from tests.cliutil import DEEPSPEED_SCRIPT, REPO, SELECT_TL301, main_in, make_project, tlint_env
from tlint.cache import CACHE_DIR_NAME, NO_CACHE_ENV

MEMO_HIT = "unchanged since the last run (run memo)"


@pytest.fixture(autouse=True)
def _memo_on(monkeypatch):
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    # Files written by the test are "racy" for two seconds; the tests do not wait.
    monkeypatch.setattr(tlint.memo, "_SETTLE_NS", 0)
    monkeypatch.setattr(tlint.memo, "_SETTLE_FINE_NS", 0)


@pytest.fixture
def demo(tmp_path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(REPO / "fixtures" / "demo", root, ignore=shutil.ignore_patterns(CACHE_DIR_NAME, "__pycache__"))
    (root / ".git").mkdir()
    return root


def run(root: Path, capsys, monkeypatch, *flags: str, fmt: str = "json") -> tuple[str, bool]:
    """(stdout, whether the run memo answered)."""
    proc = main_in(root, "check", "--format", fmt, "--jobs", "1", "--exit-zero", "--verbose", *flags, ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, MEMO_HIT in proc.stderr


def test_a_warm_run_answers_from_the_memo_byte_identical(demo, capsys, monkeypatch):
    cold = {fmt: run(demo, capsys, monkeypatch, "--no-cache", fmt=fmt)[0] for fmt in ("json", "text")}
    first, hit = run(demo, capsys, monkeypatch)
    assert not hit and first == cold["json"]
    # the cache folder is created before the run is recorded, so the first cached run
    # already writes the memo
    assert list((demo / CACHE_DIR_NAME / "runs").glob("*.json"))
    for fmt in ("json", "text"):  # the output options are not part of the key
        out, hit = run(demo, capsys, monkeypatch, fmt=fmt)
        assert hit and out == cold[fmt]


def test_the_memo_hit_imports_neither_libcst_nor_the_rules(demo):
    env = tlint_env(**{"PYTHONPATH": str(REPO)})
    env.pop(NO_CACHE_ENV, None)
    # settle: the memo is only written for files older than two seconds
    old = 1_600_000_000
    import os

    for path in demo.rglob("*"):
        os.utime(path, (old, old))
    code = ("import sys, tlint.memo; tlint.memo._SETTLE_NS = 0; from tlint.cli import main; rc = main(sys.argv[1:]); "
            "print('LIBCST' if 'libcst' in sys.modules else 'NO-LIBCST', file=sys.stderr); sys.exit(rc)")
    args = [sys.executable, "-c", code, "check", "--exit-zero", "--verbose", "."]
    (demo / CACHE_DIR_NAME).mkdir()
    os.utime(demo, (old, old))
    first = subprocess.run(args, cwd=demo, capture_output=True, text=True, env=env, timeout=120)
    second = subprocess.run(args, cwd=demo, capture_output=True, text=True, env=env, timeout=120)
    assert MEMO_HIT not in first.stderr and "LIBCST" in first.stderr
    assert MEMO_HIT in second.stderr, second.stderr
    assert "NO-LIBCST" in second.stderr
    assert first.stdout == second.stdout


@pytest.mark.parametrize("change", ["edit", "same-size-edit", "new-file", "new-subfolder-file", "delete",
                                    "config", "gitignore"])
def test_any_change_the_run_depends_on_is_a_miss(demo, capsys, monkeypatch, change):
    run(demo, capsys, monkeypatch)
    run(demo, capsys, monkeypatch)
    assert run(demo, capsys, monkeypatch)[1]
    train = demo / "train.py"
    if change == "edit":
        train.write_text(train.read_text() + "\nimport torch\n")
    elif change == "same-size-edit":
        text = train.read_text()
        train.write_text(text.replace("import", "Import", 1).replace("Import", "import", 1)[:-1] + " ")
    elif change == "new-file":
        (demo / "extra.py").write_text("import torch\n")
    elif change == "new-subfolder-file":
        (demo / "pkg").mkdir()
        (demo / "pkg" / "m.py").write_text("import torch\n")
    elif change == "delete":
        (demo / "loaders.py").unlink()
    elif change == "config":
        (demo / "tlint.toml").write_text('ignore = ["TL308"]\n' + (demo / "tlint.toml").read_text())
    elif change == "gitignore":
        (demo / ".gitignore").write_text("train.py\n")
    out, hit = run(demo, capsys, monkeypatch)
    assert not hit
    assert out == run(demo, capsys, monkeypatch, "--no-cache")[0]


def test_different_options_do_not_share_a_memo(demo, capsys, monkeypatch):
    run(demo, capsys, monkeypatch)
    run(demo, capsys, monkeypatch)
    out, hit = run(demo, capsys, monkeypatch, "--select", "TL101")
    assert not hit
    assert out == run(demo, capsys, monkeypatch, "--select", "TL101", "--no-cache")[0]


def test_no_memo_without_the_cache_or_after_an_error(demo, capsys, monkeypatch):
    run(demo, capsys, monkeypatch, "--no-cache")
    assert not (demo / CACHE_DIR_NAME / "runs").exists()
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    run(demo, capsys, monkeypatch)
    assert not (demo / CACHE_DIR_NAME / "runs").exists()
    monkeypatch.delenv(NO_CACHE_ENV)
    proc = main_in(demo, "check", "--exit-zero", ".", "missing.py", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2
    assert not (demo / CACHE_DIR_NAME / "runs").exists()


def test_racy_files_are_not_memoised(demo, capsys, monkeypatch):
    monkeypatch.setattr(tlint.memo, "_SETTLE_NS", 2_000_000_000)
    monkeypatch.setattr(tlint.memo, "_SETTLE_FINE_NS", 2_000_000_000)
    run(demo, capsys, monkeypatch)  # every file was written just now
    assert not run(demo, capsys, monkeypatch)[1]


def test_a_corrupt_memo_is_a_miss(demo, capsys, monkeypatch):
    run(demo, capsys, monkeypatch)
    cold = run(demo, capsys, monkeypatch)[0]
    for entry in (demo / CACHE_DIR_NAME / "runs").glob("*.json"):
        entry.write_bytes(b"not a memo")
    out, hit = run(demo, capsys, monkeypatch)
    assert not hit and out == cold


def test_a_changed_input_file_is_a_miss(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": DEEPSPEED_SCRIPT, "tlint.toml": SELECT_TL301,
                                         "ds.json": '{"train_batch_size": 8}'})
    run(root, capsys, monkeypatch)
    out, _ = run(root, capsys, monkeypatch)
    assert "TL301" in out and run(root, capsys, monkeypatch)[1]
    (root / "ds.json").write_text('{"train_batch_size": 8, "gradient_clipping": 1.0}')
    out, hit = run(root, capsys, monkeypatch)
    assert not hit and "TL301" not in out
