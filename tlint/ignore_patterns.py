"""Git's ignore patterns (gitignore(5)) matched as git matches them.

A pattern is parsed from its line as git parses it: trailing unescaped spaces dropped, a
leading `!` negates, one trailing `/` limits it to folders, a pattern without another `/`
is matched against the last path component (basename mode), one with a `/` against the
path relative to its file's folder (pathname mode, one leading `/` dropped).

Matching follows git's wildmatch byte for byte, including the parts a glob library does
not share: `*` and `?` never match `/`; `**` crosses folders only as a whole component
(`**/`, `/**/`, `/**`; a pattern's literal head counts as the start here, as in git, so
`ab**/c` crosses folders); bracket classes take `!` or `^`, ranges, escapes and the
POSIX classes (`[[:upper:]]`, ASCII only); with `core.ignorecase` letters match either
case, except an escaped capital or a capital class member, which then match nothing.
A pattern git cannot match (an unterminated class, an unknown POSIX class, a trailing
backslash, `[z-a]`) matches nothing: it is never an error.

Speed: a file's patterns are indexed so that a path is tested against few of them. Exact
names and paths and `*literal` suffixes are dictionary look-ups; a wildcard pattern is
filed under its literal head, else its literal tail, else a literal run it must contain,
and compiled on first use, so that many patterns cost a few look-ups per path rather than
one regular-expression test each. Only patterns without any literal byte are tried one
by one.
"""

from __future__ import annotations

import functools
import operator
import re

_SPECIAL = b"*?[\\"
_KEY_MAX = 32  # the longest literal head or tail a wildcard pattern is filed under
_INNER_MAX = 6  # the longest part of an inner literal run one is filed under
_SLASH = ord("/")


def _is_upper(c: int) -> bool:
    return 65 <= c <= 90


def _is_lower(c: int) -> bool:
    return 97 <= c <= 122


def _lower(c: int) -> int:
    return c + 32 if _is_upper(c) else c


def _upper(c: int) -> int:
    return c - 32 if _is_lower(c) else c


def _is_punct(c: int) -> bool:
    return 33 <= c <= 126 and not (48 <= c <= 57 or _is_upper(c) or _is_lower(c))


# git's ASCII character classes (git's own ctype: `space` is tab, LF, CR and space)
_POSIX = {
    b"alnum": lambda c: 48 <= c <= 57 or _is_upper(c) or _is_lower(c),
    b"alpha": lambda c: _is_upper(c) or _is_lower(c),
    b"blank": lambda c: c in (9, 32),
    b"cntrl": lambda c: c < 32 or c == 127,
    b"digit": lambda c: 48 <= c <= 57,
    b"graph": lambda c: 33 <= c <= 126,
    b"lower": _is_lower,
    b"print": lambda c: 32 <= c <= 126,
    b"punct": _is_punct,
    b"space": lambda c: c in (9, 10, 13, 32),
    b"upper": _is_upper,
    b"xdigit": lambda c: 48 <= c <= 57 or 65 <= c <= 70 or 97 <= c <= 102,
}


class _NeverMatches(Exception):
    """The pattern cannot match any path (git's wildmatch aborts on it)."""


def _byte_class(members: set[int]) -> bytes:
    """A regular-expression class of exactly `members` (never empty)."""
    out, values, i = [], sorted(members), 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(b"\\x%02x" % values[i] if i == j else b"\\x%02x-\\x%02x" % (values[i], values[j]))
        i = j + 1
    return b"[" + b"".join(out) + b"]"


_EXACT = [b"\\x%02x" % c for c in range(256)]
_EITHER_CASE = [_byte_class({_lower(c), _upper(c)}) if _is_upper(c) or _is_lower(c) else _EXACT[c]
                for c in range(256)]


def _literal(c: int, casefold: bool) -> bytes:
    return _EITHER_CASE[c] if casefold else _EXACT[c]


def _bracket(body: bytes, i: int, casefold: bool) -> tuple[bytes, int]:
    """The class starting at `body[i] == '['`: its regular expression and the index after
    its `]`. Raises _NeverMatches for a class git aborts on or one that matches no byte."""
    end = _parse_class(body, i)[2]
    regex = _class_regex(body[i:end], casefold)
    if regex is None:
        raise _NeverMatches
    return regex, end


