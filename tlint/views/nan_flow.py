"""Where numeric data read with pandas/numpy flows (`ctx.data.nan_flow`), for TL110 and its
project facts: the reads, the tensors they may become, whether the module ever handles a
missing value, and the data passed on to functions and classes of other files.

Data is followed through assignments and `for` loops (a variable within its function, an
attribute such as `self.df` across the class), through the arguments of calls of this
file's own functions and classes (into their parameters) and back through what those
return. Two facts carry the flow across files (`nan-source`, `tensorizes`): a read passed
to an imported callable, and a callable whose parameters become tensors; TL110 pairs them
in related files.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, walk
from tlint.fact_data import NanSourceFact, TensorizesFact
from tlint.views.calls import parameters

if TYPE_CHECKING:
    from tlint.source import FileIndex
    from tlint.views.calls import CallsView

READERS = frozenset(
    {
        "pandas.read_csv", "pandas.read_parquet", "pandas.read_json", "pandas.read_table", "pandas.read_excel",
        "pandas.read_feather", "numpy.loadtxt", "numpy.genfromtxt",
    }
)
# The pre-filter words of the readers (their last parts).
READER_TOKENS = frozenset(name.rsplit(".", 1)[-1] for name in READERS)
# `np.load` is not a reader here: `.npy`/`.npz` arrays are written by programs (usually the
# project's own feature extraction), not by people filling in tables with gaps.
TENSOR_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.stack"}
)
SINK_TOKENS = frozenset({"tensor", "from_numpy", "stack"})
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
NAN_HANDLING = frozenset(
    {"fillna", "dropna", "nan_to_num", "nan_to_num_", "isnan", "isfinite", "isna", "isnull", "notna", "notnull",
     "interpolate", "nanmean", "nanmedian", "ffill", "bfill"}
)
_INTEGER_DTYPES = frozenset({"long", "int", "int8", "int16", "int32", "int64", "uint8", "bool", "short"})
_INTEGER_METHODS = frozenset({"long", "int", "bool", "short"})

Key = tuple  # ("attr", name) | (id of the function or 0 for the module, name) | ("return", id of a function)


def _non_float_dtype(call: cst.Call) -> bool:
    """`np.genfromtxt(path, dtype=str)`, `pd.read_csv(path, dtype=np.int64)`: no NaN to hold."""
    dtype = get_arg(call, "dtype")
    if dtype is None:
        return False
    words = {node.value.lower() for node in walk(dtype.value) if type(node) is cst.Name}
    words |= {str(node.evaluated_value).lower() for node in walk(dtype.value) if type(node) is cst.SimpleString}
    return any(w.startswith(("int", "uint", "str", "bool", "object")) for w in words)


class NanFlow:
    """One file's NaN flow, computed lazily from its index and calls view."""

    def __init__(self, index: FileIndex, calls: CallsView) -> None:
        self.index = index
        self.calls = calls
        self._mention_cache: dict[int, frozenset] = {}  # id(expression) -> the keys it reads

    # --- what the module reads, handles and builds ------------------------------------

    @cached_property
    def reads(self) -> list[cst.Call]:
        """pandas/numpy reads of data that may hold NaN (not an integer, string or bool dtype)."""
        index = self.index
        return [call for call in index.calls if index.qualify(call.func) in READERS and not _non_float_dtype(call)]

    @cached_property
    def handles_nan(self) -> bool:
        """The module looks for or removes a missing value somewhere (`fillna`, `isnan`, an
        `sklearn.impute` imputer, `na_filter=False`, ...)."""
        index = self.index
        for call in index.calls:
            if last_name(call.func) in NAN_HANDLING:
                return True
            qualified = index.qualify(call.func) or ""
            if qualified.startswith("sklearn.impute."):
                return True
            for keyword in ("na_filter", "keep_default_na"):
                arg = get_arg(call, keyword)
                if arg is not None and type(arg.value) is cst.Name and arg.value.value == "False":
                    return True
        return False

    @cached_property
    def sinks(self) -> list[cst.CSTNode]:
        """Tensor constructions from float data, and what a `Dataset.__getitem__` returns."""
        index = self.index
        out: list[cst.CSTNode] = []
        for call in index.calls:
            if index.qualify(call.func) not in TENSOR_CONSTRUCTORS:
                continue
            dtype = get_arg(call, "dtype")
            if dtype is not None and last_name(dtype.value) in _INTEGER_DTYPES:
                continue
            parent = index.parent(call)
            if type(parent) is cst.Attribute and parent.attr.value in _INTEGER_METHODS:
                continue
            out.append(call)
        for cls in self._datasets:
            getitem = _method(cls, "__getitem__")
            if getitem is not None:
                out.extend(node for node in walk(getitem.body) if type(node) is cst.Return and node.value is not None)
        return out

    @cached_property
    def _datasets(self) -> list[cst.ClassDef]:
        index = self.index
        return [cls for cls in index.classes if any(index.qualify(base.value) in DATASET_BASES for base in cls.bases)]

    # --- the flow ------------------------------------------------------------------------

    def _key(self, node: cst.CSTNode) -> Key | None:
        """Where a name lives: a variable in its function (or the module), an attribute anywhere."""
        if type(node) is cst.Attribute:
            return ("attr", node.attr.value)
        if type(node) is cst.Name and node.value != "self":
            function = self.index.enclosing_function(node)
            return (id(function) if function is not None else 0, node.value)
        return None

    def _mentions(self, expr: cst.CSTNode, keys: set) -> bool:
        return bool(keys) and not self._mention_keys(expr).isdisjoint(keys)

    def _mention_keys(self, expr: cst.CSTNode) -> frozenset:
        """The keys `expr` reads (names, attributes, what called local functions return),
        computed once per expression: the taint's fixed point asks of the same bindings
        again for every read and every parameter."""
        found = self._mention_cache.get(id(expr))
        if found is None:
            keys: set = set()
            nodes = list(walk(expr))
            # An expression holds no function definition, so its names share one scope, found
            # once; a lambda inside it is a scope of its own (`_key` answers name by name).
            scope: int | None = -1 if any(type(n) is cst.Lambda for n in nodes) else None
            for node in nodes:
                kind = type(node)
                if kind is cst.Attribute:
                    keys.add(("attr", node.attr.value))  # type: ignore[attr-defined]
                elif kind is cst.Name:
                    if node.value == "self":  # type: ignore[attr-defined]
                        continue
                    if scope == -1:
                        keys.add(self._key(node))
                        continue
                    if scope is None:
                        function = self.index.enclosing_function(node)
                        scope = id(function) if function is not None else 0
                    keys.add((scope, node.value))  # type: ignore[attr-defined]
                elif kind is cst.Call:
                    callee = self.calls.callee(node)  # type: ignore[arg-type]
                    if callee is not None:
                        keys.add(("return", id(callee)))
            found = self._mention_cache[id(expr)] = frozenset(keys)
        return found

    def _bound_keys(self, target: cst.BaseExpression) -> set:
        if type(target) is cst.Tuple or type(target) is cst.List:
            out = set()
            for element in target.elements:
                out |= self._bound_keys(element.value)
            return out
        if type(target) is cst.Subscript:
            return self._bound_keys(target.value)
        key = self._key(target)
        return {key} if key is not None else set()

    @cached_property
    def _bindings(self) -> list[tuple[list[cst.BaseExpression], cst.CSTNode]]:
        index = self.index
        out: list[tuple[list[cst.BaseExpression], cst.CSTNode]] = []
        for node in index.assignments:
            if type(node) is cst.Assign:
                out.append(([t.target for t in node.targets], node.value))
            elif node.value is not None:
                out.append(([node.target], node.value))  # type: ignore[union-attr]
        for loop in index.loops:
            if type(loop) is cst.For:
                out.append(([loop.target], loop.iter))
        return out

    @cached_property
    def _local_calls(self) -> list[tuple[cst.Call, cst.FunctionDef, dict[str, cst.BaseExpression]]]:
        """Calls of this file's own functions and classes, with their arguments bound."""
        index = self.index
        out = []
        for call in index.calls:
            callee = self.calls.callee(call)
            if callee is None and type(call.func) is cst.Name and call.func.value not in index.imports.aliases:
                cls = index.classes_by_name.get(call.func.value)  # `Cls(...)` runs its `__init__`
                callee = self.calls.method(cls, "__init__") if cls is not None else None
            if callee is None:
                continue
            bound = self.calls.bind(call, callee)
            if bound:
                out.append((call, callee, bound))
        return out

    @cached_property
    def _returns(self) -> list[tuple[cst.FunctionDef, cst.Return]]:
        index = self.index
        out = []
        for function in index.functions:
            for node in walk(function.body, into_functions=False):
                if type(node) is cst.Return and node.value is not None:
                    out.append((function, node))
        return out

    def tainted(self, read: cst.Call | None = None, seeds: set | None = None) -> set:
        """Keys holding data derived from `read` (or from the `seeds` keys): through
        assignments, loops, the parameters of local calls and what local functions return."""
        index = self.index
        # an expression holds the read itself when it is the read or one of its ancestors
        around = {id(read), *(id(a) for a in index.ancestors(read))} if read is not None else set()
        tainted: set = set(seeds or ())
        changed = True
        while changed:
            changed = False
            for targets, value in self._bindings:
                if id(value) in around or self._mentions(value, tainted):
                    for target in targets:
                        new = self._bound_keys(target) - tainted
                        if new:
                            tainted |= new
                            changed = True
            for _, callee, bound in self._local_calls:
                for name, value in bound.items():
                    key = (id(callee), name)
                    if key not in tainted and (id(value) in around or self._mentions(value, tainted)):
                        tainted.add(key)
                        changed = True
            for function, node in self._returns:
                returned: Key = ("return", id(function))
                if returned not in tainted and (id(node.value) in around
                                           or self._mentions(node.value, tainted)):  # type: ignore[arg-type]
                    tainted.add(returned)
                    changed = True
        return tainted

    def holds(self, expr: cst.CSTNode, read: cst.Call, tainted: set) -> bool:
        """`expr` is or contains the read, or reads data derived from it."""
        return expr is read or self.index.is_inside(read, expr) or self._mentions(expr, tainted)

    def reached_sink(self, tainted: set, read: cst.Call | None = None) -> cst.CSTNode | None:
        index = self.index
        return next((s for s in self.sinks if self._mentions(s, tainted)
                     or (read is not None and index.is_inside(read, s))), None)

    # --- project facts ---------------------------------------------------------------------

    def nan_sources(self):
        """`nan-source` facts: a read (in a module that never handles NaN) whose data becomes
        no tensor here but is passed to an imported function or class (`Dataset(frame)` of
        another file); at the read, with the callee's name and the argument's place."""
        if not self.reads or self.handles_nan:
            return
        index = self.index
        for read in self.reads:
            tainted = self.tainted(read)
            if self.reached_sink(tainted, read) is not None:
                continue  # TL110 reports it in this file
            local = {id(call) for call, _, _ in self._local_calls}
            for call in index.calls:
                qualified = index.qualify(call.func)
                if qualified is None or qualified in READERS or id(call) in local:
                    continue
                for position, arg in enumerate(call.args):
                    if arg.star or not self.holds(arg.value, read, tainted):
                        continue
                    keyword = arg.keyword.value if arg.keyword is not None else None
                    yield read, NanSourceFact(qualified.rsplit(".", 1)[-1], None if keyword else position, keyword,
                                              dotted_name(read.func) or "read")

    def tensorizes(self):
        """`tensorizes` facts: a module-level function, or a `Dataset` class (through its
        `__init__`), of a module that never handles NaN, whose parameters become tensors."""
        if self.handles_nan or not self.sinks:
            return
        index = self.index
        relevant = self._leading_to_sinks
        candidates: list[tuple[str, cst.FunctionDef]] = []
        for function in index.functions:
            if index.enclosing_scope(function) is index.module and id(function) in relevant:
                candidates.append((function.name.value, function))
        for cls in self._datasets:
            init = _method(cls, "__init__")
            if init is not None and index.enclosing_scope(cls) is index.module:
                candidates.append((cls.name.value, init))
        for name, function in candidates:
            params = parameters(function)
            if params and params[0].name.value in ("self", "cls") and function.name.value == "__init__":
                params = params[1:]
            reached, positions = [], []
            for position, param in enumerate(params):
                if self.reached_sink(self.tainted(seeds={(id(function), param.name.value)})) is not None:
                    reached.append(param.name.value)
                    positions.append(position)
            if reached:
                yield function, TensorizesFact(name, tuple(reached), tuple(positions))


    @cached_property
    def _leading_to_sinks(self) -> set[int]:
        """Functions (by id) that build a tensor, or call one of this file's functions or
        classes that does (a `Dataset`'s `__init__` counts for its class)."""
        index = self.index
        relevant: set[int] = set()
        for sink in self.sinks:
            function = index.enclosing_function(sink)
            if function is not None:
                relevant.add(id(function))
        for cls in self._datasets:
            init = _method(cls, "__init__")
            if init is not None:
                relevant.add(id(init))
        changed = True
        while changed:
            changed = False
            for call, callee, _ in self._local_calls:
                caller = index.enclosing_function(call)
                if caller is not None and id(callee) in relevant and id(caller) not in relevant:
                    relevant.add(id(caller))
                    changed = True
        return relevant


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
    return next((s for s in body if type(s) is cst.FunctionDef and s.name.value == name), None)


def nan_source_sites(ctx):
    """The `nan-source` facts of the file (see `NanFlow.nan_sources`)."""
    if not any(token in ctx.text for token in READER_TOKENS):
        return []
    return list(ctx.data.nan_flow.nan_sources())


def tensorizes_sites(ctx):
    """The `tensorizes` facts of the file (see `NanFlow.tensorizes`)."""
    text = ctx.text
    if not any(token in text for token in SINK_TOKENS) or "torch" not in text:
        return []
    return list(ctx.data.nan_flow.tensorizes())
