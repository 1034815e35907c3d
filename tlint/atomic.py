"""The one atomic writer: the cache, the run memo and `--fix` write files through it."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tlint.bounded import check_replaceable


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM wait until the block is done: a write is finished, or
    cleaned up, before the interrupt is acted on. Only in the main thread, where Python
    handles signals; elsewhere a no-op.

    The signals are held by a Python handler, not masked: a signal sent to the process
    (Ctrl-C in a terminal, `kill`) is delivered by the kernel to any thread that does not
    block it, and a process with other threads (torch's, a pool's) would take it in one of
    them and raise it in the main thread at once. Python runs every handler in the main
    thread, so the holding handler sees it whichever thread received it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: object) -> None:
        caught.append(signum)

    previous: dict[int, object] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, hold)
        except (ValueError, OSError):  # pragma: no cover - not settable here
            pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        if caught:
            _deliver(caught[0], previous.get(caught[0]))


def _deliver(signum: int, handler: object) -> None:
    """Act on a held signal as its handler before the block would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.raise_signal(signum)  # SIGTERM's default: the process ends


def write_bytes_atomic(target: Path, payload: bytes, *, mode: int | None = None, durable: bool = False,
                       prefix: str = ".tmp-", suffix: str | None = None,
                       check: Callable[[], None] | None = None) -> None:
    """Write `target` through a temporary file in its folder and a rename: a reader sees
    the old file or the new one, never a part; the temporary file is removed on failure.
    `mode`: the permission bits the new file gets; `durable`: flushed to disk before the
    rename (a user's source file, not a cache entry). Ctrl-C waits until the temporary file
    is renamed or removed (`deferred_interrupts`): none is ever left behind. A link at
    `target` is replaced, never followed; a FIFO, a device or a folder there is refused
    (`tlint.bounded.Refused`). `check` runs once the temporary file is written, just
    before the rename: what it raises cancels the write (the temporary file is removed)."""
    with deferred_interrupts():
        _write(target, payload, mode, durable, prefix, suffix, check)


def _write(target: Path, payload: bytes, mode: int | None, durable: bool, prefix: str, suffix: str | None,
           check: Callable[[], None] | None) -> None:
    check_replaceable(target)  # a FIFO, a device or a folder there is refused, not replaced
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=target.suffix if suffix is None else suffix)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(payload)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temp, mode & 0o7777)
        if check is not None:
            check()
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
