"""The cache cannot run code, hide findings or go stale (tlint/signed.py, tlint/cache.py,
tlint/memo.py): every file tlint reads back from a cache folder is tried as an attacker
would write it, and a result must always equal a `--no-cache` run."""

from __future__ import annotations

import os
import pickle
import shutil
import stat
from pathlib import Path

import pytest

import tlint.cache
import tlint.engine
import tlint.memo
import tlint.project_phase
from tests.cliutil import DEEPSPEED_SCRIPT, REPO, SELECT_TL301, main_in, make_project
from tlint import signed
from tlint.cache import CACHE_DIR_NAME, NO_CACHE_ENV
from tlint.diagnostics import Diagnostic, Position, Range
from tlint.results import Fact, FileResult

MEMO_HIT = "unchanged since the last run (run memo)"


class _Payload:
    """Unpickling this writes a marker file: what a hostile pickle would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch):
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    monkeypatch.setattr(tlint.memo, "_SETTLE_NS", 0)
    monkeypatch.setattr(tlint.memo, "_SETTLE_FINE_NS", 0)
    monkeypatch.setattr(tlint.project_phase, "IMPORT_SETTLE_NS", -10**12)


@pytest.fixture
def demo(tmp_path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(REPO / "fixtures" / "demo", root, ignore=shutil.ignore_patterns(CACHE_DIR_NAME, "__pycache__"))
    (root / ".git").mkdir()
    return root


def lint(root: Path, capsys, monkeypatch, *flags: str) -> tuple[str, str]:
    proc = main_in(root, "check", "--format", "json", "--jobs", "1", "--exit-zero", "--verbose", *flags, ".",
                   capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != ".gitignore")


def poison(folder: Path, marker: Path) -> int:
    """Replace every cache file under `folder` by a hostile pickle, and put one beside it
    under the old `.pickle` name too; the count of poisoned files."""
    payload = pickle.dumps(_Payload(marker))
    count = 0
    for path in cache_files(folder):
        path.write_bytes(payload)
        path.with_suffix(".pickle").write_bytes(payload)
        count += 2
    for name in ("imports.pickle", "runs/anything.pickle"):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(payload)
        count += 1
    return count


def test_no_file_in_a_cache_folder_is_ever_unpickled(demo, tmp_path, capsys, monkeypatch):
    """Entries, the import scans and the memo, in the default cache folder (as a
    force-added `.tlint_cache` would put them): no marker, the `--no-cache` output."""
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    lint(demo, capsys, monkeypatch)
    lint(demo, capsys, monkeypatch)  # the memo
    folder = demo / CACHE_DIR_NAME
    assert (folder / "imports.json").is_file() and list((folder / "runs").glob("*.json"))
    marker = tmp_path / "PWNED"
    assert poison(folder, marker) > 10
    out, err = lint(demo, capsys, monkeypatch)
    assert MEMO_HIT not in err
    assert not marker.exists()
    assert out == clean
    out, err = lint(demo, capsys, monkeypatch)  # and the rebuilt cache serves the same
    assert out == clean and not marker.exists()


def test_a_cache_dir_committed_in_the_repository_runs_nothing(demo, tmp_path, capsys, monkeypatch):
    """`cache-dir` in the project's config pointing at a folder the repository carries."""
    (demo / "tlint.toml").write_text('cache-dir = "committed"\n' + (demo / "tlint.toml").read_text())
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    lint(demo, capsys, monkeypatch)
    committed = demo / "committed"
    assert (committed / "imports.json").is_file()
    marker = tmp_path / "PWNED"
    poison(committed, marker)
    assert lint(demo, capsys, monkeypatch)[0] == clean
    assert not marker.exists()


def _forge(entry: Path, key: bytes) -> None:
    """Rewrite a cache entry, well-formed, to claim the file has no findings."""
    stored_key, facts_only, inputs, result = signed.read(entry, signed.secret())
    result.diagnostics, result.pending = [], []
    entry.write_bytes(signed.dumps((stored_key, facts_only, inputs, result), key))


@pytest.mark.parametrize("signer", ["another-key", "unsigned"])
def test_a_well_formed_entry_this_installation_did_not_write_is_a_miss(demo, capsys, monkeypatch, signer):
    """An entry claiming "no findings" for a buggy file, committed by a pull request: with
    any key but this user's (or none), it is never trusted."""
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    assert '"TL101"' in clean
    lint(demo, capsys, monkeypatch)
    entries = sorted((demo / CACHE_DIR_NAME / "files").rglob("*.json"))
    assert entries
    for entry in entries:
        if signer == "another-key":
            _forge(entry, bytes(32))
        else:
            stored = entry.read_bytes()
            entry.write_bytes(stored.partition(b"\n")[2])  # the JSON alone, no signature line
    shutil.rmtree(demo / CACHE_DIR_NAME / "runs", ignore_errors=True)
    out, _ = lint(demo, capsys, monkeypatch)
    assert out == clean


