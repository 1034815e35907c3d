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
import stat
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from tlint.atomic import deferred_interrupts, write_bytes_atomic
from tlint.bounded import open_output
from tlint.diagnostics import Edit, Fix, Position, Range

if TYPE_CHECKING:
    from tlint.results import RunResult

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


# --- helpers for rules: statements, moves, imports ----------------------------------------


def own_statement(index, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The statement line holding `node` and nothing else (one small statement, on its own
    line in an indented block or the module body), or None (`if x: f()`, `a(); b()`)."""
    for ancestor in index.ancestors(node):
        if type(ancestor) is cst.SimpleStatementLine:
            parent = index.parent(ancestor)
            if len(ancestor.body) == 1 and type(parent) in (cst.IndentedBlock, cst.Module):
                return ancestor
            return None
        if isinstance(ancestor, (cst.BaseCompoundStatement, cst.SimpleStatementSuite, cst.Lambda)):
            return None
    return None


def call_statement(index, call: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The statement line that is exactly `call` as an expression statement (`opt.step()`)."""
    stmt = own_statement(index, call)
    if stmt is None or type(stmt.body[0]) is not cst.Expr or stmt.body[0].value is not call:
        return None
    return stmt


def same_block(index, *stmts: cst.CSTNode) -> bool:
    """The statements are in one block (the same indented body, or the module body)."""
    parents = {id(index.parent(stmt)) for stmt in stmts}
    return len(parents) == 1 and index.parent(stmts[0]) is not None


def statement_text(module: cst.Module, stmt: cst.CSTNode) -> str:
    """A statement's code without the comment lines above it (its own trailing comment kept)."""
    if isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and stmt.leading_lines:
        stmt = stmt.with_changes(leading_lines=())
    return module.code_for_node(stmt).rstrip("\r\n")


def move_after(module: cst.Module, stmt: cst.CSTNode, target: cst.CSTNode) -> list[PendingEdit]:
    """Edits moving `stmt` (alone on its lines) to just after `target`; the caller makes
    sure both are in one block (`same_block`) and `stmt`'s block keeps a statement."""
    return [delete(stmt), insert_after(target, statement_text(module, stmt))]


def move_statement_after(index, node: cst.CSTNode, target: cst.CSTNode) -> list[PendingEdit] | None:
    """Edits moving the statement that is exactly `node` (a call statement, or a small
    statement such as `p.grad = None`) to just after the statement holding `target`, when
    both are statements of one block and `node`'s comes first; None otherwise."""
    stmt = own_statement(index, node)
    if stmt is None or not (stmt.body[0] is node or type(stmt.body[0]) is cst.Expr and stmt.body[0].value is node):
        return None
    after = own_statement(index, target)
    if after is None or after is stmt or not same_block(index, stmt, after):
        return None
    body = list(index.parent(stmt).body)
    if body.index(stmt) > body.index(after):
        return None
    return move_after(index.module, stmt, after)


def move_fix(index, node: cst.CSTNode, target: cst.CSTNode) -> PendingFix | None:
    """The safe fix "Move `node` after `target`" (`move_statement_after`), or None."""
    edits = move_statement_after(index, node, target)
    if edits is None:
        return None
    what, where = short_code(index.module, node), short_code(index.module, target)
    return fix(SAFE, f"Move `{what}` after `{where}`", *edits)


def short_code(module: cst.Module, node: cst.CSTNode, limit: int = 60) -> str:
    """`node`'s code for a fix message: as written when short and on one line, else its
    callee with `()` (`scheduler.step()`)."""
    text = module.code_for_node(node)
    if "\n" in text or len(text) > limit:
        func = node.func if type(node) is cst.Call else None
        text = (module.code_for_node(func) + "()") if func is not None else text.split("\n", 1)[0][:limit]
    return text


def _docstring_or_future(stmt: cst.CSTNode) -> bool:
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if type(small) is cst.Expr and type(small.value) in (cst.SimpleString, cst.ConcatenatedString):
        return True
    return type(small) is cst.ImportFrom and small.relative == () and \
        type(small.module) is cst.Name and small.module.value == "__future__"


def add_import(module: cst.Module, code: str) -> PendingEdit | None:
    """An edit adding the import statement `code` at the top of the module: after its
    docstring and `from __future__` imports, before everything else (None for an empty
    module)."""
    body = list(module.body)
    head = 0
    while head < len(body) and _docstring_or_future(body[head]) and (
        head == 0 or type(body[head].body[0]) is not cst.Expr  # type: ignore[index]  # a simple statement line
    ):
        head += 1
    if head < len(body):
        return insert_before(body[head], code)
    return insert_after(body[-1], code) if body else None


def local_name_for(index, qualified: str, at: cst.CSTNode) -> str | None:
    """An expression naming `qualified` (a module, or a name in one) at `at`, through the
    imports of the module body and of the functions around `at` (top-level statements):
    `torch.nn.utils.clip_grad_norm_` is `th.nn.utils.clip_grad_norm_` after `import torch
    as th`, `clip_grad_norm_` after `from torch.nn.utils import clip_grad_norm_`. The
    shortest spelling wins; None when nothing imported leads to it."""
    from tlint.names import ImportTable, canonical

    table = ImportTable()
    bodies = [index.module.body]
    bodies += [f.body.body for f in index.ancestors(at)
               if type(f) is cst.FunctionDef and type(f.body) is cst.IndentedBlock]
    for body in bodies:
        for stmt in body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Import:
                        table.add_import(small)
                    elif type(small) is cst.ImportFrom and not small.relative:
                        table.add_import_from(small)
    found = []
    for local, target in table.aliases.items():
        target = canonical(target)
        if qualified == target:
            found.append(local)
        elif qualified.startswith(target + "."):
            found.append(local + qualified[len(target):])
    return min(found, key=lambda text: (len(text), text)) if found else None


def block_indent(index, node: cst.CSTNode) -> list[str]:
    """The indentation LibCST writes at the start of a line of `node`'s statement: one
    token per indented block around it, outermost first."""
    default = index.module.default_indent
    tokens = [block.indent if block.indent is not None else default
              for block in index.ancestors(node) if type(block) is cst.IndentedBlock]
    tokens.reverse()
    return tokens


def _state(index, node: cst.CSTNode, targets=()):
    from tlint.positions import _TargetedPositionState

    module = index.module
    return _TargetedPositionState(default_indent=module.default_indent, default_newline=module.default_newline,
                                  indent_tokens=block_indent(index, node), targets={id(t) for t in targets})


def code_at(index, anchor: cst.CSTNode, new: cst.CSTNode) -> str:
    """The text of `new`, an expression built (with LibCST) to `replace` `anchor`, rendered
    in `anchor`'s place: its continuation lines keep the indentation of the blocks around
    `anchor` (`Module.code_for_node` renders at column 0), and `anchor`'s own parentheses,
    which are outside its range and stay in the file, are left out."""
    def same(a, b) -> bool:
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))

    lpar = getattr(anchor, "lpar", None)
    # (an expression with `lpar` has `rpar`)
    if lpar and same(getattr(new, "lpar", ()), lpar) and same(getattr(new, "rpar", ()), anchor.rpar):  # type: ignore[attr-defined]
        new = new.with_changes(lpar=(), rpar=())
    state = _state(index, anchor)
    new._codegen(state)
    return "".join(state.tokens)