@functools.lru_cache(maxsize=1024)
def _class_regex(text: bytes, casefold: bool) -> bytes | None:
    """The regular expression of the class `text` (`[...]`), None if it matches no byte:
    each byte but `/` is tried as git tries it."""
    tests, negated, _ = _parse_class(text, 0)
    members = set()
    for byte in range(1, 256):
        if byte == _SLASH:
            continue
        t = _lower(byte) if casefold else byte
        matched = False
        for test in tests:
            kind = test[0]
            if kind == "eq":
                matched = t == test[1]
            elif kind == "range":
                matched = test[1] <= t <= test[2] or (
                    casefold and _is_lower(t) and test[1] <= _upper(t) <= test[2])
            else:
                matched = test[1](t) or (casefold and test[2] and _is_lower(t))
            if matched:
                break
        if matched != negated:
            members.add(byte)
    return _byte_class(members) if members else None


def _parse_class(body: bytes, i: int) -> tuple[list[tuple], bool, int]:
    """(member tests, negated, index after the `]`) of the class at `body[i] == '['`, read
    as git reads it. Raises _NeverMatches where git aborts."""
    n = len(body)
    p = i + 1
    if p >= n:
        raise _NeverMatches
    negated = body[p] in b"!^"
    if negated:
        p += 1
    tests: list[tuple] = []
    prev = 0
    while True:
        if p >= n:
            raise _NeverMatches
        ch = body[p]
        if ch == 0x5C:  # backslash: the next byte, literally
            p += 1
            if p >= n:
                raise _NeverMatches
            ch = body[p]
            tests.append(("eq", ch))
            current = ch
        elif ch == 0x2D and prev and p + 1 < n and body[p + 1] != 0x5D:  # a range prev-hi
            p += 1
            high = body[p]
            if high == 0x5C:
                p += 1
                if p >= n:
                    raise _NeverMatches
                high = body[p]
            tests.append(("range", prev, high))
            current = 0
        elif ch == 0x5B and p + 1 < n and body[p + 1] == 0x3A:  # `[:name:]`
            start = p + 2
            q = start
            while q < n and body[q] != 0x5D:
                q += 1
            if q >= n:
                raise _NeverMatches
            if q - start - 1 < 0 or body[q - 1] != 0x3A:  # no `:]`: a plain `[`
                tests.append(("eq", 0x5B))
                current = 0x5B
                p = start - 2
            else:
                test = _POSIX.get(body[start:q - 1])
                if test is None:
                    raise _NeverMatches
                tests.append(("posix", test, body[start:q - 1] == b"upper"))
                current = 0
                p = q
        else:
            tests.append(("eq", ch))
            current = ch
        prev = current
        p += 1
        if p >= n:
            raise _NeverMatches
        if body[p] == 0x5D:
            break
    return tests, negated, p + 1


def _translate(body: bytes, start: int, casefold: bool) -> tuple[bytes, bytes, list[bytes]]:
    """(regular expression, literal tail, literal runs) for the wildmatch pattern `body`,
    whose `**` rule counts `body[start]` as the pattern's start. The tail is the run of
    literal bytes a matching path ends with, the runs are those it contains (lower-cased
    under `casefold`). Raises _NeverMatches."""
    out: list[bytes] = [_literal(c, casefold) for c in body[:start]]
    run = bytearray(body[:start])
    runs: list[bytes] = []
    n, i = len(body), start
    while i < n:
        c = body[i]
        if c == 0x5C:  # backslash
            if i + 1 >= n:
                raise _NeverMatches
            c = body[i + 1]
            if casefold and _is_upper(c):
                raise _NeverMatches  # git compares the folded path byte with the capital
            out.append(_literal(c, casefold))
            run.append(c)
            i += 2
            continue
        if c == 0x5B:  # [
            regex, i = _bracket(body, i, casefold)
            out.append(regex)
        elif c == 0x3F:  # ?
            out.append(b"[^/]")
            i += 1
        elif c == 0x2A:  # a run of stars
            j = i
            while j < n and body[j] == 0x2A:
                j += 1
            whole = j - i >= 2 and (i == start or body[i - 1] == _SLASH) and (
                j == n or body[j] == _SLASH or (body[j] == 0x5C and j + 1 < n and body[j + 1] == _SLASH))
            if whole and j < n and body[j] == _SLASH:
                out.append(b"(?:.*/)?")  # `**/`: no folder, or any folders
                j += 1
            else:
                out.append(b".*" if whole else b"[^/]*")
            i = j
        else:
            out.append(_literal(c, casefold))
            run.append(c)
            i += 1
            continue
        if run:  # a wildcard ends the run of literal bytes
            runs.append(bytes(run).lower() if casefold else bytes(run))
        run.clear()
    tail = bytes(run).lower() if casefold else bytes(run)
    if tail:
        runs.append(tail)
    return b"".join(out), tail, runs


