"""The one door through which tlint opens a file: every read is bounded, every write goes
to a plain file only. A light module (no third-party import).

Reading (`read_bytes`, `read_text`): the file is opened without blocking (a FIFO named
`x.py` or `tlint.toml` cannot hang the open) and without becoming the controlling terminal;
its type is checked on the open descriptor (`fstat`), so only a regular file is read (a
link to `/dev/zero` or `/dev/stdin` is refused, and so is a file swapped for one between a
check and the open); and at most `limit` + 1 bytes are ever read: a file over the limit,
or one that grows past it while it is read, is refused.

Writing (`open_output`; `tlint.atomic.write_bytes_atomic` replaces a file by a rename): the
last part of the path is never followed as a link (`O_NOFOLLOW`), the file is opened
without blocking, and only a regular file (or a new one) is written: a FIFO, a device or a
folder is refused before anything is written.

A refusal is `Refused`, an `OSError` (callers that handle a file that cannot be read
handle it too) whose message says why in words.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import IO, Any

# What tlint reads, and how much of it at most.
SOURCE_BYTES = 2**20  # a Python module (tlint/reading.py says why)
NOTEBOOK_BYTES = 16 * 2**20  # a notebook's JSON, outputs included (tlint/reading.py)
CONFIG_BYTES = 4 * 2**20  # tlint.toml, pyproject.toml
GIT_FILE_BYTES = 4 * 2**20  # .gitignore, .git/info/exclude, core.excludesFile, .git/config, a `.git` file
SMALL_BYTES = 64 * 2**10  # a small file of tlint's own (its cache folder's marker, LibCST's version)

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_COMMON = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
_READ_FLAGS = os.O_RDONLY | _NONBLOCK | _COMMON
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | _NONBLOCK | _NOFOLLOW | _COMMON


class Refused(OSError):
    """A file tlint will not read or write. `kind`: "type" (not a regular file), "size"
    (over the limit), "link" (a link where none is followed), or what a `read_bytes` check
    names. `size` and `limit` in bytes for a "size" refusal."""

    def __init__(self, reason: str, kind: str, *, mode: int = 0, size: int = 0, limit: int = 0) -> None:
        super().__init__(reason)
        self.strerror = reason
        self.kind, self.mode, self.size, self.limit = kind, mode, size, limit


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a FIFO", ...)."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a plain file"


def size_words(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size:,} bytes"


def limit_words(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 and limit % 2**20 == 0 else f"{limit:,} bytes"


def _too_large(size: int, limit: int) -> Refused:
    return Refused(f"too large: {size_words(size)}, over the {limit_words(limit)} limit", "size",
                   size=size, limit=limit)


def read_bytes(path: str | os.PathLike[str], limit: int, *, follow_links: bool = True,
               check: Callable[[os.stat_result], None] | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; `Refused` (an
    `OSError`) when it is not a regular file, is larger or grows larger while read, or is a
    link and `follow_links` is False; `OSError` when it cannot be opened or read. `check`
    sees the open file's `fstat` before anything is read and may refuse it (raise)."""
    flags = _READ_FLAGS | (0 if follow_links else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and os.path.islink(path):
            raise Refused("a symbolic link: not followed", "link") from None
        raise exc from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"not a regular file: {kind_of(info.st_mode)}", "type", mode=info.st_mode)
        if info.st_size > limit:
            raise _too_large(info.st_size, limit)
        if check is not None:
            check(info)
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, max(info.st_size + 1, 65536)))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:  # it grew after the size check
        raise _too_large(len(data), limit)
    return data


def read_text(path: str | os.PathLike[str], limit: int, *, encoding: str = "utf-8", errors: str = "strict",
              follow_links: bool = True) -> str:
    """`read_bytes`, decoded (a UTF-8 BOM is dropped with `encoding="utf-8-sig"`); a
    UnicodeDecodeError as `str.decode` raises it."""
    return read_bytes(path, limit, follow_links=follow_links).decode(encoding, errors)


def source_limit(path: str | os.PathLike[str]) -> int:
    """How much of a source file is read: a notebook's JSON may be larger than a module."""
    return NOTEBOOK_BYTES if os.fspath(path)[-6:].lower() == ".ipynb" else SOURCE_BYTES


# --- writing --------------------------------------------------------------------------------


def open_output(path: str | os.PathLike[str], *, binary: bool = False, encoding: str = "utf-8",
                newline: str | None = None, create: bool = True) -> IO[Any]:
    """`path` opened for writing, emptied, as a text stream (or a binary one): created if
    absent (unless `create` is False: then FileNotFoundError). Refused (`Refused`) when it
    is a link (not followed, whatever it points to) or exists and is not a regular file: a
    FIFO without waiting for a reader, a device or a folder before anything is written."""
    try:
        fd = os.open(path, _WRITE_FLAGS if create else _WRITE_FLAGS & ~os.O_CREAT, 0o666)
    except OSError as exc:
        refusal = _output_refusal(path)
        if refusal is not None:
            raise refusal from None
        raise exc from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"not a regular file: {kind_of(info.st_mode)}", "type", mode=info.st_mode)
        os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        if binary:
            return os.fdopen(fd, "wb")
        return os.fdopen(fd, "w", encoding=encoding, newline=newline)
    except BaseException:
        os.close(fd)
        raise


def _output_refusal(path: str | os.PathLike[str]) -> Refused | None:
    """Why an output path that could not be opened is refused (a link, a FIFO with no
    reader, a folder), or None for an ordinary failure (no permission, no such folder)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return Refused("a symbolic link: tlint does not write through one", "link", mode=info.st_mode)
    if not stat.S_ISREG(info.st_mode):
        return Refused(f"not a regular file: {kind_of(info.st_mode)}", "type", mode=info.st_mode)
    return None


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """For a write that replaces `path` by a rename: `Refused` when `path` exists and is
    neither a regular file nor a link (a rename would replace a FIFO, a device or a folder
    entry with a file)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise Refused(f"not a regular file: {kind_of(info.st_mode)}", "type", mode=info.st_mode)
