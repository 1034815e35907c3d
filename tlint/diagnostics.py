"""The values that flow from rules to reporters: positions, ranges, fixes, diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tlint.docs import rule_url

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True, slots=True)
class Position:
    """1-based line, 1-based column in Unicode code points."""

    line: int
    column: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column}


@dataclass(frozen=True, slots=True)
class Range:
    start: Position
    end: Position

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start.to_json(), "end": self.end.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Range:
        return cls(Position(**data["start"]), Position(**data["end"]))

    @classmethod
    def point(cls, line: int, column: int = 1) -> Range:
        return cls(Position(line, column), Position(line, column))


@dataclass(frozen=True, slots=True)
class Edit:
    range: Range
    content: str
    cell: int | None = None  # in a notebook: the cell `range` is in (tlint/notebook.py)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"range": self.range.to_json(), "content": self.content}
        if self.cell is not None:
            out["cell"] = self.cell
        return out


@dataclass(frozen=True, slots=True)
class Fix:
    applicability: str  # "safe" | "unsafe"
    edits: tuple[Edit, ...]
    message: str = ""  # what the fix does (a code action's title); omitted from JSON when empty

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"applicability": self.applicability, "edits": [e.to_json() for e in self.edits]}
        if self.message:
            out["message"] = self.message
        return out


@dataclass(slots=True)
class Diagnostic:
    code: str
    name: str
    severity: str
    message: str
    path: str
    range: Range
    fix: Fix | None = None
    suppressed: bool = False
    detail: str | None = field(default=None, compare=False)  # e.g. a traceback for --verbose
    # In a notebook: the cell (1-based, over all its cells) that `range` is in; None in a
    # Python file, and for a notebook's own TL001 (its JSON's line and column).
    cell: int | None = None
    # The rule's kind (`tlint.rules.base.KINDS`: defect, likely-defect, practice); "" where
    # the finding is not a rule's (a trace's own).
    kind: str = ""
    # The whole list of evidence a message names boundedly ("a, b, c and 4 more"):
    # `tlint.rules.base.listing`; JSON and SARIF carry it.
    evidence: tuple[str, ...] = field(default=(), compare=False)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.range.start.line, self.range.start.column, self.code, self.message)

    def where(self) -> str:
        """`line:column`, or `cell N, line L, column C` in a notebook (the text formats)."""
        start = self.range.start
        if self.cell is None:
            return f"{start.line}:{start.column}"
        return f"cell {self.cell}, line {start.line}, column {start.column}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "range": self.range.to_json(),
            "fix": self.fix.to_json() if self.fix else None,
            "url": rule_url(self.code, self.name),
        }
        if self.cell is not None:
            out["cell"] = self.cell
        if self.kind:  # every finding of a rule (not one a test builds by hand)
            out["kind"] = self.kind
        if self.evidence:
            out["evidence"] = list(self.evidence)
        return out


def internal_error(what: Any, display: str, exc: BaseException, consequence: str = "") -> Diagnostic:
    """TL003 for a rule (or a view, an extractor, a phase: `what` in words) that raised."""
    import traceback

    if hasattr(what, "code") and hasattr(what, "name") and not isinstance(what, str):
        what = f"rule {what.code} ({what.name})"
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return Diagnostic(
        "TL003", "internal-error", "error",
        f"{what} failed on this file with {type(exc).__name__}: {first_line}{consequence}. "
        "This is a bug in tlint; please report it (--verbose shows the traceback).",
        display, Range(Position(1, 1), Position(1, 1)),
        detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), kind="defect",
    )

