"""Small, fast helpers over LibCST trees shared by every view and rule.

LibCST's own visitor rebuilds every node it passes (it costs as much as the parse), so
tlint walks the frozen dataclass fields directly, skipping whitespace and punctuation.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter
from typing import Any

import libcst as cst

# Fields that only hold whitespace, comments or punctuation: never a node a rule asks about.
_SKIPPED_FIELDS = frozenset(
    {
        "lpar", "rpar", "comma", "semicolon", "newline", "leading_lines", "header", "footer",
        "lines_after_decorators", "equal", "colon", "dot", "star", "operator", "lbracket",
        "rbracket", "lbrace", "rbrace", "leading_whitespace", "trailing_whitespace",
        "whitespace_before", "whitespace_after", "whitespace_before_colon",
        "whitespace_after_colon", "whitespace_after_star", "whitespace_after_param",
        "whitespace_before_params", "whitespace_after_def", "whitespace_after_class",
        "whitespace_before_args", "whitespace_after_func", "whitespace_after_arg",
        "whitespace_before_indicator", "whitespace_after_indicator", "whitespace_after_await",
        "whitespace_after_import", "whitespace_before_import", "whitespace_after_from",
        "whitespace_after_as", "whitespace_before_as", "whitespace_after_for",
        "whitespace_before_in", "whitespace_after_in", "whitespace_after_if",
        "whitespace_before_if", "whitespace_after_else", "whitespace_before_else",
        "whitespace_after_while", "whitespace_after_with", "whitespace_after_lambda",
        "whitespace_after_del", "whitespace_after_return", "whitespace_after_assert",
        "whitespace_after_raise", "whitespace_after_global", "whitespace_after_nonlocal",
        "whitespace_after_yield", "whitespace_after_expression", "whitespace_before_from",
        "whitespace_after_except", "whitespace_after_case", "whitespace_after_match",
        "whitespace_before_expression", "whitespace_before_value", "whitespace_after_type",
        "whitespace_after_walrus", "whitespace_before_walrus",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}
# Concrete LibCST node classes compared with `type(x) is` (they have no subclasses).
_NAME, _ATTRIBUTE = cst.Name, cst.Attribute
_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
_LITERAL_KINDS = frozenset({cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.Name,
                            cst.UnaryOperation, cst.Call})


def fields_of(node_type: type) -> tuple[str, ...]:
    """The names of the fields of a node class that can hold child nodes (in order)."""
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _SKIPPED_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[node_type] = names
    return names


# The child tuples of the nodes walked so far, by id (with the node itself, which keeps
# the id from being reused): rules and views walk the same subtrees many times. The
# engine calls `clear_caches()` after each file.
_KIDS: dict[int, tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = {}
# isinstance against LibCST's abstract base classes is slow; per type, once.
_IS_NODE: dict[type, bool] = {}


def _is_node_type(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def _all_node_types() -> frozenset:
    out, todo = set(), [cst.CSTNode]
    while todo:
        kind = todo.pop()
        out.add(kind)
        todo.extend(kind.__subclasses__())
    return frozenset(out)


NODE_TYPES = _all_node_types()  # every LibCST node class
# Per node class, a function giving the values of its child fields, in order, as a tuple.
FIELD_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def field_values(kind: type) -> Callable[[Any], tuple[Any, ...]]:
    """The function giving the values of the child fields of a `kind` node (cached in
    `FIELD_VALUES`, which hot loops read directly)."""
    names = fields_of(kind)
    getter: Callable[[Any], tuple[Any, ...]]
    if not names:
        getter = _no_fields
    elif len(names) == 1:
        name = names[0]

        def getter(node: Any, name: str = name) -> tuple[Any, ...]:
            return (getattr(node, name),)
    else:
        getter = attrgetter(*names)
    FIELD_VALUES[kind] = getter
    return getter


def _no_fields(node: Any) -> tuple[()]:
    return ()


def child_nodes(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The syntactic child nodes of `node`, in source order (a tuple, computed once)."""
    entry = _KIDS.get(id(node))
    if entry is not None and entry[0] is node:
        return entry[1]
    kind = type(node)
    out = []
    node_types = NODE_TYPES
    for value in (FIELD_VALUES.get(kind) or field_values(kind))(node):
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for item in value:
                item_type = type(item)
                if item_type in node_types or (item_type not in _IS_NODE and _is_node_type(item_type)):
                    out.append(item)
        elif value_type in node_types or (value_type not in _IS_NODE and _is_node_type(value_type)):
            out.append(value)
    kids = tuple(out)
    _KIDS[id(node)] = (node, kids)
    return kids


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The syntactic child nodes of `node`, in source order."""
    return iter(child_nodes(node))


def clear_caches() -> None:
    """Forget the nodes of the file just analysed (the engine calls this per file)."""
    _KIDS.clear()
    set_preorder([], [], {}, [])


# The preorder of the file being analysed, set by `FileIndex`: `walk` answers a subtree
# of it with one list slice instead of a step per node. A node it does not hold (another
# tree, a node built by a rule) is walked the slow way; `order[i] is node` guards ids.
_TABLE: tuple = ([], [], {}, [])  # (order, ends, positions, scopes), swapped as one (threads)
# order: every node in preorder; ends: preorder index -> the end (exclusive) of its subtree;
# positions: id(node) -> preorder index; scopes: the sorted preorder indices of the
# FunctionDef/ClassDef/Lambda nodes.


def set_preorder(order: list, ends: list, positions: dict, scopes: list) -> None:
    global _TABLE
    _TABLE = (order, ends, positions, scopes)


def walk(node: cst.CSTNode, *, into_functions: bool = True) -> Iterator[cst.CSTNode]:
    """Every node under `node` (itself included), depth first, in source order.

    With `into_functions=False` the bodies of nested functions, lambdas and classes are
    skipped (their own scope), but the nested definition node itself is yielded.
    """
    order, ends, positions, scopes = _TABLE
    start = positions.get(id(node))
    if start is None or order[start] is not node:
        return _walk(node, into_functions)
    end = ends[start]
    if into_functions:
        return iter(order[start:end])
    k = bisect_right(scopes, start)
    if k == len(scopes) or scopes[k] >= end:
        return iter(order[start:end])
    pieces = []
    at = start
    while k < len(scopes) and scopes[k] < end:
        scope = scopes[k]
        pieces.append(order[at:scope + 1])  # the nested definition itself, not its body
        at = ends[scope]
        k = bisect_left(scopes, at, k)
    pieces.append(order[at:end])
    return chain.from_iterable(pieces)


def _walk(node: cst.CSTNode, into_functions: bool) -> Iterator[cst.CSTNode]:
    stack = [node]
    pop, extend = stack.pop, stack.extend
    root = node
    while stack:
        current = pop()
        yield current
        if not into_functions and current is not root and type(current) in _SCOPES:
            continue
        extend(reversed(child_nodes(current)))


def dotted_name(expr: cst.CSTNode | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    # `type(x) is` for LibCST's concrete (final) node classes: isinstance goes through
    # ABCMeta, about ten times slower, and these run for every name of every file. The
    # type is read once into `kind`, which mypy does not narrow `expr` by (the ignores).
    kind = type(expr)
    if kind is _NAME:
        return expr.value  # type: ignore[union-attr]
    parts: list[str] = []
    while kind is _ATTRIBUTE:
        parts.append(expr.attr.value)  # type: ignore[union-attr]
        expr = expr.value  # type: ignore[union-attr]
        kind = type(expr)
    if kind is _NAME:
        parts.append(expr.value)  # type: ignore[union-attr]
        parts.reverse()
        return ".".join(parts)
    return None


def last_name(expr: cst.CSTNode | None) -> str | None:
    """The final identifier of a Name/Attribute (`self.model` -> `model`), else None."""
    kind = type(expr)  # (not followed by mypy: see dotted_name)
    if kind is _ATTRIBUTE:
        return expr.attr.value  # type: ignore[union-attr]
    if kind is _NAME:
        return expr.value  # type: ignore[union-attr]
    return None


def assignment_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets an `Assign`, `AnnAssign` or `AugAssign` writes (`a = b = v`: both)."""
    if type(node) is cst.Assign:
        return [t.target for t in node.targets]
    if type(node) is cst.AnnAssign or type(node) is cst.AugAssign:
        return [node.target]
    return []


