"""TL204 positional-slice-wrong-axis: a positional table sliced by the batch size of a
batch-first input (`self.pe[:x.size(0)]` when x is `(B, T, C)`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.vocabulary import is_positional_name

if TYPE_CHECKING:
    from tlint.context import FileContext

_BATCH_FIRST_LAYERS = frozenset({"torch.nn.MultiheadAttention", "torch.nn.TransformerEncoderLayer",
                                 "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer"})


def _first_axis_of(expr) -> str | None:
    """The tensor whose axis 0 `expr` measures: `x.size(0)`, `x.shape[0]`, `len(x)`."""
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "size":
        if len(expr.args) == 1 and literal_value(expr.args[0].value, None) == 0:
            return dotted_name(expr.func.value)
    if (type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape"
            and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index
            and literal_value(expr.slice[0].slice.value, None) == 0):
        return dotted_name(expr.value.value)
    if type(expr) is cst.Call and dotted_name(expr.func) == "len" and len(expr.args) == 1:
        return dotted_name(expr.args[0].value)
    return None


def _batch_names(fn) -> dict[str, str]:
    """`B, T, C = x.shape` / `x.size()` -> {"B": "x"}: names bound to a tensor's batch axis."""
    out = {}
    for node in walk(fn.body, into_functions=False):
        if type(node) is cst.Assign and len(node.targets) == 1:
            target, value = node.targets[0].target, node.value
            if type(value) is cst.Subscript:
                value = value.value  # `B, T = x.shape[:2]`
            source = None
            if type(value) is cst.Attribute and value.attr.value == "shape":
                source = dotted_name(value.value)
            elif type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "size" \
                    and not value.args:
                source = dotted_name(value.func.value)
            if (source and (type(target) is cst.Tuple or type(target) is cst.List) and len(target.elements) >= 2
                    and type(target.elements[0].value) is cst.Name and _batch_like(target.elements[0].value.value)):
                out[target.elements[0].value.value] = source
    return out


def _batch_like(name: str) -> bool:
    """`B`, `bs`, `bsz`, `batch_size`, `N` (the sequence-first `T, B, C` unpacking is not)."""
    return name.lower() in ("b", "bs", "bsz", "n", "nb") or "batch" in snake_parts(name)


def _table_name(expr) -> str | None:
    """`self.pe` / `self.pos_emb.weight` -> the positional attribute's name."""
    if type(expr) is cst.Attribute and expr.attr.value == "weight":
        expr = expr.value
    if type(expr) is cst.Attribute and dotted_name(expr.value) == "self" and is_positional_name(expr.attr.value):
        return expr.attr.value
    return None


_FACTORIES = frozenset({"zeros", "empty", "ones", "randn", "rand", "zeros_like", "Tensor", "FloatTensor"})


def _layout(index, expr, locals_: dict[str, tuple[int, int] | None]) -> tuple[int, int] | None:
    """(rank, positions' axis) of a table expression: `torch.zeros(n, 1, d)` is (3, 0),
    `torch.zeros(1, n, d)` (3, 1), `torch.zeros(n, d)` (2, 0); `unsqueeze`, `transpose`,
    `nn.Parameter(...)` and local names follow."""
    if type(expr) is cst.Name:
        return locals_.get(expr.value)
    if type(expr) is not cst.Call:
        return None
    func = expr.func
    name = index.qualify(func) or dotted_name(func) or ""
    args = [a.value for a in expr.args if a.keyword is None and not a.star]
    if name.rsplit(".", 1)[-1] in ("Parameter", "Buffer") and args:
        return _layout(index, args[0], locals_)
    if name.rsplit(".", 1)[-1] in _FACTORIES and name.startswith("torch.") and len(args) in (2, 3):
        ones = [literal_value(a, None) == 1 for a in args]
        if len(args) == 2:
            return None if ones[0] else (2, 0)
        if ones[1] and not ones[0]:
            return (3, 0)
        if ones[0] and not ones[1]:
            return (3, 1)
        return None
    if type(func) is not cst.Attribute:
        return None
    base = _layout(index, func.value, locals_)
    if base is None:
        return None
    rank, axis = base
    values = [literal_value(a, None) for a in args]
    if func.attr.value == "unsqueeze" and len(values) == 1 and isinstance(values[0], int):
        at = values[0] % (rank + 1)
        return (rank + 1, axis + 1 if at <= axis else axis)
    if func.attr.value in ("transpose", "swapaxes") and len(values) == 2 and all(isinstance(v, int) for v in values):
        a, b = (v % rank for v in values)
        return (rank, b if axis == a else a if axis == b else axis)
    if func.attr.value in ("to", "float", "detach", "clone", "contiguous", "requires_grad_"):
        return base
    return None