def test_the_forgery_is_what_would_hide_findings(demo, capsys, monkeypatch):
    """The check above can fail: the same forged entries, signed with this user's key,
    do hide the findings (so the key is all that keeps them out)."""
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    lint(demo, capsys, monkeypatch)
    for entry in sorted((demo / CACHE_DIR_NAME / "files").rglob("*.json")):
        _forge(entry, signed.secret())
    shutil.rmtree(demo / CACHE_DIR_NAME / "runs", ignore_errors=True)
    assert lint(demo, capsys, monkeypatch)[0] != clean


def test_a_forged_memo_is_a_miss(demo, capsys, monkeypatch):
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    lint(demo, capsys, monkeypatch)
    out, err = lint(demo, capsys, monkeypatch)
    assert MEMO_HIT in err
    for memo in (demo / CACHE_DIR_NAME / "runs").glob("*.json"):
        key, links, folders, files, markers, fields = signed.read(memo, signed.secret())
        memo.write_bytes(signed.dumps((key, links, folders, files, markers, ([], *fields[1:])), bytes(32)))
    out, err = lint(demo, capsys, monkeypatch)
    assert MEMO_HIT not in err and out == clean


def test_old_pickle_caches_are_never_opened_and_tlint_clean_removes_them(demo, tmp_path, capsys, monkeypatch):
    folder = demo / CACHE_DIR_NAME
    lint(demo, capsys, monkeypatch)
    marker = tmp_path / "PWNED"
    payload = pickle.dumps(_Payload(marker))
    for entry in list((folder / "files").rglob("*.json")):
        entry.with_suffix(".pickle").write_bytes(payload)
        entry.unlink()  # as a 0.1 cache left them: pickles only
    (folder / "imports.json").unlink()
    (folder / "imports.pickle").write_bytes(payload)
    shutil.rmtree(folder / "runs")
    assert lint(demo, capsys, monkeypatch)[0] == lint(demo, capsys, monkeypatch, "--no-cache")[0]
    assert not marker.exists()
    proc = main_in(demo, "clean", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0 and not folder.exists()


def test_an_untrustworthy_key_turns_the_cache_off(demo, tmp_path, capsys, monkeypatch):
    key = signed.key_path()
    signed.secret()
    saved = key.read_bytes()
    try:
        os.chmod(key, 0o666)  # writable by others: anybody could sign
        signed._load_key.cache_clear()
        assert signed.secret() is None
        out = lint(demo, capsys, monkeypatch)[0]
        assert out == lint(demo, capsys, monkeypatch, "--no-cache")[0]
        assert not list((demo / CACHE_DIR_NAME).rglob("*.json"))
    finally:
        os.chmod(key, 0o600)
        key.write_bytes(saved)
        signed._load_key.cache_clear()


def test_a_key_inside_the_linted_project_is_not_used(demo, monkeypatch):
    """A repository linted with XDG_CACHE_HOME (or HOME) pointing into it cannot pick the key."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(demo / ".cache"))
    signed._load_key.cache_clear()
    try:
        assert signed.secret() is not None  # elsewhere it is a key
        assert signed.secret(demo) is None
        assert signed.secret(demo / "sub") is not None  # a project that does not hold it
    finally:
        signed._load_key.cache_clear()


def test_signed_files_round_trip_and_refuse_what_is_not_theirs():
    key = bytes(range(32))
    diag = Diagnostic("TL101", "missing-attention-mask", "error", "m", "a.py", Range(Position(1, 2), Position(3, 4)))
    result = FileResult(Path("/x/a.py"), "a.py", diagnostics=[diag], facts=[
        Fact("padding", None, {"lengths": (1, 2), "names": {"a", "b"}, 3: [None, 1.5, float("inf")],
                               "(": "a key that is a tag"})])
    value = ("k", True, [("p", None)], result, {(1, 2): "tuple key"}, "\udcff")
    back = signed.loads(signed.dumps(value, key), key)
    assert back == value and type(back[0]) is str and type(back[3].facts[0].data["lengths"]) is tuple
    data = signed.dumps(value, key)
    with pytest.raises(ValueError):
        signed.loads(data, bytes(32))
    with pytest.raises(ValueError):
        signed.loads(data.replace(b'"k"', b'"K"'), key)  # any change breaks the signature
    forged = b'{"@":"Payload","f":[]}'
    header = b"tlint-signed %d %s\n" % (signed.FORMAT, signed._mac(key, forged).encode())
    with pytest.raises(ValueError):
        signed.loads(header + forged, key)  # even signed, only the registered types are built
    with pytest.raises(TypeError):
        signed.dumps(object(), key)


# --- stale results -----------------------------------------------------------------------


def test_an_edit_during_the_run_and_undone_leaves_no_stale_result(demo, capsys, monkeypatch):
    """The key and the analysis come from one read: an edit saved between the two (here
    right after the key is made) cannot be cached under the old content's key."""
    train = demo / "train.py"
    original = train.read_text()
    edited = original.replace("model(batch[\"input_ids\"])", "model(batch[\"input_ids\"], attention_mask=batch[\"attention_mask\"])")
    assert edited != original
    real_key = tlint.cache.FileCache.key

    def key_then_edit(self, path, display, settings, data):
        if path.name == "train.py":
            train.write_text(edited)
        return real_key(self, path, display, settings, data)

    monkeypatch.setattr(tlint.cache.FileCache, "key", key_then_edit)
    lint(demo, capsys, monkeypatch)
    monkeypatch.setattr(tlint.cache.FileCache, "key", real_key)
    train.write_text(original)  # the edit undone
    shutil.rmtree(demo / CACHE_DIR_NAME / "runs", ignore_errors=True)
    out = lint(demo, capsys, monkeypatch)[0]
    assert out == lint(demo, capsys, monkeypatch, "--no-cache")[0]
    assert '"TL101"' in out


def test_a_file_missing_for_a_moment_is_not_cached_as_missing(demo, capsys, monkeypatch):
    clean = lint(demo, capsys, monkeypatch, "--no-cache")[0]
    model = demo / "model.py"
    away = demo / "model.py.away"
    real_discover = tlint.engine.discover

    def discover_then_rename(*args, **kwargs):
        found = real_discover(*args, **kwargs)
        model.rename(away)  # a folder renamed mid-run, say
        return found

    monkeypatch.setattr(tlint.engine, "discover", discover_then_rename)
    out = lint(demo, capsys, monkeypatch)[0]
    assert "cannot read file" in out
    monkeypatch.setattr(tlint.engine, "discover", real_discover)
    away.rename(model)
    assert lint(demo, capsys, monkeypatch)[0] == clean


def test_an_input_file_is_recorded_as_the_analysis_read_it(tmp_path, capsys, monkeypatch):
    """A DeepSpeed JSON changed after the view read it and before the entry is stored:
    the entry holds the digest of what the analysis used, so the next run sees the change."""
    root = make_project(tmp_path / "p", {"train.py": DEEPSPEED_SCRIPT, "tlint.toml": SELECT_TL301, "ds.json": '{"train_batch_size": 8}\n'})
    real_store = tlint.cache.FileCache.store

    def edit_then_store(self, path, key, settings, result, **kw):
        (root / "ds.json").write_text('{"train_batch_size": 8, "gradient_clipping": 1.0}\n')
        return real_store(self, path, key, settings, result, **kw)

    monkeypatch.setattr(tlint.cache.FileCache, "store", edit_then_store)
    first = lint(root, capsys, monkeypatch)[0]
    assert '"TL301"' in first  # analysed with the JSON as it was
    monkeypatch.setattr(tlint.cache.FileCache, "store", real_store)
    shutil.rmtree(root / CACHE_DIR_NAME / "runs", ignore_errors=True)
    out = lint(root, capsys, monkeypatch)[0]
    assert out == lint(root, capsys, monkeypatch, "--no-cache")[0]
    assert '"TL301"' not in out


@pytest.mark.parametrize("what", ["file", "folder"])
def test_the_memo_follows_a_retargeted_link(tmp_path, capsys, monkeypatch, what):
    root = make_project(tmp_path / "p", {
        "a/train.py": "import torch\n\n\ndef f(model, batch):\n    return model(batch)\n",
        "b/train.py": (REPO / "fixtures" / "demo" / "train.py").read_text(),
    })
    for path in root.rglob("*"):
        os.utime(path, (1_600_000_000, 1_600_000_000))
    link = root / ("link.py" if what == "file" else "link")
    target = (lambda side: root / side / "train.py") if what == "file" else (lambda side: root / side)
    link.symlink_to(target("a"))
    named = "link.py" if what == "file" else "link"

    def run(*flags):
        proc = main_in(root, "check", "--format", "json", "--jobs", "1", "--exit-zero", "--verbose", *flags, named,
                       capsys=capsys, monkeypatch=monkeypatch)
        return proc.stdout, MEMO_HIT in proc.stderr

    run()
    assert run()[1]
    link.unlink()
    link.symlink_to(target("b"))
    os.utime(root, (1_600_000_000, 1_600_000_000))  # the folder's own change hidden
    out, hit = run()
    assert not hit
    assert out == run("--no-cache")[0]


def test_the_key_file_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    signed._load_key.cache_clear()
    try:
        key = signed.secret()
        assert key is not None and len(key) == 32
        mode = stat.S_IMODE(os.stat(signed.key_path()).st_mode)
        assert mode == 0o600
        assert signed.secret() == key
    finally:
        signed._load_key.cache_clear()


def test_no_key_can_be_made_then_nothing_is_cached(demo, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the key's folder cannot be created
    signed._load_key.cache_clear()
    try:
        assert signed.secret() is None
        assert lint(demo, capsys, monkeypatch)[0] == lint(demo, capsys, monkeypatch, "--no-cache")[0]
        assert not list((demo / CACHE_DIR_NAME).rglob("*.json"))
    finally:
        signed._load_key.cache_clear()
