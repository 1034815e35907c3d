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
- `complete_sites(function)`: every use of a function in the file when each is a call
  seen here (a module class's `forward` through the sub-modules that hold its instances),
  else None: what a rule may conclude from "every caller passes ...";
- `instance_class(expr)`: the class of this file whose instance a name or `self.<attr>`
  holds, when every assignment to it builds one.

Calls in other files are not seen here (nothing reads another file during a file's
check): a rule that needs them reports with a `ProjectCondition` over the `call-args`
project facts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from tlint.context import register_view
from tlint.cst import assignment_targets, dotted_name, last_name, walk

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex
    from tlint.views.model import ModelView


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


class CallsView:
    """Calls and callers of one file's functions, computed lazily from its index."""

    def __init__(self, index: FileIndex, models: Callable[[], ModelView] | None = None) -> None:
        """`models`: how to get the file's model view (`ctx.models`), asked only for the
        complete call sites of a module class's `forward`."""
        self.index = index
        self._callees: dict[int, cst.FunctionDef | None] = {}
        self._callers: dict[int, list[CallSite]] = {}
        self._complete = _CompleteSites(index, models)

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
        key = id(call)
        if key in self._callees:
            return self._callees[key]
        found = self._callee(call)
        self._callees[key] = found
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
    def _instances(self) -> dict[tuple[int, str], list[cst.ClassDef | None]]:
        """(class for `self.<attr>` / scope for a name, name) -> the local class each
        assignment to it builds (None: something else)."""
        index = self.index
        out: dict[tuple[int, str], list[cst.ClassDef | None]] = {}
        classes = index.classes_by_name
        if not classes:
            return out
        built_at: list[tuple[cst.CSTNode, cst.ClassDef | None, list[cst.BaseExpression]]] = []
        names: set[str] = set()  # names (or attributes) some assignment stores an instance in
        for node in index.assignments:
            if type(node) is cst.AugAssign:
                continue
            value = node.value
            built = None
            if (type(value) is cst.Call and type(value.func) is cst.Name
                    and value.func.value not in index.imports.aliases):
                built = classes.get(value.func.value)
            targets = assignment_targets(node)
            built_at.append((node, built, targets))
            if built is not None:
                names.update(last_name(t) or "" for t in targets)
        for holder, built, targets in built_at:  # only the names that may hold an instance
            for target in targets:
                if type(target) is cst.Name and target.value in names:
                    out.setdefault((id(index.enclosing_scope(holder)), target.value), []).append(built)
                elif (type(target) is cst.Attribute and type(target.value) is cst.Name
                      and target.value.value == "self" and target.attr.value in names):
                    out.setdefault((id(index.enclosing_class(holder)), target.attr.value), []).append(built)
        return out

    def instance_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of this file that `expr` (a name, or `self.<attr>`) holds an instance
        of, when every assignment to it in its scope (its class) builds that class."""
        index = self.index
        owner: cst.CSTNode | None
        if type(expr) is cst.Name:
            owner, name = index.enclosing_scope(expr), expr.value
        elif type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            owner, name = index.enclosing_class(expr), expr.attr.value
        else:
            return None
        if owner is None:
            return None
        built = self._instances.get((id(owner), name))
        if not built or built[0] is None or any(b is not built[0] for b in built[1:]):
            return None
        return built[0]

    # --- who calls a function -----------------------------------------------------------

    @cached_property
    def _calls_by_name(self) -> dict[str, list[cst.Call]]:
        """The calls of the file by the last name of their callee (`f(...)`, `x.f(...)`)."""
        out: dict[str, list[cst.Call]] = {}
        for call in self.index.calls:
            func = call.func
            name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
            if name is not None:
                out.setdefault(name, []).append(call)
        return out

    def callers(self, function: cst.FunctionDef) -> list[CallSite]:
        """Every call of this file that runs `function`, with its arguments bound."""
        found = self._callers.get(id(function))
        if found is None:
            found = self._callers[id(function)] = [CallSite(call, function, self.bind(call, function))
                                                   for call in self._calls_of(function)]
        return found

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        index = self.index
        out = [call for call in self._calls_by_name.get(function.name.value, ()) if self.callee(call) is function]
        if function.name.value == "__init__":
            owner = index.enclosing_class(function)
            classes = index.classes_by_name
            for cls in index.classes:  # `Cls(...)` runs `__init__` (its own or a base's)
                if classes.get(cls.name.value) is not cls or cls.name.value in index.imports.aliases:
                    continue
                if cls is owner or self.method(cls, "__init__") is function:
                    out += [call for call in self._calls_by_name.get(cls.name.value, ())
                            if type(call.func) is cst.Name]
        return out

    def complete_sites(self, function: cst.FunctionDef) -> list[tuple[cst.Call, cst.FunctionDef | None, bool]] | None:
        """[(call, calling function, bound: through `self` or an instance)] for every use of
        `function` in the file, or None when a use is not a call seen here (passed along,
        stored, subclassed): a rule may then conclude nothing from the callers."""
        return self._complete.sites(function)

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


class _CompleteSites:
    """Every call site of a function of the file, or None when not every use of it is a
    call seen here: the call sites of a method (`self.name(...)`), of a module-level
    function, and of a module class's `forward` (its instances held as sub-modules:
    `self.attn(...)`, `self.layers[i](...)`, a loop over `self.layers`). A function whose
    uses are not all such calls (passed along, stored, subclassed, called through something
    the view does not resolve) has no known sites."""

    def __init__(self, index: FileIndex, models: Callable[[], ModelView] | None) -> None:
        self.index = index
        self.models = models
        self._memo: dict[int, list | None] = {}
        self._names: list[cst.Name] | None = None
        self._attributes: list[cst.Attribute] | None = None

    @cached_property
    def owner(self) -> dict[int, cst.ClassDef]:
        """Method -> the class whose body defines it, over the whole file."""
        out: dict[int, cst.ClassDef] = {}
        for cls in self.index.classes:
            for stmt in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
                if type(stmt) is cst.FunctionDef:
                    out.setdefault(id(stmt), cls)
        return out

    def _scan(self) -> None:
        if self._names is None:
            self._names, self._attributes = [], []
            for node in walk(self.index.module):
                if type(node) is cst.Name:
                    self._names.append(node)
                elif type(node) is cst.Attribute:
                    self._attributes.append(node)

    def sites(self, fn: cst.FunctionDef) -> list[tuple[cst.Call, cst.FunctionDef | None, bool]] | None:
        """[(call, calling function, bound)], or None when not every use is a seen call."""
        if id(fn) not in self._memo:
            self._scan()
            owner = self.owner.get(id(fn))
            if owner is None:
                found = self._function_sites(fn)
            elif fn.name.value == "forward":
                found = self._instance_sites(owner)
            else:
                found = self._method_sites(fn, owner)
            self._memo[id(fn)] = found
        return self._memo[id(fn)]

    def _call_of(self, node) -> cst.Call | None:
        parent = self.index.parent(node)
        return parent if type(parent) is cst.Call and parent.func is node else None

    def _function_sites(self, fn):
        if self.index.parent(fn) is not self.index.module:
            return None
        assert self._names is not None  # (`_scan` ran)
        out = []
        for name in self._names:
            if name.value != fn.name.value or name is fn.name:
                continue
            call = self._call_of(name)
            if call is None:
                return None
            out.append((call, self.index.enclosing_function(call), False))
        return out

    def _method_sites(self, fn, owner):
        assert self._attributes is not None  # (`_scan` ran)
        out = []
        for attr in self._attributes:
            if attr.attr.value != fn.name.value:
                continue
            cls = self.index.enclosing_class(attr)
            if cls is not owner and cls is not None and type(attr.value) is cst.Name and attr.value.value == "self" \
                    and any(type(s) is cst.FunctionDef and s.name.value == fn.name.value
                            for s in (cls.body.body if type(cls.body) is cst.IndentedBlock else ())):
                continue  # another class's own method of that name
            call = self._call_of(attr)
            if call is None:
                return None  # `self.name` stored or passed along: called with anything
            # `self.name(...)`, or through another object (`self.model.name(...)`): a call of
            # that name elsewhere is counted even if it is another class's method
            out.append((call, self.index.enclosing_function(call), True))
        return out

    def _instance_sites(self, owner):
        assert self._names is not None and self._attributes is not None  # (`_scan` ran)
        name = owner.name.value
        if self.models is None:
            return None
        models = self.models()
        holders = [(mc, sub) for mc in models.classes.values()
                   for sub in (*mc.attributes.values(), *mc.inherited.values()) if sub.ctor == name]
        built = {id(sub.call) for _, sub in holders if sub.call is not None}
        for node in self._names:
            if node.value != name or node is owner.name:
                continue
            call = self._call_of(node)
            if call is not None and id(call) in built:
                continue
            if self.index.enclosing_function(node) is None and type(self.index.parent(node)) is not cst.Arg:
                continue  # class-level metadata (`_can_record_outputs = {"attentions": Layer}`)
            parent = self.index.parent(node)
            outer = self.index.parent(parent) if type(parent) is cst.Arg else None
            if type(outer) is cst.Call and dotted_name(outer.func) in ("isinstance", "issubclass", "super"):
                continue
            return None
        out = []
        for mc, sub in holders:
            loops = {var for var, src in mc._loop_sources().items() if src is sub}
            for attr in self._attributes:
                if (attr.attr.value != sub.name or type(attr.value) is not cst.Name
                        or attr.value.value != "self" or self.index.enclosing_class(attr) is not mc.node):
                    continue
                parent = self.index.parent(attr)
                if type(parent) is cst.AssignTarget or (type(parent) is cst.AnnAssign and parent.target is attr):
                    continue
                call = self._call_of(attr) or (self._call_of(parent) if type(parent) is cst.Subscript else None)
                if call is not None:
                    out.append((call, self.index.enclosing_function(call), True))
                    continue
                holder = self.index.parent(parent)
                if type(parent) is cst.Arg and type(holder) is cst.Call and dotted_name(holder.func) == "len":
                    continue
                if loops and self._loop_iter(attr, mc):
                    continue
                return None
            forward = mc.forward
            for var in loops:
                for use in walk(forward.body) if forward is not None else ():
                    if type(use) is not cst.Name or use.value != var:
                        continue
                    call = self._call_of(use)
                    if call is not None:
                        out.append((call, forward, True))
                    elif not self._loop_target(use):
                        return None
        return out

    def _loop_target(self, name: cst.Name) -> bool:
        """`name` is (part of) the target of a `for` loop."""
        node = name
        for anc in self.index.ancestors(name):
            if type(anc) is cst.For:
                return anc.target is node
            if type(anc) not in (cst.Element, cst.Tuple, cst.List):
                return False
            node = anc
        return False

    def _loop_iter(self, attr, mc) -> bool:
        """`self.layers` is the iterable of a loop of `forward` the view resolves."""
        forward = mc.forward
        if forward is None:
            return False
        for loop in walk(forward.body):
            if type(loop) is cst.For and any(n is attr for n in walk(loop.iter)):
                return True
        return False


def _static(function: cst.FunctionDef) -> bool:
    return any(last_name(d.decorator) == "staticmethod" for d in function.decorators)


@register_view("calls")
def calls(ctx: FileContext) -> CallsView:
    """Calls and callers of the file's functions (`ctx.calls`)."""
    return CallsView(ctx.index, lambda: ctx.models)
