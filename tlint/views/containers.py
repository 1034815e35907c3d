"""Sub-modules and the members of their containers, as `ModelView` reads them from
`self.<name> = ...` (see `tlint.views.model`): `nn.ModuleDict` from a dict literal or
`dict(...)`, `nn.Sequential` with or without an `OrderedDict` (members by key or by
position), lists (`nn.ModuleList([...])`, list comprehensions, `[Block()] * n`, starred
lists), a local name bound to one, and a helper function of the file that returns one.

A list or container may also be filled after it is built: `blocks.append(Block())`,
`.extend(...)`, `.insert(i, ...)`, `blocks += [...]` on a local list before it is wrapped
(`nn.ModuleList(blocks)`, `nn.Sequential(*blocks)`), and `self.blocks.append(...)`,
`self.blocks.add_module(name, ...)` or `self.heads["lm"] = ...` on a container attribute in
any method of its class. Every element constructor found joins the model: the first is the
list's element (`SubModule.ctor`), the others with a different constructor are
`SubModule.others`."""

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
    # the elements of a list whose constructor differs from the first one's (`[Embed(), *blocks, Norm()]`,
    # a list filled by `.append(Block())` then `.append(Norm())`), in order of appearance
    others: list[SubModule] = field(default_factory=list)
    # `self.<name> = None` (a branch without the module): a later assignment of the attribute replaces it
    placeholder: bool = False

    def __post_init__(self) -> None:
        if not self.path:
            self.path = self.name

    def nested(self) -> list[SubModule]:
        """This sub-module and every member of its containers, depth first."""
        out = [self]
        for child in (*self.children.values(), *self.others):
            out += child.nested()
        return out


def describe(view: ModelView, name: str, value: cst.BaseExpression, path: str = "", depth: int = 0) -> SubModule:
    """What `view.<name> = value` declares: a module, a list of them (its element's
    constructor) or a container with named members; a local name bound to one, or a
    helper function of the file that returns one, is followed (a few levels deep)."""
    path = path or name
    if depth > 4:
        return SubModule(name, None, None, path=path)
    if type(value) is cst.Name and value.value == "None":
        return SubModule(name, None, None, path=path, placeholder=depth == 0)
    if type(value) is cst.IfExp and any(type(v) is cst.Name and v.value == "None" for v in (value.body, value.orelse)):
        built = value.orelse if type(value.body) is cst.Name and value.body.value == "None" else value.body
        return describe(view, name, built, path, depth + 1)  # `None if no_cross else Attention(d)`: the module
    if type(value) is cst.Name:
        elements = _elements(view, value, depth)
        if elements:
            return _list(view, name, elements, path, depth)
        bound = view.bindings.expression(value)
        if bound is not None and type(view.index.parent(bound)) is not cst.Param:
            return describe(view, name, bound, path, depth + 1)
        return SubModule(name, None, None, path=path)
    if type(value) is cst.Call:
        ctor = view.ctor_name(value)
        if ctor in LIST_CONTAINERS:
            filled = _attribute_fills(view, value, path) if depth == 0 else ([], {})
            members = _members(view, value, ctor) if value.args else None
            if members is not None or filled[1]:
                children = {key: describe(view, key, expr, f"{path}.{key}", depth + 1)
                            for key, expr in (*(members or ()), *filled[1].items())}
                described = SubModule(name, ctor, value, children=children, path=path)
                described.others = [describe(view, name, call, path, depth + 1) for call in _distinct(filled[0])]
                return described
            elements = [*(_elements(view, value.args[0].value, depth) if value.args else ()), *filled[0]]
            if elements:
                return _list(view, name, elements, path, depth)
        if ctor is None:
            returned = _factory_result(view, value)
            if returned is not None:
                described = describe(view, name, returned, path, depth + 1)
                if described.ctor is not None or described.children:
                    return described
        return SubModule(name, ctor, value, path=path)
    if type(value) is cst.IfExp:  # `Table(d) if learned else None`: the module of its first built branch
        branch = value.body if not (type(value.body) is cst.Name and value.body.value == "None") else value.orelse
        return describe(view, name, branch, path, depth + 1)
    elements = _elements(view, value, depth)
    if elements:
        return _list(view, name, elements, path, depth)
    return SubModule(name, None, None, path=path)