def get_arg(call: cst.Call, keyword: str | None, position: int | None = None) -> cst.Arg | None:
    """The argument bound to `keyword`, or the positional one at `position` (0-based)."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if keyword is not None and arg.keyword.value == keyword:
                return arg
        elif arg.star:
            index = -1_000_000  # after *args positions are unknown
        else:
            if position is not None and index == position:
                return arg
            index += 1
    return None


def positional_count(call: cst.Call) -> int:
    """Number of plain positional arguments (a `*args` makes the count open-ended: large)."""
    count = 0
    for arg in call.args:
        if arg.keyword is None:
            if arg.star == "*":
                return 1_000
            if arg.star == "":
                count += 1
    return count


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def keywords(call: cst.Call) -> set[str]:
    return {arg.keyword.value for arg in call.args if arg.keyword is not None}


_UNKNOWN = object()


# The last implicit concatenation evaluated: LibCST nests `'a' 'b' 'c'` to the right
# (`Concat('a', Concat('b', 'c'))`), and a walker that calls `literal_value` on every node
# meets each inner suffix of the chain right after the whole. Remembering the chain's piece
# values (and, per suffix, whether its pieces are all str or all bytes) answers those
# suffixes without re-evaluating their pieces, so evaluating every node of an n-piece string
# costs O(n) piece evaluations instead of O(n^2). One chain is kept (the nodes are not
# weak-referenceable), so the memory held is bounded by the largest string of the file.
_chain_nodes: dict[int, tuple[cst.ConcatenatedString, int]] = {}
_chain_values: list = []
_chain_kinds: list = []


def _concatenated_value(expr: cst.ConcatenatedString, default: Any) -> Any:
    global _chain_nodes, _chain_values, _chain_kinds
    hit = _chain_nodes.get(id(expr))
    if hit is None or hit[0] is not expr:
        # iteratively: LibCST's own `evaluated_value` recurses once per piece, and a long
        # implicitly concatenated string (pydoc_data/topics.py) exhausts the recursion limit
        nodes: list[cst.ConcatenatedString] = []
        pieces: list[cst.BaseExpression] = []
        node: cst.BaseExpression = expr
        while type(node) is cst.ConcatenatedString:
            nodes.append(node)
            pieces.append(node.left)
            node = node.right
        pieces.append(node)
        values = [p.evaluated_value if type(p) is cst.SimpleString else None for p in pieces]
        # kinds[i]: str or bytes when pieces i.. are all of that type, else None
        kinds: list = [None] * len(values)
        following = type(values[-1]) if isinstance(values[-1], (str, bytes)) else None
        kinds[-1] = following
        for i in range(len(values) - 2, -1, -1):
            own = type(values[i]) if isinstance(values[i], (str, bytes)) else None
            following = own if own is not None and own is following else None
            kinds[i] = following
        _chain_nodes = {id(n): (n, i) for i, n in enumerate(nodes)}
        _chain_values, _chain_kinds = values, kinds
        hit = _chain_nodes[id(expr)]
    start = hit[1]
    kind = _chain_kinds[start]
    if kind is str:
        return "".join(_chain_values[start:])
    if kind is bytes:
        return b"".join(_chain_values[start:])
    return default


def literal_value(expr: cst.CSTNode | None, default: Any = _UNKNOWN) -> Any:
    """The value of a literal expression (numbers, strings, True/False/None, -x,
    float("nan")/float("inf"), math.inf), or `default` when it is not a literal."""
    if type(expr) not in _LITERAL_KINDS:  # the common case, cheaply (see dotted_name)
        return default
    if type(expr) is cst.Integer:
        return expr.evaluated_value
    if type(expr) is cst.Float:
        return expr.evaluated_value
    if type(expr) is cst.SimpleString:
        return expr.evaluated_value
    if type(expr) is cst.ConcatenatedString:
        return _concatenated_value(expr, default)
    if type(expr) is cst.Name and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if type(expr) is cst.UnaryOperation and type(expr.operator) in (cst.Minus, cst.Plus):
        inner = literal_value(expr.expression, default)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if type(expr.operator) is cst.Minus else inner
        return default
    if type(expr) is cst.Call and dotted_name(expr.func) == "float" and len(expr.args) == 1:
        inner = literal_value(expr.args[0].value, default)
        if isinstance(inner, str):
            try:
                return float(inner)
            except ValueError:
                return default
    return default


def is_literal(expr: cst.CSTNode | None) -> bool:
    return literal_value(expr, _UNKNOWN) is not _UNKNOWN


_SNAKE: dict[str, tuple[str, ...]] = {}


def snake_parts(name: str) -> list[str]:
    """`ln_1` -> ["ln", "1"]; `wpe` -> ["wpe"]; `layerNorm` -> ["layer", "norm"]."""
    known = _SNAKE.get(name)
    if known is not None:
        return list(known)
    out: list[str] = []
    for chunk in name.split("_"):
        if not chunk:
            continue
        current = chunk[0]
        for ch in chunk[1:]:
            if ch.isupper() and not current[-1].isupper():
                out.append(current.lower())
                current = ch
            else:
                current += ch
        out.append(current.lower())
    if len(_SNAKE) > 50_000:  # identifiers of a whole repository fit; a runaway input does not grow it
        _SNAKE.clear()
    _SNAKE[name] = tuple(out)
    return out
