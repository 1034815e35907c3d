"""One parsed file and the index built by tlint's single traversal of it.

Every view (facts, model structure, training steps) and every rule reads this index
instead of walking the tree again.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import libcst as cst

from tlint.cst import FIELD_VALUES, NODE_TYPES, child_nodes, dotted_name, field_values, set_preorder
from tlint.names import ImportTable

_LOOPS = (cst.For, cst.While)
_NAME = cst.Name
# What the index keeps of a node, by its class (one dict lookup per node).
_CALL, _FUNCTION, _CLASS, _LOOP, _ASSIGNMENT, _IMPORT, _SCOPE = (
    "call function class loop assignment import scope".split())
_ROLES: dict[type, str] = {cst.Call: _CALL, cst.FunctionDef: _FUNCTION, cst.ClassDef: _CLASS, cst.Lambda: _SCOPE,
          cst.For: _LOOP, cst.While: _LOOP, cst.Assign: _ASSIGNMENT, cst.AugAssign: _ASSIGNMENT,
          cst.AnnAssign: _ASSIGNMENT, cst.Import: _IMPORT, cst.ImportFrom: _IMPORT}
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)


def _append_subtree(node: cst.CSTNode, order: list, ends: list, positions: dict) -> None:
    at = len(order)
    order.append(node)
    ends.append(at + 1)
    positions[id(node)] = at
    for kid in child_nodes(node):
        _append_subtree(kid, order, ends, positions)
    ends[at] = len(order)


class FileIndex:
    """Everything a rule asks about often, collected in one pass over the tree."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.imports = ImportTable()
        self.parents: dict[int, cst.CSTNode] = {}  # by id(node): LibCST's __hash__ is Python code
        self.calls: list[cst.Call] = []
        self.functions: list[cst.FunctionDef] = []
        self.classes: list[cst.ClassDef] = []
        self.loops: list[cst.For | cst.While] = []
        self.assignments: list[cst.Assign | cst.AnnAssign | cst.AugAssign] = []
        self.identifiers: set[str] = set()
        self._qualified: dict[int, tuple] = {}
        self._build()

    def _build(self) -> None:
        parents = self.parents
        identifiers, imports = self.identifiers, self.imports
        # the preorder that `tlint.cst.walk` answers subtrees from (see `set_preorder`)
        order: list[cst.CSTNode] = []
        ends: list[int] = []
        positions: dict[int, int] = {}
        scopes: list[int] = []
        append, end_append = order.append, ends.append
        lists: dict[str, list[Any]] = {_CALL: self.calls, _FUNCTION: self.functions, _CLASS: self.classes,
                                       _LOOP: self.loops, _ASSIGNMENT: self.assignments}
        roles = _ROLES
        getters, getter_of, node_types = FIELD_VALUES, field_values, NODE_TYPES
        stack: list = [self.module]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            if kind is int:  # the end of the subtree of order[~node]
                ends[~node] = len(order)
                continue
            at = len(order)
            append(node)
            end_append(at + 1)
            positions[id(node)] = at
            if kind is _NAME:
                identifiers.add(node.value)
                continue
            role = roles.get(kind)
            if role is not None:
                if role is _IMPORT:
                    # an import's names are neither identifiers nor given parents here
                    if kind is cst.Import:
                        imports.add_import(node)
                    else:
                        imports.add_import_from(node)
                    for kid in child_nodes(node):
                        _append_subtree(kid, order, ends, positions)
                    ends[at] = len(order)
                    continue
                if role is not _SCOPE:
                    lists[role].append(node)
                if role is _FUNCTION or role is _CLASS or role is _SCOPE:
                    scopes.append(at)
            kids = []  # `child_nodes(node)`, inline and not kept (nothing walks by it now)
            for value in (getters.get(kind) or getter_of(kind))(node):
                value_type = type(value)
                if value_type is tuple or value_type is list:
                    for item in value:
                        if type(item) in node_types:
                            kids.append(item)
                elif value_type in node_types:
                    kids.append(value)
            if kids:
                push(~at)
                for kid in kids:
                    parents[id(kid)] = node
                kids.reverse()
                extend(kids)
        set_preorder(order, ends, positions, scopes)
        self.order = order  # every node, in source order (preorder)
        self.ends = ends  # preorder index -> the end (exclusive) of that node's subtree in `order`
        self.position = positions  # id(node) -> its index in `order`
        self._module_aliases()

    def _module_aliases(self) -> None:
        for stmt in self.module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if (
                        type(small) is cst.Assign
                        and len(small.targets) == 1
                        and type(small.targets[0].target) is cst.Name
                        and dotted_name(small.value) is not None
                    ):
                        self.imports.add_assignment_alias(small.targets[0].target.value, small.value)

    # --- navigation -------------------------------------------------------------------

    def parent(self, node: cst.CSTNode | None) -> cst.CSTNode | None:
        return self.parents.get(id(node))

    def ancestors(self, node: cst.CSTNode):
        parents = self.parents
        parent = parents.get(id(node))
        while parent is not None:
            yield parent
            parent = parents.get(id(parent))

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for anc in self.ancestors(node):
            if type(anc) is cst.FunctionDef:
                return anc
            if type(anc) in (cst.ClassDef, cst.Lambda):
                return None
        return None

    def enclosing_scope(self, node: cst.CSTNode) -> cst.CSTNode:
        for anc in self.ancestors(node):
            if type(anc) in _SCOPES:
                return anc
        return self.module

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for anc in self.ancestors(node):
            if type(anc) is cst.ClassDef:
                return anc
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> list[cst.For | cst.While]:
        """Loops around `node` within its own function, innermost first."""
        out = []
        for anc in self.ancestors(node):
            if type(anc) in _LOOPS:
                out.append(anc)
            elif type(anc) in _SCOPES:
                break
        return out

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return any(anc is container for anc in self.ancestors(node))

    def qualify(self, expr: cst.BaseExpression | None) -> str | None:
        # a score of rules ask for the name of every call's callee: once per node (the
        # aliases are complete once the index is built)
        entry = self._qualified.get(id(expr))
        if entry is not None and entry[0] is expr:
            return entry[1]
        found = self.imports.qualify(expr)
        self._qualified[id(expr)] = (expr, found)
        return found

    def call_name(self, call: cst.Call) -> str | None:
        """Qualified name of the callee if it resolves through imports, else its dotted text."""
        return self.qualify(call.func) or dotted_name(call.func)

    @cached_property
    def functions_by_name(self) -> dict[str, list[cst.FunctionDef]]:
        out: dict[str, list[cst.FunctionDef]] = {}
        for fn in self.functions:
            out.setdefault(fn.name.value, []).append(fn)
        return out

    @cached_property
    def classes_by_name(self) -> dict[str, cst.ClassDef]:
        return {cls.name.value: cls for cls in self.classes}

    @cached_property
    def statement_calls(self) -> dict[cst.CSTNode, list[cst.Call]]:
        """Calls grouped by their enclosing function (or the module)."""
        out: dict[cst.CSTNode, list[cst.Call]] = {}
        for call in self.calls:
            out.setdefault(self.enclosing_function(call) or self.module, []).append(call)
        return out