def _list(view: ModelView, name: str, elements: list[cst.Call], path: str, depth: int) -> SubModule:
    """A list of modules: its first element's constructor, and the elements of other
    constructors as `others`."""
    first, *rest = _distinct(elements)
    described = SubModule(name, view.ctor_name(first), first, is_list=True, path=path)
    described.others = [describe(view, name, call, path, depth + 1) for call in rest]
    return described


def _distinct(calls: list[cst.Call]) -> list[cst.Call]:
    """The calls of different callees (by their text), first of each kept."""
    seen: set[str | None] = set()
    out = []
    for call in calls:
        callee = dotted_name(call.func)
        if callee not in seen:
            seen.add(callee)
            out.append(call)
    return out

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

def _elements(view: ModelView, expr: cst.BaseExpression, depth: int) -> list[cst.Call]:
    """The element constructors of a list of modules (see `list_calls`), following a local
    name bound to the list (and what `.append`, `.extend`, `.insert` and `+=` add to it
    before `expr` reads it) and a starred argument (`nn.Sequential(*blocks)`)."""
    if type(expr) is cst.Name:
        reaching = view.bindings.reaching(expr) if depth <= 4 else []
        if reaching and type(reaching[0].node) is cst.AugAssign:  # the bindings from the last plain one on
            at = view.index.position[id(expr)]
            before = [b for b in view.bindings.of(expr) if b.position < at]
            plain = [i for i, b in enumerate(before) if type(b.node) is not cst.AugAssign]
            reaching = before[plain[-1]:] if plain else []
        if not reaching or reaching[0].kind != "assign" or reaching[0].value is None \
                or any(type(b.node) is not cst.AugAssign for b in reaching[1:]):
            return []
        first = reaching[0].value
        out: list[cst.Call] = _elements(view, first, depth + 1)
        for binding in reaching[1:]:  # `blocks = [...]` then `blocks += [...]`
            out += _elements(view, binding.node.value, depth + 1)  # type: ignore[attr-defined]  # an AugAssign
        if out or type(first) is cst.List and not first.elements:
            out += _local_fills(view, expr, reaching[0].node, depth)
        position = view.index.position
        return sorted(out, key=lambda call: position.get(id(call), 0))
    return [call for call in list_calls(expr)
            if not (type(call.func) is cst.Attribute and call.func.attr.value == "deepcopy")]
    # `copy.deepcopy(layer)`: the element is whatever was passed in


# list methods that add modules -> the position of the element argument (None: an iterable of them)
_FILL_METHODS = {"append": 0, "insert": 1, "extend": None, "add_module": 1}


def _fill_calls(view: ModelView) -> dict[tuple[int, str], list[cst.Call]]:
    """(id of the scope, holder's text) -> the `.append`/`.extend`/`.insert`/`.add_module`
    calls on it, in order: the scope of `blocks.append(...)` is its function (or the
    module), of `self.blocks.append(...)` its class. Built once per file, on first need."""
    cached = view.__dict__.get("_fill_calls")
    if cached is not None:
        return cached
    index = view.index
    out: dict[tuple[int, str], list[cst.Call]] = {}
    for call in index.calls:
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in _FILL_METHODS or not call.args:
            continue
        holder = dotted_name(func.value)
        if holder is None:
            continue
        if holder.startswith("self."):
            scope: cst.CSTNode | None = index.enclosing_class(call)
        else:
            scope = index.enclosing_function(call) or index.module
        if scope is not None:
            out.setdefault((id(scope), holder), []).append(call)
    view.__dict__["_fill_calls"] = out
    return out


def _added(view: ModelView, call: cst.Call, depth: int) -> list[cst.Call]:
    """The module constructors a fill call adds (`append(Block())`, `extend([...])`, a
    local name bound to one)."""
    position = _FILL_METHODS[call.func.attr.value]  # type: ignore[attr-defined]  # checked by `_fill_calls`
    args = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if position is None:
        return _elements(view, args[0].value, depth + 1) if args else []
    if len(args) <= position:
        return []
    value = args[position].value
    if type(value) is cst.Name and depth <= 4:
        value = view.bindings.expression(value) or value
    return [value] if type(value) is cst.Call else []


