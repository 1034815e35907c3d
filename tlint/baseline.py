"""`tlint check --add-suppressions [REASON]`: adopt tlint on an existing codebase by
suppressing every current finding in place (Ruff's `--add-noqa`), so that from then on
only new findings fail.

Each unsuppressed finding gets `# tlint: ignore[CODE]` where tlint/suppressions.py will
match it: a comment at the end of the line the finding starts on; when that line ends
inside a string or with a backslash continuation (no comment can go there), at the end of
the line it ends on; else a comment line of its own just above it. A line that already has
a `# tlint: ignore[...]` (or `# noqa: TLxxx`) comment gets the codes merged into it; codes
of one line share one comment, and REASON follows the comment's bracket
(`# tlint: ignore[TL101, TL305] legacy code`), where TL002 reads a suppression's reason.
Parse errors (TL001), unused suppressions (TL002, reported after suppressions apply) and
internal errors (TL003) are never suppressed.

Files are rewritten in their own encoding and line endings, as `--fix` writes
(`tlint.fixes.write_fixed`: never outside the given paths, never a read-only file or one
changed meanwhile); a second run adds nothing."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from tlint.diagnostics import Diagnostic
from tlint.suppressions import _NOQA, Suppression, parse_suppressions

NOT_SUPPRESSIBLE = frozenset({"TL001", "TL002", "TL003"})
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass
class Placement:
    """Where the codes of one comment go: at the end of `line` (or merged into its comment),
    or on a new comment line above `line` (`above`)."""

    line: int
    above: bool = False
    codes: list[str] = field(default_factory=list)


@dataclass
class FileSuppressions:
    text: str  # the new text
    added: int  # findings suppressed
    left: list[Diagnostic]  # findings no comment can reach


class _Lines:
    """A file's lines (with their ends), the lines a comment can end, and its comments."""

    def __init__(self, text: str, analysed: str | None = None) -> None:
        """`analysed`: the text to tokenize when it is not `text` itself (a notebook cell with
        its IPython syntax masked: same lines, same lengths)."""
        self.lines = [m.group() for m in _LINE.finditer(text)]
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        text = text if analysed is None else analysed
        self.comment_safe: set[int] = set()  # lines whose end is a NEWLINE/NL token
        self.comments: dict[int, tuple[int, int]] = {}  # line -> 0-based [start, end) of its comment
        readline = io.StringIO(_NEWLINE.sub("\n", text)).readline
        for tok in tokenize.generate_tokens(readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL):
                self.comment_safe.add(tok.start[0])
            elif tok.type == tokenize.COMMENT:
                self.comments[tok.start[0]] = (tok.start[1], tok.end[1])
        self.suppressions: dict[int, Suppression] = {s.line: s for s in parse_suppressions(text)}

    def body(self, line: int) -> str:
        return _NEWLINE.sub("", self.lines[line - 1]) if 1 <= line <= len(self.lines) else ""

    def mergeable(self, line: int) -> Suppression | None | bool:
        """The line's suppression comment to merge into, None when it has none, False when
        its first suppression-like text cannot take more codes (file level, or inside a
        string: parse_suppressions reads only the first one of a line)."""
        sup = self.suppressions.get(line)
        if sup is None:
            return None
        comment = self.comments.get(line)
        inside = comment is not None and comment[0] <= sup.column - 1 < comment[1]
        if sup.file_level or not inside or sup.blanket:
            return False
        return sup

    def can_end(self, line: int) -> bool:
        return line in self.comment_safe and self.mergeable(line) is not False


def place(lines: _Lines, diag: Diagnostic) -> tuple[int, bool] | None:
    """(line, above) of the comment that will suppress `diag`, or None."""
    start, end = diag.range.start.line, diag.range.end.line
    if not 1 <= start <= end <= len(lines.lines):
        return None
    if lines.can_end(start):
        return start, False
    if end != start and lines.can_end(end):
        return end, False
    above = lines.suppressions.get(start - 1)
    if above is not None and above.standalone and not above.file_level:  # a comment line above: merge into it
        return (start - 1, False) if lines.mergeable(start - 1) else None
    if start == 1 or (start - 1) in lines.comment_safe:
        return start, True
    return None


def _merged(line: str, sup: Suppression, codes: list[str]) -> str:
    """`line` with `codes` added to its suppression comment's list."""
    if sup.kind == "tlint" and sup.bracket is not None:
        at = sup.bracket[1] - 1
        inner = line[sup.bracket[0] - 1:at]
        joiner = ", " if inner.strip() else ""
        return line[:at].rstrip() + joiner + ", ".join(codes) + line[at:]
    match = _NOQA.match(line, sup.column - 1)  # a noqa comment: the codes go after its last one
    assert match is not None and match.group(1)
    at = match.end(1)
    return line[:at] + ", " + ", ".join(codes) + line[at:]


