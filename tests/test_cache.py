"""The per-file result cache: a warm run prints exactly what a cold run prints, parses
only what changed, and survives corrupt entries, config changes and version bumps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tlint.cache
import tlint.engine
import tlint.project_phase
from tests.cliutil import DEEPSPEED_SCRIPT, REPO, SELECT_TL301, main_in, make_project
from tlint import signed
from tlint.cache import CACHE_DIR_NAME, NO_CACHE_ENV

FORMATS = ("json", "text")


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch):
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The displays of the files LibCST parses (one process: `--jobs 1`)."""
    seen: list[str] = []
    original = tlint.engine.parse_source

    def counting(text, display, **options):
        seen.append(display)
        return original(text, display, **options)

    monkeypatch.setattr(tlint.engine, "parse_source", counting)
    return seen


def lint(root: Path, capsys, monkeypatch, *flags: str, fmt: str = "json") -> str:
    proc = main_in(root, "check", "--format", fmt, "--jobs", "1", "--exit-zero", *flags, ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def entries(root: Path) -> list[Path]:
    return sorted((root / CACHE_DIR_NAME / "files").rglob("*.json"))


@pytest.fixture
def demo(tmp_path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(REPO / "fixtures" / "demo", root, ignore=shutil.ignore_patterns(CACHE_DIR_NAME, "__pycache__"))
    return root


def test_warm_runs_print_the_cold_output_and_parse_nothing(demo, tmp_path, capsys, monkeypatch, parses):
    clean = tmp_path / "clean"
    shutil.copytree(REPO / "fixtures" / "clean", clean, ignore=shutil.ignore_patterns(CACHE_DIR_NAME, "__pycache__"))
    for root in (demo, clean):
        cold = {fmt: lint(root, capsys, monkeypatch, fmt=fmt) for fmt in FORMATS}
        assert (root / CACHE_DIR_NAME / ".gitignore").read_text().splitlines()[-1] == "*"
        assert entries(root)
        parses.clear()
        for fmt in FORMATS:
            assert lint(root, capsys, monkeypatch, fmt=fmt) == cold[fmt]
        assert parses == []
        assert lint(root, capsys, monkeypatch, "--no-cache") == cold["json"]
    assert '"code": "TL' in lint(demo, capsys, monkeypatch)


def test_touching_one_file_reanalyses_only_that_file(demo, capsys, monkeypatch, parses):
    lint(demo, capsys, monkeypatch)
    train = demo / "train.py"
    train.write_text(train.read_text() + "\n\ndef unused_helper(model, ids):\n    return model(ids)\n")
    parses.clear()
    warm = {fmt: lint(demo, capsys, monkeypatch, fmt=fmt) for fmt in FORMATS}
    assert parses == ["train.py"]
    for fmt in FORMATS:
        assert warm[fmt] == lint(demo, capsys, monkeypatch, "--no-cache", fmt=fmt)


# duration: the demo linted about nine times: after each of three config changes, warm and with --no-cache
def test_a_config_change_is_seen(demo, capsys, monkeypatch):
    lint(demo, capsys, monkeypatch)
    config = demo / "tlint.toml"
    for change in ('severity = { TL101 = "info" }\nignore = ["TL308"]\n',
                   'causal-names = ["Classifier"]\n',
                   '[rules.missing-grad-clipping]\nclip-functions = ["train.clip"]\n'):
        config.write_text(change + config.read_text() if not change.startswith("[") else config.read_text() + change)
        assert lint(demo, capsys, monkeypatch) == lint(demo, capsys, monkeypatch, "--no-cache")
    assert lint(demo, capsys, monkeypatch, "--select", "TL1") == lint(demo, capsys, monkeypatch, "--select", "TL1", "--no-cache")


def test_a_corrupt_or_truncated_entry_is_ignored_and_rebuilt(demo, capsys, monkeypatch, parses):
    import tlint.memo

    # (the run's memo would render the stored result without reading a cache entry once the
    # files are older than its racy window, as on a loaded machine: this test is about entries)
    monkeypatch.setattr(tlint.memo, "load", lambda *args, **kwargs: None)
    cold = lint(demo, capsys, monkeypatch)
    stored = entries(demo)
    stored[0].write_bytes(stored[0].read_bytes()[:40])  # truncated
    stored[1].write_bytes(b"not a pickle at all")
    stored[2].write_bytes(signed.dumps(("a", "tuple", "of the wrong shape"), signed.secret()))
    parses.clear()
    assert lint(demo, capsys, monkeypatch) == cold
    assert len(parses) == 3
    for entry in stored[:3]:
        assert signed.read(entry, signed.secret())[3].display  # rewritten whole
    parses.clear()
    assert lint(demo, capsys, monkeypatch) == cold
    assert parses == []


def test_a_new_tlint_version_invalidates(demo, capsys, monkeypatch, parses):
    cold = lint(demo, capsys, monkeypatch)
    count = len(entries(demo))
    monkeypatch.setattr(tlint, "__version__", "99.0.0")
    tlint.cache.code_fingerprint.cache_clear()
    try:
        parses.clear()
        assert lint(demo, capsys, monkeypatch) == cold
        assert len(parses) == count
        assert len(entries(demo)) == count  # overwritten, one entry per file
    finally:
        monkeypatch.undo()
        tlint.cache.code_fingerprint.cache_clear()


def test_no_cache_and_stdin_write_nothing(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": "import torch\n", "model.py": TOKENIZER.format("gpt2")})
    lint(root, capsys, monkeypatch, "--no-cache")
    assert not (root / CACHE_DIR_NAME).exists()
    monkeypatch.setattr("sys.stdin", __import__("io").TextIOWrapper(__import__("io").BytesIO(b"import torch\n")))
    proc = main_in(root, "check", "--stdin-filename", "train.py", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert not (root / CACHE_DIR_NAME).exists()


def test_a_changed_deepspeed_json_invalidates_the_file_that_reads_it(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": DEEPSPEED_SCRIPT, "tlint.toml": SELECT_TL301, "ds.json": '{"train_batch_size": 8}'})
    flagged = lint(root, capsys, monkeypatch, "--select", "TL301")
    assert "TL301" in flagged
    (root / "ds.json").write_text('{"train_batch_size": 8, "gradient_clipping": 1.0}')
    assert "TL301" not in lint(root, capsys, monkeypatch, "--select", "TL301")
    (root / "ds.json").unlink()
    assert lint(root, capsys, monkeypatch, "--select", "TL301") == lint(root, capsys, monkeypatch, "--select", "TL301", "--no-cache")


def test_cache_dir_is_configurable_and_never_takes_over_a_users_folder(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": "import torch\n", "tlint.toml": 'cache-dir = "build/lint"\n'})
    lint(root, capsys, monkeypatch)
    assert entries(root) == [] and (root / "build" / "lint" / ".gitignore").is_file()
    assert list((root / "build" / "lint").rglob("*.json"))
    (root / "tlint.toml").write_text('cache-dir = "notes"\n')
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("mine\n")
    lint(root, capsys, monkeypatch)
    assert sorted(p.name for p in (root / "notes").iterdir()) == ["todo.txt"]
    assert main_in(root, "clean", capsys=capsys, monkeypatch=monkeypatch).returncode == 0
    assert (root / "notes" / "todo.txt").is_file()
    (root / "tlint.toml").write_text("cache-dir = 3\n")
    proc = main_in(root, "check", ".", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 2 and "cache-dir" in proc.stderr


def test_clean_removes_the_cache_folders(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "p", {"train.py": "import torch\n", "sub/tlint.toml": "",
                                         "sub/model.py": "import torch\n"})
    lint(root, capsys, monkeypatch)
    assert (root / CACHE_DIR_NAME).is_dir() and (root / "sub" / CACHE_DIR_NAME).is_dir()
    proc = main_in(root, "clean", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0 and "removed" in proc.stderr
    assert not (root / CACHE_DIR_NAME).exists() and not (root / "sub" / CACHE_DIR_NAME).exists()
    assert (root / "train.py").is_file()
    assert main_in(root, "clean", capsys=capsys, monkeypatch=monkeypatch).returncode == 0


def test_analyse_cached_serves_facts_only_requests_from_any_entry(tmp_path, parses):
    from tlint.cache import FileCache
    from tlint.config import default_settings
    from tlint.engine import analyse_cached

    path = make_project(tmp_path / "p", {"tok.py": (
        "from transformers import AutoTokenizer\n\n"
        'tokenizer = AutoTokenizer.from_pretrained("gpt2")\n')}) / "tok.py"
    settings, cache = default_settings(path.parent), FileCache()
    facts = analyse_cached(cache, path, "tok.py", settings, facts_only=True).facts
    assert facts and analyse_cached(cache, path, "tok.py", settings, facts_only=True).facts == facts
    assert len(parses) == 1
    full = analyse_cached(cache, path, "tok.py", settings)  # a facts-only entry cannot answer
    assert len(parses) == 2 and full.facts == facts
    assert analyse_cached(cache, path, "tok.py", settings, facts_only=True).facts == facts
    assert analyse_cached(None, path, "tok.py", settings).facts == facts
    assert len(parses) == 3


TOKENIZER = 'from transformers import AutoTokenizer\n\ntokenizer = AutoTokenizer.from_pretrained("{}")\n'


def _check(root: Path, capsys, monkeypatch, *paths: str) -> str:
    return lint_paths_out(root, capsys, monkeypatch, "--select", "TL104", *paths)


def lint_paths_out(root: Path, capsys, monkeypatch, *args: str) -> str:
    proc = main_in(root, "check", "--format", "json", "--jobs", "1", "--exit-zero", *args,
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_unnamed_related_files_come_from_the_cache_and_their_changes_are_seen(tmp_path, capsys, monkeypatch, parses):
    # eval.py imports train.py: one program, so TL104 compares their tokenizers
    root = make_project(tmp_path / "p", {"train.py": TOKENIZER.format("bert-base-uncased"),
                                         "eval.py": "import train\n" + TOKENIZER.format("bert-base-cased")})
    cold = _check(root, capsys, monkeypatch, "train.py")
    assert '"TL104"' in cold and sorted(parses) == ["eval.py", "train.py"]
    parses.clear()
    assert _check(root, capsys, monkeypatch, "train.py") == cold
    assert parses == []  # the unnamed eval.py's facts came from its cache entry
    (root / "eval.py").write_text("import train\n" + TOKENIZER.format("bert-base-uncased"), encoding="utf-8")
    warm = _check(root, capsys, monkeypatch, "train.py")
    assert parses == ["eval.py"] and '"TL104"' not in warm
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    assert _check(root, capsys, monkeypatch, "train.py") == warm


def test_the_import_scan_is_cached_and_a_changed_import_is_seen(tmp_path, capsys, monkeypatch):
    import time

    root = make_project(tmp_path / "p", {
        "train.py": TOKENIZER.format("bert-base-uncased"),
        "lib/__init__.py": "", "lib/tok.py": TOKENIZER.format("bert-base-cased"),
        "lib/other.py": "import os\n"})
    scans: list[int] = []
    original = tlint.project_phase.scan_imports
    monkeypatch.setattr(tlint.project_phase, "scan_imports", lambda text: scans.append(1) or original(text))
    later = time.time_ns() + 10_000_000_000  # every file "settled": its scan is stored
    monkeypatch.setattr(tlint.project_phase.time, "time_ns", lambda: later)
    cold = _check(root, capsys, monkeypatch, "train.py")
    assert '"TL104"' not in cold and len(scans) == 4  # train.py does not import lib/tok.py
    scans.clear()
    assert _check(root, capsys, monkeypatch, "train.py") == cold and scans == []
    (root / "train.py").write_text("import lib.tok\n" + TOKENIZER.format("bert-base-uncased"), encoding="utf-8")
    warm = _check(root, capsys, monkeypatch, "train.py")
    assert len(scans) == 1 and '"TL104"' in warm  # the new import relates lib/tok.py
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    assert _check(root, capsys, monkeypatch, "train.py") == warm


def test_an_atomic_write_that_fails_leaves_neither_a_part_nor_a_temporary_file(tmp_path, monkeypatch):
    from tlint.cache import write_bytes_atomic

    target = tmp_path / "entry.pickle"
    target.write_bytes(b"old")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr("tlint.cache.os.replace", refuse)
    with pytest.raises(OSError):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.pickle"]
    monkeypatch.undo()
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["entry.pickle"]
