"""What a long-lived process keeps of a project between runs: the language server lints
the edited text on every keystroke, and its cross-file phase needs the facts and imports
of every related file on disk. Without memory, each keystroke re-read and re-parsed them
all (about 8 s for a file importing a large package); with it, only the edited file is
analysed again, and a file on disk only when its `stat` key changed.

A `ProjectMemory` is handed to `Linter(memory=...)`. It holds, per file on disk:
- its facts-only `FileResult`, under its stat key (size, modification and change times,
  inode), the fingerprint of its settings and the digests of the files its analysis read
  (DeepSpeed JSON configs);
- its import scan, under its stat key (the format of the cache's import table).

A file written in the last two seconds is not kept (its stat key could survive one more
write within the same timestamp tick), as in the disk cache. Nothing is written to disk:
`tlint check --stdin-filename` and the language server leave no cache in a project.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tlint.config import Settings
    from tlint.results import FileResult

_SETTLE_NS = 2_000_000_000
_MAX_FILES = 50_000  # more than this many files remembered: start afresh


def stat_key(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


class ProjectMemory:
    def __init__(self) -> None:
        self.facts: dict[Path, tuple[tuple[int, ...], str, bool, FileResult]] = {}
        self.imports: dict[str, tuple[tuple[int, ...], list[str]]] = {}
        self._fingerprints: dict[int, tuple[Settings, str]] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0  # for tests and measurements

    def _fingerprint(self, settings: Settings) -> str:
        cached = self._fingerprints.get(id(settings))
        if cached is None or cached[0] is not settings:
            from tlint.cache import settings_fingerprint

            if len(self._fingerprints) > 256:
                self._fingerprints.clear()
            cached = self._fingerprints[id(settings)] = (settings, settings_fingerprint(settings))
        return cached[1]

    def facts_of(self, path: Path, settings: Settings, prefilter: bool,
                 analyse: Callable[[], FileResult]) -> FileResult:
        """The facts-only result of `path` on disk: remembered while the file, its settings
        and its inputs are unchanged, else `analyse()` (then remembered)."""
        from tlint.cache import input_digest

        try:
            info = os.stat(path)
        except OSError:
            return analyse()
        key = stat_key(info)
        fingerprint = self._fingerprint(settings)
        with self._lock:
            entry = self.facts.get(path)
        if (entry is not None and entry[0] == key and entry[1] == fingerprint and entry[2] == prefilter
                and all(input_digest(p) == digest for p, digest in entry[3].inputs.items())):
            self.hits += 1
            return entry[3]
        self.misses += 1
        result = analyse()
        settled = time.time_ns() - _SETTLE_NS
        if not result.unreadable and info.st_mtime_ns < settled and info.st_ctime_ns < settled:
            with self._lock:
                if len(self.facts) >= _MAX_FILES:
                    self.facts.clear()
                self.facts[path] = (key, fingerprint, prefilter, result)
        return result

    def store_imports(self, table: dict[str, tuple[tuple[int, ...], list[str]]]) -> None:
        """Remember the settled import scans of one project's files (`Project._scan_imports`)."""
        with self._lock:
            if len(self.imports) + len(table) > _MAX_FILES:
                self.imports.clear()
            self.imports.update(table)
