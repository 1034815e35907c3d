"""The training view's literals as they run by default (`TrainingView.literal`,
`nonzero`, `binding`): literals and simple arithmetic on them, module constants, parameter
defaults, `argparse`/`click` option defaults and dataclass field defaults. A mixin of
`tlint.views.training.TrainingView`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, literal_value
from tlint.views.training_common import UNKNOWN, _number

if TYPE_CHECKING:
    from tlint.source import FileIndex


class _Const(NamedTuple):
    """A default that is not written as an expression (`action="store_true"`)."""

    value: object


class TrainingLiterals:
    """`TrainingView`'s literals as they run by default."""

    if TYPE_CHECKING:  # set by TrainingView
        index: FileIndex

    # --- literals as they run by default ------------------------------------------------

    def literal(self, expr: cst.BaseExpression | None, default: Any = UNKNOWN) -> Any:
        """The value `expr` has when the program runs with its defaults: literals, simple
        arithmetic on them, module constants, parameter defaults, argparse/click option
        defaults and dataclass field defaults. `default` when it cannot be known."""
        value = self._literal(expr, 0)
        return default if value is UNKNOWN else value

    def nonzero(self, expr: cst.BaseExpression) -> bool:
        """True unless `expr` is known to be 0/None/False (unknown values count as set)."""
        value = self.literal(expr)
        return value is UNKNOWN or not (value is None or value is False or (_number(value) and value == 0))

    def _literal(self, expr: cst.BaseExpression | None, depth: int) -> Any:
        if expr is None or depth > 8:
            return UNKNOWN
        value = literal_value(expr, UNKNOWN)
        if value is not UNKNOWN:
            return value
        if type(expr) is cst.Name:
            return self._name_value(expr, depth)
        if type(expr) is cst.Attribute:
            qualified = self.index.qualify(expr)
            if qualified is not None:
                return math.inf if qualified in ("math.inf", "numpy.inf", "torch.inf") else UNKNOWN
            return self._option_value(expr.attr.value, depth)
        if type(expr) is cst.BinaryOperation:
            return _fold(expr.operator, self._literal(expr.left, depth + 1), self._literal(expr.right, depth + 1))
        if type(expr) is cst.Call:
            return self._fold_call(expr, depth)
        return UNKNOWN

    def _fold_call(self, call: cst.Call, depth: int) -> Any:
        name = self.index.qualify(call.func) or dotted_name(call.func)
        functions: dict[str, Callable[..., Any]] = {"int": int, "float": float, "round": round, "abs": abs,
                                                    "max": max, "min": min}
        function = functions.get(name or "") or {"math.ceil": math.ceil, "math.floor": math.floor}.get(name or "")
        if function is None or not call.args or any(a.keyword or a.star for a in call.args):
            return UNKNOWN
        values = [self._literal(a.value, depth + 1) for a in call.args]
        if function is float and len(values) == 1 and isinstance(values[0], str):
            try:
                return float(values[0])  # float("inf"), float("1e-4")
            except ValueError:
                return UNKNOWN
        if any(not _number(v) for v in values):
            return UNKNOWN
        try:
            return function(*values)
        except (TypeError, ValueError, OverflowError):
            return UNKNOWN

    @cached_property
    def _bindings(self) -> dict[tuple[cst.CSTNode, str], list[cst.BaseExpression | None]]:
        """(scope, name) -> values bound to it (None when not a plain value)."""
        out: dict[tuple[cst.CSTNode, str], list[cst.BaseExpression | None]] = {}
        index = self.index

        def bind(scope: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
            if type(target) is cst.Name:
                out.setdefault((scope, target.value), []).append(value)
            elif type(target) is cst.Tuple or type(target) is cst.List:
                values = value.elements if type(value) is cst.Tuple or type(value) is cst.List else None
                if values is not None and len(values) != len(target.elements):
                    values = None
                for i, element in enumerate(target.elements):
                    bind(scope, element.value, values[i].value if values else None)

        for node in index.assignments:
            scope = index.enclosing_scope(node)
            if type(node) is cst.Assign:
                for target in node.targets:
                    bind(scope, target.target, node.value)
            elif type(node) is cst.AnnAssign:
                if node.value is not None:
                    bind(scope, node.target, node.value)
            else:
                assert type(node) is cst.AugAssign
                bind(scope, node.target, None)
        for loop in index.loops:
            if type(loop) is cst.For:
                bind(index.enclosing_scope(loop), loop.target, None)
        return out

    def _resolve_name(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression a name is bound to, seen from its use (a parameter: its
        default); None when it is bound several times, or to something unknown."""
        index = self.index
        scope = index.enclosing_scope(name)
        while True:
            while type(scope) is cst.ClassDef:  # class bodies are not visible from methods
                scope = index.enclosing_scope(scope)
            bound = self._bindings.get((scope, name.value))
            if type(scope) is cst.FunctionDef or type(scope) is cst.Lambda:
                param = _find_param(scope.params, name.value)
                if param is not None:
                    return param.default if not bound and param.default is not None else None
            if bound:
                return bound[0] if len(bound) == 1 else None
            if scope is index.module or scope is None:
                return None
            scope = index.enclosing_scope(scope)

    def binding(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression `name` is bound to, seen from its use: an assignment's value,
        or a parameter's default (then its parent is the `cst.Param`); None when the name
        is imported, bound several times, or to something unknown."""
        if name.value in self.index.imports.aliases:
            return None
        return self._resolve_name(name)

    def _name_value(self, name: cst.Name, depth: int) -> Any:
        if name.value in self.index.imports.aliases:
            return UNKNOWN
        value = self._resolve_name(name)
        if value is None:
            return self._option_value(name.value, depth) if self._click_parameter(name) else UNKNOWN
        return self._literal(value, depth + 1)

    def _click_parameter(self, name: cst.Name) -> bool:
        """A parameter of a function whose `@click.option`s supply it."""
        function = self.index.enclosing_function(name)
        if function is None or _find_param(function.params, name.value) is None:
            return False
        return any(
            type(d.decorator) is cst.Call and self.index.qualify(d.decorator.func) in ("click.option", "click.argument")
            for d in function.decorators
        )

    @cached_property
    def _option_defaults(self) -> dict[str, list[cst.BaseExpression | _Const]]:
        """Attribute name -> default expressions (or _Const) of argparse/click options,
        dataclass/config class fields and `__init__` parameters (Lightning hparams)."""
        out: dict[str, list[cst.BaseExpression | _Const]] = {}
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "add_argument":
                self._argparse_option(call, out)
            elif self.index.qualify(func) in ("click.option", "click.argument"):
                self._click_option(call, out)
        for cls in self.index.classes:
            for name, values in self._class_defaults(cls).items():
                out.setdefault(name, []).extend(values)
            init = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"), None)
            if init is not None:
                for param in _all_params(init.params):
                    if param.default is not None:
                        out.setdefault(param.name.value, []).append(param.default)
        # `args.num_warmup_steps = int(ratio * total)` after parsing: the default is not what runs.
        for node in self.index.assignments:
            # (an AnnAssign or AugAssign after `else`: mypy narrows no `type(x) is` negatively)
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[union-attr]
            for target in targets:
                if type(target) is cst.Attribute and target.attr.value in out:
                    value = node.value if type(node) is cst.Assign else None
                    if not (type(value) is cst.Name and value.value == target.attr.value):
                        out[target.attr.value].append(_Const(UNKNOWN))
        return out

    def _class_defaults(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression | _Const]]:
        out: dict[str, list[cst.BaseExpression | _Const]] = {}
        if type(cls.body) is not cst.IndentedBlock:
            return out
        for statement in cls.body.body:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is cst.AnnAssign and small.value is not None:
                    name, value = last_name(small.target), small.value
                elif type(small) is cst.Assign and len(small.targets) == 1:
                    name, value = last_name(small.targets[0].target), small.value
                else:
                    continue
                default = self._field_default(value)
                if name:
                    out.setdefault(name, []).append(default if default is not None else _Const(UNKNOWN))
        return out

    def _field_default(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        if type(value) is cst.Call and (last_name(value.func) == "field"):
            arg = get_arg(value, "default")
            return arg.value if arg is not None else None
        return value

    def _argparse_option(self, call: cst.Call, out: dict[str, list[cst.BaseExpression | _Const]]) -> None:
        flags = [literal_value(a.value, UNKNOWN) for a in call.args if a.keyword is None and not a.star]
        flags = [f for f in flags if isinstance(f, str)]
        if not flags:
            return
        long = [f for f in flags if f.startswith("--")]
        dest = (long[0] if long else flags[0]).lstrip("-").replace("-", "_")
        dest_arg = get_arg(call, "dest")
        if dest_arg is not None and isinstance(literal_value(dest_arg.value, UNKNOWN), str):
            dest = literal_value(dest_arg.value)
        default = get_arg(call, "default")
        action_arg = get_arg(call, "action")
        action = literal_value(action_arg.value, UNKNOWN) if action_arg else None
        if default is not None:
            out.setdefault(dest, []).append(default.value)
        elif action in ("store_true", "store_false"):
            out.setdefault(dest, []).append(_Const(action == "store_false"))
        else:
            out.setdefault(dest, []).append(_Const(UNKNOWN))

    def _click_option(self, call: cst.Call, out: dict[str, list[cst.BaseExpression | _Const]]) -> None:
        names = [literal_value(a.value, UNKNOWN) for a in call.args if a.keyword is None and not a.star]
        names = [n for n in names if isinstance(n, str)]
        plain = [n for n in names if not n.startswith("-")]
        long = [n for n in names if n.startswith("--")]
        if not plain and not long:
            return
        dest = plain[0] if plain else long[0].lstrip("-").split("/")[0].replace("-", "_")
        default = get_arg(call, "default")
        if default is not None:
            out.setdefault(dest, []).append(default.value)
        elif get_arg(call, "is_flag") is not None:
            out.setdefault(dest, []).append(_Const(False))
        else:
            out.setdefault(dest, []).append(_Const(UNKNOWN))

    def _option_value(self, name: str, depth: int) -> Any:
        candidates = self._option_defaults.get(name)
        if not candidates:
            return UNKNOWN
        values = [c.value if isinstance(c, _Const) else self._literal(c, depth + 1) for c in candidates]
        first = values[0]
        if first is UNKNOWN or any(v is UNKNOWN or v != first or type(v) is not type(first) for v in values[1:]):
            return UNKNOWN
        return first


def _fold(operator: cst.BaseBinaryOp, left: Any, right: Any) -> Any:
    if _number(left) and left == 0 and type(operator) is cst.Multiply or (
        _number(right) and right == 0 and type(operator) is cst.Multiply
    ):
        return 0
    if not (_number(left) and _number(right)):
        return UNKNOWN
    try:
        if type(operator) is cst.Add:
            return left + right
        if type(operator) is cst.Subtract:
            return left - right
        if type(operator) is cst.Multiply:
            return left * right
        if type(operator) is cst.Divide:
            return left / right
        if type(operator) is cst.FloorDivide:
            return left // right
        if type(operator) is cst.Modulo:
            return left % right
        if type(operator) is cst.Power and abs(right) <= 64 and abs(left) < 1e6:
            return left ** right
    except (ZeroDivisionError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    return out


def _find_param(params: cst.Parameters, name: str) -> cst.Param | None:
    for param in _all_params(params):
        if param.name.value == name:
            return param
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param and star.name.value == name:
            return star  # bound, with no default
    return None