_FIRST_SPECIAL = re.compile(rb"[*?\[\\]")


def _simple_length(body: bytes) -> int:
    """The length of the literal head (up to the first `*`, `?`, `[` or backslash)."""
    found = _FIRST_SPECIAL.search(body)
    return len(body) if found is None else found.start()


def _trim_trailing_spaces(line: bytes) -> bytes:
    """git drops unescaped trailing spaces (a backslash keeps the next byte)."""
    if not line.endswith(b" "):
        return line
    last_space = None
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == 0x20:
            if last_space is None:
                last_space = i
        elif c == 0x5C:
            i += 1
            if i >= n:
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def pattern_lines(data: bytes) -> list[bytes]:
    """The lines of an ignore file that may hold a pattern, as git splits them: a UTF-8
    byte-order mark dropped, one CR before each LF dropped, empty lines and `#` comments
    skipped."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    out = []
    for line in data.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        out.append(line[:-1] if line.endswith(b"\r") else line)
    return out


class _Wild:
    """A wildcard pattern: its index, kind, literal head and tail (lower-cased under
    `core.ignorecase`), and its regular expression, compiled on first use."""

    __slots__ = ("index", "dir_only", "basename", "head", "tail", "regex")

    def __init__(self, index: int, dir_only: bool, basename: bool, head: bytes, tail: bytes, regex: bytes) -> None:
        self.index, self.dir_only, self.basename = index, dir_only, basename
        self.head, self.tail = head, tail
        self.regex: re.Pattern[bytes] | bytes = regex

    def matches(self, text: bytes) -> bool:
        """Whether the pattern matches `text` (the name or the relative path)."""
        regex = self.regex
        if type(regex) is bytes:
            regex = self.regex = re.compile(regex, re.DOTALL)
        return regex.fullmatch(text) is not None  # type: ignore[union-attr]


_INDEX = operator.attrgetter("index")


class PatternList:
    """The patterns of one ignore file, asked about paths relative to its folder; the last
    pattern that matches decides (git's order within a file)."""

    def __init__(self, lines: list[bytes], casefold: bool = False) -> None:
        self.casefold = casefold
        self.signs: list[bool] = []  # per line: True ignores, False re-includes (a `!` line)
        # exact look-ups: key -> highest index, for any path and for folders only
        self._names: tuple[dict[bytes, int], dict[bytes, int]] = ({}, {})
        self._paths: tuple[dict[bytes, int], dict[bytes, int]] = ({}, {})
        self._suffixes: dict[int, tuple[dict[bytes, int], dict[bytes, int]]] = {}
        # wildcard patterns filed by head, tail or inner run: (basename mode, key length) -> key -> patterns
        self._heads: dict[tuple[bool, int], dict[bytes, list[_Wild]]] = {}
        self._tails: dict[tuple[bool, int], dict[bytes, list[_Wild]]] = {}
        self._inner: dict[tuple[bool, int], dict[bytes, list[_Wild]]] = {}
        self._loose: list[_Wild] = []
        for line in lines:
            self._add(line)
        self._loose.reverse()
        self._head_keys = sorted(self._heads)
        self._tail_keys = sorted(self._tails)
        self._inner_keys = sorted(self._inner)
        self._suffix_lengths = sorted(self._suffixes)

    def __len__(self) -> int:
        return len(self.signs)

    def _add(self, line: bytes) -> None:
        body = _trim_trailing_spaces(line)
        ignore = not body.startswith(b"!")
        if not ignore:
            body = body[1:]
        dir_only = body.endswith(b"/")
        if dir_only:
            body = body[:-1]
        basename = b"/" not in body
        if not basename and body.startswith(b"/"):
            body = body[1:]
        index = len(self.signs)
        self.signs.append(ignore)  # every line keeps its place, one that matches nothing too
        if not body:
            return  # an empty pattern matches nothing
        head = _simple_length(body)
        fold = self.casefold
        if head == len(body):  # no wildcard: an exact name or path
            table = self._names if basename else self._paths
            table[dir_only][body.lower() if fold else body] = index
            return
        if basename and body[0] == 0x2A and _simple_length(body[1:]) == len(body) - 1:  # `*literal`
            suffix = body[1:].lower() if fold else body[1:]
            self._suffixes.setdefault(len(suffix), ({}, {}))[dir_only][suffix] = index
            return
        try:
            regex, tail, runs = _translate(body, 0 if basename else head, fold)
        except _NeverMatches:
            return
        head_key = body[:head].lower() if fold else body[:head]
        wild = _Wild(index, dir_only, basename, head_key, tail, regex)
        # filed where the fewest patterns are yet: under its literal head, its literal tail
        # or (the start of) a literal run a matching path contains; longer keys first
        options = []
        if head:
            options.append((self._heads, head_key[:_KEY_MAX]))
        if tail:
            options.append((self._tails, tail[-_KEY_MAX:]))
        options.extend((self._inner, run[:_INNER_MAX]) for run in runs)
        if not options:
            self._loose.append(wild)
            return
        files, key = min(options, key=lambda option: (
            len(option[0].get((basename, len(option[1])), {}).get(option[1], ())), -len(option[1])))
        files.setdefault((basename, len(key)), {}).setdefault(key, []).append(wild)

    def decision(self, rel: bytes, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included by a `!` pattern, None: no pattern matches
        `rel` (a path relative to the file's folder, `/`-separated)."""
        best = self.last_match(rel, is_dir)
        return None if best < 0 else self.signs[best]

    def last_match(self, rel: bytes, is_dir: bool) -> int:
        """The index (among the lines given) of the last pattern that matches `rel`, or -1."""
        name = rel.rpartition(b"/")[2]
        key_name, key_rel = (name.lower(), rel.lower()) if self.casefold else (name, rel)
        best = -1
        for exact, key in ((self._names, key_name), (self._paths, key_rel)):
            best = max(best, exact[False].get(key, -1))
            if is_dir:
                best = max(best, exact[True].get(key, -1))
        for length in self._suffix_lengths:
            if length > len(key_name):
                break
            tables = self._suffixes[length]
            key = key_name[len(key_name) - length:]
            best = max(best, tables[False].get(key, -1))
            if is_dir:
                best = max(best, tables[True].get(key, -1))
        candidates: list[_Wild] = []
        for basename, length in self._head_keys:
            text = key_name if basename else key_rel
            if length <= len(text):
                candidates.extend(self._heads[basename, length].get(text[:length], ()))
        for basename, length in self._tail_keys:
            text = key_name if basename else key_rel
            if length <= len(text):
                candidates.extend(self._tails[basename, length].get(text[len(text) - length:], ()))
        for basename, length in self._inner_keys:
            text = key_name if basename else key_rel
            runs = self._inner[basename, length]
            for at in range(len(text) - length + 1):
                found = runs.get(text[at:at + length])
                if found:
                    candidates.extend(found)
        if candidates:
            candidates = sorted(set(candidates), key=_INDEX, reverse=True)
        for group in (candidates, self._loose):  # each highest index first
            for wild in group:
                if wild.index <= best:
                    break
                if wild.dir_only and not is_dir:
                    continue
                text, key = (name, key_name) if wild.basename else (rel, key_rel)
                if key.startswith(wild.head) and key.endswith(wild.tail) and wild.matches(text):
                    best = wild.index
                    break
        return best
