"""The run memo: a warm `tlint check` with nothing changed answers from one file.

The per-file cache (`cache.py`) spares the parse of unchanged files, but a warm run still
imports LibCST and the rules, walks the folders, resolves the configuration and runs the
cross-file phase. When *nothing* it depends on has changed, the whole result is the same,
so `tlint check` first looks for a memo of the same invocation and checks it with a few
hundred `stat` calls, importing neither LibCST nor any rule.

What a run depends on is recorded while it runs (`seen_folder`, `seen_file`): every folder
it listed (discovery, the project walk, the config and `.gitignore` lookups up to the git
root — a folder's modification time moves when an entry is added, removed or renamed, so
a new file, a new config or a deleted module invalidates), and every file whose content it
used, by `stat` key (size, modification and change times in nanoseconds, inode: the change
time moves on every write). tlint's own modules are covered by the cache's code
fingerprint, which is part of the key together with the working folder (display paths
depend on it), the command-line options that change the result, and the `TLINT_*`
environment. The output options (`--format`, `--statistics`, `--exit-zero`, ...) are not
part of the key: the memo holds the result, which is rendered as usual.

A memo is written only after a clean run (no missing path, no internal error), to the
default cache folder of the first path's project, and only if no recorded file or folder
changed during the run or just before it — 0.1 s where the file system keeps sub-second
times, 2 s where it keeps whole seconds — since a write within the timestamp granularity
would otherwise go unnoticed; the next run then writes it. The cache folder is created
before the run, and that change of its parent folder is tlint's own, so a first cached run
already writes the memo. Reading a memo never fails a run: anything unexpected is a miss.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tlint import signed

_RUNS = "runs"
_KEEP = 16  # memos kept per cache folder (one per distinct invocation)
# A file or folder changed this close to the run's start is "racy": a later change within
# the same timestamp tick could keep its stat key. Two seconds on file systems that keep
# whole seconds only (FAT keeps two), a tenth of a second where times have sub-second parts
# (Linux's coarse clock ticks every few milliseconds).
_SETTLE_NS = 2_000_000_000
_SETTLE_FINE_NS = 100_000_000
_recorder: list[Recorder] = []


class Recorder:
    def __init__(self) -> None:
        self.folders: set[str] = set()
        self.files: set[str] = set()
        self.markers: set[str] = set()
        # folders tlint itself changed at the start of the run (creating its cache folder):
        # {folder: its modification time after that}, exempt from the racy check
        self.own: dict[str, int] = {}
        self.started = time.time_ns()


def seen_folder(path: Path | str) -> None:
    if _recorder:
        _recorder[-1].folders.add(os.fspath(path))


def seen_file(path: Path | str) -> None:
    if _recorder:
        _recorder[-1].files.add(os.fspath(path))


def seen_marker(path: Path | str) -> None:
    """A path whose existence (not content) matters, such as a `.git` that ends the
    config search."""
    if _recorder:
        _recorder[-1].markers.add(os.fspath(path))


@contextmanager
def recording() -> Iterator[Recorder]:
    recorder = Recorder()
    _recorder.append(recorder)
    try:
        yield recorder
    finally:
        _recorder.pop()


class StoredResult:
    """A memo's result: what `engine.RunResult` offers the CLI, without importing the engine."""

    def __init__(self, diagnostics, files, parse_errors, errors, paths, unread=()) -> None:
        self.diagnostics, self.files, self.parse_errors = diagnostics, files, parse_errors
        self.errors, self.paths, self.unread = errors, paths, list(unread)

    @property
    def internal_errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.code == "TL003")


def _file_key(path: str) -> tuple[int, int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def _folder_key(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_ino)


def invocation_key(paths: list[str], options: dict) -> str:
    from tlint.cache import code_fingerprint

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("TLINT_"))
    parts = [code_fingerprint(), sys.version, sys.executable, os.getcwd(), repr(paths),
             repr(sorted(options.items())), repr(env)]
    return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _resolved(paths: list[str]) -> dict[str, str]:
    """What each named path resolves to: a link on the way (the file itself, or a folder
    above it) that is pointed elsewhere changes this, not the stat of what it led to."""
    return {p: os.path.realpath(p) for p in (paths or ["."])}


def _candidates(paths: list[str]) -> Iterator[Path]:
    """Cache folders that may hold this invocation's memo: `.tlint_cache/` in the first
    path's folder and its ancestors (the project root is one of them)."""
    from tlint.cache import CACHE_DIR_NAME

    first = Path(paths[0] if paths else ".")
    try:
        folder = first.resolve()
    except (OSError, RuntimeError):
        return
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        yield candidate / CACHE_DIR_NAME / _RUNS


def load(paths: list[str], options: dict):
    """The stored `RunResult` of this invocation if nothing it depends on changed, else None."""
    try:
        key = invocation_key(paths, options)
        for folder in _candidates(paths):
            entry = folder / f"{key}.json"
            if not os.path.lexists(entry):
                continue
            secret = signed.secret(folder.parent.parent)
            if secret is None:
                return None
            stored_key, links, folders, files, markers, result = signed.read(entry, secret)
            if stored_key != key or _resolved(paths) != links:
                return None
            if any(_folder_key(path) != value for path, value in folders.items()):
                return None
            if any(_file_key(path) != value for path, value in files.items()):
                return None
            if any(os.path.lexists(path) != value for path, value in markers.items()):
                return None
            return StoredResult(*result)
    except Exception:  # a memo is an optimisation: anything odd is a miss
        return None
    return None


def store(paths: list[str], options: dict, recorder: Recorder, result, cache_dir: Path,
          cache_dirs: set[Path]) -> bool:
    """Write the memo of a clean run into `cache_dir/runs/` (see the module docstring)."""
    from tlint.cache import write_bytes_atomic

    try:
        if result.errors or result.internal_errors:
            return False
        skip = tuple(os.fspath(d) for d in cache_dirs)
        folders = {p: _folder_key(p) for p in sorted(recorder.folders)
                   if not any(p == d or p.startswith(d + os.sep) for d in skip)}
        files = {p: _file_key(p) for p in sorted(recorder.files)}
        # change times cannot be set by tools (modification times can: unpacked archives
        # keep whole seconds), so their sub-second parts tell the file system's resolution
        fine = any(v[2] % 1_000_000_000 for v in files.values() if v is not None)
        settled = recorder.started - (min(_SETTLE_NS, _SETTLE_FINE_NS) if fine else _SETTLE_NS)
        for path, value in folders.items():
            if value is None or (value[0] >= settled and recorder.own.get(path) != value[0]):
                return False
        for stat_key in files.values():
            if stat_key is not None and (stat_key[1] >= settled or stat_key[2] >= settled):
                return False
        secret = signed.secret(cache_dir.parent)
        if secret is None:
            return False
        key = invocation_key(paths, options)
        target = cache_dir / _RUNS
        target.mkdir(parents=True, exist_ok=True)
        fields = (result.diagnostics, result.files, result.parse_errors, list(result.errors), dict(result.paths),
                  list(result.unread))
        markers = {p: os.path.lexists(p) for p in sorted(recorder.markers)}
        payload = signed.dumps((key, _resolved(paths), folders, files, markers, fields), secret)
        write_bytes_atomic(target / f"{key}.json", payload)
        _prune(target)
        return True
    except Exception:
        return False


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[_KEEP:]:
        try:
            old.unlink()
        except OSError:
            pass