def add_suppressions(text: str, diagnostics: list[Diagnostic], reason: str = "",
                     analysed: str | None = None) -> FileSuppressions:
    """The text with a suppression for each of `diagnostics` (one file's, unsuppressed);
    `analysed`: `text` as it is tokenized, when not itself (see `_Lines`)."""
    wanted = [d for d in diagnostics if not d.suppressed and d.code not in NOT_SUPPRESSIBLE]
    if not wanted:
        return FileSuppressions(text, 0, [])
    try:
        lines = _Lines(text, analysed)
    except (tokenize.TokenError, SyntaxError):
        return FileSuppressions(text, 0, wanted)
    placements: dict[tuple[int, bool], Placement] = {}
    left: list[Diagnostic] = []
    added = 0
    for diag in wanted:
        where = place(lines, diag)
        if where is None:
            left.append(diag)
            continue
        placement = placements.setdefault(where, Placement(*where))
        if diag.code not in placement.codes:
            placement.codes.append(diag.code)
        added += 1
    newline = next(iter(_NEWLINE.findall(text)), "\n")
    tail = f" {reason}" if reason else ""
    out = list(lines.lines)
    # bottom up, so that inserted lines do not move the lines still to edit
    for (number, above), placement in sorted(placements.items(), key=lambda item: (item[0][0], not item[0][1]),
                                             reverse=True):
        codes = sorted(placement.codes)
        comment = f"# tlint: ignore[{', '.join(codes)}]{tail}"
        if above:
            body = lines.body(number)
            indent = body[:len(body) - len(body.lstrip())]
            out.insert(number - 1, f"{indent}{comment}{newline}")
            continue
        raw = out[number - 1]
        body = _NEWLINE.sub("", raw)
        ending = raw[len(body):]
        sup = lines.suppressions.get(number)
        if sup is not None:
            body = _merged(body, sup, codes)
        else:
            body = f"{body.rstrip()}  {comment}"
        out[number - 1] = body + ending
    return FileSuppressions("".join(out), added, left)


_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")


def add_file_suppression(text: str, code: str, reason: str = "") -> str | None:
    """The text with `code` suppressed for the whole file (the editor's "Disable TLxxx for
    this file"): merged into the file's first `# tlint: ignore-file[...]` comment as
    `add_suppressions` merges codes, else a comment line `# tlint: ignore-file[CODE]` at the
    top, below a shebang and an encoding declaration (which must stay first). None when
    the file already suppresses `code` everywhere, or `code` is never suppressed."""
    if code in NOT_SUPPRESSIBLE:
        return None
    file_level = [s for s in parse_suppressions(text) if s.file_level and s.kind == "tlint"]
    if any(s.blanket or code in s.selectors for s in file_level):
        return None
    lines = [m.group() for m in _LINE.finditer(text)]
    if lines and lines[-1] == "":
        lines.pop()
    newline = next(iter(_NEWLINE.findall(text)), "\n")
    tail = f" {reason}" if reason else ""
    mergeable = [s for s in file_level if s.bracket is not None]
    if mergeable:
        sup = mergeable[0]
        raw = lines[sup.line - 1]
        body = _NEWLINE.sub("", raw)
        lines[sup.line - 1] = _merged(body, sup, [code]) + raw[len(body):]
        return "".join(lines)
    at = 1 if lines and lines[0].startswith("#!") else 0
    for index, line in enumerate(lines[:2]):
        if _CODING.match(line):
            at = index + 1
    if at and not _NEWLINE.search(lines[at - 1]):  # the last line has no line end yet
        lines[at - 1] += newline
    lines.insert(at, f"# tlint: ignore-file[{code}]{tail}{newline}")
    return "".join(lines)


@dataclass
class BaselineOutcome:
    texts: dict[Path, str] = field(default_factory=dict)  # changed files' new texts
    added: dict[Path, int] = field(default_factory=dict)
    left: list[Diagnostic] = field(default_factory=list)  # findings that stay unsuppressed
    errors: list[str] = field(default_factory=list)
    read: dict[Path, bytes] = field(default_factory=dict)  # the bytes each new text was made from


