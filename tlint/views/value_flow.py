"""Where the value a parameter receives goes inside its function (`parameter_sinks`).

The value is followed, not the name: through the bindings that reach each read
(`ctx.bindings.reaching`), a read of the parameter, or of a local computed from it,
either

- **flows** into a new local: the value of an assignment to plain names (`mask =
  rearrange(mask, ...)`, `q_mask, kv_mask = ...`, `x += mask`), the iterable of a `for`, a
  `with ... as` item;
- **is inspected** and computes nothing from the values: a test against None
  (`mask is not None`, `exists(mask)`, `isinstance`, `len`), its shape, size, dtype or
  device, an `assert`, a `del`, the receiver of an in-place method of itself
  (`mask.unsqueeze_(1)`), or the condition of an `if`/`while` that guards nothing (its
  branches only `pass`);
- or **reaches a sink**: anything else (a statement that uses it, `dots.masked_fill_(~mask,
  v)`; a `return`; an argument of a call whose result is not assigned; a store into an
  attribute or a subscript; the condition of an `if`/`while` with a body; a read from a
  nested function or lambda).

A local rebound from something else (`mask = torch.ones(i, j).triu_(1)`) no longer holds
the parameter's value: reads of it after the rebinding are not the parameter's. A
parameter with no sink has a value that reaches nothing the function returns or updates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import dotted_name, last_name, walk
from tlint.views.bindings import PARAM

if TYPE_CHECKING:
    from tlint.views.bindings import BindingsView

_PRESENCE_CALLS = frozenset({"exists", "is_none", "is_not_none", "isinstance", "len", "torch.is_tensor",
                             "callable", "type", "id"})
_SHAPE_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "size", "dim", "is_cuda"})
_TARGET_KINDS = (cst.Name, cst.Tuple, cst.List, cst.StarredElement, cst.Element)

_FLOW, _INSPECT, _SINK = 0, 1, 2


class ParameterFlow:
    """The value of parameter `name` of `fn` followed through the function: `sinks`, the
    reads of it (or of values computed from it) that reach a sink, in source order;
    `tainted`, the bindings (name, id of the binding node) that hold a value computed from
    it."""

    def __init__(self, fn: cst.FunctionDef, name: str, bindings: BindingsView) -> None:
        self.bindings = bindings
        self.sinks: list[cst.Name] = []
        param = next((b for b in bindings.in_scope(fn, name) if b.kind == PARAM), None)
        self.tainted: set[tuple[str, int]] = {(name, id(param.node))} if param is not None else set()
        self.names = {name} if param is not None else set()
        if param is None:
            return
        index = bindings.index
        reads = [node for node in walk(fn.body) if type(node) is cst.Name and _is_read(node, index)]
        done: set[int] = set()
        changed = True
        while changed:
            changed = False
            for read in reads:
                if id(read) in done or not self.holds(read):
                    continue
                done.add(id(read))
                kind, targets = _classify(read, fn, index)
                if kind == _SINK:
                    self.sinks.append(read)
                elif kind == _FLOW:
                    for key in targets:
                        if key not in self.tainted:
                            self.tainted.add(key)
                            self.names.add(key[0])
                            changed = True
        self.sinks.sort(key=lambda n: index.position[id(n)])

    def holds(self, name: cst.Name) -> bool:
        """This read of a name may hold the parameter's value (or one computed from it)."""
        return name.value in self.names and any((b.name, id(b.node)) in self.tainted
                                                for b in self.bindings.reaching(name))

    def reaches(self, expr: cst.CSTNode) -> bool:
        """Some name `expr` reads may hold the parameter's value."""
        return any(type(node) is cst.Name and self.holds(node) for node in walk(expr))


def parameter_sinks(fn: cst.FunctionDef, name: str, bindings: BindingsView) -> list[cst.Name] | None:
    """The reads of `fn`'s parameter `name`'s value (or of values computed from it) that
    reach a sink, in source order; None when `name` is not a parameter of `fn`."""
    if not any(b.kind == PARAM for b in bindings.in_scope(fn, name)):
        return None
    return ParameterFlow(fn, name, bindings).sinks


