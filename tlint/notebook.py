"""Jupyter notebooks (`.ipynb`): their code cells as one Python source, and back.

A notebook is JSON (nbformat 4), read with the standard library's `json`. Its code cells
are joined into one source that the engine parses once, like a module: each cell's text
(a line end added when it has none), then one empty line, the boundary, before the next
cell. That empty line keeps every position unambiguous: an edit that starts where the
boundary line starts belongs to the cell above (an insertion after its last statement),
one on the line after it to the cell below. The cell map (`CellMap`: per cell, its number
and where its lines start in the joined source) turns positions back into the notebook's
own: cell N (1-based, counted over all the notebook's cells, markdown included: `cells[N-1]`
in the JSON), line and column within it.

IPython syntax is masked so the rest parses, keeping every line's length (and so every
position): a line magic (`%matplotlib inline`), a shell escape (`!pip install ...`), a
help query (`model?`, `?model`), an assigned one (`files = !ls`) or an automagic (a line
magic or shell alias without its `%`, `pip install x`, `cd data`: a line starting with the
name that is not Python by itself) becomes a comment, or
`0` and a comment where a statement must stand; a cell magic's first line (`%%time`) is
masked the same way, and the body of one that does not run its body as Python
(`%%bash`, `%%writefile`, `%%html`, ...) is masked whole. A cell is masked only when it
does not compile as it is, so `%` or `!` at the start of a line inside a bracket or a
string stays.

`--fix` (`apply_fixes`) edits the cells' texts and writes back only the `source` values
of the cells it changed: everything else in the file (outputs, metadata, key order,
indentation, the final newline) keeps its bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range

SUFFIX = ".ipynb"
_NEWLINE = re.compile(r"\r\n|\r|\n")
# the cell magics whose body is Python that IPython runs in the kernel
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy",
                                 "tlint"})
# IPython's automagics: the line magics (and the shell aliases) it runs without their `%` when
# a line starts with the name (`pip install x`, `cd data`, `ls -l`), as IPython 8 and
# ipykernel define them
_AUTOMAGICS = frozenset("""
    alias alias_magic autoawait autocall automagic autosave bookmark cat cd clear code_wrap colors conda config
    connect_info cp debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll
    load load_ext loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic mamba man matplotlib
    micromamba mkdir more mv notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision
    prun psearch psource pushd pwd pycat pylab qtconsole quickref recall rehashx reload_ext rep rerun reset
    reset_selective rm rmdir run save sc set_env store sx system tb time timeit unalias unload_ext uv who who_ls
    whos xdel xmode""".split())
# the name, then arguments or nothing (not an assignment: `config = ...` is Python)
_AUTOMAGIC_START = "(?:" + "|".join(sorted(_AUTOMAGICS)) + r")(?:[ \t]+(?![ \t=]|[-+*/%&|^<>@]=)|[ \t]*$)"
_AUTOMAGIC = re.compile(_AUTOMAGIC_START)
_CANDIDATE = re.compile(r"^[ \t]*[%!?]|\?[ \t]*$|=[ \t]*[%!]|^[ \t]*" + _AUTOMAGIC_START, re.MULTILINE)
_HELP = re.compile(r"^[ \t]*(?:\?\??[\w.]+|[\w.]+\?\??)[ \t]*$")
_ASSIGNED = re.compile(r"^[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*(?=[%!])")
# cells[N-1] is cell N: (cell number, first line in the joined source, number of lines)
CellMap = list[tuple[int, int, int]]


def is_notebook(path: Path | str) -> bool:
    name = path if isinstance(path, str) else path.name
    return name[-6:].lower() == SUFFIX


class NotebookError(ValueError):
    """The text is not a notebook tlint can read: `message`, at `line`/`column` of the JSON."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass
class Cell:
    number: int  # 1-based position in the notebook's `cells`
    text: str  # the cell's source, as written
    masked: str  # the same, IPython syntax masked (same lines, same lengths)
    masked_lines: frozenset[int]  # 1-based lines of the cell that were masked


@dataclass
class Notebook:
    cells: list[Cell]  # the code cells with text, in order
    source: str  # the joined, masked source the engine parses
    cell_map: CellMap


def _normalized(text: str) -> str:
    return text if not text or text.endswith(("\n", "\r")) else text + "\n"


