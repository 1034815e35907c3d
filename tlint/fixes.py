"""Fixes: how a rule describes one, how the engine turns it into text edits, and how
`tlint check --fix` / `--unsafe-fixes` / `--diff` apply them.

A rule attaches a `PendingFix` to its report: a list of edits anchored on CST nodes
(`replace(node, new)`, `insert_before(stmt, code)`, `insert_after(stmt, code)`,
`delete(stmt)`), built with LibCST (new nodes are rendered with `Module.code_for_node`).
The engine resolves the anchors to line/column ranges in the same single code-generation
pass that positions the findings, and the diagnostic carries a plain `Fix` (text edits)
that every reporter, the cache and the language server share. A fix whose anchors cannot
be resolved safely (a statement that shares its line with another, say) is dropped: no
fix is better than a wrong one.

Applying: the fixes of one file are taken in source order, skipping any that overlaps a
fix already taken; the result must still compile, else the pass is abandoned for that
file. The file is linted again and the loop repeats until nothing is left to fix (at most
`MAX_PASSES`), so overlapping fixes land over several passes and a second `--fix` run
changes nothing. Files are written atomically, in their own encoding, BOM and line
endings, and only when they changed.
"""

from __future__ import annotations

import codecs
import difflib
import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import libcst as cst

from tlint.diagnostics import Edit, Fix, Position, Range

MAX_PASSES = 10
SAFE, UNSAFE = "safe", "unsafe"
_NEWLINE = re.compile(r"\r\n?|\n")


# --- what rules build -------------------------------------------------------------------


@dataclass(frozen=True)
class PendingEdit:
    kind: str  # "replace" | "insert_before" | "insert_after" | "delete"
    node: cst.CSTNode
    content: str | cst.CSTNode = ""


@dataclass
class PendingFix:
    """A fix anchored on CST nodes; `message` says what it does (code-action title)."""

    applicability: str
    edits: list[PendingEdit]
    message: str = ""

    def __post_init__(self) -> None:
        if self.applicability not in (SAFE, UNSAFE):
            raise ValueError(f"applicability must be safe or unsafe, not {self.applicability!r}")


def replace(node: cst.CSTNode, new: cst.CSTNode | str) -> PendingEdit:
    """Replace `node`'s text by `new` (a node, rendered by LibCST, or source text)."""
    return PendingEdit("replace", node, new)


def insert_before(stmt: cst.CSTNode, code: str | cst.CSTNode) -> PendingEdit:
    """Insert statement(s) `code` on new line(s) before `stmt`, at its indentation."""
    return PendingEdit("insert_before", stmt, code)


def insert_after(stmt: cst.CSTNode, code: str | cst.CSTNode) -> PendingEdit:
    """Insert statement(s) `code` on new line(s) after `stmt` (after its whole body for a
    compound statement), at `stmt`'s indentation."""
    return PendingEdit("insert_after", stmt, code)


def delete(stmt: cst.CSTNode) -> PendingEdit:
    """Delete the line(s) of `stmt` (a statement alone on its lines, comments after it
    included). The rule makes sure the block is not left empty (`replace` with `pass`)."""
    return PendingEdit("delete", stmt)


def fix(applicability: str, message: str, *edits: PendingEdit) -> PendingFix:
    return PendingFix(applicability, list(edits), message)


def anchors(pending: PendingFix) -> list[cst.CSTNode]:
    return [edit.node for edit in pending.edits]


# --- resolving anchors to text edits ----------------------------------------------------


