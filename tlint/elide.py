"""Data tables are not built as LibCST trees.

LibCST's tree costs about 600 bytes of memory per byte of dense source (measured with
LibCST 1.9: torch's `sparse/_triton_ops_meta.py`, 490 KiB, most of it one dict of number
tuples, holds 620 MiB once parsed). No rule reads a table of hundreds of constants, so in
a large file (`ELIDE_MIN_BYTES`) each literal list, tuple, set or dict made only of
constants (numbers, strings, bytes, `None`, booleans, signed numbers), names and dotted
names (`torch.float16`), and nested such literals, with at least `MIN_CONSTANTS` of them,
is handed to LibCST with everything between its brackets turned into spaces, line breaks
kept: an empty literal at the same place, so every line and column after it is where it
was. The file's text itself is unchanged (the suppression comments, code frames and the
cache read it, not the tree).

A fix whose edits touch an elided span is dropped (the finding stays, without a fix): a
fix renders nodes of the tree, which no longer hold the table's text (`drop_touching`).
Python's own tree, which the syntax check builds first, finds the tables: nothing is
parsed twice.
"""

from __future__ import annotations

import ast
import re

from tlint.diagnostics import Fix

# Smaller files are parsed whole (the walk below costs a few milliseconds per 100 KiB).
ELIDE_MIN_BYTES = 256 * 2**10
# A literal with fewer constants is left as it is.
MIN_CONSTANTS = 256

_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict)
_OPEN = {ast.List: "[", ast.Tuple: "(", ast.Set: "{", ast.Dict: "{"}
_CLOSE = {"[": "]", "(": ")", "{": "}"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOT_BREAK = re.compile(r"[^\r\n]")

Span = tuple[int, int, int, int]  # 1-based start line and column, end line and column (end exclusive)


def _constants(node: ast.AST) -> int:
    """How many constants and (dotted) names a literal made only of them holds; -1 when it
    holds anything else (a call, a subscript, `**` in a dict, a starred element)."""
    total = 0
    stack = [node]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is ast.Constant:
            total += 1
        elif kind is ast.UnaryOp and type(item.operand) is ast.Constant:  # type: ignore[attr-defined]
            total += 1
        elif kind is ast.Name:
            total += 1
        elif kind is ast.Attribute:
            while type(item) is ast.Attribute:
                item = item.value
            if type(item) is not ast.Name:
                return -1
            total += 1
        elif kind is ast.Dict:
            if any(key is None for key in item.keys):  # type: ignore[attr-defined]
                return -1
            stack.extend(item.keys)  # type: ignore[attr-defined]
            stack.extend(item.values)  # type: ignore[attr-defined]
        elif kind in (ast.List, ast.Tuple, ast.Set):
            stack.extend(item.elts)  # type: ignore[attr-defined]
        else:
            return -1
    return total


def elide_tables(text: str, tree: ast.AST) -> tuple[str, list[Span]]:
    """`text` with its constant tables blanked between their brackets, and the blanked
    spans (as positions of `text`); `text` itself when it has none. `tree` is Python's
    tree of `text`."""
    if len(text) < ELIDE_MIN_BYTES:
        return text, []
    found: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if type(node) in _CONTAINERS:
            count = _constants(node)
            if count >= MIN_CONSTANTS:
                found.append(node)
            if count >= 0:
                continue  # nothing inside a constant literal is anything else
        stack.extend(ast.iter_child_nodes(node))
    if not found:
        return text, []
    starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]  # offset of each line (CPython's breaks)

    def offset(line: int, byte_column: int) -> int:
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(text)
        row = text[start:end]
        if row.isascii():
            return start + byte_column
        return start + len(row.encode("utf-8", "surrogatepass")[:byte_column].decode("utf-8", "surrogatepass"))

    pieces: list[str] = []
    spans: list[Span] = []
    done = 0
    for node in sorted(found, key=lambda n: (n.lineno, n.col_offset)):  # type: ignore[attr-defined]
        end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        if end_line is None or end_col is None:
            continue
        first = offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        last = offset(end_line, end_col) - 1  # the closing bracket
        opening = text[first] if first < len(text) else ""
        if first < done or opening != _OPEN[type(node)] or text[last:last + 1] != _CLOSE[opening]:
            continue  # an unparenthesised tuple, or a position we cannot trust: parsed whole
        pieces.append(text[done:first + 1])
        pieces.append(_NOT_BREAK.sub(" ", text[first + 1:last]))
        done = last
        spans.append((node.lineno, first - starts[node.lineno - 1] + 2,  # type: ignore[attr-defined]
                      end_line, last - starts[end_line - 1] + 1))
    if not spans:
        return text, []
    pieces.append(text[done:])
    return "".join(pieces), spans


def drop_touching(fix: Fix | None, spans: list[Span]) -> Fix | None:
    """`fix`, or None when one of its edits overlaps an elided span."""
    if fix is None or not spans:
        return fix
    for edit in fix.edits:
        start = (edit.range.start.line, edit.range.start.column)
        end = (edit.range.end.line, edit.range.end.column)
        for line, column, end_line, end_column in spans:
            if start < (end_line, end_column) and (line, column) < end or start == end == (line, column):
                return None
    return fix
