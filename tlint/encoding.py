"""Decoding source files as Python does: a light module (no LibCST), shared by the engine,
the reporters' code frames and the fixes."""

from __future__ import annotations

import io
import tokenize


def decode_source(data: bytes) -> str:
    """Decode like Python does (BOM, PEP 263 cookie, default UTF-8); raises on bad bytes."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text