def _cell_text(cell: dict, number: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise NotebookError(f"cell {number}: `source` is neither a string nor a list of strings")


def _cells(document) -> list[dict]:
    if not isinstance(document, dict):
        raise NotebookError("not a Jupyter notebook: the JSON is not an object")
    if "cells" not in document:
        if "worksheets" in document:
            raise NotebookError("notebook format 3 is not supported: convert it with "
                                "`jupyter nbconvert --to notebook --nbformat 4`")
        raise NotebookError("not a Jupyter notebook: no `cells` list")
    cells = document["cells"]
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise NotebookError("not a Jupyter notebook: `cells` is not a list of objects")
    return cells


def _python(document: dict) -> bool:
    """False for a notebook whose kernel is another language (R, Julia, ...)."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for value in ((metadata.get("language_info") or {}).get("name") if isinstance(metadata.get("language_info"), dict)
                  else None,
                  (metadata.get("kernelspec") or {}).get("language") if isinstance(metadata.get("kernelspec"), dict)
                  else None):
        if isinstance(value, str) and value.strip() and not value.strip().lower().startswith("python"):
            return False
    return True


def parse_json(text: str):
    """The notebook's JSON document, or `NotebookError` at the place the JSON breaks."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"invalid notebook JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise NotebookError("invalid notebook JSON: nested too deeply") from None
    except ValueError as exc:  # a number Python refuses to convert (more than 4300 digits)
        raise NotebookError(f"invalid notebook JSON: {exc}") from None


def load(text: str) -> Notebook:
    """The code cells of the notebook whose JSON is `text`, masked and joined."""
    document = parse_json(text)
    cells = _cells(document)
    out: list[Cell] = []
    if _python(document):
        for number, cell in enumerate(cells, start=1):
            if cell.get("cell_type") != "code":
                continue
            body = _cell_text(cell, number)
            if not body:
                continue
            masked, lines = mask(body)
            out.append(Cell(number, body, masked, lines))
    parts: list[str] = []
    cell_map: CellMap = []
    line = 1
    for code in out:
        body = _normalized(code.masked)
        count = len(_NEWLINE.findall(body))
        cell_map.append((code.number, line, count))
        parts.append(body + "\n")
        line += count + 1
    return Notebook(out, "".join(parts), cell_map)


def load_diagnostic(text: str, display: str) -> Notebook | Diagnostic:
    """`load`, or TL001 for the file when it is not a notebook tlint can read."""
    from tlint.reading import parse_error

    try:
        return load(text)
    except NotebookError as exc:
        return parse_error(display, exc.message, exc.line, exc.column)


def source_for_imports(text: str) -> str:
    """The joined code of a notebook (for the project's import scan); "" when unreadable."""
    try:
        return load(text).source
    except NotebookError:
        return ""


# --- masking IPython syntax ---------------------------------------------------------------


def _comment(line: str, statement: bool) -> str:
    """`line` (IPython syntax after its indentation) as Python of the same length: a comment,
    or, where a statement must stand (`statement`), `0` and a comment."""
    body = line.lstrip(" \t")
    indent = line[:len(line) - len(body)]
    if not body:
        return line
    if statement and indent:
        return indent + ("0" if len(body) == 1 else "0#" + body[2:])
    return indent + "#" + body[1:]


def _automagic(body: str) -> bool:
    """`body` (a line without its indentation) is an automagic call: it starts with an
    automagic name and is not Python by itself (`ls -l` and `pwd` are, `pip install x` is not)."""
    if not _AUTOMAGIC.match(body):
        return False
    try:
        compile(body, "<line>", "exec", flags=0x400, dont_inherit=True)  # ast only
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


def mask(text: str) -> tuple[str, frozenset[int]]:
    """`text` (one cell) with its IPython syntax masked, and the 1-based lines masked."""
    if not _CANDIDATE.search(text):
        return text, frozenset()
    try:
        compile(text, "<cell>", "exec", flags=0x400, dont_inherit=True)  # ast only
        return text, frozenset()
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    pieces = _NEWLINE.split(text)
    ends = _NEWLINE.findall(text)
    masked: set[int] = set()
    first = pieces[0].lstrip(" \t")
    whole = False
    if first.startswith("%%"):
        name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        whole = name not in _PYTHON_CELL_MAGICS
        pieces[0] = _comment(pieces[0], False)
        masked.add(1)
    continued = False
    for i in range(1 if masked else 0, len(pieces)):
        line = pieces[i]
        body = line.lstrip(" \t")
        if whole or continued:
            if body:
                pieces[i] = _comment(line, False)
            masked.add(i + 1)
        elif body[:1] in ("%", "!") or _HELP.match(line) or _automagic(body):
            pieces[i] = _comment(line, True)
            masked.add(i + 1)
        else:
            assigned = _ASSIGNED.match(line)
            if assigned is None:
                continued = False
                continue
            at = assigned.end()
            rest = line[at:]
            pieces[i] = line[:at] + ("0" if len(rest) == 1 else "0#" + rest[2:])
            masked.add(i + 1)
        continued = line.endswith("\\")
    out = [piece + end for piece, end in zip(pieces, ends)]
    if len(pieces) > len(ends):
        out.append(pieces[-1])
    return "".join(out), frozenset(masked)


# --- positions: joined source -> cells ------------------------------------------------------


def cell_position(cell_map: CellMap, position: Position) -> tuple[int, Position]:
    """(cell number, position within the cell) of a position in the joined source. The
    boundary line after a cell is the end of that cell (the line after its last one)."""
    line = position.line
    chosen = cell_map[0]
    low, high = 0, len(cell_map) - 1
    while low <= high:  # the last cell starting at or before `line`
        middle = (low + high) // 2
        if cell_map[middle][1] <= line:
            chosen = cell_map[middle]
            low = middle + 1
        else:
            high = middle - 1
    number, first, count = chosen
    if line < first:
        return number, Position(1, 1)
    within = line - first + 1
    if within > count:  # the boundary line (or beyond): the end of the cell
        return number, Position(count + 1, 1)
    return number, Position(within, position.column)


def cell_range(cell_map: CellMap, rng: Range) -> tuple[int, Range] | None:
    """(cell, range within it) of a joined-source range, or None when it spans cells."""
    cell, start = cell_position(cell_map, rng.start)
    end_cell, end = cell_position(cell_map, rng.end)
    if end_cell != cell:
        return None
    return cell, Range(start, end)


def to_cells(diagnostics: list[Diagnostic], cell_map: CellMap) -> list[Diagnostic]:
    """The diagnostics of a notebook with positions in its cells (`cell` set); a fix with
    an edit that spans cells is dropped (the finding stays)."""
    from dataclasses import replace

    if not cell_map:
        return diagnostics
    out = []
    for diag in diagnostics:
        if diag.cell is not None:  # mapped already
            out.append(diag)
            continue
        where = cell_range(cell_map, diag.range)
        if where is None:  # a finding over several cells: shown from its start
            cell, start = cell_position(cell_map, diag.range.start)
            where = (cell, Range(start, start))
        fix = diag.fix
        if fix is not None:
            edits = []
            for edit in fix.edits:
                placed = cell_range(cell_map, edit.range)
                if placed is None:
                    fix = None
                    break
                edits.append(Edit(placed[1], edit.content, placed[0]))
            else:
                fix = Fix(fix.applicability, tuple(edits), fix.message)
        out.append(replace(diag, range=where[1], cell=where[0], fix=fix))
    return out


# --- reading cells for reporters ------------------------------------------------------------


def cell_texts(text: str) -> list[str | None]:
    """Each cell's source (None where unreadable) of the notebook whose JSON is `text`;
    [] when it is not a notebook."""
    try:
        cells = _cells(parse_json(text))
    except NotebookError:
        return []
    out: list[str | None] = []
    for number, cell in enumerate(cells, start=1):
        try:
            out.append(_cell_text(cell, number))
        except NotebookError:
            out.append(None)
    return out


# --- --fix: edits to cells, cells back into the JSON ----------------------------------------


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, int]:
    """The notebook JSON `text` with the fixes (edits in cell positions) applied: the
    non-overlapping ones, in order, as long as the joined source still compiles
    (`tlint.fixes.choose_fixes`), none that touches a masked (IPython) line. Only the
    changed cells' `source` values are rewritten. (new text, fixes applied)."""
    from tlint.fixes import FileLines, choose_fixes

    try:
        notebook = load(text)
    except NotebookError:
        return text, 0
    starts = {number: first for number, first, _ in notebook.cell_map}
    lines = FileLines(notebook.source)
    masked_spans = []
    for cell in notebook.cells:
        for line in cell.masked_lines:
            joined = Position(starts[cell.number] + line - 1, 1)
            begin = lines.offset(joined)
            masked_spans.append((begin, begin + len(lines.line(joined.line))))
    joined_fixes = []
    for one in fixes:
        edits = []
        for edit in one.edits:
            first = starts.get(edit.cell) if edit.cell is not None else None
            if first is None:
                break
            shift = first - 1
            rng = Range(Position(edit.range.start.line + shift, edit.range.start.column),
                        Position(edit.range.end.line + shift, edit.range.end.column))
            begin, end = lines.offset(rng.start), lines.offset(rng.end)
            if any((begin < stop and start < end) or start < begin < stop for start, stop in masked_spans):
                break
            edits.append(Edit(rng, edit.content))
        else:
            joined_fixes.append(Fix(one.applicability, tuple(edits), one.message))
    new_source, kept = choose_fixes(notebook.source, joined_fixes)
    if not kept:
        return text, 0
    del new_source  # (compiled; the cells are edited from their own text below)
    spans = sorted(span for fix_spans in kept for span in fix_spans)
    new_texts: dict[int, str] = {}
    offset = 0
    for cell in notebook.cells:
        body = _normalized(cell.text)
        end = offset + len(body)
        mine = [(s - offset, e - offset, content) for s, e, content in spans if offset <= s and e <= end]
        if mine:
            out, cursor = [], 0
            for s, e, content in mine:
                out.append(body[cursor:s])
                out.append(content)
                cursor = e
            out.append(body[cursor:])
            new = "".join(out)
            if new != body:
                if body != cell.text and new.endswith("\n"):  # the line end `_normalized` added
                    new = new[:-1]
                new_texts[cell.number] = new
        offset = end + 1  # the boundary line
    if not new_texts:
        return text, 0
    return replace_sources(text, new_texts), len(kept)


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    return match.end() if match else at


