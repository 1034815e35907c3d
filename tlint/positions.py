"""Line/column ranges for the few nodes that are reported.

LibCST's PositionProvider records a range for every node (about twice the cost of the
parse). tlint only needs ranges for reported nodes, so it runs code generation once per
file that has findings and records positions for the requested nodes only.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst._add_slots import add_slots
from libcst._nodes.internal import CodegenState

from tlint.diagnostics import Position, Range

_NEWLINE = re.compile(r"\r\n?|\n")


class _NoRecord:
    """The context of a node nobody asked about: nothing to record."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_NO_RECORD = _NoRecord()


@add_slots
@dataclass(frozen=False)
class _TargetedPositionState(CodegenState):
    targets: set = field(default_factory=set)  # ids of the nodes to place
    ranges: dict = field(default_factory=dict)  # id(node) -> ((line, column), (line, column))
    line: int = 1
    column: int = 0
    synced: int = 0

    def _sync(self) -> tuple[int, int]:
        tokens = self.tokens
        for index in range(self.synced, len(tokens)):
            token = tokens[index]
            segments = _NEWLINE.split(token)
            if len(segments) == 1:
                self.column += len(token)
            else:
                self.line += len(segments) - 1
                self.column = len(segments[-1])
        self.synced = len(tokens)
        return self.line, self.column

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node=None, end_node=None):
        if id(node) not in self.targets:
            return _NO_RECORD
        return self._record(node, start_node, end_node)

    @contextmanager
    def _record(self, node: cst.CSTNode, start_node, end_node) -> Iterator[None]:
        if start_node is not None:
            self.targets.add(id(start_node))
        if end_node is not None:
            self.targets.add(id(end_node))
        start = self._sync()
        yield
        end = self._sync()
        if start_node is not None and id(start_node) in self.ranges:
            start = self.ranges[id(start_node)][0]
        if end_node is not None and id(end_node) in self.ranges:
            end = self.ranges[id(end_node)][1]
        self.ranges[id(node)] = (start, end)


def node_ranges(module: cst.Module, nodes, *, text: str | None = None, statement_lines=None,
                index=None) -> dict[cst.CSTNode, Range]:
    """1-based line/column ranges of `nodes` (code-point columns).

    With the source `text`, the first line of each top-level statement from Python's own
    tree (`statement_lines`, see `engine.parse_source`) and the file's `FileIndex`, only
    the top-level statements that hold a requested node are generated, each from its own
    line, and each checked against the source; anything unexpected falls back to
    generating the whole module (the results are the same)."""
    nodes = list(nodes)
    if not nodes:
        return {}
    if text is not None and statement_lines and index is not None:
        found = _by_statement(module, nodes, text, statement_lines, index)
        if found is not None:
            return found
    state = _state(module, nodes, 1)
    module._codegen(state)
    return _collect(state, nodes, {})


def _state(module: cst.Module, nodes, line: int) -> _TargetedPositionState:
    return _TargetedPositionState(default_indent=module.default_indent, default_newline=module.default_newline,
                                  targets={id(node) for node in nodes}, line=line)


def _collect(state: _TargetedPositionState, nodes, out: dict) -> dict:
    for node in nodes:
        found = state.ranges.get(id(node))
        if found is not None:
            (sl, sc), (el, ec) = found
            out[node] = Range(Position(sl, sc + 1), Position(el, ec + 1))
    return out


def _by_statement(module: cst.Module, nodes, text: str, statement_lines, index) -> dict | None:
    if "\r" in text:
        return None  # Python and LibCST may count lines differently: generate it all
    body = module.body
    firsts, taken = [], 0
    for stmt in body:
        if taken >= len(statement_lines):
            return None
        firsts.append(statement_lines[taken])
        taken += len(stmt.body) if type(stmt) is cst.SimpleStatementLine else 1
    if taken != len(statement_lines):
        return None
    position, ends, order = index.position, index.ends, index.order
    starts = [position.get(id(stmt), -1) for stmt in body]
    groups: dict[int, list] = {}
    for node in nodes:
        if node is module:
            continue  # the module itself has no range (as when generating it all)
        at = position.get(id(node))
        if at is None or order[at] is not node:
            return None
        which = bisect_right(starts, at) - 1
        if which < 0 or starts[which] < 0 or at >= ends[starts[which]]:
            return None
        groups.setdefault(which, []).append(node)
    out: dict = {}
    line, offset = 1, 0
    for which in sorted(groups):
        stmt = body[which]
        first = firsts[which] - len(stmt.leading_lines)
        if first < line:
            return None
        while line < first:
            offset = text.find("\n", offset) + 1
            if offset == 0:
                return None
            line += 1
        state = _state(module, groups[which], first)
        stmt._codegen(state)
        code = "".join(state.tokens)
        if not text.startswith(code, offset):
            return None
        _collect(state, groups[which], out)
    return out