def _local_fills(view: ModelView, name: cst.Name, bound_at: cst.CSTNode, depth: int) -> list[cst.Call]:
    """What `.append`/`.extend`/`.insert` add to the local list `name` between its binding
    and this use."""
    index = view.index
    scope = index.enclosing_function(name) or index.module
    start, end = index.position[id(bound_at)], index.position[id(name)]
    out: list[cst.Call] = []
    for call in _fill_calls(view).get((id(scope), name.value), ()):
        if start < index.position[id(call)] < end:
            out += _added(view, call, depth)
    return out


def _attribute_fills(view: ModelView, container: cst.Call,
                     path: str) -> tuple[list[cst.Call], dict[str, cst.BaseExpression]]:
    """What the class's methods add to the container `self.<path> = nn.ModuleList(...)`:
    the elements of `.append`/`.extend`/`.insert`/`.add_module` calls, and the members
    `self.<path>["key"] = ...` assigns by a literal key."""
    index = view.index
    cls = index.enclosing_class(container)
    if cls is None:
        return [], {}
    holder = f"self.{path}"
    elements = [element for call in _fill_calls(view).get((id(cls), holder), ()) for element in _added(view, call, 0)]
    keyed: dict[str, cst.BaseExpression] = {}
    for key, value, node in _keyed_fills(view).get((id(cls), holder), ()):
        if key is not None:
            keyed.setdefault(key, value)
        elif type(value) is cst.Call:
            elements.append(value)
        del node
    return elements, keyed


def _keyed_fills(view: ModelView) -> dict[tuple[int, str], list[tuple[str | None, cst.BaseExpression, cst.CSTNode]]]:
    """(id of the class, `self.<name>`) -> (literal key or None, value, statement) of the
    assignments `self.<name>[key] = value` in its methods."""
    cached = view.__dict__.get("_keyed_fills")
    if cached is not None:
        return cached
    index = view.index
    out: dict[tuple[int, str], list[tuple[str | None, cst.BaseExpression, cst.CSTNode]]] = {}
    for node in index.assignments:
        if type(node) is not cst.Assign:
            continue
        for target in node.targets:
            subscript = target.target
            if type(subscript) is not cst.Subscript:
                continue
            holder = dotted_name(subscript.value)
            cls = index.enclosing_class(node) if holder and holder.startswith("self.") else None
            if cls is not None and holder is not None:
                out.setdefault((id(cls), holder), []).append((subscript_key(subscript), node.value, node))
    view.__dict__["_keyed_fills"] = out
    return out

def _factory_result(view: ModelView, call: cst.Call) -> cst.BaseExpression | None:
    """The expression a helper function of the file returns (`def make_blocks(n): return
    nn.ModuleList(...)`), or a builder method of the class (`self.self_attn =
    self.build_self_attention(dim)`, the method of the class or of a base of this file),
    when it has one `return`; its parameters are not followed."""
    func = call.func
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        function = view.bindings.calls.callee(call)
    elif type(func) is not cst.Name or func.value in view.index.imports.aliases:
        return None
    else:
        functions = [f for f in view.index.functions_by_name.get(func.value, ())
                     if type(view.index.parent(f)) is cst.Module]
        function = functions[0] if len(functions) == 1 else None
    if function is None:
        return None
    returns = [node for node in walk(function.body, into_functions=False) if type(node) is cst.Return]
    if len(returns) != 1 or returns[0].value is None:
        return None
    return returns[0].value


def list_calls(expr: cst.BaseExpression) -> list[cst.Call]:
    """The element constructors of `[Ctor(...) for _ in range(n)]`, `[Ctor(...)] * n`,
    `[A(), *[B() for _ in ...], C()]` or `[a] + [b]`, in order."""
    if (type(expr) is cst.ListComp or type(expr) is cst.GeneratorExp) and type(expr.elt) is cst.Call:
        return [expr.elt]
    if type(expr) is cst.List or type(expr) is cst.Tuple:
        out: list[cst.Call] = []
        for element in expr.elements:
            if type(element) is cst.StarredElement:
                out += list_calls(element.value)  # `[*blocks]`, `[*[Block() for _ in ...]]`
            elif type(element.value) is cst.Call:
                out.append(element.value)
        return out
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Multiply:
        return list_calls(expr.left)
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
        return list_calls(expr.left) + list_calls(expr.right)
    return []


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