def _table_layouts(index, module_class) -> dict[str, tuple[int, int]]:
    """`self.<positional attr>` -> its (rank, positions' axis), when every way `__init__`
    builds it agrees (a table built per branch of a flag has no single layout)."""
    init = module_class.methods.get("__init__")
    if init is None:
        return {}
    locals_: dict[str, tuple[int, int] | None] = {}
    fresh: dict[str, tuple[int, int] | None] = {}
    out: dict[str, tuple[int, int] | None] = {}

    def store(table: str, value) -> None:
        layout = _layout(index, value, locals_)
        out[table] = layout if out.get(table, layout) == layout else None

    for node in walk(init.body):
        if type(node) is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if type(target) is cst.Name:
                layout = _layout(index, node.value, locals_)
                reads_itself = any(type(n) is cst.Name and n.value == target.value for n in walk(node.value))
                if not reads_itself:
                    if target.value in fresh and fresh[target.value] != layout:
                        layout = None
                    fresh[target.value] = layout
                locals_[target.value] = layout
            elif (type(target) is cst.Attribute and dotted_name(target.value) == "self"
                  and is_positional_name(target.attr.value)):
                store(target.attr.value, node.value)
        elif (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "register_buffer"
              and dotted_name(node.func.value) == "self" and len(node.args) >= 2):
            name = literal_value(node.args[0].value, None)
            if isinstance(name, str) and is_positional_name(name):
                store(name, node.args[1].value)
    return {name: layout for name, layout in out.items() if layout is not None}


def _measured_axes(module_class, expr) -> tuple[str, list[int], str | None] | None:
    """`x.size(1)` / `x.shape[1]` -> ("x", [1], None); `x.size(self.x_dim)` with
    `self.x_dim = 1 if batch_first else 0` in `__init__` -> ("x", [1, 0], "batch_first")."""
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "size" \
            and len(expr.args) == 1:
        tensor, axis = dotted_name(expr.func.value), expr.args[0].value
    elif (type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape"
          and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index):
        tensor, axis = dotted_name(expr.value.value), expr.slice[0].slice.value
    else:
        return None
    if tensor is None:
        return None
    value = literal_value(axis, None)
    if isinstance(value, int) and not isinstance(value, bool):
        return tensor, [value], None
    init = module_class.methods.get("__init__")
    if type(axis) is cst.Attribute and dotted_name(axis.value) == "self" and init is not None:
        for node in walk(init.body):
            if (type(node) is cst.Assign and len(node.targets) == 1 and type(node.value) is cst.IfExp
                    and dotted_name(node.targets[0].target) == f"self.{axis.attr.value}"):
                body, orelse = literal_value(node.value.body, None), literal_value(node.value.orelse, None)
                if isinstance(body, int) and isinstance(orelse, int):
                    return tensor, [body, orelse], cst.Module([]).code_for_node(node.value.test)
    return None


