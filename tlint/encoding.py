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


# What a terminal (or a CI log viewer) would act on instead of showing: C0 controls (ESC
# starts the sequences that clear the screen or move the cursor), DEL, C1 controls, the
# bidirectional overrides and isolates (they reorder what is shown), and lone surrogates
# (a notebook's JSON may hold them; no stream can encode them).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                                   "\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`printable(text)` with every character a terminal would act on rather than show
    written as an escape (`\\x1b`, `\\u202e`, `\\ud800`), as git quotes such file names:
    for file names and messages in the formats read on a terminal (text, concise, github,
    doctor's text). `keep_newlines`: a line break stays one (a multi-line message)."""
    text = printable(text)
    if text.isascii() and text.isprintable():
        return text
    return (_UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE).sub(_escaped, text)


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the control pictures: one column each, as the character was
    return "\u2421" if code == 0x7F else "\ufffd"


_UNSAFE_IN_FRAME = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                              "\ud800-\udfff]")


def frame_safe(line: str) -> str:
    """A source line as a code frame shows it: each control character as its control
    picture (`␛` for ESC, one column, so the carets below stay aligned), other characters a
    terminal would act on (C1 controls, bidirectional controls, lone surrogates) as `\ufffd`.
    A tab is left for the frame to expand."""
    if line.isascii() and line.isprintable():
        return line
    return _UNSAFE_IN_FRAME.sub(_picture, line)


def raw_name(text: str) -> bytes:
    """The bytes of a file name as Python decoded it (for URIs, which percent-encode them)."""
    return os.fsencode(text) if not text.isascii() else text.encode()
