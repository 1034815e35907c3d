"""The one atomic writer: the cache, the run memo and `--fix` write files through it."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM wait until the block is done: a write is finished, or
    cleaned up, before the interrupt is raised. Only in the main thread, where Python
    handles signals; elsewhere a no-op."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    blocked = {signal.SIGINT, signal.SIGTERM}
    previous = mask(signal.SIG_BLOCK, blocked)
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, previous)


def write_bytes_atomic(target: Path, payload: bytes, *, mode: int | None = None, durable: bool = False,
                       prefix: str = ".tmp-", suffix: str | None = None) -> None:
    """Write `target` through a temporary file in its folder and a rename: a reader sees
    the old file or the new one, never a part; the temporary file is removed on failure.
    `mode`: the permission bits the new file gets; `durable`: flushed to disk before the
    rename (a user's source file, not a cache entry). Ctrl-C waits until the temporary file
    is renamed or removed (`deferred_interrupts`): none is ever left behind."""
    with deferred_interrupts():
        _write(target, payload, mode, durable, prefix, suffix)


def _write(target: Path, payload: bytes, mode: int | None, durable: bool, prefix: str, suffix: str | None) -> None:
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=target.suffix if suffix is None else suffix)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(payload)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temp, mode & 0o7777)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
