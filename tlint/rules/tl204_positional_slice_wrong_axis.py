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


class PositionalSliceWrongAxis(Rule):
    code = "TL204"
    name = "positional-slice-wrong-axis"
    severity = "error"
    # pre-filter: module classes: a torch.nn/HF/Lightning base (through an import) or `forward`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
    summary = "A positional table is sliced by the batch size of a batch-first input."
    probes = ("batch-coupling", "position-blind", "padding-equivalence")

    def check(self, ctx: FileContext) -> None:
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
