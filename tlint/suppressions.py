"""Inline and file-level suppression comments, and TL002 for the ones that did nothing.

Forms: `# tlint: ignore[TL101]`, `# tlint: ignore[missing-attention-mask]`, bare
`# tlint: ignore`, `# noqa: TL101`, and file-level `# tlint: ignore-file[TL301]` /
`# tlint: ignore-file`. A list that names no rule (`ignore[]`, `ignore[ , ]`) suppresses
nothing: only the bare form suppresses every code (TL002 reports the empty list). A line
comment applies to findings that start or end on its line, or that start on the line
below when the comment stands alone on its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tlint.diagnostics import Diagnostic, Edit, Fix, Position, Range

_TLINT = re.compile(r"#\s*tlint:\s*(ignore-file|ignore)\b(?:\[([^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*([A-Za-z0-9_\-]+(?:\s*,\s*[A-Za-z0-9_\-]+)*))?", re.IGNORECASE)
NEVER_SUPPRESSED = frozenset({"TL003"})
_LINES = re.compile(r"\r\n|\r|\n")


@dataclass
class Suppression:
    line: int
    column: int  # 1-based column of the `#`
    end_column: int
    selectors: tuple[str, ...]  # empty: all codes, unless `names_none`
    file_level: bool
    standalone: bool  # the comment is alone on its line
    kind: str  # "tlint" or "noqa"
    used: set[str] = field(default_factory=set)
    text: str = ""  # the whole line (for the fix that removes the comment)
    bracket: tuple[int, int] | None = None  # 1-based columns [start, end) of the selector list
    # `ignore[]`: a list that names no rule suppresses nothing (a bare `ignore` suppresses all)
    names_none: bool = False

    @property
    def blanket(self) -> bool:
        """Whether it suppresses every code (a bare `# tlint: ignore`, `# noqa`)."""
        return not self.selectors and not self.names_none

    def matches(self, code: str, name: str) -> bool:
        return self.blanket or code in self.selectors or name in self.selectors


def parse_suppressions(text: str) -> list[Suppression]:
    """The suppression comments of a file: comments only, as Python's tokenizer finds them
    (`# tlint: ignore` inside a string or a docstring is text, not a comment). A file the
    tokenizer refuses (it does not parse: TL001) falls back to a search of its raw lines."""
    out: list[Suppression] = []
    if "tlint" not in text and "noqa" not in text and "NOQA" not in text:
        return out
    # Lines end at \r\n, \r or \n, as the positions of findings count them (str.splitlines
    # also splits at form feeds, \x1c-\x1e, \x85, \u2028 and \u2029).
    lines = _LINES.split(text)
    candidates = [n for n, line in enumerate(lines, start=1)
                  if "#" in line and (_TLINT.search(line) or _NOQA.search(line))]
    if not candidates:
        return out
    comments = _comments(text, candidates[-1])
    for lineno in candidates:
        line = lines[lineno - 1]
        if comments is None:
            starts = [0]  # the tokenizer refused the file: the raw line, as before
        else:
            starts = comments.get(lineno, [])
        for start in starts:
            found = _suppression(line, lineno, start)
            if found is not None:
                out.append(found)
                break
    return out


def _comments(text: str, last_line: int) -> dict[int, list[int]] | None:
    """Line -> the 0-based columns where its comments start, up to `last_line`; None when
    the tokenizer refuses the file before reaching that line."""
    import io
    import tokenize

    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    found: dict[int, list[int]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.setdefault(token.start[0], []).append(token.start[1])
            elif token.start[0] > last_line:
                break
    except (tokenize.TokenError, SyntaxError):
        return None
    return found


def _suppression(line: str, lineno: int, start: int) -> Suppression | None:
    """The suppression in `line`'s comment that starts at column `start` (0-based), if any."""
    standalone = line.lstrip().startswith("#")
    match = _TLINT.search(line, start)
    if match:
        selectors = tuple(s.strip() for s in (match.group(2) or "").split(",") if s.strip())
        bracket = (match.start(2) + 1, match.end(2) + 1) if match.group(2) is not None else None
        return Suppression(lineno, match.start() + 1, match.end() + 1, selectors,
                           match.group(1).lower() == "ignore-file", standalone, "tlint",
                           text=line, bracket=bracket, names_none=bracket is not None and not selectors)
    match = _NOQA.search(line, start)
    if match:
        codes = tuple(s.strip().upper() for s in (match.group(1) or "").split(",") if s.strip())
        if codes and not any(c.startswith("TL") for c in codes):
            return None  # a noqa for another tool
        return Suppression(lineno, match.start() + 1, match.end() + 1, codes, False, standalone, "noqa")
    return None


