"""Determinism: byte-identical output (JSON and text) across runs, `--jobs` values and the
order in which files are found or named."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

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


# duration: the project linted four times (twice at one job, at 2 and at 4 jobs): worker processes start each time
def test_identical_across_runs_and_jobs(outputs):
    reference = outputs("--jobs", "1", ".")
    assert '"TL001"' in reference["json"] and "TL103" in reference["text"]
    assert outputs("--jobs", "1", ".") == reference
    for jobs in ("2", "4"):
        assert outputs("--jobs", jobs, ".") == reference, jobs


# duration: three runs, two of them in worker processes
def test_identical_whatever_order_files_are_found(outputs, monkeypatch):
    import tlint.engine

    reference = outputs("--jobs", "1", ".")
    real = tlint.engine.discover
    for seed, jobs in ((0, "1"), (1, "2")):
        rng = random.Random(seed)

        def shuffled(paths, settings_for, roots=None, rng=rng):
            files, errors = real(paths, settings_for, roots)
            files = list(files)
            rng.shuffle(files)
            return files, errors

        monkeypatch.setattr(tlint.engine, "discover", shuffled)
        assert outputs("--jobs", jobs, ".") == reference, seed


# duration: three runs, one of them in worker processes
def test_identical_whatever_order_files_are_named(outputs, project):
    names = sorted(p.relative_to(project).as_posix() for p in project.rglob("*.py"))
    reference = outputs("--jobs", "1", *names)
    assert outputs("--jobs", "1", ".") == reference  # a folder, or its files named one by one
    order = list(names)
    random.Random(0).shuffle(order)
    assert outputs("--jobs", "2", *order) == reference, order


# --- explicit paths with no project marker -------------------------------------------------


@pytest.fixture
def packages(tmp_path):
    """Two packages and no config or git root anywhere: the cross-file findings (a padded
    batch fed to the model without its mask, a loop with no clipping and no warmup) need
    `pkg.data` and `pkg.model` resolved from `pkg/train/full.py`."""
    root = tmp_path / "work" / "proj"
    demo = REPO / "fixtures" / "demo"
    (root / "pkg" / "train").mkdir(parents=True)
    (root / "tools").mkdir()
    for folder in ("pkg", "pkg/train", "tools"):
        (root / folder / "__init__.py").write_text("")
    shutil.copy(demo / "data.py", root / "pkg" / "data.py")
    shutil.copy(demo / "model.py", root / "pkg" / "model.py")
    train = (demo / "train.py").read_text(encoding="utf-8")
    train = train.replace("from data import", "from pkg.data import").replace("from model import", "from pkg.model import")
    (root / "pkg" / "train" / "full.py").write_text(train, encoding="utf-8")
    (root / "tools" / "report.py").write_text(
        "import torch\n\nfrom pkg.data import make_loaders\nfrom pkg.model import build_model\n\n\n"
        "def score(batch):\n    model = build_model()\n    return model(batch['input_ids'])\n", encoding="utf-8")
    return root


NAMED = ("pkg/train/full.py", "pkg/data.py", "pkg/model.py", "tools/report.py")


# duration: every order of the four named paths (24) and of their subsets: order independence is claimed for all of them
def test_explicit_paths_give_one_result_whatever_the_order_cache_and_jobs(packages, capsys, monkeypatch):
    import itertools

    import tlint.engine
    import tlint.memo
    from tlint.cache import CACHE_DIR_NAME, NO_CACHE_ENV

    monkeypatch.setattr(tlint.memo, "_SETTLE_NS", 0)
    monkeypatch.setattr(tlint.memo, "_SETTLE_FINE_NS", 0)

    def run(*args: str) -> str:
        # TL301 and TL304 are practice rules (off by default): their cross-file findings are wanted
        proc = main_in(packages, "check", "--format", "json", "--verbose", "--extend-select", "TL301,TL304", *args,
                       capsys=capsys, monkeypatch=monkeypatch)
        assert proc.returncode == 1, proc.stderr
        assert "note:" not in proc.stderr
        return proc.stdout

    reference = run("--no-cache", "--jobs", "1", *NAMED)
    for code in ('"TL101"', '"TL301"', '"TL304"'):  # the cross-file findings
        assert code in reference, code
    assert '"path": "tools/report.py"' in reference
    for order in itertools.permutations(NAMED):
        assert run("--no-cache", "--jobs", "1", *order) == reference, order
    for size in (2, 3):  # fewer paths: the same for every order of the same set
        for subset in itertools.combinations(NAMED, size):
            first = run("--no-cache", "--jobs", "1", *subset)
            assert run("--no-cache", "--jobs", "1", *reversed(subset)) == first, subset
    # a folder and the same files named one by one
    every = sorted(p.relative_to(packages).as_posix() for p in packages.rglob("*.py"))
    assert run("--no-cache", "pkg", "tools") == run("--no-cache", *every)
    # worker processes, and the cache cold, warm (entries) and memoised
    monkeypatch.setattr(tlint.engine, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    for order in (NAMED, tuple(reversed(NAMED)), NAMED[1:] + NAMED[:1]):
        for jobs in ("1", "2"):
            shutil.rmtree(packages / CACHE_DIR_NAME, ignore_errors=True)
            assert run("--no-cache", "--jobs", jobs, *order) == reference, (order, jobs)
            assert run("--jobs", jobs, *order) == reference, ("cold", order, jobs)
            assert run("--jobs", jobs, *order) == reference, ("warm", order, jobs)
            proc = main_in(packages, "check", "--format", "json", "--verbose", "--extend-select", "TL301,TL304",
                           "--jobs", jobs, *order,
                           capsys=capsys, monkeypatch=monkeypatch)
            assert proc.stdout == reference and "run memo" in proc.stderr, ("memo", order, jobs)
            shutil.rmtree(packages / CACHE_DIR_NAME / "runs")
            assert run("--jobs", jobs, *order) == reference, ("entries only", order, jobs)
    # one cache folder, at the run's root; none in the named folders, none above the project
    caches = sorted(p.relative_to(packages.parent).as_posix() for p in packages.parent.rglob(CACHE_DIR_NAME))
    assert caches == ["proj/" + CACHE_DIR_NAME]


def test_paths_with_no_common_project_folder_keep_their_own_roots(tmp_path, capsys, monkeypatch):
    """A common folder that is no project (the root, `/tmp`, the home folder) is never
    used: each path is its own project, and the user is told."""
    from tlint.config import named_roots

    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    roots, notices = named_roots([a, a / "sub", b / "."])
    assert set(roots.values()) == {tmp_path.resolve()} and len(roots) == 3 and not notices
    monkeypatch.setattr("tlint.config._too_wide", lambda folder: folder == tmp_path.resolve())
    roots, notices = named_roots([b, a / "sub", a])
    assert roots == {b: b.resolve(), a / "sub": a.resolve(), a: a.resolve()}
    assert len(notices) == 1 and "own project" in notices[0]
    assert named_roots([Path("/")])[0] == {Path("/"): Path("/")}