def unwrap_with(index, stmt: cst.CSTNode) -> PendingEdit | None:
    """An edit replacing a `with` statement by its body, dedented one level (exactly: the
    body is re-rendered by LibCST, comments and strings untouched), or None when that is
    not exact: `async with`, a comment in the header (`with x:  # why`), a body on the
    header line, a comment line at column 0 opening the body."""
    if type(stmt) is not cst.With or stmt.asynchronous is not None:
        return None
    body = stmt.body
    if type(body) is not cst.IndentedBlock or not body.body or body.header.comment is not None:
        return None
    if any(_has_comment(child) for child in stmt.children if child is not body and child not in stmt.leading_lines):
        return None
    statements = list(body.body)
    # (every concrete statement has leading_lines; LibCST's BaseStatement does not declare them)
    lead = list(statements[0].leading_lines)  # type: ignore[attr-defined]
    while lead and lead[0].comment is None:  # blank lines right under the header
        lead.pop(0)
    first = statements[0].with_changes(leading_lines=lead)
    last = statements[-1] if len(statements) > 1 else first
    statements = [first, *statements[1:-1], last] if len(statements) > 1 else [first]
    state = _state(index, stmt, targets=[last])
    for each in statements:
        each._codegen(state)
    text = "".join(state.tokens)
    if id(last) not in state.ranges:
        return None
    (line, column) = state.ranges[id(last)][1]
    end = FileLines(text).offset(Position(line, column + 1))
    prefix = "".join(block_indent(index, stmt))
    if not text.startswith(prefix) or text[len(prefix):len(prefix) + 1].isspace():
        return None
    return replace(stmt, text[len(prefix):end])


