"""Reading and parsing one source file, safely: the bytes (one read), the text (decoded as
Python decodes it), the parse guards that keep LibCST's native parser from crashing or
spending minutes, and the pre-filter that spares LibCST the files no rule needs.

Nothing here runs a rule; every failure is a TL001 diagnostic, never an exception.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint import bounded
from tlint.bounded import source_limit
from tlint.context import Timer
from tlint.diagnostics import Diagnostic, Position, Range
from tlint.elide import ELIDE_MIN_BYTES
from tlint.encoding import decode_source, printable
from tlint.rules import ENGINE_CODES

if TYPE_CHECKING:
    from tlint.config import Settings

# Python's own parser refuses more than 200 nested brackets; LibCST's native parser can
# crash the process on such input, so deeper files are checked by `compile` first.
_MAX_SAFE_NESTING = 150
# Files above this size (generated data and test tables, mostly) are reported, not read
# whole nor parsed. LibCST's tree of dense code costs about 600 bytes per byte of source
# (measured with LibCST 1.9: torch's `testing/_internal/common_methods_invocations.py`,
# 1.3 MiB, holds 770 MiB once parsed and takes 22 s), so 1 MiB bounds one file at about
# 600 MiB and 20 s; it is still nearly four times the largest hand-written file we know of
# (transformers' modeling_utils.py, 273 KiB). Files over `GUARD_BYTES` are analysed in a
# child process, one at a time in a run (tlint/engine.py), and their constant tables are
# not built as trees (tlint/elide.py).
MAX_FILE_BYTES = bounded.SOURCE_BYTES
# A notebook's file is mostly its cells' outputs (plots as base64 PNG, logs): its JSON may be
# this large (`json.loads` of 16 MiB takes about 0.2 s); its code, once its cells are joined,
# is held to `MAX_FILE_BYTES` like a module's (`parse_source`).
MAX_NOTEBOOK_BYTES = bounded.NOTEBOOK_BYTES
# LibCST's native parser overflows its stack somewhere past 3,000 to 8,000 nested nodes
# (measured with LibCST 1.9: 4,000 chained subscripts crash it, 3,000 do not; 8,000
# additions or attribute accesses crash it, 4,000 do not).
_MAX_LIBCST_DEPTH = 3000
# LibCST's parse time grows about fourfold per level of brackets nested in a `match`
# statement's pattern (measured with LibCST 1.9: mapping patterns nested 8 deep take 0.9 s,
# 12 about 47 s; class patterns holding groups, `A((A((...))))`, or or-patterns in groups
# the same per bracket); more than this many levels is parsed under the time limit.
_MAX_PATTERN_NESTING = 5
# Files over this size are analysed in a child process (its memory goes back to the system
# when it ends), one at a time in a run, under a time limit that grows with their size.
GUARD_BYTES = ELIDE_MIN_BYTES
# The time limit of a guarded parse (and the analysis that follows it), in seconds.
PARSE_TIME_LIMIT = 20.0

_CASE_LINE = re.compile(r"^[ \t]*case\b", re.MULTILINE)

# --- reading and parsing ----------------------------------------------------------------


def _max_nesting(text: str) -> int:
    depth = best = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth > best:
                best = depth
        elif ch in ")]}" and depth:
            depth -= 1
    return best


def parse_error(display: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic("TL001", "parse-error", "error", message, display,
                      Range(Position(line, column), Position(line, column)), kind="defect")


def _too_large(display: str, size: int, limit: int = MAX_FILE_BYTES) -> Diagnostic:
    return parse_error(display, f"file too large to lint ({size / 2**20:.1f} MiB; the limit is "
                        f"{limit // 2**20} MiB): exclude it in the configuration")


def _libcst_depth_risk(tree, start: int = 0) -> bool:
    """True when LibCST would nest deeper than its native parser survives: CPython keeps
    `a and b and ...` flat, LibCST nests one BooleanOperation per operator."""
    import ast

    stack = [(tree, start)]
    while stack:
        node, depth = stack.pop()
        depth += len(node.values) - 1 if isinstance(node, ast.BoolOp) else 1
        if depth > _MAX_LIBCST_DEPTH:
            return True
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))
    return False


def _deep_expression_risk(tree, text: str) -> bool:
    """`_libcst_depth_risk`, walked only where it can be true: statements are followed
    (their nesting counts), and an expression is measured only when its source spans at
    least `_MAX_LIBCST_DEPTH // 2` characters (every nesting level takes one or more). Python
    3.11 and 3.12 refuse deep chains themselves, but 3.10 compiles `a + a + ...` or
    `y[0][0]...` of any length and 3.13 several thousand levels, which crash LibCST's
    native parser (a segfault, fatal to a single-process run)."""
    import ast

    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    last = len(starts) - 1

    def span(node) -> int | None:
        line, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if line is None or end is None:
            return None
        first = starts[min(line, last) - 1] + node.col_offset
        return starts[min(end, last) - 1] + (node.end_col_offset or 0) - first

    containers = (ast.stmt, ast.excepthandler) + ((ast.match_case,) if hasattr(ast, "match_case") else ())
    threshold = _MAX_LIBCST_DEPTH // 2
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and depth + 1 < threshold:
            length = span(node)  # a simple statement: nothing in it is longer than itself
            if length is not None and length < threshold:
                continue
        depth += 1
        if depth > _MAX_LIBCST_DEPTH:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            # a dotted module name is one string for CPython, a chain of Attribute nodes for LibCST
            dots = [alias.name.count(".") for alias in node.names] + [(getattr(node, "module", None) or "").count(".")]
            if depth + max(dots) > _MAX_LIBCST_DEPTH:
                return True
        for child in ast.iter_child_nodes(node):
            if isinstance(child, containers):
                stack.append((child, depth))
                continue
            length = span(child)
            if length is None:  # no position (`arguments`, `withitem`): measure its parts
                stack.append((child, depth))
                continue
            if length >= threshold and _libcst_depth_risk(child, depth):
                return True
    return False


class NeedsGuard(Exception):
    """Raised by `parse_source(..., guard=True)` before LibCST runs on a file it might crash
    on or spend minutes on: the caller analyses the file in a child process under a time
    limit (tlint/guard.py). `reason` says which risk it is."""

    def __init__(self, reason: str, size: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.size = size  # the text's length, for a "large" one


def _pattern_nesting_risk(text: str, tree) -> bool:
    """True when a `case` pattern nests deeper than `_MAX_PATTERN_NESTING` brackets.

    LibCST's parse time grows exponentially with a pattern's nesting, whatever nests:
    mapping and sequence patterns, class patterns, or-patterns and `as` patterns in
    parentheses, parenthesised groups. Each of those levels opens a bracket, so the
    pattern's bracket depth is counted on Python's own tokens (a bracket in a string is
    not one), from the `case` keyword to the `:` (or the guard's `if`) that ends the
    pattern, in the lines of each outermost `match` statement of Python's tree `tree`
    (each line tokenized once)."""
    if "case" not in text or not _CASE_LINE.search(text):
        return False
    import ast
    import io
    import tokenize

    lines = text.splitlines(keepends=True)
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if type(node) is not ast.Match:
            stack.extend(ast.iter_child_nodes(node))
            continue
        source = "".join(lines[node.lineno - 1:node.end_lineno])
        depth, in_pattern, line_start = 0, False, True
        try:
            for token in tokenize.generate_tokens(io.StringIO(source).readline):
                kind, value = token.type, token.string
                if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                    line_start = True
                    continue
                if kind in (tokenize.NL, tokenize.COMMENT):
                    continue
                if line_start and kind == tokenize.NAME and value == "case":
                    depth, in_pattern = 0, True
                elif in_pattern and kind == tokenize.NAME and value == "if" and depth == 0:
                    in_pattern = False  # the guard is an expression, not a pattern
                elif in_pattern and kind == tokenize.OP:
                    if value in "([{":
                        depth += 1
                        if depth > _MAX_PATTERN_NESTING:
                            return True
                    elif value in ")]}":
                        depth -= 1
                    elif value == ":" and depth == 0:
                        in_pattern = False
                line_start = False
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - Python compiled it
            return True
    return False


def parse_source(text: str, display: str, *, syntax_only: bool = False,
                 statement_lines: list | None = None, timer: Timer | None = None,
                 guard: bool = False, elided: list | None = None) -> cst.Module | Diagnostic | Any:
    """The LibCST module, or a TL001 diagnostic saying why the file cannot be parsed.
    With `syntax_only`, a file Python compiles gives Python's own `ast.Module` instead
    (LibCST is not run); one it refuses still goes to LibCST, as below. A `statement_lines`
    list receives, from Python's tree, the first line of each top-level statement (its
    first decorator's), which `positions.node_ranges` places nodes from.

    CPython's own parser looks first: it is fast, it refuses what Python cannot compile
    (nesting beyond its limits, NUL bytes) before LibCST spends minutes on it or crashes,
    and its messages and positions are the clearer. A file it calls a syntax error still
    goes to LibCST, which may know newer syntax than the running Python. `timer` (the
    profile's hook) is charged for LibCST's parse separately.

    With `guard`, a parse LibCST might crash on or spend minutes on raises `NeedsGuard`
    instead of running here: a file Python refuses (the depth guards need Python's tree;
    LibCST may still know its syntax), one over `GUARD_BYTES`, one with deeply nested
    `match` patterns.

    An `elided` list asks for the constant tables of a large file to be left out of
    LibCST's tree (tlint/elide.py) and receives their spans."""
    if len(text) > MAX_FILE_BYTES:
        return _too_large(display, len(text.encode("utf-8", "surrogatepass")))
    if "\x00" in text:  # CPython refuses them (a ValueError before 3.12); LibCST does not
        line = text.count("\n", 0, text.index("\x00")) + 1
        return parse_error(display, "syntax error: source code cannot contain null bytes", line)
    py_error: SyntaxError | None = None
    try:
        tree = compile(text, display, "exec", flags=0x400, dont_inherit=True)  # ast only
    except SyntaxError as exc:
        py_error = exc
    except (RecursionError, MemoryError):
        return parse_error(display, "file too deeply nested to parse (beyond what Python itself can compile)")
    except ValueError as exc:  # pragma: no cover - NUL bytes are handled above
        return parse_error(display, f"syntax error: {exc}")
    else:
        if len(text) >= _MAX_LIBCST_DEPTH // 2 and _deep_expression_risk(tree, text):
            return parse_error(display, "expression too deeply nested to parse (more than "
                                f"{_MAX_LIBCST_DEPTH} levels, as in a chain of that many operators)")
    if py_error is not None and (("(" in text or "[" in text or "{" in text)
                                 and _max_nesting(text) > _MAX_SAFE_NESTING):
        return parse_error(display, f"syntax error: {py_error.msg}", py_error.lineno or 1, py_error.offset or 1)
    if syntax_only and py_error is None:
        return tree  # pre-filtered (see `prefilter_skips`): Python's tree, LibCST not run
    if guard:
        if py_error is not None:
            raise NeedsGuard("Python refuses it")
        if len(text) > GUARD_BYTES:
            raise NeedsGuard("large", len(text))
        if _pattern_nesting_risk(text, tree):
            raise NeedsGuard("nested match patterns")
    if statement_lines is not None and py_error is None:
        statement_lines.extend(min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
                               for stmt in tree.body)  # type: ignore[attr-defined]  # "exec": an ast.Module
    source = text
    if elided is not None and py_error is None and len(text) >= ELIDE_MIN_BYTES:
        from tlint.elide import elide_tables

        source, spans = elide_tables(text, tree)
        elided.extend(spans)
    try:
        return cst.parse_module(source) if timer is None else timer("phase: LibCST parse", cst.parse_module, source)
    except cst.ParserSyntaxError as exc:
        # LibCST's native parser leaves raw_column at 0 (and raw_line often on the line
        # before); CPython's own parser gives the real position and a clearer message.
        if py_error is not None:
            return parse_error(display, f"syntax error: {py_error.msg}", py_error.lineno or 1, py_error.offset or 1)
        message = exc.message.strip().splitlines()[0] if exc.message.strip() else "invalid syntax"
        return parse_error(display, f"LibCST cannot parse this file, although Python accepts it: {message}",
                            max(exc.raw_line, 1), exc.raw_column + 1)
    except RecursionError:
        return parse_error(display, "file too deeply nested to parse (recursion limit)")
    except Exception as exc:  # the native parser reports some failures as other types
        return parse_error(display, f"cannot parse: {type(exc).__name__}: {exc}")


def read_source(path: Path, display: str) -> bytes | Diagnostic:
    """A source file's bytes (one read: the cache key and the analysis use the same
    bytes), or TL001 when it cannot be read, is not a regular file (a FIFO, a device, a
    link to one) or is too large: `tlint.bounded.read_bytes`, which checks the type and
    size on the opened file before anything is read and never reads more than the limit
    (a file that grows, or is replaced by a FIFO, between discovery and this read is TL001
    too). A notebook (`.ipynb`) may be up to `MAX_NOTEBOOK_BYTES`."""
    limit = source_limit(path)
    try:
        return bounded.read_bytes(path, limit)
    except bounded.Refused as refusal:
        if refusal.kind == "size":
            return _too_large(display, refusal.size, limit)
        return parse_error(display, f"not a regular file ({bounded.kind_of(refusal.mode)}): it is not read")
    except OSError as exc:
        if os.path.islink(path) and not os.path.exists(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return parse_error(display, "cannot read file: broken symbolic link (or a symlink loop) to "
                               + printable(target))
        return parse_error(display, f"cannot read file: {exc.strerror or exc}")


def decode_data(data: bytes, display: str) -> str | Diagnostic:
    """The text of a source file's bytes, decoded as Python does (BOM, PEP 263), or TL001."""
    try:
        return decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            line_start = data.rfind(b"\n", 0, exc.start) + 1
            line = data.count(b"\n", 0, exc.start) + 1
            column = len(data[line_start:exc.start].decode(exc.encoding, "replace")) + 1
            return parse_error(display, f"cannot decode file as {exc.encoding}: {exc.reason} "
                                f"(byte 0x{data[exc.start]:02x})", line, column)
        return parse_error(display, f"cannot decode file: {exc}")


def read_text(path: Path, display: str) -> str | Diagnostic:
    data = read_source(path, display)
    return data if isinstance(data, Diagnostic) else decode_data(data, display)


# --- the pre-filter ---------------------------------------------------------------------
# A file that contains none of the tokens of the enabled rules (`Rule.tokens`) and of the
# fact extractors (`tlint.views.facts.TOKENS`) cannot give a finding or a fact: it is
# syntax-checked by Python's own compiler (TL001 as ever) and its suppression comments are
# read (TL002 as ever), but LibCST never parses it; its `call-args` facts come from
# Python's tree. `tlint check --no-prefilter` (or `TLINT_NO_PREFILTER=1`, read by the CLI)
# turns it off: `analyse_file(..., prefilter=False)`.


_TOKENS: dict[int, tuple[Settings, Any]] = {}


def needed_tokens(settings: Settings, facts_only: bool = False) -> tuple[str, ...] | None:
    """The lower-case tokens one of which a file must contain (or one of the rules'
    `patterns` match) to be parsed under `settings` (`facts_only`: for its facts alone),
    or None when every file is needed."""
    spec = _prefilter_spec(settings, facts_only)
    return None if spec is None else spec[0]


def _prefilter_spec(settings: Settings, facts_only: bool):
    cached = _TOKENS.get(id(settings) * 2 + facts_only)
    if cached is not None and cached[0] is settings:
        return cached[1]
    import re

    from tlint.views import facts as facts_view

    tokens = facts_view.prefilter_tokens(settings)
    patterns: set[str] = set()
    if tokens is not None and not facts_only:
        for rule in settings.ruleset().rules:
            if rule.code in ENGINE_CODES:
                continue
            needed = rule.needed_tokens()
            if needed is None:
                tokens = None
                break
            tokens |= needed
            patterns.update(rule.patterns)
    spec = None
    if tokens is not None:
        # the words most training code has first: they decide most parsed files at once
        common = ("torch", "forward", "transformer", "mask", "pad")
        ordered = tuple(sorted({t.lower() for t in tokens},
                               key=lambda t: (common.index(t) if t in common else len(common), len(t), t)))
        spec = (ordered, re.compile("|".join(f"(?:{p})" for p in sorted(patterns))) if patterns else None)
    _TOKENS[id(settings) * 2 + facts_only] = (settings, spec)
    return spec


def prefilter_skips(text: str, settings: Settings, facts_only: bool = False) -> bool:
    """True when no enabled rule or fact extractor needs this file's tree."""
    spec = _prefilter_spec(settings, facts_only)
    if spec is None:
        return False
    tokens, pattern = spec
    lowered = text.lower()
    for token in tokens:
        if token in lowered:
            return False
    if pattern is not None and pattern.search(lowered):
        return False
    from tlint.views.facts import ast_facts_exact

    return ast_facts_exact(text)