def _is_read(node: cst.Name, index) -> bool:
    """A load of the name: not an attribute's or a keyword's name, nor a binding target."""
    parent = index.parent(node)
    kind = type(parent)
    if kind is cst.Attribute:
        return parent.attr is not node
    if kind is cst.Arg:
        return parent.keyword is not node
    if kind in (cst.Param, cst.FunctionDef, cst.ClassDef, cst.NameItem, cst.ImportAlias, cst.AsName):
        return False
    child: cst.CSTNode = node
    while kind in (cst.Tuple, cst.List, cst.Element, cst.StarredElement):
        child, parent = parent, index.parent(parent)
        kind = type(parent)
    if kind is cst.AssignTarget or (kind in (cst.For, cst.CompFor, cst.NamedExpr) and parent.target is child):
        return False
    return True


def _targets(target: cst.BaseExpression) -> list[str] | None:
    """The plain names a target binds, or None when it stores into an attribute or subscript."""
    out = []
    for node in walk(target):
        if type(node) in (cst.Attribute, cst.Subscript):
            return None
        if type(node) is cst.Name:
            out.append(node.value)
    return out


def _classify(read: cst.Name, fn: cst.FunctionDef, index) -> tuple[int, list[tuple[str, int]]]:
    """What one read of the value does: (_FLOW, the bindings it flows into), (_INSPECT, [])
    or (_SINK, [])."""
    child: cst.CSTNode = read
    parent: Any = index.parent(read)
    inspected = type(parent) is cst.Attribute and parent.value is read and parent.attr.value in _SHAPE_ATTRS
    while parent is not None and parent is not fn:
        kind = type(parent)
        if kind in (cst.Lambda, cst.FunctionDef, cst.NamedExpr):
            return _SINK, []  # read when the nested function runs, or bound twice: not followed
        if kind is cst.Arg and type(index.parent(parent)) is cst.Call \
                and dotted_name(index.parent(parent).func) in _PRESENCE_CALLS:
            inspected = True
        elif kind is cst.Comparison and parent.left is child and len(parent.comparisons) == 1 \
                and type(parent.comparisons[0].operator) in (cst.Is, cst.IsNot):
            inspected = True
        elif kind in (cst.If, cst.While) and parent.test is child:
            if _refuses(parent):
                return _SINK, []  # a branch on it raises or warns: the mask is refused loudly
            return (_INSPECT, []) if inspected or _guards_nothing(parent) else (_SINK, [])
        elif inspected and isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return _INSPECT, []
        elif kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            if parent.value is not child and not (kind is cst.AugAssign and parent.target is child):
                return _SINK, []  # read in a target: `x[mask] = 0`
            targets = [t.target for t in parent.targets] if kind is cst.Assign else [parent.target]
            names: list[str] = []
            for target in targets:
                found = _targets(target)
                if found is None:
                    return _SINK, []  # stored into an attribute or a tensor
                names += found
            return _FLOW, [(n, id(parent)) for n in names]
        elif kind is cst.For:
            found = _targets(parent.target) if parent.iter is child else None
            return (_FLOW, [(n, id(parent)) for n in found]) if found is not None else (_SINK, [])
        elif kind is cst.With:
            item: Any = next((item for item in parent.items if item is child), None)
            found = _targets(item.asname.name) if item is not None and item.asname is not None else None
            return (_FLOW, [(n, id(parent)) for n in found]) if found is not None else (_SINK, [])
        elif kind in (cst.Assert, cst.Del):
            return _INSPECT, []
        elif kind is cst.Expr:
            call = parent.value
            if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.value is read \
                    and call.func.attr.value.endswith("_"):
                return _INSPECT, []  # `mask.unsqueeze_(1)`: updates itself, read again where used
            return _SINK, []
        elif isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return _SINK, []
        child, parent = parent, index.parent(parent)
    return _SINK, []


def _refuses(statement: cst.If | cst.While) -> bool:
    return any(type(n) is cst.Raise or (type(n) is cst.Call and "warn" in (last_name(n.func) or ""))
               for n in walk(statement))


def _guards_nothing(statement: cst.If | cst.While) -> bool:
    """Every branch of the `if` (or the `while` body) only passes: the test decides nothing."""
    blocks: list[cst.BaseSuite] = [statement.body]
    orelse: Any = statement.orelse
    while orelse is not None:
        blocks.append(orelse.body)
        orelse = orelse.orelse if type(orelse) is cst.If else None
    for block in blocks:
        lines: Any = block.body if type(block) is cst.IndentedBlock else [block]
        for line in lines:
            smalls = line.body if type(line) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) else [line]
            for small in smalls:
                if type(small) is not cst.Pass and not (type(small) is cst.Expr and type(small.value) in (
                        cst.SimpleString, cst.Ellipsis, cst.ConcatenatedString)):
                    return False
    return True