def _has_comment(node: cst.CSTNode) -> bool:
    """A comment anywhere under `node`, whitespace included (LibCST's own children)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Comment:
            return True
        stack.extend(current.children)
    return False


def with_keyword(call: cst.Call, keyword: str, value: str | cst.BaseExpression) -> cst.Call:
    """`call` with the argument `keyword=value` appended, in the call's own style: the
    separator of its other arguments (one per line stays one per line), its trailing comma,
    its spacing around `=`. Render it with `code_at(index, call, new)`."""
    if isinstance(value, str):
        value = cst.parse_expression(value)
    args = list(call.args)
    equal = next((a.equal for a in args if a.keyword is not None and type(a.equal) is cst.AssignEqual),
                 cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    new = cst.Arg(value=value, keyword=cst.Name(keyword), equal=equal)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if len(args) >= 2 and type(args[-2].comma) is cst.Comma:
        separator = args[-2].comma
    elif type(call.whitespace_before_args) is cst.ParenthesizedWhitespace:
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    new = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args, new])


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
            edits.append(Edit(Range(line_start, line_start),
                              _block(_render(module, edit.content), indent, lines.newline)))
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
    The result must compile: when all of them together do not, they are taken one at a
    time, in source order, each kept only if the text still compiles with it (one broken
    fix does not block the others)."""
    new, kept = choose_fixes(text, fixes)
    return new, len(kept)


def choose_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, list[list[tuple[int, int, str]]]]:
    """`apply_fixes`, with the fixes applied as lists of (start offset, end offset, new
    text) spans of `text` (a notebook applies them to its cells: tlint/notebook.py)."""
    lines = FileLines(text)
    taken: list[tuple[int, int]] = []
    chosen: list[list[tuple[int, int, str]]] = []
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
        chosen.append(spans)
    if not chosen:
        return text, []
    new = _edited(text, chosen)
    if _compiles(new):
        return new, chosen
    kept: list[list[tuple[int, int, str]]] = []
    for spans in chosen:
        candidate = _edited(text, [*kept, spans])
        if _compiles(candidate):
            kept.append(spans)
            new = candidate
    return (new, kept) if kept else (text, [])


def _edited(text: str, fixes: list[list[tuple[int, int, str]]]) -> str:
    out = []
    cursor = 0
    for start, end, content in sorted((span for spans in fixes for span in spans), key=lambda span: span[:2]):
        out.append(text[cursor:start])
        out.append(content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


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
    read: dict[Path, bytes] = field(default_factory=dict)  # the bytes the originals were decoded from
    # files left as they are, and why: saved between their analysis and the read of the text
    # the fixes would edit (their positions belong to the analysed bytes, not these)
    skipped: dict[Path, str] = field(default_factory=dict)
    applied: dict[Path, int] = field(default_factory=dict)
    result: RunResult | None = None  # set by `fix_run`
    first: RunResult | None = None  # the first pass's result, before any fix (--show-fixes)
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
    """Lint, apply the wanted fixes in memory, lint again, until stable. A notebook's text
    is its JSON; its fixes edit the cells' sources (tlint/notebook.py)."""
    from dataclasses import replace

    from tlint.cache import digest_bytes
    from tlint.notebook import apply_fixes as apply_notebook_fixes
    from tlint.notebook import is_notebook

    outcome = FixOutcome()
    stdin_path = stdin[0].absolute() if stdin is not None else None
    # each result carries the digest of the bytes it analysed: the text a fix edits must be
    # those very bytes (its positions were computed on them)
    linter.options = replace(linter.options, digests=True)
    for number in range(MAX_PASSES + 1):
        if stdin is not None:
            assert stdin_path is not None  # (set with stdin)
            result = linter.run([], stdin=(stdin[0], outcome.texts.get(stdin_path, stdin[1])))
        else:
            result = linter.run(paths, overrides=dict(outcome.texts))
        outcome.result, outcome.passes = result, number
        if number == 0:
            outcome.first = result
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
            if path in outcome.skipped:
                continue
            if path not in outcome.texts:
                if stdin is not None:
                    original = stdin[1]
                else:
                    loaded = _read(path)
                    if loaded is None:
                        continue
                    if digest_bytes(loaded[1]) != result.digests.get(path):
                        outcome.skipped[path] = "it changed between its analysis and the fix (run tlint again)"
                        continue
                    original, outcome.read[path] = loaded
                outcome.originals[path] = original
                outcome.texts[path] = original
            if is_notebook(path):  # a notebook's JSON: the fixes edit its cells
                new, count = apply_notebook_fixes(outcome.texts[path], fixes)
            else:
                new, count = apply_fixes(outcome.texts[path], fixes)
            if count and new != outcome.texts[path]:
                outcome.texts[path] = new
                outcome.applied[path] = outcome.applied.get(path, 0) + count
                changed = True
        if not changed:
            break
    return outcome


def _read(path: Path) -> tuple[str, bytes] | None:
    from tlint.encoding import decode_source
    from tlint.reading import read_source

    data = read_source(path, "")
    if not isinstance(data, bytes):
        return None
    try:
        return decode_source(data), data
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return None


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}"))


