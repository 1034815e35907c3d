"""Sub-modules and the members of their containers, as `ModelView` reads them from
`self.<name> = ...` (see `tlint.views.model`): `nn.ModuleDict` from a dict literal or
`dict(...)`, `nn.Sequential` with or without an `OrderedDict` (members by key or by
position), lists (`nn.ModuleList([...])`, list comprehensions, `[Block()] * n`, starred
lists), a local name bound to one, and a helper function of the file that returns one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, literal_value, walk

if TYPE_CHECKING:
    from tlint.views.model import ModelView

LIST_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict"})


@dataclass
class SubModule:
    """`self.<name> = <ctor>(...)` in a module's methods (first assignment wins)."""

    name: str
    ctor: str | None  # qualified torch name, or a local class name, or None
    call: cst.Call | None
    is_list: bool = False  # held in a ModuleList/Sequential/list comprehension
    guessed: bool = False  # not declared in the file: assumed from an opaque base (see `declared`)
    # named members of a container (`nn.ModuleDict(dict(wte=...))`, `nn.Sequential(OrderedDict(...))`,
    # `nn.Sequential(a, b)` by position "0", "1"): `self.<name>.<key>` / `self.<name>["key"]`
    children: dict[str, SubModule] = field(default_factory=dict)
    path: str = ""  # dotted from the class (`transformer.wpe`); the name for a direct attribute

    def __post_init__(self) -> None:
        if not self.path:
            self.path = self.name

    def nested(self) -> list[SubModule]:
        """This sub-module and every member of its containers, depth first."""
        out = [self]
        for child in self.children.values():
            out += child.nested()
        return out


def describe(view: ModelView, name: str, value: cst.BaseExpression, path: str = "", depth: int = 0) -> SubModule:
    """What `view.<name> = value` declares: a module, a list of them (its element's
    constructor) or a container with named members; a local name bound to one, or a
    helper function of the file that returns one, is followed (a few levels deep)."""
    path = path or name
    if depth > 4:
        return SubModule(name, None, None, path=path)
    if type(value) is cst.Name:
        bound = view.bindings.expression(value)
        if bound is not None and type(view.index.parent(bound)) is not cst.Param:
            return describe(view, name, bound, path, depth + 1)
        return SubModule(name, None, None, path=path)
    if type(value) is cst.Call:
        ctor = view.ctor_name(value)
        if ctor in LIST_CONTAINERS and value.args:
            members = _members(view, value, ctor)
            if members is not None:
                children = {key: describe(view, key, expr, f"{path}.{key}", depth + 1) for key, expr in members}
                return SubModule(name, ctor, value, children=children, path=path)
            inner = value.args[0].value
            element = _element(view, inner, depth)
            if element is not None:
                return SubModule(name, view.ctor_name(element), element, is_list=True, path=path)
        if ctor is None:
            returned = _factory_result(view, value)
            if returned is not None:
                described = describe(view, name, returned, path, depth + 1)
                if described.ctor is not None or described.children:
                    return described
        return SubModule(name, ctor, value, path=path)
    element = _element(view, value, depth)
    if element is not None:
        return SubModule(name, view.ctor_name(element), element, is_list=True, path=path)
    return SubModule(name, None, None, path=path)

def _members(view: ModelView, call: cst.Call, ctor: str) -> list[tuple[str, cst.BaseExpression]] | None:
    """Named members of a container call: `nn.ModuleDict(dict(a=A()))` / `({"a": A()})`,
    `nn.Sequential(OrderedDict([("a", A()), ...]))`, `nn.Sequential(A(), B())` ("0", "1")."""
    args = [arg for arg in call.args if arg.keyword is None]
    if ctor == "torch.nn.Sequential" and len(args) == 1 and not args[0].star \
            and type(args[0].value) is cst.Call \
            and (view.index.qualify(args[0].value.func) or "").endswith("OrderedDict"):
        inner = args[0].value.args[0].value if args[0].value.args else None
        return _pairs(inner) if inner is not None else []
    if ctor == "torch.nn.ModuleDict" and args and not args[0].star:
        return _dict_entries(args[0].value)
    if ctor == "torch.nn.Sequential" and args and not any(arg.star for arg in args) \
            and all(type(arg.value) is cst.Call for arg in args):
        return [(str(i), arg.value) for i, arg in enumerate(args)]
    return None

