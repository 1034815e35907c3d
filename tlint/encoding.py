"""Decoding source files as Python does: a light module (no LibCST), shared by the engine,
the reporters' code frames and the fixes."""

from __future__ import annotations

import io
import os
import re
import tokenize

_UNDECODED = re.compile("[\udc80-\udcff]")  # bytes a file name had that were not UTF-8


def decode_source(data: bytes) -> str:
    """Decode like Python does (BOM, PEP 263 cookie, default UTF-8); raises on bad bytes."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def printable(text: str) -> str:
    """`text` (a file name as Python decodes them: each byte that is not valid UTF-8 as a
    lone surrogate) with each such byte written `\\xNN`, as every reporter writes it."""
    if text.isascii() or not _UNDECODED.search(text):
        return text
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def raw_name(text: str) -> bytes:
    """The bytes of a file name as Python decoded it (for URIs, which percent-encode them)."""
    return os.fsencode(text) if not text.isascii() else text.encode()
