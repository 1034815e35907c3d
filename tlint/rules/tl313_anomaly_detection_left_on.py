"""TL313 anomaly-detection-left-on: autograd anomaly detection enabled in training code.

`torch.autograd.set_detect_anomaly(True)` (a literal, or a default that is true) and
`torch.autograd.detect_anomaly()` outside test files. A call under an `if` is a debugging
switch someone turns on deliberately (`if args.debug:`), and is not reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name
from tlint.rules.base import Rule
from tlint.views.training import TrainingView

if TYPE_CHECKING:
    from tlint.context import FileContext

_SET = ("torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly")
_CONTEXT = ("torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly")


class AnomalyDetectionLeftOn(Rule):
    code = "TL313"
    name = "anomaly-detection-left-on"
    kind = "practice"
    tokens = frozenset({"anomaly"})  # pre-filter: `set_detect_anomaly`/`detect_anomaly`
    summary = "Autograd anomaly detection is left on in training code (several times slower)."

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        view: TrainingView = ctx.training
        for call in ctx.index.calls:
            name = ctx.index.qualify(call.func)
            if name in _SET:
                mode = view.literal(call.args[0].value) if call.args else None
                if mode is not True:
                    continue
            elif name not in _CONTEXT:
                continue
            if any(type(a) in (cst.If, cst.IfExp) for a in ctx.index.ancestors(call)):
                continue
            ctx.report(call, "autograd anomaly detection makes every backward several times slower; "
                       "turn it on only while debugging a NaN (e.g. behind a --debug flag)",
                       fix=self._fix(ctx.index, call))

    @staticmethod
    def _fix(index, call: cst.Call):
        """Remove the switch: the statement `set_detect_anomaly(True)` (a `pass` when it is
        alone in its block), or the `with detect_anomaly():` around a block (the body is
        dedented in its place). Nothing changes but the speed: safe."""
        spelled = dotted_name(call.func) or "set_detect_anomaly"
        parent = index.parent(call)
        if type(parent) is cst.WithItem:
            stmt = index.parent(parent)
            if parent.asname is not None or type(stmt) is not cst.With or len(stmt.items) != 1:
                return None
            edit = fixes.unwrap_with(index, stmt)
            return edit and fixes.fix("safe", f"Remove `with {spelled}():` and dedent its block", edit)
        stmt = fixes.call_statement(index, call)
        if stmt is None:
            return None
        block = index.parent(stmt)
        if type(block) is cst.IndentedBlock and len(block.body) == 1:
            edit = fixes.replace(stmt, "pass")
        else:
            edit = fixes.delete(stmt)
        return fixes.fix("safe", f"Remove the `{spelled}(...)` call", edit)