def _element(view: ModelView, expr: cst.BaseExpression, depth: int) -> cst.Call | None:
    """The element constructor of a list of modules (see `_element_call`), following a
    local name bound to the list and a starred argument (`nn.Sequential(*blocks)`)."""
    if type(expr) is cst.Name and depth <= 4:
        bound = view.bindings.expression(expr)
        if bound is not None and type(view.index.parent(bound)) is not cst.Param:
            return _element(view, bound, depth + 1)
        return None
    element = element_call(expr)
    if element is not None and type(element.func) is cst.Attribute and element.func.attr.value == "deepcopy":
        return None  # `copy.deepcopy(layer)`: the element is whatever was passed in
    return element

def _factory_result(view: ModelView, call: cst.Call) -> cst.BaseExpression | None:
    """The expression a helper function of the file returns (`def make_blocks(n): return
    nn.ModuleList(...)`), when it has one `return`; its parameters are not followed."""
    if type(call.func) is not cst.Name or call.func.value in view.index.imports.aliases:
        return None
    functions = [f for f in view.index.functions_by_name.get(call.func.value, ())
                 if type(view.index.parent(f)) is cst.Module]
    if len(functions) != 1:
        return None
    returns = [node for node in walk(functions[0].body, into_functions=False) if type(node) is cst.Return]
    if len(returns) != 1 or returns[0].value is None:
        return None
    return returns[0].value


def element_call(expr: cst.BaseExpression) -> cst.Call | None:
    """The element constructor of `[Ctor(...) for _ in range(n)]` or `[Ctor(...)] * n`."""
    if (type(expr) is cst.ListComp or type(expr) is cst.GeneratorExp) and type(expr.elt) is cst.Call:
        return expr.elt
    if type(expr) is cst.List and expr.elements and type(expr.elements[0].value) is cst.Call:
        return expr.elements[0].value
    if type(expr) is cst.List and expr.elements and type(expr.elements[0]) is cst.StarredElement:
        return element_call(expr.elements[0].value)  # `[*blocks]`, `[*[Block() for _ in ...]]`
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
        return element_call(expr.left)
    return None


def subscript_key(expr: cst.Subscript) -> str | None:
    """The literal key of `x["wte"]` / `x[0]` as a member name."""
    if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
        return None
    key = literal_value(expr.slice[0].slice.value, default=None)
    return str(key) if isinstance(key, (str, int)) and not isinstance(key, bool) else None


def _dict_entries(expr: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]] | None:
    """`dict(a=A(), b=B())` or `{"a": A(), "b": B()}` as (key, value) pairs; None otherwise."""
    if type(expr) is cst.Call and dotted_name(expr.func) == "dict":
        if any(arg.keyword is None for arg in expr.args):
            return _pairs(expr.args[0].value) if len(expr.args) == 1 else None
        return [(arg.keyword.value, arg.value) for arg in expr.args if arg.keyword is not None]
    if type(expr) is cst.Dict:
        out: list[tuple[str, cst.BaseExpression]] = []
        for element in expr.elements:
            if type(element) is cst.DictElement:
                key = literal_value(element.key, default=None)
                if isinstance(key, str):
                    out.append((key, element.value))
        return out
    return None


def _pairs(expr: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """`[("a", A()), ("b", B())]` (a list or tuple of pairs) as (key, value) pairs."""
    out: list[tuple[str, cst.BaseExpression]] = []
    if type(expr) is cst.List or type(expr) is cst.Tuple:
        for element in expr.elements:
            pair = element.value
            if (type(pair) is cst.Tuple or type(pair) is cst.List) and len(pair.elements) == 2:
                key = literal_value(pair.elements[0].value, default=None)
                if isinstance(key, str):
                    out.append((key, pair.elements[1].value))
    elif type(expr) is cst.Dict:
        out += _dict_entries(expr) or []
    return out