class FileLines:
    """The file's lines with their ends, for line-based edits."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for match in _NEWLINE.finditer(text):
            self.starts.append(match.end())
        found = _NEWLINE.search(text)
        self.newline = found.group(0) if found else "\n"

    def count(self) -> int:
        return len(self.starts)

    def line(self, number: int) -> str:
        """Line `number` (1-based) without its end."""
        start = self.starts[number - 1]
        end = self.starts[number] if number < len(self.starts) else len(self.text)
        return _NEWLINE.sub("", self.text[start:end])

    def offset(self, pos: Position) -> int:
        if pos.line > len(self.starts):
            return len(self.text)
        return min(self.starts[pos.line - 1] + pos.column - 1, len(self.text))

    def position(self, offset: int) -> Position:
        import bisect

        line = bisect.bisect_right(self.starts, offset)
        return Position(line, offset - self.starts[line - 1] + 1)


def _render(module: cst.Module, content: str | cst.CSTNode) -> str:
    if isinstance(content, cst.CSTNode):
        if isinstance(content, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return module.code_for_node(content).rstrip("\r\n")
        return module.code_for_node(content)
    return content


def _block(code: str, indent: str, newline: str) -> str:
    """Statement text `code` (possibly several lines) indented as `indent`, with ends."""
    lines = code.strip("\r\n").splitlines()
    return "".join((indent + line if line.strip() else "") + newline for line in lines)


def resolve_fix(pending: PendingFix, module: cst.Module, lines: FileLines,
                ranges: dict[cst.CSTNode, Range]) -> Fix | None:
    """The text edits of `pending`, or None when an anchor cannot be edited safely."""
    edits = []
    for edit in pending.edits:
        where = ranges.get(edit.node)
        if where is None:
            return None
        start, end = where.start, where.end
        if edit.kind == "replace":
            edits.append(Edit(where, _render(module, edit.content)))
            continue
        first = lines.line(start.line)
        indent = first[: start.column - 1]
        if indent.strip():  # not the first thing on its line (`if x: a(); b()`)
            return None
        last = lines.line(end.line)
        rest = last[end.column - 1:].strip()
        if rest and not rest.startswith("#"):  # another statement after it (`a(); b()`)
            return None
        line_start = Position(start.line, 1)
        after = Position(end.line + 1, 1)
        if edit.kind == "insert_before":
            edits.append(Edit(Range(line_start, line_start), _block(_render(module, edit.content), indent, lines.newline)))
        elif edit.kind == "insert_after":
            text = _block(_render(module, edit.content), indent, lines.newline)
            if end.line >= lines.count() and not lines.text.endswith(("\n", "\r")):
                text = lines.newline + text  # the statement ends the file without a newline
            edits.append(Edit(Range(after, after), text))
        elif edit.kind == "delete":
            edits.append(Edit(Range(line_start, after), ""))
        else:
            raise ValueError(f"unknown edit kind {edit.kind!r}")
    return Fix(pending.applicability, tuple(edits), pending.message)


# --- applying ---------------------------------------------------------------------------


def _spans(lines: FileLines, one: Fix) -> list[tuple[int, int, str]]:
    return sorted((lines.offset(e.range.start), lines.offset(e.range.end), e.content) for e in one.edits)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    if a[0] == a[1] == b[0] == b[1]:
        return True  # two insertions at one point: order would be a guess
    return a[0] < b[1] and b[0] < a[1] or a[0] == b[0]


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """Apply the non-overlapping fixes (in source order); return (new text, fixes applied).
    The text is returned unchanged when the result would not compile."""
    lines = FileLines(text)
    taken: list[tuple[int, int]] = []
    chosen: list[tuple[int, int, str]] = []
    count = 0
    ordered = sorted(fixes, key=lambda f: min((lines.offset(e.range.start) for e in f.edits), default=0))
    for one in ordered:
        spans = _spans(lines, one)
        if not spans or any(s > e for s, e, _ in spans):
            continue
        if any(_overlaps((s, e), t) for s, e, _ in spans for t in taken):
            continue
        if any(_overlaps(a[:2], b[:2]) for i, a in enumerate(spans) for b in spans[i + 1:]):
            continue
        taken.extend((s, e) for s, e, _ in spans)
        chosen.extend(spans)
        count += 1
    if not count:
        return text, 0
    out = []
    cursor = 0
    for start, end, content in sorted(chosen, key=lambda span: (span[0], span[1])):
        out.append(text[cursor:start])
        out.append(content)
        cursor = end
    out.append(text[cursor:])
    new = "".join(out)
    if not _compiles(new):
        return text, 0
    return new, count


def _compiles(text: str) -> bool:
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# --- the --fix loop ---------------------------------------------------------------------


@dataclass
class FixOutcome:
    """What a `--fix` run did: the new texts of changed files, the originals, how many
    fixes were applied per file, and the final lint result (what is left)."""

    texts: dict[Path, str] = field(default_factory=dict)
    originals: dict[Path, str] = field(default_factory=dict)
    applied: dict[Path, int] = field(default_factory=dict)
    result: object = None
    passes: int = 0

    @property
    def changed(self) -> list[Path]:
        return sorted(p for p, text in self.texts.items() if text != self.originals.get(p))

    @property
    def total(self) -> int:
        return sum(self.applied.values())


def wanted(diag, unsafe: bool) -> bool:
    return (diag.fix is not None and not diag.suppressed
            and (diag.fix.applicability == SAFE or unsafe))


def fix_run(linter, paths: list[Path], *, unsafe: bool, stdin: tuple[Path, str] | None = None) -> FixOutcome:
    """Lint, apply the wanted fixes in memory, lint again, until stable."""
    outcome = FixOutcome()
    stdin_path = stdin[0].absolute() if stdin is not None else None
    for number in range(MAX_PASSES + 1):
        if stdin is not None:
            result = linter.run([], stdin=(stdin[0], outcome.texts.get(stdin_path, stdin[1])))
        else:
            result = linter.run(paths, overrides=dict(outcome.texts))
        outcome.result, outcome.passes = result, number
        if number == MAX_PASSES:
            break
        by_file: dict[Path, list[Fix]] = {}
        for diag in result.diagnostics:
            if wanted(diag, unsafe):
                path = stdin_path if stdin is not None else result.path_of(diag.path)
                if path is not None:
                    by_file.setdefault(path, []).append(diag.fix)
        changed = False
        for path, fixes in by_file.items():
            if path not in outcome.texts:
                original = stdin[1] if stdin is not None else _read(path)
                if original is None:
                    continue
                outcome.originals[path] = original
                outcome.texts[path] = original
            new, count = apply_fixes(outcome.texts[path], fixes)
            if count and new != outcome.texts[path]:
                outcome.texts[path] = new
                outcome.applied[path] = outcome.applied.get(path, 0) + count
                changed = True
        if not changed:
            break
    return outcome


def _read(path: Path) -> str | None:
    from tlint.engine import decode_source

    try:
        return decode_source(path.read_bytes())
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
        return None


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}"))


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` in the file's own encoding (BOM and cookie kept), through a
    temporary file in the same folder and a rename: the file is never half-written."""
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(codecs.BOM_UTF8)
    if encoding == "utf-8-sig":
        encoding, bom = "utf-8", True
    payload = (codecs.BOM_UTF8 if bom else b"") + text.encode(encoding)
    mode = path.stat().st_mode
    path = path.resolve()  # a symlink stays a symlink: its target is rewritten
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tlint-fix")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode & 0o7777)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
