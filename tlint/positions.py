"""Line/column ranges for the few nodes that are reported.

LibCST's PositionProvider records a range for every node (about twice the cost of the
parse). tlint only needs ranges for reported nodes, so it runs code generation once per
file that has findings and records positions for the requested nodes only.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst
from libcst._add_slots import add_slots
from libcst._nodes.internal import CodegenState

from tlint.diagnostics import Position, Range

_NEWLINE = re.compile(r"\r\n?|\n")


@add_slots
@dataclass(frozen=False)
class _TargetedPositionState(CodegenState):
    targets: set = field(default_factory=set)
    starts: dict = field(default_factory=dict)
    ranges: dict = field(default_factory=dict)
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

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node=None, end_node=None
    ) -> Iterator[None]:
        if node not in self.targets:
            yield
            return
        if start_node is not None:
            self.targets.add(start_node)
        if end_node is not None:
            self.targets.add(end_node)
        start = self._sync()
        yield
        end = self._sync()
        if start_node is not None and start_node in self.ranges:
            start = self.ranges[start_node][0]
        if end_node is not None and end_node in self.ranges:
            end = self.ranges[end_node][1]
        self.ranges[node] = (start, end)


def node_ranges(module: cst.Module, nodes) -> dict[cst.CSTNode, Range]:
    """1-based line/column ranges of `nodes` (code-point columns)."""
    targets = set(nodes)
    if not targets:
        return {}
    state = _TargetedPositionState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        targets=set(targets),
    )
    module._codegen(state)
    out = {}
    for node in targets:
        found = state.ranges.get(node)
        if found is None:
            continue
        (sl, sc), (el, ec) = found
        out[node] = Range(Position(sl, sc + 1), Position(el, ec + 1))
    return out
