"""TL110 nan-unchecked-input: numeric data read with pandas/numpy reaches a tensor in a
module that never looks for NaN."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, walk
from tlint.rules.base import Rule

READERS = frozenset(
    {
        "pandas.read_csv", "pandas.read_parquet", "pandas.read_json", "pandas.read_table", "pandas.read_excel",
        "pandas.read_feather", "numpy.loadtxt", "numpy.genfromtxt",
    }
)
# `np.load` is not a reader here: `.npy`/`.npz` arrays are written by programs (usually the
# project's own feature extraction), not by people filling in tables with gaps.
TENSOR_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.from_numpy", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.stack"}
)

if TYPE_CHECKING:
    from tlint.context import FileContext
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
_NAN_HANDLING = frozenset(
    {"fillna", "dropna", "nan_to_num", "nan_to_num_", "isnan", "isfinite", "isna", "isnull", "notna", "notnull",
     "interpolate", "nanmean", "nanmedian", "ffill", "bfill"}
)
_INTEGER_DTYPES = frozenset({"long", "int", "int8", "int16", "int32", "int64", "uint8", "bool", "short"})
_INTEGER_METHODS = frozenset({"long", "int", "bool", "short"})


def _key(index, node: cst.CSTNode) -> tuple | None:
    """Where a name lives: a variable in its function (or the module), an attribute anywhere."""
    if type(node) is cst.Attribute:
        return ("attr", node.attr.value)
    if type(node) is cst.Name and node.value != "self":
        return (index.enclosing_function(node), node.value)
    return None


def _mentions(index, expr: cst.CSTNode, keys: set) -> bool:
    return any(_key(index, node) in keys for node in walk(expr) if type(node) in (cst.Name, cst.Attribute))


def _bound_keys(index, target: cst.BaseExpression) -> set:
    if type(target) is cst.Tuple or type(target) is cst.List:
        out = set()
        for element in target.elements:
            out |= _bound_keys(index, element.value)
        return out
    if type(target) is cst.Subscript:
        return _bound_keys(index, target.value)
    key = _key(index, target)
    return {key} if key is not None else set()


def _non_float_dtype(call: cst.Call) -> bool:
    """`np.genfromtxt(path, dtype=str)`, `pd.read_csv(path, dtype=np.int64)`: no NaN to hold."""
    dtype = get_arg(call, "dtype")
    if dtype is None:
        return False
    words = {node.value.lower() for node in walk(dtype.value) if type(node) is cst.Name}
    words |= {str(node.evaluated_value).lower() for node in walk(dtype.value) if type(node) is cst.SimpleString}
    return any(w.startswith(("int", "uint", "str", "bool", "object")) for w in words)


class NanUncheckedInput(Rule):
    code = "TL110"
    name = "nan-unchecked-input"
    severity = "warning"
    tokens = frozenset({name.rsplit(".", 1)[-1] for name in READERS})  # pre-filter: the pandas/numpy readers
    summary = "Data read with pandas/numpy reaches a tensor with no NaN handling in the module."
    verify_site = "data"
    data_check = "nan-inf"

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        reads = [call for call in index.calls if index.qualify(call.func) in READERS and not _non_float_dtype(call)]
        if not reads or self._handles_nan(index):
            return
        sinks = self._sinks(index)
        if not sinks:
            return
        for read in reads:
            tainted = self._tainted_by(index, read)
            sink = next((s for s in sinks if _mentions(index, s, tainted) or index.is_inside(read, s)), None)
            if sink is None:
                continue
            reader = dotted_name(read.func) or "read"
            ctx.report(read, f"data read by `{reader}(...)` becomes a tensor with no NaN handling in this module "
                             "(no `fillna`/`dropna`/`isnan`/`nan_to_num`): one missing value makes the loss NaN; "
                             "drop or fill missing values, or assert there are none")

    @staticmethod
    def _handles_nan(index) -> bool:
        for call in index.calls:
            if last_name(call.func) in _NAN_HANDLING:
                return True
            qualified = index.qualify(call.func) or ""
            if qualified.startswith("sklearn.impute."):
                return True
            for keyword in ("na_filter", "keep_default_na"):
                arg = get_arg(call, keyword)
                if arg is not None and type(arg.value) is cst.Name and arg.value.value == "False":
                    return True
        return False

    @staticmethod
    def _tainted_by(index, read: cst.Call) -> set:
        """Variables (in their function) and attributes that hold data derived from `read`."""
        tainted: set = set()
        bindings = []
        for node in index.assignments:
            if type(node) is cst.Assign:
                bindings.append(([t.target for t in node.targets], node.value))
            elif node.value is not None:
                bindings.append(([node.target], node.value))
        for loop in index.loops:
            if type(loop) is cst.For:
                bindings.append(([loop.target], loop.iter))
        changed = True
        while changed:
            changed = False
            for targets, value in bindings:
                if index.is_inside(read, value) or value is read or _mentions(index, value, tainted):
                    for target in targets:
                        new = _bound_keys(index, target) - tainted
                        if new:
                            tainted |= new
                            changed = True
        return tainted

    @staticmethod
    def _sinks(index) -> list[cst.CSTNode]:
        """Tensor constructions from float data, and what a `Dataset.__getitem__` returns."""
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
        for cls in index.classes:
            if not any(index.qualify(base.value) in DATASET_BASES for base in cls.bases):
                continue
            for stmt in cls.body.body:
                if type(stmt) is cst.FunctionDef and stmt.name.value == "__getitem__":
                    out.extend(node for node in walk(stmt.body) if type(node) is cst.Return and node.value is not None)
        return out