def _members(text: str, at: int):
    """(key, value start, value end) of the JSON object starting at `at`."""
    from json.decoder import scanstring  # type: ignore[attr-defined]

    at = _skip(text, at + 1)
    if text[at] == "}":
        return
    while True:
        key, at = scanstring(text, at + 1)
        at = _skip(text, at)
        at = _skip(text, at + 1)  # the colon
        end = _DECODER.raw_decode(text, at)[1]
        yield key, at, end
        at = _skip(text, end)
        if text[at] != ",":
            return
        at = _skip(text, at + 1)


def _items(text: str, at: int):
    """(start, end) of each value of the JSON array starting at `at`."""
    at = _skip(text, at + 1)
    if text[at] == "]":
        return
    while True:
        end = _DECODER.raw_decode(text, at)[1]
        yield at, end
        at = _skip(text, end)
        if text[at] != ",":
            return
        at = _skip(text, at + 1)


def source_spans(text: str) -> list[tuple[int, int] | None]:
    """Per cell (in order), the [start, end) of its `source` value in the JSON `text`."""
    cells = None
    for key, start, end in _members(text, _skip(text, 0)):
        if key == "cells":
            cells = (start, end)
    if cells is None:
        return []
    out: list[tuple[int, int] | None] = []
    for start, _ in _items(text, cells[0]):
        found = None
        if text[start] == "{":
            for key, value_start, value_end in _members(text, start):
                if key == "source":
                    found = (value_start, value_end)
        out.append(found)
    return out


