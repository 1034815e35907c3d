"""The training view's literals as they run by default (`TrainingView.literal`,
`nonzero`, `binding`): a mixin of `tlint.views.training.TrainingView` that asks the file's
bindings view (`tlint.views.bindings.BindingsView`, `ctx.bindings`), the one place that
resolves names and their default-run values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.views.bindings import UNKNOWN

if TYPE_CHECKING:
    from tlint.views.bindings import BindingsView


class TrainingLiterals:
    """`TrainingView`'s literals as they run by default, from its bindings view."""

    if TYPE_CHECKING:  # set by TrainingView
        bindings: BindingsView

    def literal(self, expr: cst.BaseExpression | None, default: Any = UNKNOWN) -> Any:
        """The value `expr` has when the program runs with its defaults (see
        `BindingsView.value`); `default` when it cannot be known."""
        return self.bindings.value(expr, default)

    def nonzero(self, expr: cst.BaseExpression) -> bool:
        """True unless `expr` is known to be 0/None/False (unknown values count as set)."""
        return self.bindings.nonzero(expr)

    def _resolve_name(self, name: cst.Name) -> cst.BaseExpression | None:
        return self.bindings.expression(name)

    def binding(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression `name` is bound to at this use (`BindingsView.expression`)."""
        return self.bindings.expression(name)