def apply_suppressions(diagnostics, suppressions: list[Suppression]) -> None:
    """Mark suppressed diagnostics (in place) and record which comments were used."""
    if not suppressions:
        return
    by_line: dict[int, list[Suppression]] = {}
    file_level = []
    for sup in suppressions:
        if sup.file_level:
            file_level.append(sup)
        else:
            by_line.setdefault(sup.line, []).append(sup)
    for diag in diagnostics:
        if diag.code in NEVER_SUPPRESSED:
            continue
        start, end = diag.range.start.line, diag.range.end.line
        candidates = list(file_level)
        candidates += by_line.get(start, [])
        if end != start:
            candidates += by_line.get(end, [])
        candidates += [s for s in by_line.get(start - 1, []) if s.standalone]
        for sup in candidates:
            if sup.matches(diag.code, diag.name):
                diag.suppressed = True
                sup.used.add(diag.code)
                break


# --- TL002: unused suppressions and the fixes that remove them ---------------------------


def unused_suppressions(suppressions: list[Suppression], display: str, enabled: set[str]) -> list[Diagnostic]:
    """TL002 for each `# tlint: ignore` of a file that suppressed nothing (or names codes
    that are unknown or suppressed nothing), with the fix that removes it."""
    from tlint.rules import lookup

    out = []

    def report(sup: Suppression, message: str, fix: Fix | None = None) -> None:
        where = Range(Position(sup.line, sup.column), Position(sup.line, sup.end_column))
        out.append(Diagnostic("TL002", "unused-suppression", "info", message, display, where, fix, kind="practice"))

    for sup in suppressions:
        if sup.kind != "tlint":
            continue
        if sup.names_none:
            report(sup, "suppression names no rule (`[]`): it suppresses nothing; name the codes, "
                        "or write a bare `# tlint: ignore`", _remove_suppression(sup))
            continue
        if not sup.selectors:
            if not sup.used:
                report(sup, "suppression comment suppresses nothing", _remove_suppression(sup))
            continue
        rules = {s: lookup(s) for s in sup.selectors}
        unknown = [s for s, rule in rules.items() if rule is None]
        unused = [s for s, rule in rules.items() if rule is not None and rule.code in enabled
                  and rule.code not in sup.used]
        if unknown:
            report(sup, f"suppression names unknown rule(s): {', '.join(unknown)}")
        if unused:
            kept = [s for s in sup.selectors if s not in unused]
            report(sup, f"unused suppression of {', '.join(unused)}",
                   _keep_selectors(sup, kept) if kept else _remove_suppression(sup))
    return out


def _remove_suppression(sup: Suppression) -> Fix | None:
    """Delete the comment (its whole line when it stands alone). Text after it on the line
    is its reason (`# tlint: ignore[TL101] padded upstream`) and goes too, unless it is
    another comment (`# tlint: ignore  # type: ignore`), which stays."""
    line = sup.text
    if not line or line[sup.column - 1:sup.end_column - 1].lstrip()[:1] != "#":
        return None
    message = "Remove the unused suppression"
    if sup.standalone:
        return Fix("safe", (Edit(Range(Position(sup.line, 1), Position(sup.line + 1, 1)), ""),), message)
    start = len(line[:sup.column - 1].rstrip()) + 1
    rest = line[sup.end_column - 1:]
    if rest.strip().startswith("#"):
        end = sup.end_column + (len(rest) - len(rest.lstrip()))
        replacement = "  "
    else:
        end = len(line) + 1
        replacement = ""
    return Fix("safe", (Edit(Range(Position(sup.line, start), Position(sup.line, end)), replacement),), message)


def _keep_selectors(sup: Suppression, kept: list[str]) -> Fix | None:
    if sup.bracket is None:
        return None
    start, end = sup.bracket
    return Fix("safe", (Edit(Range(Position(sup.line, start), Position(sup.line, end)), ", ".join(kept)),),
               "Remove the unused codes from the suppression")
