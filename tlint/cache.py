"""The per-file result cache: `.tlint_cache/` at each project root (or `cache-dir`).

One entry per linted file, named by a hash of the file's absolute path and overwritten
when the file, its configuration or tlint changes, so the cache never holds more than one
entry per file. An entry is the `FileResult` of `analyse_file` as signed JSON
(`signed.py`: data only, and trusted only under this user's key): the diagnostics, the
pending cross-file findings, the facts with their ranges, the suppression comments, under
a key made of everything the analysis depends on:

- the file's bytes (a content hash of the one read the analysis used), its absolute path
  and its display path;
- tlint itself: its version, the size and modification time of every module of the
  package (so an edited rule invalidates during development), the Python and LibCST
  versions (they decide what parses);
- the effective configuration of the file's project (every setting: selected rules,
  rule options, `causal-names`, ...) and the codes it enables;
- the other files the analysis read (DeepSpeed JSON configs named by literal paths,
  recorded through `note_input`), by the content hash of the bytes the analysis read,
  absent ones included.

The project phase's import scan (which files import which) is cached too, in one table
per project (`imports.json`): each file's scanned module names under a key made of its
`stat` (size, modification and change times in nanoseconds, inode), so a warm run does not
even read the files whose key is unchanged. The key is the cheapest one that needs no
read; it is safe because a scan is only stored for a file whose modification time is at
least two seconds old when the table is written (a file rewritten within the timestamp
granularity of its file system, with the same size, would otherwise keep a stale scan;
such "racy" files are simply scanned again next run, as git does with its index), and the
change time moves on every write, even when a tool restores the modification time.

A warm run therefore parses nothing that did not change, and the cross-file phase runs
from the cached facts as it does from fresh ones. Entries are written atomically (a
temporary file, then `os.replace`); an entry that cannot be read, is not signed by this
user's key or does not match is a miss and is rebuilt. A file that could not be read is
never stored. Nothing here ever fails a run: a cache that cannot be written is not
written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from tlint import bounded, signed
from tlint.atomic import write_bytes_atomic  # noqa: F401 - the memo and tests use it from here

if TYPE_CHECKING:
    from tlint.config import Settings
    from tlint.results import FileResult

CACHE_DIR_NAME = ".tlint_cache"
# Set (to anything but "" or "0") to disable the cache, as `--no-cache` does.
NO_CACHE_ENV = "TLINT_NO_CACHE"
# Written into every cache folder: `tlint clean` removes only folders that carry it.
_GITIGNORE = "# Created by tlint: this folder is tlint's cache (`tlint clean` removes it).\n*\n"
_ENTRIES = "files"
_IMPORTS = "imports.json"  # the project phase's import scans, one table per project


def cache_disabled_by_env() -> bool:
    return os.environ.get(NO_CACHE_ENV, "") not in ("", "0")


def cache_dir_for(settings: Settings) -> Path:
    """The cache folder of a project: `cache-dir` (relative to the project root), or
    `.tlint_cache/` at the root."""
    configured = getattr(settings, "cache_dir", None)
    if configured is None:
        return settings.root / CACHE_DIR_NAME
    return (settings.root / configured).resolve()


def is_cache_dir(folder: Path) -> bool:
    """True for a folder tlint created as its cache (it carries tlint's `.gitignore`)."""
    try:
        return bounded.read_text(folder / ".gitignore", bounded.SMALL_BYTES, follow_links=False) == _GITIGNORE
    except (OSError, UnicodeDecodeError):
        return False


def remove_cache_dir(folder: Path) -> bool:
    """Remove a tlint cache folder; False if it is absent or not tlint's."""
    if not folder.is_dir() or folder.is_symlink() or not is_cache_dir(folder):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


# --- files read during an analysis ------------------------------------------------------

_INPUT_LIMIT = 2_000_000  # other files are read up to this size (DeepSpeed JSON configs)


def note_input(path: Path) -> None:
    """Tell the run memo that the analysis read (or looked for) `path` (the cache entry
    records the digest itself: `FileContext.read_input`)."""
    from tlint.memo import seen_file

    seen_file(path)


def digest_bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_input(path: Path, limit: int = _INPUT_LIMIT) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes, else None; never follows into
    a FIFO or a device and never reads more than the limit (`tlint.bounded`)."""
    try:
        return bounded.read_bytes(path, limit)
    except OSError:
        return None


def input_digest(path: Path, data: bytes | None = None) -> str | None:
    """What an input file is: the digest of its content (`data` when the caller already
    read it with `read_input`), a marker for a file that is not read (not regular, too
    large), or None when it is absent."""
    if data is None:
        data = read_input(path)
    if data is not None:
        return digest_bytes(data)
    try:
        info = os.stat(path)
    except OSError:
        return None
    return f"unread:{info.st_mode:o}:{info.st_size}"


# --- keys -------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """tlint's version and the state of its modules, the Python and LibCST versions."""
    from importlib.util import find_spec

    from tlint import __version__

    package = Path(__file__).resolve().parent
    parts = [__version__, sys.version, _libcst_version(find_spec("libcst")), str(signed.FORMAT)]
    for folder, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                try:
                    stat = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                rel = os.path.relpath(os.path.join(folder, name), package)
                parts.append(f"{rel}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def _libcst_version(spec) -> str:
    """LibCST's version without importing it (the warm path does not need it): its
    `_version.py`, or the size and time of its `__init__.py`."""
    if spec is None or not spec.origin:
        return "?"
    package = Path(spec.origin).parent
    try:
        return bounded.read_text(package / "_version.py", bounded.SMALL_BYTES)
    except (OSError, UnicodeDecodeError):
        try:
            stat = os.stat(spec.origin)
        except OSError:
            return "?"
        return f"{spec.origin}:{stat.st_size}:{stat.st_mtime_ns}"


def settings_fingerprint(settings: Settings) -> str:
    """Every setting of the project (conservatively: those applied after the analysis,
    such as `per-file-ignores`, too) and the rule codes they enable."""
    values = {f.name: getattr(settings, f.name) for f in fields(settings) if not f.name.startswith("_")}
    values["enabled"] = sorted(settings.enabled_codes())
    text = json.dumps(values, sort_keys=True, default=_plain)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _plain(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


# --- the cache --------------------------------------------------------------------------


class FileCache:
    """Lookups and stores of `FileResult`s, for the files of any number of projects.

    `prefilter` is part of every key (a pre-filtered result has no tree-based facts)."""

    def __init__(self, prefilter: bool = True) -> None:
        self._settings_keys: dict[int, tuple[Settings, str]] = {}
        self._ready: dict[Path, bool] = {}
        self._secrets: dict[Path, bytes | None] = {}
        self.prefilter = prefilter
        self.hits = self.misses = 0

    def secret(self, settings: Settings) -> bytes | None:
        """The signing key for this project's entries (None: nothing is read or written)."""
        root = settings.root
        if root not in self._secrets:
            self._secrets[root] = signed.secret(root)
        return self._secrets[root]

    def key(self, path: Path, display: str, settings: Settings, data: bytes) -> str:
        cached = self._settings_keys.get(id(settings))
        if cached is None or cached[0] is not settings:
            cached = self._settings_keys[id(settings)] = (settings, settings_fingerprint(settings))
        content = digest_bytes(data)
        return "\0".join((code_fingerprint(), cached[1], str(path), display, content, str(self.prefilter)))

    def _entry(self, path: Path, settings: Settings) -> Path:
        name = hashlib.blake2b(str(path).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        return cache_dir_for(settings) / _ENTRIES / name[:2] / f"{name}.json"

    def load(self, path: Path, key: str, settings: Settings, *, facts_only: bool = False) -> FileResult | None:
        """The stored result for `path` under `key`, or None (absent, stale, unreadable,
        not signed by this user's key). A full result also answers a `facts_only` request
        (its facts are the same)."""
        from tlint.results import FileResult

        secret = self.secret(settings)
        valid = False
        if secret is not None:
            try:
                stored_key, stored_facts_only, inputs, result = signed.read(self._entry(path, settings), secret)
                valid = (stored_key == key and type(result) is FileResult and (facts_only or not stored_facts_only)
                         and all(input_digest(Path(p)) == digest for p, digest in inputs))
            except Exception:  # absent, truncated, corrupt, unsigned, from another format: a miss
                valid = False
        if not valid:
            self.misses += 1
            return None
        self.hits += 1
        result.path = path
        result.inputs = {Path(p): digest for p, digest in inputs}
        return result

    def store(self, path: Path, key: str, settings: Settings, result: FileResult, *,
              facts_only: bool = False) -> None:
        """Write the entry atomically; a failure to write is silent (the run goes on). A
        result that could not read its file (TL001 "cannot read") is never stored."""
        secret = self.secret(settings)
        if secret is None or result.unreadable:
            return
        inputs = [(str(p), digest) for p, digest in sorted(result.inputs.items())]
        bare = replace(result, path=None, inputs={})  # type: ignore[arg-type]  # restored on load
        try:
            payload = signed.dumps((key, facts_only, inputs, bare), secret)
        except Exception:  # a result that does not serialise is simply not cached
            return
        target = self._entry(path, settings)
        try:
            self._prepare(cache_dir_for(settings))
            target.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(target, payload)
        except OSError:
            return

    # --- the project phase's import scan ---------------------------------------------

    def load_imports(self, settings: Settings) -> dict[str, tuple[tuple[int, ...], list[str]]]:
        """The stored import scans of a project's files: {path: (stat key, imports)}, or {}
        (absent, unreadable, unsigned, from another tlint)."""
        secret = self.secret(settings)
        if secret is None:
            return {}
        try:
            fingerprint, table = signed.read(cache_dir_for(settings) / _IMPORTS, secret)
            if fingerprint == code_fingerprint() and type(table) is dict:
                return table
        except Exception:  # absent, truncated, corrupt: scan afresh
            pass
        return {}

    def store_imports(self, settings: Settings, table: dict[str, tuple[tuple[int, ...], list[str]]]) -> None:
        """Write the import scans atomically; silent on failure, like `store`."""
        secret = self.secret(settings)
        if secret is None:
            return
        folder = cache_dir_for(settings)
        try:
            payload = signed.dumps((code_fingerprint(), table), secret)
            self._prepare(folder)
            write_bytes_atomic(folder / _IMPORTS, payload)
        except Exception:
            return

    def _prepare(self, folder: Path) -> None:
        """Create the cache folder with its `.gitignore`, once per run and folder. A folder
        that exists, is not empty and is not tlint's (a `cache-dir` pointing at the user's
        files) is never written into: raises OSError, and nothing is cached there."""
        ready = self._ready.get(folder)
        if ready is None:
            ready = self._ready[folder] = self._adopt(folder)
        if not ready:
            raise OSError(f"{folder} is not a tlint cache folder")

    @staticmethod
    def _adopt(folder: Path) -> bool:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if is_cache_dir(folder):
                return True
            if any(folder.iterdir()):
                return False
            write_bytes_atomic(folder / ".gitignore", _GITIGNORE.encode("utf-8"))
            return True
        except OSError:
            return False
