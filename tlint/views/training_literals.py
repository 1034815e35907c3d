"""The training view's literals as they run by default (`TrainingView.literal`,
`nonzero`, `binding`): a mixin of `tlint.views.training.TrainingView` that asks the file's
bindings view (`tlint.views.bindings.BindingsView`, `ctx.bindings`), the one place that
resolves names and their default-run values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.views.bindings import ASSIGN, PARAM, UNKNOWN

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

    def sources(self, expr: cst.BaseExpression) -> list[cst.BaseExpression] | None:
        """The expressions `expr` may hold at this use, one level back: for a name, the
        assignments that reach it, or for a parameter the arguments every call of its
        function in this file passes (its default where a call leaves it out, the default
        alone when nothing here calls it); for `self.<attr>`, the assignments to it in its
        class. None when any of them is unknown (a loop target, `*args`, a parameter
        without default or caller) or `expr` is neither a name nor `self.<attr>`."""
        bindings = self.bindings
        if type(expr) is cst.Attribute:
            bound = bindings.attribute(expr)
        elif type(expr) is cst.Name and expr.value not in bindings.index.imports.aliases:
            bound = bindings.reaching(expr)
        else:
            return None
        if not bound:
            return None
        out: list[cst.BaseExpression] = []
        for binding in bound:
            if binding.kind == ASSIGN and binding.value is not None:
                out.append(binding.value)
                continue
            if binding.kind != PARAM or type(binding.node) is not cst.Param or len(bound) != 1:
                return None
            param, function = binding.node, binding.scope
            sites = bindings.calls.callers(function) if type(function) is cst.FunctionDef else []
            for site in sites:
                if site.arguments is None:
                    return None
                argument = site.arguments.get(param.name.value, param.default)
                if argument is None:
                    return None
                out.append(argument)
            if not sites:
                if param.default is None:
                    return None
                out.append(param.default)
        return out

    def binding(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression `name` is bound to at this use (`BindingsView.expression`)."""
        return self.bindings.expression(name)