def baseline(result, reason: str = "") -> BaselineOutcome:
    """Suppressions for every unsuppressed finding of a lint `result` (engine.RunResult),
    file by file; nothing is written."""
    from tlint.encoding import decode_source, printable
    from tlint.notebook import is_notebook
    from tlint.reading import read_source

    outcome = BaselineOutcome()
    by_path: dict[str, list[Diagnostic]] = {}
    for diag in result.diagnostics:
        if not diag.suppressed:
            by_path.setdefault(diag.path, []).append(diag)
    for display, diagnostics in sorted(by_path.items()):
        path = result.path_of(display)
        suppressible = [d for d in diagnostics if d.code not in NOT_SUPPRESSIBLE]
        outcome.left.extend(d for d in diagnostics if d.code in NOT_SUPPRESSIBLE)
        if not suppressible:
            continue
        data = read_source(path, display) if path is not None else None
        try:
            if isinstance(data, Diagnostic):
                raise OSError(data.message)
            text = decode_source(data) if data is not None else None
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
            outcome.errors.append(f"cannot read {printable(display)}: {exc}")
            text = None
        if text is None:
            outcome.left.extend(suppressible)
            continue
        done = (add_suppressions(text, suppressible, reason) if path is None or not is_notebook(path)
                else _notebook_suppressions(text, suppressible, reason))
        outcome.left.extend(done.left)
        if done.added and done.text != text:
            assert path is not None and isinstance(data, bytes)  # (a text was read)
            outcome.read[path] = data
            outcome.texts[path] = done.text
            outcome.added[path] = done.added
    outcome.left.sort(key=Diagnostic.sort_key)
    return outcome


def _notebook_suppressions(text: str, diagnostics: list[Diagnostic], reason: str) -> FileSuppressions:
    """`add_suppressions` in the cells of the notebook whose JSON is `text`: each cell is
    edited as its own text (its IPython syntax masked for the tokenizer); only the changed
    cells' sources are rewritten in the JSON (tlint/notebook.py `replace_sources`)."""
    from tlint.notebook import NotebookError, load, replace_sources

    try:
        cells = {cell.number: cell for cell in load(text).cells}
    except NotebookError:
        return FileSuppressions(text, 0, list(diagnostics))
    by_cell: dict[int, list[Diagnostic]] = {}
    left: list[Diagnostic] = []
    for diag in diagnostics:
        if diag.cell in cells:
            by_cell.setdefault(diag.cell, []).append(diag)
        else:
            left.append(diag)
    new_texts: dict[int, str] = {}
    added = 0
    for number, found in by_cell.items():
        cell = cells[number]
        done = add_suppressions(cell.text, found, reason, cell.masked)
        left.extend(done.left)
        if done.added and done.text != cell.text:
            new_texts[number] = done.text
            added += done.added
    return FileSuppressions(replace_sources(text, new_texts) if new_texts else text, added, left)


def run_command(args, linter, paths: list[Path]) -> int:
    """`tlint check --add-suppressions [REASON]`: lint, write the suppressions, lint again
    and say what is left (those findings, on stderr). The exit code is `tlint check`'s on
    what is left: 0 when everything was suppressed."""
    import sys

    from tlint.encoding import printable
    from tlint.fixes import allowed_roots, write_fixed
    from tlint.results import exit_code

    reason = " ".join((args.add_suppressions or "").split())
    result = linter.run(paths)
    outcome = baseline(result, reason)
    errors = list(result.errors) + outcome.errors
    written, files = 0, 0
    roots = allowed_roots(paths)  # never written: see tlint/fixes.py `write_fixed`
    for path, text in sorted(outcome.texts.items()):
        try:
            why = write_fixed(path, text, outcome.read[path], roots)
        except (OSError, UnicodeEncodeError) as exc:
            errors.append(f"cannot write the suppressions to {printable(str(path))}: "
                          f"{getattr(exc, 'strerror', None) or exc}")
            continue
        if why is not None:
            sys.stderr.write(f"tlint: warning: {printable(str(path))} not changed: {why}\n")
            continue
        written, files = written + outcome.added[path], files + 1

    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    sys.stderr.write(f"tlint: added {plural(written, 'suppression')} in {plural(files, 'file')}\n")
    final = linter.run(paths) if outcome.texts else result
    final.errors = list(dict.fromkeys(errors + final.errors))
    for diag in final.diagnostics:
        if not diag.suppressed:
            why = "never suppressed" if diag.code in NOT_SUPPRESSIBLE else "no comment can reach it"
            sys.stderr.write(f"{diag.path}:{diag.where()}: {diag.code} {diag.message} "
                             f"(not suppressed: {why})\n")
    for message in final.errors:
        sys.stderr.write(f"tlint: error: {message}\n")
    return exit_code(final, fail_on=args.fail_on, exit_zero=args.exit_zero)