def _line_indent(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    head = text[line_start:at]
    return head[:len(head) - len(head.lstrip(" \t"))]


def _serialised(text: str, span: tuple[int, int], new: str, ascii_only: bool) -> str:
    """`new` as a `source` value in the style of the one at `span` (a list of lines or one
    string; the old list's spacing and indentation)."""
    start, end = span
    if text[start] != "[":
        return json.dumps(new, ensure_ascii=ascii_only)
    parts = [json.dumps(line, ensure_ascii=ascii_only) for line in new.splitlines(True)]
    if not parts:
        return "[]"
    items = list(_items(text, start))
    if items:
        opening = text[start + 1:items[0][0]]
        closing = text[items[-1][1]:end - 1]
        between = text[items[0][1]:items[1][0]] if len(items) > 1 else "," + opening
    else:
        key_indent = _line_indent(text, start)
        opening = "\n" + key_indent + " "
        closing = "\n" + key_indent
        between = "," + opening
    return "[" + opening + between.join(parts) + closing + "]"


def replace_sources(text: str, new_texts: dict[int, str]) -> str:
    """The notebook JSON `text` with the `source` of each cell number in `new_texts`
    replaced; every other byte kept."""
    spans = source_spans(text)
    ascii_only = text.isascii()
    out, cursor = [], 0
    for number in sorted(new_texts):
        span = spans[number - 1] if 1 <= number <= len(spans) else None
        if span is None:
            continue
        out.append(text[cursor:span[0]])
        out.append(_serialised(text, span, new_texts[number], ascii_only))
        cursor = span[1]
    out.append(text[cursor:])
    return "".join(out)
