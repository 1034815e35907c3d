"""The one atomic writer: the cache, the run memo and `--fix` write files through it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(target: Path, payload: bytes, *, mode: int | None = None, durable: bool = False,
                       prefix: str = ".tmp-", suffix: str | None = None) -> None:
    """Write `target` through a temporary file in its folder and a rename: a reader sees
    the old file or the new one, never a part; the temporary file is removed on failure.
    `mode`: the permission bits the new file gets; `durable`: flushed to disk before the
    rename (a user's source file, not a cache entry)."""
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
