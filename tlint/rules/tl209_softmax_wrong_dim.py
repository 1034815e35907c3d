"""TL209 softmax-wrong-dim: attention softmax over an axis other than the keys, or a
softmax whose `dim` is left implicit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import get_arg, literal_value, walk
from tlint.rules.base import Rule
from tlint.views.attention import SOFTMAX_FUNCTIONS, illustration

if TYPE_CHECKING:
    from tlint.context import FileContext

_IMPLICIT = ("torch.nn.functional.softmax", "torch.softmax", "torch.nn.Softmax")


def scores_ndim(site) -> int | None:
    """The rank of the attention scores: from the product's spelling (einsum output, `bmm`,
    `.T`), else 4 when q/k were split into heads with a 4-D `view`/`reshape`."""
    if site.ndim is not None:
        return site.ndim
    for node in (*site.upstream, *site.callers):
        for sub in walk(node):
            if (type(sub) is cst.Call and type(sub.func) is cst.Attribute
                    and sub.func.attr.value in ("view", "reshape")):
                dims = [a for a in sub.args if a.keyword is None and not a.star]
                if len(dims) == 4:
                    return 4
    return None


_FACTORIES = frozenset({"zeros", "ones", "randn", "rand", "empty", "full"})


def input_rank(index, flow, expr, at_node, depth: int = 0) -> int | None:
    """The rank of a tensor expression when its spelling proves it: a factory with literal
    sizes (`torch.randn(4, 10)`), `view`/`reshape` with their sizes, `mm`/`bmm`, `flatten(1)`,
    `unsqueeze` of a known rank, or a local name last bound to one of those."""
    if depth > 4:
        return None
    if type(expr) is cst.Name:
        value = flow.definition(expr.value, flow.order_of(at_node, index))
        return input_rank(index, flow, value, value, depth + 1) if value is not None else None
    if type(expr) is not cst.Call:
        return None
    func = expr.func
    name = index.qualify(func) or ""
    args = [a for a in expr.args if a.keyword is None]
    if any(a.star for a in expr.args):
        return None
    method = func.attr.value if type(func) is cst.Attribute else None
    if name.startswith("torch.") and name.rsplit(".", 1)[-1] in _FACTORIES:
        sizes = args[:-1] if name.endswith(".full") else args
        if len(sizes) == 1 and type(sizes[0].value) in (cst.Tuple, cst.List):
            return len(sizes[0].value.elements)  # type: ignore[attr-defined]
        return len(sizes) or None
    product = name if name in ("torch.mm", "torch.bmm") else f"torch.{method}" if not name else None
    if product in ("torch.mm", "torch.bmm"):
        return 2 if product == "torch.mm" else 3
    if method in ("view", "reshape") and not name:
        if len(args) == 1 and type(args[0].value) in (cst.Tuple, cst.List):
            return len(args[0].value.elements)  # type: ignore[attr-defined]
        return len(args) or None
    if method == "flatten" and not name and len(expr.args) == 1 and literal_value(expr.args[0].value, None) == 1:
        return 2
    if method == "unsqueeze" and not name and type(func) is cst.Attribute:
        base = input_rank(index, flow, func.value, at_node, depth + 1)
        return base + 1 if base is not None else None
    return None


def wrong_axis(dim: int, ndim: int | None, key_axis: int | None = None) -> bool:
    if key_axis is not None and ndim is not None:  # an einsum names the keys' axis (`bihd,bjhd->bijh`)
        return dim % ndim != key_axis if -ndim <= dim < ndim else True
    if dim == -1:
        return False
    if dim < 0:
        return True
    if ndim is not None:
        return dim != ndim - 1
    return dim <= 1


class SoftmaxWrongDim(Rule):
    code = "TL209"
    name = "softmax-wrong-dim"
    kind = "defect"
    tokens = frozenset({"softmax", "logsumexp"})  # pre-filter: softmax calls, `nn.Softmax`, logsumexp softmaxes
    summary = "Attention softmax over the wrong axis, or a softmax with an implicit dim."
    probes = ("attention-entropy",)

    def check(self, ctx: FileContext) -> None:
        index = ctx.index
        attention = ctx.models.attention
        for call in index.calls:
            qualified = index.qualify(call.func)
            if qualified in _IMPLICIT and get_arg(call, "dim", 1 if qualified != "torch.nn.Softmax" else 0) is None:
                if any(arg.star for arg in call.args):
                    continue
                rank = None
                if qualified != "torch.nn.Softmax":
                    first = get_arg(call, "input", 0)
                    rank = input_rank(index, attention.flow(call), first.value, call) if first is not None else None
                if rank in (1, 2):
                    continue  # the implicit axis of a 1-D or 2-D input is its last one
                spelled = {"torch.nn.functional.softmax": "F.softmax", "torch.softmax": "torch.softmax",
                           "torch.nn.Softmax": "nn.Softmax"}[qualified]
                picks = (f"for this {rank}-D input the implicit axis is {0 if rank == 3 else 1}, not the last"
                         if rank is not None else
                         "the implicit axis is 0 for 1-D and 3-D inputs and 1 otherwise, not the last axis")
                ctx.report(call, f"`{spelled}` without `dim=`: {picks}; pass `dim=-1`",
                           fix=fixes.fix("unsafe", "Pass `dim=-1`", fixes.replace(
                               call, fixes.code_at(index, call, fixes.with_keyword(call, "dim", "-1")))))
        for site in attention.sites:
            dim = site.dim
            if not isinstance(dim, int) or isinstance(dim, bool) or illustration(index, site):
                continue
            ndim = scores_ndim(site)
            key_axis = site.product.key_axis
            if wrong_axis(dim, ndim, key_axis) and not self._dual_softmax(index, site.softmax):
                if key_axis is not None and ndim is not None and key_axis != ndim - 1:
                    ctx.report(site.softmax, f"softmax over attention scores with dim={dim}: the einsum puts the keys "
                                             f"on axis {key_axis} of {ndim}, and the weights must sum to 1 over the "
                                             f"keys; use `dim={key_axis}`")
                    continue
                ctx.report(site.softmax, f"softmax over attention scores with dim={dim}: the weights must sum to 1 "
                                         "over the keys, the last axis (`dim=-1`); this normalises over "
                                         + ("queries or heads" if ndim is None else f"axis {dim} of {ndim}"),
                           fix=self._fix(ctx, site.softmax))

    @staticmethod
    def _fix(ctx, call: cst.Call):
        """`dim=-1` in place of the literal axis, where it is written: the softmax call
        (keyword or positional) or the `nn.Softmax(dim=...)` constructor of the sub-module
        it calls. Unsafe: the weights change, and code after the softmax may rely on the
        old axis (a sum over it, a transpose done to compensate)."""
        index = ctx.index
        ctor = ctx.models._softmax_module_ctor(call)  # the order of `softmax_input`
        if index.qualify(call.func) in SOFTMAX_FUNCTIONS:
            arg = get_arg(call, "dim", 1)
        elif ctor is not None:
            arg = get_arg(ctor, "dim", 0)
        elif type(call.func) is cst.Attribute and call.func.attr.value == "softmax":
            arg = get_arg(call, "dim", 0)
        else:
            return None
        if arg is None or arg.star:
            return None
        return fixes.fix("unsafe", "Set `dim=-1` (the key axis)", fixes.replace(arg.value, "-1"))

    @staticmethod
    def _dual_softmax(index, call) -> bool:
        """`softmax(s, 1) * softmax(s, 2)`: the same scores normalised over both axes and
        multiplied, the mutual-nearest-neighbour confidence of feature matching (LoFTR,
        SuperGlue-style dual softmax), not attention over keys."""
        if type(call) is not cst.Call or not call.args:
            return False
        parent = index.parent(call)
        if not (type(parent) is cst.BinaryOperation and type(parent.operator) is cst.Multiply):
            return False
        other = parent.right if parent.left is call else parent.left
        if not (type(other) is cst.Call and other.args and index.qualify(other.func) == index.qualify(call.func)):
            return False

        def dim_of(c):
            arg = get_arg(c, "dim", 1)
            return literal_value(arg.value, None) if arg is not None else None

        return (other.args[0].value.deep_equals(call.args[0].value)
                and dim_of(other) is not None and dim_of(call) is not None and dim_of(other) != dim_of(call))
