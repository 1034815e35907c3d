"""The bindings view (`ctx.bindings`): what a name or `self.<attr>` is bound to at a point,
and the value it has when the program runs with its defaults. Every rule and view that
resolves a name asks here.

**Bindings** (`Binding`): assignments (tuple and list unpacking element by element,
annotated, augmented, the walrus), `for` and comprehension targets, `with … as`,
parameters, imports, `def`/`class` names and `except … as`; and for `self.<attr>`, the
assignments to it in every method of its class (and the class body).

- `of(name)`: every binding of the scope a name resolves to (class bodies are not seen
  from methods, as in Python);
- `reaching(name)`: those that may hold at the use, in source order: the last binding
  that surely runs before the use, the conditional ones after it (an `if`, a loop body, a
  `try`), and, in a loop, the bindings later in the same loop body (the next iteration);
  every binding when none comes before the use (a closure, a function defined first);
- `attribute(expr)`: the bindings of `self.<attr>` in its class;
- `expression(name)`: the one expression that reaches a use (an assignment's value, or a
  parameter's default: its parent is then the `cst.Param`); None when several or none.

**Values as the program runs by default** (`value`, `values`, `nonzero`): literals and
arithmetic on them; names through the bindings that reach them (every one must agree);
`self.<attr>` through its class's assignments; parameters through the arguments of every
call of the function in this file (`ctx.calls`; its default where a call leaves it out,
the default alone when nothing calls it here); `argparse`/`click` option defaults,
dataclass/pydantic/config-class field defaults and `__init__` defaults for
`args.<name>`/`cfg.train.<name>`; `d["k"]` and `d.get("k", default)` of a dict literal,
of `vars(args)`, or of `**kwargs` (the callers' keyword, else the default).

A name unpacked from the call of a local function (`total, warmup = self.helper(n, 0)`)
takes the element of the tuple its one `return` gives, read there.

`values(expr)` gives one value per way the program can reach the expression (one per
resolvable call site for a parameter): a rule that reports on a value reports when every
one of them triggers it (`all_values`) and stays silent when none resolves.

Over 800 lines: the bindings table and the default-run values are one resolver (a value
asks for the bindings that reach a name, a parameter's value for its call sites, an
unpacked name for its helper's return, an option's for the parser's defaults); split,
each part would call back into the others' tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import libcst as cst

from tlint.context import register_view
from tlint.cst import assignment_targets, dotted_name, get_arg, last_name, literal_value, walk
from tlint.views.calls import CallsView, parameters

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex

# What `value` returns for a value it cannot know statically.
UNKNOWN: Any = object()

ASSIGN = "assign"  # `x = v`, `x: T = v`, `(x := v)`, an element of `a, b = u, v`
AUGMENT = "augment"  # `x += v`: its value folds the values before it (outside loops)
LOOP = "loop"  # `for x in ...`, a comprehension's target
WITH = "with"  # `with f() as x`
PARAM = "param"  # a parameter (its value: the default)
IMPORT = "import"
DEFINITION = "definition"  # `def x`, `class x`
OTHER = "other"  # `except E as x`, `global`, `del` ...


@dataclass(frozen=True, eq=False)
class Binding:
    """One place `name` is bound. `value`: the expression bound (the element for tuple
    unpacking, a parameter's default, the `with` item), None when not known from here;
    `node`: the statement (or `cst.Param`) that binds it; `position`: its source order."""

    name: str
    kind: str
    node: cst.CSTNode
    value: cst.BaseExpression | None
    scope: cst.CSTNode
    position: int


def _position(binding: Binding) -> int:
    return binding.position


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Const(NamedTuple):
    """A default that is not written as an expression (`action="store_true"`)."""

    value: object


# a block under one of these may not run (a `with` body, a `finally` always run)
_CONDITIONAL_BLOCK_OWNERS = (cst.If, cst.Else, cst.For, cst.While, cst.Try, cst.TryStar, cst.ExceptHandler,
                             cst.ExceptStarHandler, cst.MatchCase)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class BindingsView:
    """Bindings and default-run values of one file, computed lazily from its index."""

    def __init__(self, index: FileIndex, calls: CallsView | None = None) -> None:
        self.index = index
        self.calls = calls if calls is not None else CallsView(index)
        self._reaching: dict[int, list[Binding]] = {}

    # --- the tables -------------------------------------------------------------------

    @cached_property
    def _table(self) -> dict[tuple[int, str], list[Binding]]:
        """(id of the scope, name) -> its bindings in source order (LibCST's nodes hash in
        Python code: tables are keyed by `id`)."""
        index = self.index
        out: dict[tuple[int, str], list[Binding]] = {}
        position = index.position

        def add(scope: cst.CSTNode, name: str, kind: str, node: cst.CSTNode,
                value: cst.BaseExpression | None) -> None:
            key = (id(scope), name)
            found = out.get(key)
            binding = Binding(name, kind, node, value, scope, position[id(node)])
            if found is None:
                out[key] = [binding]
            else:
                found.append(binding)

        def bind(scope: cst.CSTNode, target: cst.BaseExpression, kind: str, node: cst.CSTNode,
                 value: cst.BaseExpression | None) -> None:
            # iterative, not recursive: a closure that calls itself is a reference cycle,
            # which would keep `out` (and through it the file's tree) alive past the file
            stack: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = [(target, value)]
            while stack:
                target, value = stack.pop()
                if type(target) is cst.Name:
                    add(scope, target.value, kind, node, value)
                elif type(target) is cst.Tuple or type(target) is cst.List:
                    values = value.elements if type(value) is cst.Tuple or type(value) is cst.List else None
                    if values is not None and (len(values) != len(target.elements)
                                               or any(type(e) is cst.StarredElement for e in values)):
                        values = None
                    for i in range(len(target.elements) - 1, -1, -1):  # popped in source order
                        stack.append((target.elements[i].value, values[i].value if values else None))
                elif type(target) is cst.StarredElement:
                    stack.append((target.value, None))

        for node in index.assignments:
            scope = index.enclosing_scope(node)
            if type(node) is cst.Assign:
                for target in node.targets:
                    bind(scope, target.target, ASSIGN, node, node.value)
            elif type(node) is cst.AnnAssign:
                if node.value is not None:
                    bind(scope, node.target, ASSIGN, node, node.value)
            else:
                bind(scope, node.target, AUGMENT, node, None)  # type: ignore[union-attr]
        for loop in index.loops:
            if type(loop) is cst.For:
                bind(index.enclosing_scope(loop), loop.target, LOOP, loop, None)
        for function in index.functions:
            for param in (*parameters(function), function.params.star_arg, function.params.star_kwarg):
                if type(param) is cst.Param:
                    add(function, param.name.value, PARAM, param, param.default)
            add(index.enclosing_scope(function), function.name.value, DEFINITION, function, None)
        for cls in index.classes:
            add(index.enclosing_scope(cls), cls.name.value, DEFINITION, cls, None)
        binder: Any  # dispatched on `type(binder)`, which mypy does not narrow by in a tuple
        for binder in self._other_binders:
            if type(binder) is cst.CompFor:
                continue  # a scope of its own (`_comprehension_binding`)
            scope = index.enclosing_scope(binder)
            if type(binder) is cst.With:
                for item in binder.items:
                    if item.asname is not None:
                        bind(scope, item.asname.name, WITH, binder, item.item)
            elif type(binder) is cst.NamedExpr:
                bind(scope, binder.target, ASSIGN, binder, binder.value)
            elif type(binder) is cst.Lambda:
                for param in (*parameters(binder), binder.params.star_arg, binder.params.star_kwarg):
                    if type(param) is cst.Param:
                        add(binder, param.name.value, PARAM, param, param.default)
            elif type(binder) in (cst.ExceptHandler, cst.ExceptStarHandler) and binder.name is not None:
                bind(scope, binder.name.name, OTHER, binder, None)
        for lists in out.values():
            if len(lists) > 1:
                lists.sort(key=_position)
        return out

    @cached_property
    def _other_binders(self) -> list[cst.CSTNode]:
        """`with`, walrus, lambda and `except` nodes (the index lists none of them)."""
        kinds = (cst.With, cst.NamedExpr, cst.Lambda, cst.ExceptHandler, cst.ExceptStarHandler, cst.CompFor)
        return [node for node in self.index.order if type(node) in kinds]

    @cached_property
    def _comprehension_names(self) -> frozenset[str]:
        """Names some comprehension of the file binds (only those need its scope checked)."""
        return frozenset(n.value for node in self._other_binders if type(node) is cst.CompFor
                         for n in _target_names(node.target))

    @cached_property
    def _attributes(self) -> dict[tuple[int, str], list[Binding]]:
        """(class, attr) -> the bindings of `self.<attr>` in its methods and `<attr>` in
        its body, in source order."""
        index = self.index
        position = index.position
        out: dict[tuple[int, str], list[Binding]] = {}

        def add(cls: cst.ClassDef, name: str, node: cst.CSTNode, scope: cst.CSTNode) -> None:
            augmented = type(node) is cst.AugAssign
            out.setdefault((id(cls), name), []).append(Binding(
                name, AUGMENT if augmented else ASSIGN, node, None if augmented else node.value,  # type: ignore[attr-defined]
                scope, position[id(node)]))

        for node in index.assignments:
            names = [t.attr.value for t in assignment_targets(node)
                     if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self"]
            if not names:
                continue
            scope = index.enclosing_scope(node)
            cls = index.enclosing_class(scope) if type(scope) is cst.FunctionDef else None
            if cls is not None:
                for name in names:
                    add(cls, name, node, scope)
        for cls in index.classes:  # `<attr> = v` in the class body
            for statement in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
                if type(statement) is cst.SimpleStatementLine:
                    for small in statement.body:
                        for target in assignment_targets(small):
                            if type(target) is cst.Name:
                                add(cls, target.value, small, cls)
        for lists in out.values():
            if len(lists) > 1:
                lists.sort(key=_position)
        return out

    # --- bindings of a name -------------------------------------------------------------

    def _resolving_scope(self, name: cst.Name) -> tuple[cst.CSTNode | None, list[Binding]]:
        """The scope `name` resolves to from its use (class bodies skipped from inside
        functions) and its bindings there; (None, []) when it is bound nowhere here."""
        index = self.index
        scope: cst.CSTNode | None = index.enclosing_scope(name)
        if name.value in self._comprehension_names:
            comprehension = self._comprehension_binding(name, scope)
            if comprehension is not None:
                return comprehension.scope, [comprehension]
        first = True
        while scope is not None:
            if type(scope) is cst.ClassDef and not first:
                scope = index.enclosing_scope(scope)
                continue
            bound = self._table.get((id(scope), name.value))
            if bound:
                return scope, bound
            if scope is index.module:
                return None, []
            scope = index.enclosing_scope(scope)
            first = False
        return None, []

    def _comprehension_binding(self, name: cst.Name, scope: cst.CSTNode | None) -> Binding | None:
        """The target of a comprehension around `name` that binds it (`x` in `[x for x in
        xs]`: a scope of its own, as in Python 3)."""
        index = self.index
        for ancestor in index.ancestors(name):
            if ancestor is scope:
                return None
            if type(ancestor) in _COMPREHENSIONS:
                comp: cst.CompFor | None = ancestor.for_in
                while comp is not None:
                    if any(n.value == name.value for n in _target_names(comp.target)):
                        return Binding(name.value, LOOP, comp, None, ancestor, index.position[id(comp)])
                    comp = comp.inner_for_in
        return None

    def names_in(self, scope: cst.CSTNode) -> dict[str, list[Binding]]:
        """Name -> the bindings made in `scope` itself, in source order."""
        return self._by_scope.get(id(scope), {})

    @cached_property
    def _by_scope(self) -> dict[int, dict[str, list[Binding]]]:
        out: dict[int, dict[str, list[Binding]]] = {}
        for (scope, name), bound in self._table.items():
            out.setdefault(scope, {})[name] = bound
        return out

    def in_scope(self, scope: cst.CSTNode, name: str) -> list[Binding]:
        """The bindings of `name` made in `scope` itself (not in nested functions)."""
        return self._table.get((id(scope), name), [])

    def before(self, scope: cst.CSTNode, node: cst.CSTNode) -> dict[str, list[Binding]]:
        """Name -> the bindings made in `scope` itself before `node`, in source order
        (parameters first)."""
        at = self.index.position[id(node)]
        out: dict[str, list[Binding]] = {}
        for name, bound in self.names_in(scope).items():
            earlier = [b for b in bound if b.position < at or b.kind == PARAM]
            if earlier:
                out[name] = earlier
        return out

    def of(self, name: cst.Name) -> list[Binding]:
        """Every binding of the scope `name` resolves to, in source order."""
        return self._resolving_scope(name)[1]

    def reaching(self, name: cst.Name) -> list[Binding]:
        """The bindings of `name` that may hold at this use (see the module docstring)."""
        found = self._reaching.get(id(name))
        if found is None:
            found = self._reaching[id(name)] = self._reaching_uncached(name)
        return found

    def _reaching_uncached(self, name: cst.Name) -> list[Binding]:
        scope, bound = self._resolving_scope(name)
        if len(bound) <= 1 or scope is None:
            return bound
        index = self.index
        if scope is not index.enclosing_scope(name):
            return bound  # read from a nested function: any binding may hold when it runs
        at = index.position[id(name)]
        before = [b for b in bound if b.position < at and not self._reads_first(b, name)]
        out: list[Binding] = []
        for binding in reversed(before):
            out.append(binding)
            if self._surely_before(binding, name, scope):
                break
        else:
            return bound  # nothing surely runs first
        out.reverse()
        for loop in index.enclosing_loops(name):  # the next iteration sees later bindings
            out.extend(b for b in bound if b.position > at and index.is_inside(b.node, loop) and b not in out)
        return out

    def _reads_first(self, binding: Binding, name: cst.Name) -> bool:
        """`name` is read by the binding statement itself before it binds (`x = x + 1`)."""
        node = binding.node
        if type(node) not in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr):
            return False
        index = self.index
        start = index.position[id(node)]
        return start <= index.position[id(name)] < index.ends[start]

    def _surely_before(self, binding: Binding, use: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """Every block around `binding` (inside `scope`) that may not run also holds `use`."""
        index = self.index
        if binding.kind == PARAM:
            return True
        if binding.kind == LOOP and not index.is_inside(use, binding.node):
            return False  # a loop target is bound only if the loop runs
        for ancestor in index.ancestors(binding.node):
            if ancestor is scope:
                return True
            if type(ancestor) in (cst.IndentedBlock, cst.SimpleStatementSuite) \
                    and type(index.parent(ancestor)) in _CONDITIONAL_BLOCK_OWNERS \
                    and not index.is_inside(use, ancestor):
                return False
        return True

    def attribute(self, expr: cst.Attribute) -> list[Binding]:
        """The bindings of `self.<attr>` in the class `expr` is used in."""
        if not (type(expr.value) is cst.Name and expr.value.value == "self"):
            return []
        cls = self.index.enclosing_class(expr)
        if cls is None:
            return []
        return self._attributes.get((id(cls), expr.attr.value), [])

    def expression(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression `name` is bound to at this use: an assignment's value, or a
        parameter's default (then its parent is the `cst.Param`); None when the name is
        imported, bound several ways, or to something unknown."""
        if name.value in self.index.imports.aliases:
            return None
        reaching = self.reaching(name)
        if len(reaching) != 1:
            return None
        return reaching[0].value if reaching[0].kind in (ASSIGN, PARAM) else None

    def parameter(self, name: cst.Name) -> cst.Param | None:
        """The parameter `name` reads, when nothing else binds it in its function."""
        reaching = self.reaching(name)
        if len(reaching) == 1 and reaching[0].kind == PARAM:
            node = reaching[0].node
            return node if type(node) is cst.Param else None
        return None

    # --- values as the program runs by default ----------------------------------------

    def value(self, expr: cst.BaseExpression | None, default: Any = UNKNOWN) -> Any:
        """The value `expr` has when the program runs with its defaults (see the module
        docstring); `default` when it cannot be known, or when the ways the program
        reaches it disagree."""
        found = self._values(expr, 0)
        if not found or any(v is UNKNOWN for v in found):
            return default
        first = found[0]
        if any(v != first or type(v) is not type(first) for v in found[1:]):
            return default
        return first

    def values(self, expr: cst.BaseExpression | None) -> list[Any]:
        """Every value `expr` may have as the program runs by default (one per resolvable
        call site for a parameter); UNKNOWN for one that cannot be known; [] when the
        expression is not bound here."""
        return self._values(expr, 0)

    def all_values(self, expr: cst.BaseExpression | None, test: Callable[[Any], bool]) -> bool:
        """Every known value of `expr` passes `test`, and at least one is known: a rule
        reports only when every resolvable way gives the triggering value, and stays
        silent when none resolves."""
        known = [v for v in self._values(expr, 0) if v is not UNKNOWN]
        return bool(known) and all(test(v) for v in known)

    def nonzero(self, expr: cst.BaseExpression) -> bool:
        """True unless `expr` is known to be 0/None/False (unknown values count as set)."""
        value = self.value(expr)
        return value is UNKNOWN or not (value is None or value is False or (_number(value) and value == 0))

    def empty(self, expr: cst.BaseExpression | None) -> bool:
        """`expr` is known to be None or False where it is used: a literal, or a local
        variable bound to one (`mask = None`, `causal = False`). A parameter is not empty by
        its default (`forward(self, x, mask=None)` passes on what its callers give)."""
        if expr is None:
            return False
        if type(expr) is cst.Name:
            if expr.value in ("None", "False"):
                return True
            reaching = self.reaching(expr)
            if not reaching or any(b.kind == PARAM for b in reaching):
                return False
        value = self.value(expr)
        return value is None or value is False

    def _one(self, expr: cst.BaseExpression | None, depth: int) -> Any:
        found = self._values(expr, depth)
        if not found or any(v is UNKNOWN for v in found):
            return UNKNOWN
        first = found[0]
        if any(v != first or type(v) is not type(first) for v in found[1:]):
            return UNKNOWN
        return first

    def _values(self, expr: cst.BaseExpression | None, depth: int) -> list[Any]:
        if expr is None or depth > 8:
            return [UNKNOWN]
        value = literal_value(expr, UNKNOWN)
        if value is not UNKNOWN:
            return [value]
        kind = type(expr)
        if kind is cst.Name:
            return self._name_values(expr, depth)  # type: ignore[arg-type]
        if kind is cst.Attribute:
            return [self._attribute_value(expr, depth)]  # type: ignore[arg-type]
        if kind is cst.BinaryOperation:
            return [_fold(expr.operator, self._one(expr.left, depth + 1),  # type: ignore[attr-defined]
                          self._one(expr.right, depth + 1))]  # type: ignore[attr-defined]
        if kind is cst.Call:
            return [self._fold_call(expr, depth)]  # type: ignore[arg-type]
        if kind is cst.Subscript:
            return [self._subscript_value(expr, depth)]  # type: ignore[arg-type]
        return [UNKNOWN]

    def _name_values(self, name: cst.Name, depth: int) -> list[Any]:
        if name.value in self.index.imports.aliases:
            return [UNKNOWN]
        reaching = self.reaching(name)
        if not reaching:
            return [UNKNOWN]
        if len(reaching) == 1 and reaching[0].kind == PARAM:
            return self._parameter_values(reaching[0], name, depth)
        out = []
        for binding in reaching:
            if binding.kind == AUGMENT:
                out.extend(self._augmented_values(binding, depth))
                continue
            if binding.kind == PARAM and type(binding.node) is cst.Param:  # `if c: x *= n` after it
                out.extend(self._parameter_values(binding, name, depth))
                continue
            if binding.kind != ASSIGN:
                return [UNKNOWN]
            value = binding.value if binding.value is not None else self._unpacked(binding)
            out.append(self._one(value, depth + 1))
        return out

    def _unpacked(self, binding: Binding) -> cst.BaseExpression | None:
        """`steps, warmup = self.compute_warmup(...)`: the element of the tuple the local
        function returns (its one `return a, b`) that the name unpacks, read where it is
        returned (its parameters then take what the function's callers pass)."""
        node = binding.node
        if type(node) is not cst.Assign or len(node.targets) != 1 or type(node.value) is not cst.Call:
            return None
        target = node.targets[0].target
        if type(target) is not cst.Tuple and type(target) is not cst.List:
            return None
        names = [e.value.value if type(e.value) is cst.Name else None for e in target.elements]
        if names.count(binding.name) != 1 or any(type(e) is cst.StarredElement for e in target.elements):
            return None
        function = self.calls.callee(node.value)
        if function is None:
            return None
        returns = [n for n in walk(function.body, into_functions=False) if type(n) is cst.Return]
        if len(returns) != 1:
            return None
        value = returns[0].value
        if (type(value) is not cst.Tuple and type(value) is not cst.List) or len(value.elements) != len(names) \
                or any(type(e) is cst.StarredElement for e in value.elements):
            return None
        return value.elements[names.index(binding.name)].value

    def _augmented_values(self, binding: Binding, depth: int) -> list[Any]:
        """`x *= 8` run once (not in a loop): the values of `x` before it, each folded with
        the right-hand side; UNKNOWN for a loop-carried one (`step += 1`)."""
        node = binding.node
        operator = _AUGMENTED.get(type(getattr(node, "operator", None)))
        if type(node) is not cst.AugAssign or type(node.target) is not cst.Name or operator is None \
                or depth > 8 or self.index.enclosing_loops(node):
            return [UNKNOWN]
        right = self._one(node.value, depth + 1)
        return [_fold(operator, left, right) for left in self._name_values(node.target, depth + 1)]

    def _parameter_values(self, binding: Binding, name: cst.Name, depth: int) -> list[Any]:
        param = binding.node
        assert type(param) is cst.Param
        function = binding.scope
        if self._click_parameter(name, function):
            return [self._option_value(name.value, depth)]
        if type(function) is not cst.FunctionDef:
            return [UNKNOWN]
        sites = self.calls.callers(function)
        if not sites:
            return [self._one(param.default, depth + 1) if param.default is not None else UNKNOWN]
        out = []
        for site in sites:
            if site.arguments is None:
                out.append(UNKNOWN)
            elif param.name.value in site.arguments:
                out.append(self._one(site.arguments[param.name.value], depth + 1))
            else:
                out.append(self._one(param.default, depth + 1) if param.default is not None else UNKNOWN)
        return out

    def _attribute_value(self, expr: cst.Attribute, depth: int) -> Any:
        qualified = self.index.qualify(expr)
        if qualified is not None:
            return math.inf if qualified in ("math.inf", "numpy.inf", "torch.inf") else UNKNOWN
        bound = self.attribute(expr)
        if bound:
            if any(b.kind != ASSIGN for b in bound):
                return UNKNOWN
            values = [self._one(b.value, depth + 1) for b in bound]
            first = values[0]
            if first is UNKNOWN or any(v is UNKNOWN or v != first or type(v) is not type(first) for v in values[1:]):
                return UNKNOWN
            return first
        return self._option_value(expr.attr.value, depth)

    def _subscript_value(self, expr: cst.Subscript, depth: int) -> Any:
        """`d["k"]` of a dict literal (or `dict(k=...)`) a name holds, or of `vars(args)`."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Index:
            return UNKNOWN
        key = literal_value(expr.slice[0].slice.value, UNKNOWN)
        if not isinstance(key, str):
            return UNKNOWN
        return self._mapping_value(expr.value, key, None, depth)

    def _mapping_value(self, mapping: cst.BaseExpression, key: str, fallback: cst.BaseExpression | None,
                       depth: int) -> Any:
        """The value at `key` of the mapping `mapping` holds (`fallback` when the mapping
        is known and lacks the key)."""
        source: cst.BaseExpression | None = mapping
        if type(mapping) is cst.Name:
            reaching = self.reaching(mapping)
            if len(reaching) == 1 and reaching[0].kind == PARAM:
                param = reaching[0].node
                function = reaching[0].scope
                assert type(param) is cst.Param
                if type(function) is cst.FunctionDef and param is function.params.star_kwarg:
                    return self._kwargs_value(function, key, fallback, depth)
                return UNKNOWN
            source = self.expression(mapping)
        if type(source) is cst.Dict:
            for element in source.elements:
                if type(element) is not cst.DictElement:
                    return UNKNOWN  # `**other`
                if literal_value(element.key, UNKNOWN) == key:
                    return self._one(element.value, depth + 1)
            return self._one(fallback, depth + 1) if fallback is not None else UNKNOWN
        if type(source) is cst.Call:
            name = self.index.qualify(source.func) or dotted_name(source.func)
            if name == "dict" and all(a.keyword is not None for a in source.args):
                arg = get_arg(source, key)
                if arg is not None:
                    return self._one(arg.value, depth + 1)
                return self._one(fallback, depth + 1) if fallback is not None else UNKNOWN
            if name == "vars" and len(source.args) == 1:
                return self._option_value(key, depth)
        return UNKNOWN

    def _kwargs_value(self, function: cst.FunctionDef, key: str, fallback: cst.BaseExpression | None,
                      depth: int) -> Any:
        """`kwargs.get(key, fallback)` in `function(**kwargs)`: what its callers pass."""
        sites = self.calls.callers(function)
        named = {p.name.value for p in parameters(function)}
        if key in named:
            return UNKNOWN
        values = []
        for site in sites:
            if site.arguments is None:
                return UNKNOWN
            given = site.arguments.get(key)
            values.append(self._one(given, depth + 1) if given is not None
                          else self._one(fallback, depth + 1) if fallback is not None else UNKNOWN)
        if not sites:
            values.append(self._one(fallback, depth + 1) if fallback is not None else UNKNOWN)
        first = values[0]
        if first is UNKNOWN or any(v is UNKNOWN or v != first or type(v) is not type(first) for v in values[1:]):
            return UNKNOWN
        return first

    def _fold_call(self, call: cst.Call, depth: int) -> Any:
        name = self.index.qualify(call.func) or dotted_name(call.func)
        func = call.func
        if (type(func) is cst.Attribute and func.attr.value == "get" and call.args
                and not any(a.star for a in call.args) and len(call.args) <= 2):
            key = literal_value(call.args[0].value, UNKNOWN)
            if isinstance(key, str) and self.index.qualify(func.value) is None:
                fallback = call.args[1].value if len(call.args) == 2 else None
                return self._mapping_value(func.value, key, fallback, depth)
        functions: dict[str, Callable[..., Any]] = {"int": int, "float": float, "round": round, "abs": abs,
                                                    "max": max, "min": min}
        function = functions.get(name or "") or {"math.ceil": math.ceil, "math.floor": math.floor}.get(name or "")
        if function is None or not call.args or any(a.keyword or a.star for a in call.args):
            return UNKNOWN
        values = [self._one(a.value, depth + 1) for a in call.args]
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

    def _click_parameter(self, name: cst.Name, function: cst.CSTNode) -> bool:
        """A parameter of a function whose `@click.option`s supply it."""
        if type(function) is not cst.FunctionDef:
            return False
        return any(
            type(d.decorator) is cst.Call and self.index.qualify(d.decorator.func) in ("click.option", "click.argument")
            for d in function.decorators
        )

    # --- option and field defaults ----------------------------------------------------

    @cached_property
    def _option_defaults(self) -> dict[str, list[cst.BaseExpression | _Const]]:
        """Attribute name -> default expressions (or _Const) of argparse/click options,
        dataclass/pydantic/config class fields and `__init__` parameters (Lightning hparams)."""
        out: dict[str, list[cst.BaseExpression | _Const]] = {}
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "add_argument":
                _argparse_option(call, out)
            elif self.index.qualify(func) in ("click.option", "click.argument"):
                _click_option(call, out)
        for cls in self.index.classes:
            for name, values in class_defaults(cls).items():
                out.setdefault(name, []).extend(values)
            init = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"), None)
            if init is not None:
                for param in parameters(init):
                    if param.default is not None:
                        out.setdefault(param.name.value, []).append(param.default)
        # `args.num_warmup_steps = int(ratio * total)` after parsing: the default is not what runs.
        for node in self.index.assignments:
            for target in assignment_targets(node):
                if type(target) is cst.Attribute and target.attr.value in out:
                    value = node.value if type(node) is cst.Assign else None
                    if not (type(value) is cst.Name and value.value == target.attr.value):
                        out[target.attr.value].append(_Const(UNKNOWN))
        return out

    def option_default(self, name: str) -> Any:
        """The default of option/field `name` (UNKNOWN when absent or when they disagree)."""
        return self._option_value(name, 0)

    def _option_value(self, name: str, depth: int) -> Any:
        candidates = self._option_defaults.get(name)
        if not candidates:
            return UNKNOWN
        values = [c.value if isinstance(c, _Const) else self._one(c, depth + 1) for c in candidates]
        first = values[0]
        if first is UNKNOWN or any(v is UNKNOWN or v != first or type(v) is not type(first) for v in values[1:]):
            return UNKNOWN
        return first


def class_defaults(cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression | _Const]]:
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
            default = field_default(value)
            if name:
                out.setdefault(name, []).append(default if default is not None else _Const(UNKNOWN))
    return out


def field_default(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """`field(default=v)` (dataclasses), `Field(v)`/`Field(default=v)` (pydantic): `v`."""
    if type(value) is cst.Call and last_name(value.func) in ("field", "Field"):
        arg = get_arg(value, "default", 0 if last_name(value.func) == "Field" else None)
        return arg.value if arg is not None else None
    return value


def _argparse_option(call: cst.Call, out: dict[str, list[cst.BaseExpression | _Const]]) -> None:
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


def _click_option(call: cst.Call, out: dict[str, list[cst.BaseExpression | _Const]]) -> None:
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


_AUGMENTED: dict[type, cst.BaseBinaryOp] = {
    cst.AddAssign: cst.Add(), cst.SubtractAssign: cst.Subtract(), cst.MultiplyAssign: cst.Multiply(),
    cst.DivideAssign: cst.Divide(), cst.FloorDivideAssign: cst.FloorDivide(),
}


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


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if type(target) is cst.Name:
        return [target]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in _target_names(e.value)]  # type: ignore[attr-defined]
    if type(target) is cst.StarredElement:
        return _target_names(target.value)
    return []


def module_constants(index: FileIndex) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(name, value) of module-level `NAME = value` statements, in order."""
    for stmt in index.module.body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                    yield small.targets[0].target.value, small.value


__all__ = ["UNKNOWN", "Binding", "BindingsView", "assignment_targets", "class_defaults", "field_default",
           "module_constants"]


@register_view("bindings")
def bindings(ctx: FileContext) -> BindingsView:
    """Bindings and default-run values of the file's names (`ctx.bindings`)."""
    return BindingsView(ctx.index, ctx.calls)