class PositionalSliceWrongAxis(Rule):
    code = "TL204"
    name = "positional-slice-wrong-axis"
    kind = "defect"
    # pre-filter: module classes: a torch.nn/HF/Lightning base (through an import) or `forward`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
    summary = "A positional table is sliced by the batch size of a batch-first input."
    probes = ("batch-coupling", "position-blind", "padding-equivalence")

    def check(self, ctx: FileContext) -> None:
        for module_class in ctx.models.classes.values():
            self._check_layout(ctx, module_class)
        view = ctx.models
        index = ctx.index
        batch_first_groups = set()
        for number, group in enumerate(view.groups()):
            for module_class in group:
                for call in index.calls:
                    if (index.qualify(call.func) in _BATCH_FIRST_LAYERS and view.class_of(call) is module_class):
                        arg = get_arg(call, "batch_first")
                        if arg is not None and literal_value(arg.value, None) is True:
                            batch_first_groups.add(number)
        for number, group in enumerate(view.groups()):
            for module_class in group:
                for method, fn in module_class.methods.items():
                    if method == "__init__":
                        continue
                    batch_names = _batch_names(fn)
                    for node in walk(fn.body):
                        if type(node) is not cst.Subscript or _table_name(node.value) is None:
                            continue
                        for element in node.slice:
                            part = element.slice
                            if type(part) is not cst.Slice or part.upper is None:
                                continue
                            upper = part.upper
                            tensor = _first_axis_of(upper)
                            unpacked = type(upper) is cst.Name and upper.value in batch_names
                            if unpacked or (tensor is not None and (tensor in batch_names.values()
                                                                     or number in batch_first_groups)):
                                ctx.report(node, f"positional table `self.{_table_name(node.value)}` sliced by the "
                                                 "batch size: the input is batch-first `(B, T, ...)`, so axis 0 is "
                                                 "the batch; slice by the sequence length (`x.size(1)`)")
                                break

    @staticmethod
    def _check_layout(ctx, module_class) -> None:
        """`x + self.pe[:x.size(1)]` with a `(max_len, 1, d)` table: the slice measures the
        input's axis 1 as the sequence, but the table's positions lie on axis 0, so they
        broadcast onto the input's axis 0; and the other way round for a `(1, max_len, d)`
        table sliced on its axis 1 by the input's axis 0."""
        layouts = _table_layouts(ctx.index, module_class)
        if not layouts:
            return
        for method, fn in module_class.methods.items():
            if method == "__init__":
                continue
            for node in walk(fn.body):
                if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
                    pairs = [(node.left, node.right), (node.right, node.left)]
                elif type(node) is cst.AugAssign and type(node.operator) is cst.AddAssign:
                    pairs = [(node.value, node.target)]
                else:
                    continue
                for table, other in pairs:
                    if type(table) is not cst.Subscript or type(other) is not cst.Name:
                        continue
                    name = _table_name(table.value)
                    if name not in layouts:
                        continue
                    rank, axis = layouts[name]
                    sliced = [(at, element.slice) for at, element in enumerate(table.slice)
                              if type(element.slice) is cst.Slice and element.slice.upper is not None]
                    if rank != 3 or len(sliced) != 1 or sliced[0][0] != axis:
                        continue
                    measured = _measured_axes(module_class, sliced[0][1].upper)
                    if measured is None or measured[0] != other.value:
                        continue
                    wrong = [a for a in measured[1] if a in (0, 1) and a != axis]
                    if not wrong:
                        continue
                    shape, other_shape = ("(max_len, 1, d)", "(1, max_len, d)")[::1 if axis == 0 else -1]
                    when = ""
                    if measured[2] is not None:
                        when = f" when `{measured[2]}` {'holds' if wrong[0] == measured[1][0] else 'does not hold'}"
                    ctx.report(table, f"positional table `self.{name}` is laid out {shape} (positions on axis {axis}) "
                                      f"but sliced by the length of `{other.value}`'s axis {wrong[0]}{when}: added to "
                                      f"`{other.value}`, the positions line up with its axis {axis}, not with its "
                                      f"sequence axis {wrong[0]}; build the table as {other_shape} for that layout")
                    break
