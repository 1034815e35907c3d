"""Signed data files: how tlint's cache entries, import scans and run memos are stored.

Nothing tlint reads back from disk can run code or claim a result tlint did not compute:

- **Data only.** A file holds JSON. The few value types JSON lacks are tagged objects
  (`{"(": [...]}` a tuple, `{"{": [...]}` a set, `{"/": "..."}` a path, `{"!": [[k, v],
  ...]}` a mapping whose keys are not plain strings or collide with a tag, `{"@": "Name",
  "f": [...]}` one of the dataclasses in `_TYPES`, built from its fields). Decoding builds
  those and nothing else: no import, no call chosen by the file.
- **Signed.** The first line is `tlint-signed <format> <MAC>`: a keyed BLAKE2b of the rest
  under a secret of this user's, made once with `os.urandom` and kept in the user cache
  folder (`$XDG_CACHE_HOME/tlint/cache-key`, else `~/.cache/tlint/cache-key`), mode 0600,
  outside any repository. A file this installation did not write (committed to a
  repository, copied from another machine, edited) fails the check and is a cache miss;
  it is never decoded. The key is refused (and the cache is off) when it is not a regular
  file of this user's that only this user can write, and for a project whose own folder
  holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import fields, is_dataclass
from functools import lru_cache
from pathlib import Path, PurePath
from typing import Any

FORMAT = 3  # 2: the pickled cache of tlint 0.1 was dropped (never opened); 3: typed project facts
_MAGIC = b"tlint-signed"
_KEY_BYTES = 32
_TAGS = frozenset(("(", "{", "/", "!", "@"))


# --- the key ----------------------------------------------------------------------------


def key_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "")
    folder = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return folder / "tlint" / "cache-key"


@lru_cache(maxsize=4)
def _load_key(path: str) -> bytes | None:
    """The secret at `path`, created (atomically, 0600) when absent; None when it cannot
    be made or is not trustworthy (then nothing is cached)."""
    from tlint import bounded

    def trusted(info: os.stat_result) -> None:
        if info.st_mode & 0o022 or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
            raise bounded.Refused("writable by others, or not this user's", "owner")

    for _ in range(2):
        try:
            data = bounded.read_bytes(path, 4 * _KEY_BYTES, follow_links=False, check=trusted)
        except FileNotFoundError:
            if not _create_key(path):
                return None
            continue
        except OSError:
            return None
        try:
            key = bytes.fromhex(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            return None
        return key if len(key) == _KEY_BYTES else None
    return None


def _create_key(path: str) -> bool:
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        temp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, os.urandom(_KEY_BYTES).hex().encode("ascii") + b"\n")
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
        return True
    except OSError:
        return False


def secret(root: Path | None = None) -> bytes | None:
    """This user's signing key, or None (no key can be had: cache nothing). With `root`,
    also None when the key lies inside that project folder (a repository that carries a
    `.cache/tlint/cache-key` and is linted with HOME set to it must not choose the key)."""
    path = key_path()
    if root is not None:
        try:
            if path.resolve().is_relative_to(root.resolve()):
                return None
        except (OSError, RuntimeError):
            return None
    return _load_key(os.fspath(path))


# --- the codec --------------------------------------------------------------------------

_TYPES: dict[str, type] = {}


def register(*classes: type) -> None:
    """Allow these dataclasses in signed files (by class name), besides tlint's own."""
    _default_types()
    _add(classes)


def _add(classes: tuple[type, ...]) -> None:
    for cls in classes:
        assert is_dataclass(cls)
        _TYPES[cls.__name__] = cls


_DEFAULTS_ADDED: list[bool] = []


def _default_types() -> None:
    if _DEFAULTS_ADDED:
        return
    _DEFAULTS_ADDED.append(True)
    from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range
    from tlint.fact_data import FACT_TYPES
    from tlint.results import Fact, FileResult, PendingDiagnostic, ProjectCondition
    from tlint.suppressions import Suppression

    _add((Position, Range, Edit, Fix, Diagnostic, Fact, PendingDiagnostic, FileResult, ProjectCondition,
          Suppression, *FACT_TYPES))


def _plain(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [_plain(v) for v in value]
    if kind is tuple:
        return {"(": [_plain(v) for v in value]}
    if kind is dict:
        if all(type(k) is str and k not in _TAGS for k in value):
            return {k: _plain(v) for k, v in value.items()}
        return {"!": [[_plain(k), _plain(v)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"{": sorted((_plain(v) for v in value), key=_order)}
    if isinstance(value, PurePath):
        return {"/": os.fspath(value)}
    name = kind.__name__
    if _TYPES.get(name) is kind:
        return {"@": name, "f": [_plain(getattr(value, f.name)) for f in fields(value) if f.init]}
    raise TypeError(f"cannot store a {name} in a signed file")


def _order(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        (tag, value), = obj.items()
        if tag == "(":
            return tuple(value)
        if tag == "{":
            return set(value)
        if tag == "/":
            if type(value) is not str:
                raise ValueError("a path is a string")
            return Path(value)
        if tag == "!":
            return {_frozen(k): v for k, v in value}
    elif "@" in obj:
        cls = _TYPES.get(obj["@"]) if type(obj["@"]) is str else None
        values = obj.get("f")
        if cls is None or type(values) is not list or len(obj) != 2:
            raise ValueError(f"not a stored type: {obj.get('@')!r}")
        names = [f.name for f in fields(cls) if f.init]
        if len(values) != len(names):
            raise ValueError(f"{cls.__name__}: {len(values)} fields, expected {len(names)}")
        return cls(*values)
    return obj


def _frozen(key: Any) -> Any:
    return frozenset(key) if type(key) is set else key


def dumps(value: Any, key: bytes) -> bytes:
    """`value` as a signed data file."""
    _default_types()
    payload = json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False,
                         check_circular=False).encode("utf-8", "surrogatepass")
    return b"%s %d %s\n%s" % (_MAGIC, FORMAT, _mac(key, payload).encode("ascii"), payload)


def loads(data: bytes, key: bytes) -> Any:
    """The value of a signed data file; ValueError when it is not one this key signed
    (its payload is then never decoded)."""
    header, newline, payload = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != _MAGIC or parts[1] != b"%d" % FORMAT:
        raise ValueError("not a signed tlint file of this format")
    if not hmac.compare_digest(parts[2], _mac(key, payload).encode("ascii")):
        raise ValueError("signature does not match")
    _default_types()
    return json.loads(payload.decode("utf-8", "surrogatepass"), object_hook=_hook)


def _mac(key: bytes, payload: bytes) -> str:
    return hashlib.blake2b(payload, key=key, digest_size=32).hexdigest()


def read(path: Path | str, key: bytes, limit: int = 1 << 30) -> Any:
    """`loads` of a regular file (not through a link; at most `limit` bytes)."""
    from tlint import bounded

    try:
        data = bounded.read_bytes(path, limit, follow_links=False)
    except bounded.Refused:
        raise ValueError("not a regular file of a plausible size") from None
    return loads(data, key)
