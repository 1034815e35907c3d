"""Determinism: byte-identical output (JSON and text) across runs, `--jobs` values and the
order in which files are found or named."""

from __future__ import annotations

import random
import shutil

import pytest

from tests.cliutil import REPO, SYNTAX_ERROR, main_in

FORMATS = ("json", "text")


@pytest.fixture
def project(tmp_path):
    """The demo project (every rule, cross-file rules included) plus files TL001 reports."""
    root = tmp_path / "proj"
    shutil.copytree(REPO / "fixtures" / "demo", root)
    (root / ".git").mkdir()
    (root / "broken.py").write_text(SYNTAX_ERROR, encoding="utf-8")
    (root / "latin.py").write_bytes(b"s = 'caf\xe9'\n")
    (root / "sub").mkdir()
    (root / "sub" / "copy_of_model.py").write_text((root / "model.py").read_text(encoding="utf-8"), encoding="utf-8")
    return root


@pytest.fixture
def outputs(project, capsys, monkeypatch):
    import tlint.engine

    monkeypatch.setattr(tlint.engine, "_PARALLEL_MIN_BYTES", 0)  # worker processes for any input

    def run(*args: str) -> dict[str, str]:
        out = {}
        for fmt in FORMATS:
            proc = main_in(project, "check", "--format", fmt, *args, capsys=capsys, monkeypatch=monkeypatch)
            assert proc.returncode == 1, proc.stderr
            out[fmt] = proc.stdout
        return out

    return run


def test_identical_across_runs_and_jobs(outputs):
    reference = outputs("--jobs", "1", ".")
    assert '"TL001"' in reference["json"] and "TL103" in reference["text"]
    assert outputs("--jobs", "1", ".") == reference
    for jobs in ("2", "4"):
        assert outputs("--jobs", jobs, ".") == reference, jobs


def test_identical_whatever_order_files_are_found(outputs, monkeypatch):
    import tlint.engine

    reference = outputs("--jobs", "1", ".")
    real = tlint.engine.discover
    for seed, jobs in ((0, "1"), (1, "2")):
        rng = random.Random(seed)

        def shuffled(paths, settings_for, rng=rng):
            files, errors = real(paths, settings_for)
            files = list(files)
            rng.shuffle(files)
            return files, errors

        monkeypatch.setattr(tlint.engine, "discover", shuffled)
        assert outputs("--jobs", jobs, ".") == reference, seed


def test_identical_whatever_order_files_are_named(outputs, project):
    names = sorted(p.relative_to(project).as_posix() for p in project.rglob("*.py"))
    reference = outputs("--jobs", "1", *names)
    assert outputs("--jobs", "1", ".") == reference  # a folder, or its files named one by one
    order = list(names)
    random.Random(0).shuffle(order)
    assert outputs("--jobs", "2", *order) == reference, order
