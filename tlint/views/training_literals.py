"""The training view's literals as they run by default (`TrainingView.literal`,
`nonzero`, `binding`): a mixin of `tlint.views.training.TrainingView` that asks the file's
bindings view (`tlint.views.bindings.BindingsView`, `ctx.bindings`), the one place that
resolves names and their default-run values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import dotted_name, last_name, walk
from tlint.views.bindings import ASSIGN, PARAM, UNKNOWN

if TYPE_CHECKING:
    from tlint.views.bindings import BindingsView


class TrainingLiterals:
    """`TrainingView`'s literals as they run by default, from its bindings view."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts
        bindings: BindingsView

        def role(self, expr: cst.BaseExpression | None, roles: dict[str, str] | None = None) -> str | None: ...

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

    def _built_by(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The one expression a name or `self.<attr>` was bound to, else None."""
        if type(expr) is cst.Name:
            return self.bindings.expression(expr)
        if type(expr) is cst.Attribute:
            bound = self.bindings.attribute(expr)
            return bound[0].value if len(bound) == 1 else None
        return None

    def optimized_modules(self, optimizer: cst.BaseExpression) -> set[str]:
        """The modules whose `.parameters()` an optimiser was built over (`{"gen"}` for
        `opt = Adam(gen.parameters())`, also `self.opt` bound in `__init__`); empty when
        unknown (parameters gathered elsewhere, a wrapper's inner optimiser)."""
        built = self._built_by(optimizer)
        if type(built) is not cst.Call or not built.args:
            return set()
        out = set()
        for node in walk(built.args[0].value):
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "parameters":
                name = dotted_name(node.func.value)
                if name is not None:
                    out.add(name)
        return out

    def is_module(self, expr: cst.BaseExpression) -> bool:
        """`expr` holds a module: a model by its origin, one built by a `torch.nn` class or
        by a class of this file deriving from a `Module`, or something whose `.parameters()`
        the file asks for (`Adam(discriminator.parameters())`)."""
        if self.role(expr) == "model":
            return True
        index = self.bindings.index
        built = self._built_by(expr)
        if type(built) is cst.Call:
            if (index.qualify(built.func) or "").startswith("torch.nn."):
                return True
            cls = index.classes_by_name.get(last_name(built.func) or "")
            if cls is not None and any((last_name(base.value) or "").endswith("Module") for base in cls.bases):
                return True
        name = dotted_name(expr)
        return name is not None and any(
            type(call.func) is cst.Attribute and call.func.attr.value in ("parameters", "named_parameters")
            and dotted_name(call.func.value) == name for call in index.calls)


def covers(module: str, modules: set[str]) -> bool:
    """A reset of `module` resets the parameters of one of `modules` (the same module, a
    module inside it, or one holding it: `model` covers `model.encoder` and back)."""
    return any(module == m or m.startswith(module + ".") or module.startswith(m + ".") for m in modules)
