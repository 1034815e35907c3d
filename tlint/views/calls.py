"""The calls view (`ctx.calls`): which function of this file a call runs, who calls a
function, and with which arguments.

- `callee(call)`: the function or method of this file a call runs, when it can be told: a
  plain name (the innermost scope that defines it), `self.m()`/`cls.m()`/`super().m()`
  (the class and its bases in this file), `Cls(...)` (its `__init__`), a method called on
  an instance of a class of this file (`self.opt = Wrapper(...)` then `self.opt.step()`,
  `w = Wrapper(...)` then `w.step()`), and `x.m()` when only one class of this file has a
  method `m` and `x` is not an import;
- `callers(function)`: every call of this file that runs `function` (`CallSite`), with
  the arguments it binds to each parameter (`bind`);
- `instance_class(expr)`: the class of this file whose instance a name or `self.<attr>`
  holds, when every assignment to it builds one.

Calls in other files are not seen here (nothing reads another file during a file's
check): a rule that needs them reports with a `ProjectCondition` over the `call-args`
project facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from tlint.context import register_view
from tlint.cst import dotted_name, last_name

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex


@dataclass(frozen=True, eq=False)
class CallSite:
    """A call of this file that runs `function`. `arguments`: parameter name -> the
    argument expression it receives there (a parameter the call leaves out is absent);
    None when a `*args`/`**kwargs` argument hides what reaches which parameter."""

    call: cst.Call
    function: cst.FunctionDef
    arguments: dict[str, cst.BaseExpression] | None


def is_method(index: FileIndex, function: cst.FunctionDef) -> bool:
    return type(index.parent(index.parent(function))) is cst.ClassDef


def parameters(function: cst.FunctionDef | cst.Lambda) -> list[cst.Param]:
    """Every named parameter (positional-only, ordinary, keyword-only), in order."""
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def find_param(params: cst.Parameters, name: str) -> cst.Param | None:
    """The parameter called `name` (`*args`/`**kwargs` included: bound, with no default)."""
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param and star.name.value == name:
            return star
    return None


class CallsView:
    """Calls and callers of one file's functions, computed lazily from its index."""

    def __init__(self, index: FileIndex) -> None:
        self.index = index
        self._callees: dict[cst.Call, cst.FunctionDef | None] = {}

    # --- what a call runs -------------------------------------------------------------

    @cached_property
    def _methods_by_name(self) -> dict[str, list[cst.FunctionDef]]:
        out: dict[str, list[cst.FunctionDef]] = {}
        for function in self.index.functions:
            if is_method(self.index, function):
                out.setdefault(function.name.value, []).append(function)
        return out

    def local_function(self, name: cst.Name) -> cst.FunctionDef | None:
        """The plain (non-method) function of this file a name refers to, seen from its use."""
        index = self.index
        if name.value in index.imports.aliases:
            return None
        candidates = [f for f in index.functions_by_name.get(name.value, ()) if not is_method(index, f)]
        if not candidates:
            return None
        scopes = [a for a in index.ancestors(name) if type(a) in (cst.FunctionDef, cst.Module)]
        for scope in scopes:  # innermost scope that defines it
            for function in candidates:
                if index.enclosing_scope(function) is scope:
                    return function
        return None

    def callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function or method of this file a call runs, when it can be told."""
        if call in self._callees:
            return self._callees[call]
        found = self._callee(call)
        self._callees[call] = found
        return found

    def _callee(self, call: cst.Call) -> cst.FunctionDef | None:
        func = call.func
        if type(func) is cst.Name:
            return self.local_function(func)
        if type(func) is not cst.Attribute or func.attr.value.startswith("__"):
            return None
        method, receiver = func.attr.value, func.value
        is_super = type(receiver) is cst.Call and dotted_name(receiver.func) == "super"
        if is_super or (type(receiver) is cst.Name and receiver.value in ("self", "cls")):
            cls = self.index.enclosing_class(call)
            return self.method(cls, method, skip_own=is_super) if cls is not None else None
        if self.index.qualify(receiver) is not None:
            return None
        owner = self.instance_class(receiver)
        if owner is not None:
            return self.method(owner, method)
        owners = self._methods_by_name.get(method, ())
        return owners[0] if len(owners) == 1 else None

    def method(self, cls: cst.ClassDef, name: str, *, skip_own: bool = False,
               depth: int = 0) -> cst.FunctionDef | None:
        """Method `name` of `cls`, or of its bases defined in this file."""
        if depth > 5:
            return None
        if not skip_own and type(cls.body) is cst.IndentedBlock:
            for statement in cls.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == name:
                    return statement
        for base in cls.bases:
            parent = self.index.classes_by_name.get(last_name(base.value) or "")
            if parent is not None and parent is not cls:
                found = self.method(parent, name, depth=depth + 1)
                if found is not None:
                    return found
        return None

    # --- instances of this file's classes ----------------------------------------------

    @cached_property
    def _instances(self) -> dict[tuple[cst.CSTNode | None, str], list[cst.ClassDef | None]]:
        """(class for `self.<attr>` / scope for a name, name) -> the local class each
        assignment to it builds (None: something else)."""
        index = self.index
        out: dict[tuple[cst.CSTNode | None, str], list[cst.ClassDef | None]] = {}
        classes = index.classes_by_name
        for node in index.assignments:
            if type(node) is cst.AugAssign:
                continue
            value = node.value
            built = None
            if (type(value) is cst.Call and type(value.func) is cst.Name
                    and value.func.value not in index.imports.aliases):
                built = classes.get(value.func.value)
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[union-attr]
            for target in targets:
                if type(target) is cst.Name:
                    out.setdefault((index.enclosing_scope(node), target.value), []).append(built)
                elif (type(target) is cst.Attribute and type(target.value) is cst.Name
                      and target.value.value == "self"):
                    out.setdefault((index.enclosing_class(node), target.attr.value), []).append(built)
        return out

    def instance_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of this file that `expr` (a name, or `self.<attr>`) holds an instance
        of, when every assignment to it in its scope (its class) builds that class."""
        index = self.index
        if type(expr) is cst.Name:
            key: tuple[cst.CSTNode | None, str] = (index.enclosing_scope(expr), expr.value)
        elif type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            key = (index.enclosing_class(expr), expr.attr.value)
        else:
            return None
        if key[0] is None:
            return None
        built = self._instances.get(key)
        if not built or built[0] is None or any(b is not built[0] for b in built[1:]):
            return None
        return built[0]

    # --- who calls a function -----------------------------------------------------------

    @cached_property
    def _callers(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        out: dict[cst.FunctionDef, list[cst.Call]] = {}
        classes = self.index.classes_by_name
        for call in self.index.calls:
            found = self.callee(call)
            if found is None and type(call.func) is cst.Name and call.func.value in classes \
                    and call.func.value not in self.index.imports.aliases:
                found = self.method(classes[call.func.value], "__init__")  # `Cls(...)` runs `__init__`
            if found is not None:
                out.setdefault(found, []).append(call)
        return out

    def callers(self, function: cst.FunctionDef) -> list[CallSite]:
        """Every call of this file that runs `function`, with its arguments bound."""
        return [CallSite(call, function, self.bind(call, function)) for call in self._callers.get(function, ())]

    def bind(self, call: cst.Call, function: cst.FunctionDef) -> dict[str, cst.BaseExpression] | None:
        """Parameter name -> argument expression for `call` running `function` (`self`
        skipped for a method); None when a starred argument hides the binding."""
        params = function.params
        positional = [*params.posonly_params, *params.params]
        if is_method(self.index, function) and positional and not _static(function):
            positional = positional[1:]
        out: dict[str, cst.BaseExpression] = {}
        at = 0
        for arg in call.args:
            if arg.star:
                return None
            if arg.keyword is not None:
                out[arg.keyword.value] = arg.value
            elif at < len(positional):
                out[positional[at].name.value] = arg.value
                at += 1
            else:
                at += 1
        return out


def _static(function: cst.FunctionDef) -> bool:
    return any(last_name(d.decorator) == "staticmethod" for d in function.decorators)


@register_view("calls")
def calls(ctx: FileContext) -> CallsView:
    """Calls and callers of the file's functions (`ctx.calls`)."""
    return CallsView(ctx.index)