def encoded(text: str, data: bytes) -> bytes:
    """`text` in the encoding of the file whose bytes are `data`: its BOM and PEP 263
    cookie kept."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(codecs.BOM_UTF8)
    if encoding == "utf-8-sig":
        encoding, bom = "utf-8", True
    return (codecs.BOM_UTF8 if bom else b"") + text.encode(encoding)


# --- writing fixed files back: what is never done -----------------------------------------


def allowed_roots(paths: Iterable[Path]) -> list[Path]:
    """The given paths, links resolved: a file is written only if it is one of them or
    under one of them (so a link inside a given folder never leads a write outside it)."""
    roots = []
    for path in paths:
        try:
            roots.append(Path(path).resolve())
        except (OSError, RuntimeError):
            continue
    return roots


def write_fixed(path: Path, text: str, analysed: bytes, roots: list[Path]) -> str | None:
    """Write the fixed `text` to `path` unless that would be wrong; None when written, else
    why it was not (said to the user, the file left as it is):

    - outside the given paths once links are resolved (`roots`: `allowed_roots`);
    - not a regular file, or read-only (no write permission bit, or no access);
    - changed since it was analysed (`analysed`: the bytes the fixes were computed from):
      someone saved it meanwhile, and their edit must not be lost.

    A file with several hard links, or owned by another user, is rewritten in place (the
    fixed text compiles: `apply_fixes` checked it), so that its links and its owner stay;
    any other file is replaced atomically through a temporary file (never half-written,
    never left behind, even on Ctrl-C: `write_bytes_atomic`)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:
        return f"cannot resolve it ({exc})"
    if not any(real == root or root in real.parents for root in roots):
        return f"it leads outside the given paths (to {real.as_posix()}) through a symbolic link"
    try:
        info = os.stat(real)
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return "it is no longer a regular file"
    if not info.st_mode & 0o222 or not os.access(real, os.W_OK):
        return "it is read-only"
    from tlint.cache import digest_bytes
    from tlint.reading import read_source

    digest = digest_bytes(analysed)

    def unchanged() -> None:
        """The file still holds the analysed bytes (its digest), else `_Changed`."""
        current = read_source(real, "")
        if not isinstance(current, bytes) or digest_bytes(current) != digest:
            raise _Changed

    payload = encoded(text, analysed)
    several_links = info.st_nlink > 1
    other_owner = hasattr(os, "geteuid") and info.st_uid != os.geteuid()
    try:
        unchanged()
        if several_links or other_owner:
            with deferred_interrupts():
                unchanged()
                with open_output(real, binary=True, create=False) as stream:  # not through a link, no FIFO
                    stream.write(payload)
                    stream.flush()
                    os.fsync(stream.fileno())
            return None
        # checked again once the new text is on disk, just before the rename that puts it in place
        write_bytes_atomic(real, payload, mode=info.st_mode, durable=True, prefix=f".{real.name}.",
                           suffix=".tlint-fix", check=unchanged)
    except _Changed:
        return "it changed while tlint was fixing it (run tlint again)"
    return None


class _Changed(Exception):
    """The file no longer holds the bytes its fixes were computed on."""


def skipped_messages(outcome: FixOutcome, displays: dict[Path, str]) -> list[str]:
    """"PATH not fixed: why" for each file `fix_run` left as it is."""
    from tlint.encoding import printable

    return [f"{printable(displays.get(path, path.as_posix()))} not fixed: {why}"
            for path, why in sorted(outcome.skipped.items())]


def write_fixes(outcome: FixOutcome, paths: Iterable[Path], displays: dict[Path, str]) -> tuple[list[str], list[str]]:
    """Write the changed files of a `--fix` run (`write_fixed`): (files skipped and why,
    files that could not be written). A file not written drops out of `outcome.applied`."""
    from tlint.encoding import printable

    roots = allowed_roots(paths)
    skipped, failed = skipped_messages(outcome, displays), []
    for path in outcome.changed:
        display = printable(displays.get(path, path.as_posix()))
        try:
            why = write_fixed(path, outcome.texts[path], outcome.read[path], roots)
        except (OSError, UnicodeEncodeError) as exc:
            failed.append(f"cannot write the fixes to {display}: {getattr(exc, 'strerror', None) or exc}")
            outcome.applied.pop(path, None)
            continue
        if why is not None:
            skipped.append(f"{display} not fixed: {why}")
            outcome.applied.pop(path, None)
    return skipped, failed
