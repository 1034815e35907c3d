"""Hand-written attention, seen through a small per-function data flow.

`FunctionFlow(fn, bindings)` records, in source order, which local names each statement
writes (the bindings of its scope from `ctx.bindings`: `x = ...`, `a, b = ...`, `x += ...`;
and in-place `x.masked_fill_(...)`), so a rule can ask what an expression was computed
from (`trace`); what a helper's callers pass comes from `ctx.calls`. On top of it, `attention_sites(index)` finds every
softmax of the file and, where its input traces back to a query-key product
(`q @ k.transpose(-2, -1)`, `torch.matmul`, `bmm`, `baddbmm`, `einsum`), describes the
attention: the product, the statements between it and the softmax (scaling, masking),
the softmax `dim`. `sdpa_calls(index)` lists `F.scaled_dot_product_attention` calls.

The model view (`tlint.views.model.ModelView.attention_sites`) exposes these per file; free
functions (the Annotated Transformer's `attention(q, k, v, mask)`) and helper methods of a
module class are covered alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts, walk
from tlint.views.bindings import AUGMENT, PARAM

if TYPE_CHECKING:
    from tlint.views.bindings import BindingsView

SOFTMAX_FUNCTIONS = frozenset({"torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax"})
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax"})
SDPA = frozenset({"torch.nn.functional.scaled_dot_product_attention"})
_PRODUCT_FUNCTIONS = frozenset({"torch.matmul", "torch.bmm", "torch.baddbmm", "torch.einsum", "einsum",
                                "opt_einsum.contract"})
_TRANSPOSE_METHODS = frozenset({"transpose", "permute", "swapaxes", "swapdims", "t", "movedim"})
_TRANSPOSE_ATTRS = frozenset({"T", "mT", "mH", "H"})
_REARRANGE = frozenset({"einops.rearrange", "einops.einsum"})
_IN_PLACE_PREFIXES = ("masked_fill_", "div_", "mul_", "add_", "sub_", "fill_", "clamp_", "masked_scatter_",
                      "copy_", "tril_", "triu_")
_SCALE_PARTS = {"scale", "scaling", "sqrt", "rsqrt", "temp", "temperature", "tau", "factor", "inv", "alpha",
                "softmax_scale", "norm", "logit"}
_SCALE_CALLS = {"sqrt", "rsqrt", "normalize"}
_MASK_CALLS = {"masked_fill", "masked_fill_", "where", "masked_scatter", "masked_scatter_"}
_SCALE_KEYWORDS = frozenset({"scale", "softmax_scale", "scale_factor", "scaling"})


@dataclass
class Write:
    order: int
    kind: str  # "set" (binds the name anew) or "update" (modifies it: `+=`, in-place method)
    value: cst.CSTNode  # the value expression, or the AugAssign / in-place call itself


class FunctionFlow:
    """The writes of local names in one function body, in source order: the bindings of
    its scope (`ctx.bindings`; a tuple target records the whole value it unpacks, a loop
    target its iterable) and in-place updates (`x += y`, `x.masked_fill_(...)`)."""

    def __init__(self, fn: cst.FunctionDef | cst.Module, bindings: BindingsView) -> None:
        self.fn = fn
        self.writes: dict[str, list[Write]] = {}
        index = bindings.index
        self._index = index
        self.params = set()
        for name, bound in bindings.names_in(fn).items():
            for binding in bound:
                node = binding.node
                if binding.kind == PARAM:
                    self.params.add(name)
                elif binding.kind == AUGMENT:
                    if type(node) is cst.AugAssign and type(node.target) is cst.Name:
                        self._add(name, "update", binding.position, node)
                elif type(node) is cst.For:
                    self._add(name, "set", binding.position, node.iter)
                elif type(node) is cst.With:
                    self._add(name, "set", binding.position, binding.value)  # type: ignore[arg-type]
                elif type(node) in (cst.Assign, cst.AnnAssign):
                    self._add(name, "set", binding.position, node.value)  # type: ignore[attr-defined]
        body = fn.body if type(fn) is cst.FunctionDef else fn
        for node in walk(body, into_functions=False):
            if type(node) is cst.Expr and type(node.value) is cst.Call:
                func = node.value.func
                if (type(func) is cst.Attribute and type(func.value) is cst.Name
                        and func.attr.value.endswith("_") and func.attr.value.startswith(_IN_PLACE_PREFIXES)):
                    self._add(func.value.value, "update", index.position[id(node)], node.value)
        for writes in self.writes.values():
            writes.sort(key=lambda w: w.order)

    def _add(self, name: str, kind: str, order: int, value: cst.CSTNode) -> None:
        self.writes.setdefault(name, []).append(Write(order, kind, value))

    def order_of(self, node: cst.CSTNode, index) -> int:
        """The source-order number of the statement that holds `node`."""
        current: cst.CSTNode | None = node
        while current is not None:
            if isinstance(current, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return index.position[id(current)]
            current = index.parent(current)
        return 1 << 30

    def trace(self, expr: cst.CSTNode, at: int, *, skip=lambda node: False) -> list[cst.CSTNode]:
        """`expr` and every value it was computed from within this function (the values of
        the names it reads, as last written before `at`, and their updates), transitively.
        Subtrees for which `skip(node)` holds are not followed into."""
        out = [expr]
        seen: set[tuple[str, int]] = set()
        queue = [(expr, at)]
        while queue:
            current, before = queue.pop()
            for name in read_names(current, skip):
                if (name, before) in seen:
                    continue
                seen.add((name, before))
                for write in reversed(self.writes.get(name, ())):
                    if write.order >= before:
                        continue
                    out.append(write.value)
                    queue.append((write.value, write.order))
                    if write.kind == "set":
                        break
        return out

    def definition(self, name: str, before: int) -> cst.CSTNode | None:
        for write in reversed(self.writes.get(name, ())):
            if write.order < before and write.kind == "set":
                return write.value
        return None


def _target_names(target) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        out = []
        for element in target.elements:
            out += _target_names(element.value)
        return out
    if type(target) is cst.StarredElement:
        return _target_names(target.value)
    return []


def read_names(expr: cst.CSTNode, skip=lambda node: False) -> list[str]:
    """Local names read by `expr` (not attribute names, keywords or called functions' names)."""
    out = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if skip(node) and node is not expr:
            continue
        if type(node) is cst.Name:
            out.append(node.value)
            continue
        if type(node) is cst.Attribute:
            stack.append(node.value)
            continue
        if type(node) is cst.Arg:
            stack.append(node.value)
            continue
        if type(node) is cst.AugAssign:
            stack.extend([node.target, node.value])
            continue
        if type(node) in (cst.Lambda, cst.FunctionDef, cst.ClassDef):
            continue
        if type(node) is cst.Call:
            stack.append(node.func)
            stack.extend(arg.value for arg in node.args)
            continue
        from tlint.cst import children

        stack.extend(children(node))
    return out


# --- recognising attention ----------------------------------------------------------------


def is_transposed(expr: cst.CSTNode) -> bool:
    """Does `expr` transpose/permute its tensor (`k.transpose(-2, -1)`, `k.mT`, `rearrange`)?"""
    for node in walk(expr):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _TRANSPOSE_METHODS:
            return True
        if type(node) is cst.Attribute and node.attr.value in _TRANSPOSE_ATTRS:
            return True
        if type(node) is cst.Call and last_name(node.func) in ("rearrange", "transpose", "permute", "swapaxes"):
            return True
    return False


@dataclass
class Product:
    node: cst.CSTNode  # BinaryOperation (`@`) or Call (matmul/bmm/baddbmm/einsum)
    left: cst.CSTNode | None
    right: cst.CSTNode | None
    ndim: int | None = None  # of the scores, when the spelling tells (einsum, bmm, `.T`)
    einsum: bool = False
    key_axis: int | None = None  # the keys' axis of the scores, when an einsum names it (`bihd,bjhd->bijh`: 2)


def as_product(index, node: cst.CSTNode) -> Product | None:
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:
        ndim = 2 if _simple_t(node.right) else None
        return Product(node, node.left, node.right, ndim)
    if type(node) is cst.Call:
        name = index.qualify(node.func) or dotted_name(node.func) or ""
        attr = node.func.attr.value if type(node.func) is cst.Attribute else None
        if name in ("torch.matmul", "torch.bmm") or (attr in ("matmul", "bmm") and name not in _PRODUCT_FUNCTIONS
                                                      and not name.startswith("torch.")):
            args = [a.value for a in node.args if a.keyword is None]
            if attr in ("matmul", "bmm") and not name.startswith("torch."):
                args = [node.func.value, *args]  # type: ignore[attr-defined]  # an Attribute: `attr` is set
            if len(args) >= 2:
                return Product(node, args[0], args[1], 3 if name.endswith("bmm") or attr == "bmm" else None)
        if name == "torch.baddbmm":
            args = [a.value for a in node.args if a.keyword is None]
            if len(args) >= 3:
                return Product(node, args[1], args[2], 3)
        if name in ("torch.einsum", "einops.einsum", "opt_einsum.contract") or last_name(node.func) == "einsum":
            args = [a.value for a in node.args if a.keyword is None]
            spec = None
            strings = [a for a in args if isinstance(literal_value(a, None), str)]
            if strings:
                spec = literal_value(strings[0], None)
            tensors = [a for a in args if a not in strings]
            if spec and "->" in spec and len(tensors) >= 2:
                lhs, out = spec.replace(" ", "").split("->", 1)
                inputs = lhs.split(",")
                # a query-key product contracts the feature axis: the output keeps both
                # sequence axes, so each input has an axis the output lacks
                if len(inputs) == 2 and all(set(i) - set(out) for i in inputs) and "..." not in out:
                    own = [axis for axis, letter in enumerate(out) if letter in inputs[1] and letter not in inputs[0]]
                    return Product(node, tensors[0], tensors[1], len(out), einsum=True,
                                   key_axis=own[0] if len(own) == 1 else None)
                if len(inputs) == 2 and "..." in out:
                    return Product(node, tensors[0], tensors[1], None, einsum=True)
    return None


def _keys_axis(product: Product, ndim: int | None) -> int | None:
    """The keys' axis of a query-key product's scores of rank `ndim`: what an einsum names,
    the last axis for a matmul (`q @ k^T`)."""
    if product.einsum:
        return product.key_axis
    return ndim - 1 if ndim is not None else None


def _simple_t(expr) -> bool:
    return (type(expr) is cst.Attribute and expr.attr.value == "T") or (
        type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "t"
        and not expr.args)


@dataclass
class AttentionSite:
    """One hand-written attention: `softmax(<scores>)` whose scores come from a q-k product."""

    function: cst.FunctionDef | cst.Module
    flow: FunctionFlow
    softmax: cst.Call
    scores: cst.BaseExpression  # the softmax input
    dim: object  # the literal `dim` (int), None when missing, Ellipsis when not a literal
    product: Product
    between: list[cst.CSTNode] = field(default_factory=list)  # product -> softmax computations
    upstream: list[cst.CSTNode] = field(default_factory=list)  # what q and k were computed from
    callers: list[cst.CSTNode] = field(default_factory=list)  # the same, in the callers of a helper method
    sides: tuple[list[cst.CSTNode], list[cst.CSTNode]] = ([], [])  # upstream of q, of k (callers included)
    softmax_ctor: cst.Call | None = None  # the constructor of the softmax module `self.softmax(...)` calls

    @property
    def ndim(self) -> int | None:
        return self.product.ndim

    def masks(self) -> list[MaskUse]:
        """Masks applied to the scores between the product and the softmax."""
        out = []
        for node in self.between:
            for sub in walk(node):
                if type(sub) is cst.Call:
                    attr = last_name(sub.func)
                    if attr in ("masked_fill", "masked_fill_"):
                        mask = get_arg(sub, "mask", 0)
                        value = get_arg(sub, "value", 1)
                        if type(sub.func) is cst.Attribute and dotted_name(sub.func) in (
                                "torch.masked_fill",):
                            mask, value = get_arg(sub, "mask", 1), get_arg(sub, "value", 2)
                        if mask is not None:
                            out.append(MaskUse(sub, mask.value, value.value if value else None))
                    elif attr == "where" and len(sub.args) >= 3:
                        out.append(MaskUse(sub, sub.args[0].value, None))
                elif type(sub) is cst.BinaryOperation and type(sub.operator) in (cst.Add, cst.Subtract):
                    for operand in (sub.left, sub.right):
                        if _mask_like(operand):
                            out.append(MaskUse(sub, operand, None))
                elif type(sub) is cst.AugAssign and type(sub.operator) in (cst.AddAssign, cst.SubtractAssign):
                    if _mask_like(sub.value):
                        out.append(MaskUse(sub, sub.value, None))
        return out

    def is_scaled(self) -> bool:
        """Scaled anywhere between the product and the softmax, inside the product's own
        operands (`(q * scale) @ k.T`), or folded into q/k before (`q = q * self.scale`)."""
        if self.product.node is not None and type(self.product.node) is cst.Call:
            if any(arg.keyword is not None and arg.keyword.value in ("alpha", "scale")
                   for arg in self.product.node.args):
                return True
        # folded into the softmax module (`FusedScaleMaskSoftmax(..., scale=coeff)`; not `scale=None`)
        if self.softmax_ctor is not None and any(
                arg.keyword is not None and arg.keyword.value in _SCALE_KEYWORDS
                and not (type(arg.value) is cst.Name and arg.value.value == "None") for arg in self.softmax_ctor.args):
            return True
        for node in (*self.between, *self.upstream, *self.callers):
            if _scales(node, normalize=False):
                return True
        # cosine attention: both q and k L2-normalised (a key-only normalisation leaves
        # the query's norm, and the logits' scale, free)
        return all(any(_normalizes(node) for node in side) for side in self.sides)

    def keys_are_values(self, index) -> bool:
        """Attention over a memory in the RNN encoder-decoder style (Luong's dot and general
        scores, Bahdanau's): the keys are one parameter of the function, read as it is (no
        learned projection on the way), and the same tensor is the values (`bmm(weights,
        context)`). Transformer attention projects keys and values apart."""
        memory = _plain_parameter(self.flow, self.product.right, self.flow.order_of(self.product.node, index))
        if memory is None:
            return False
        body = self.function.body if type(self.function) is cst.FunctionDef else self.function
        for node in walk(body):
            product = as_product(index, node)
            if product is None or product.left is None or product.right is None or product.node is self.product.node:
                continue
            at = self.flow.order_of(product.node, index)
            weights = self.flow.trace(product.left, at)
            if (_plain_parameter(self.flow, product.right, at) == memory
                    and any(sub is self.softmax for traced in weights for sub in walk(traced))):
                return True
        return False


def _plain_parameter(flow: FunctionFlow, expr: cst.CSTNode | None, at: int) -> str | None:
    """The parameter `expr` reads, when it reads only that one (through reshapes and
    transposes, `context.transpose(1, 2).contiguous()`) and no call of a module or a
    `self` method computes it on the way."""
    if expr is None:
        return None
    names: set[str] = set()
    for node in flow.trace(expr, at):
        for sub in walk(node):
            if type(sub) is cst.Call and (dotted_name(sub.func) or "").startswith(("self.", "F.linear", "torch.nn.")):
                return None
        names.update(name for name in read_names(node) if name not in ("self", "torch", "math"))
    return next(iter(names)) if len(names) == 1 and names <= flow.params else None


@dataclass
class MaskUse:
    node: cst.CSTNode  # the masked_fill / where call, or the addition
    mask: cst.BaseExpression
    value: cst.BaseExpression | None  # the fill value, for masked_fill


def _mask_like(expr) -> bool:
    for node in walk(expr):
        name = last_name(node) if type(node) in (cst.Name, cst.Attribute) else None
        if name and any(p in ("mask", "bias", "alibi", "causal") or p.endswith("mask") for p in snake_parts(name)):
            return True
    return False


def _scale_factor(expr) -> bool:
    for node in walk(expr):
        if type(node) in (cst.Float, cst.Integer):
            return True
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Power:
            return True
        if type(node) in (cst.Name, cst.Attribute):
            name = last_name(node)
            if name and set(snake_parts(name)) & _SCALE_PARTS:
                return True
        if type(node) is cst.Call and last_name(node.func) in _SCALE_CALLS:
            return True
    return False


def _normalizes(expr) -> bool:
    return any(type(node) is cst.Call and last_name(node.func) == "normalize" for node in walk(expr))


# calls whose arguments are sizes: arithmetic there shapes a tensor, it does not scale one
_SHAPE_CALLS = frozenset({"view", "reshape", "expand", "repeat", "chunk", "split", "narrow", "unflatten", "zeros",
                          "ones", "empty", "full", "arange", "new_zeros", "new_ones", "new_empty", "new_full",
                          "randn", "rand", "tile", "pad"})


def _scales(expr, normalize: bool = True) -> bool:
    """A division, or a multiplication by a scale-like factor, inside `expr` (an L2
    `normalize` counts when `normalize`); not the size arithmetic of a reshape's arguments
    (`x.view(B, -1, heads, 3 * d)` shapes the tensor, it does not scale it)."""
    sizes: set[int] = set()
    for node in walk(expr):
        if id(node) in sizes:
            continue
        if type(node) is cst.Call and last_name(node.func) in _SHAPE_CALLS:
            sizes.update(id(sub) for arg in node.args for sub in walk(arg))
        if type(node) is cst.BinaryOperation:
            if type(node.operator) in (cst.Divide, cst.FloorDivide) and not _is_shape_arith(node):
                return True
            if type(node.operator) is cst.Multiply and (_scale_factor(node.left) or _scale_factor(node.right)):
                return True
        elif type(node) is cst.AugAssign:
            if type(node.operator) is cst.DivideAssign:
                return True
            if type(node.operator) is cst.MultiplyAssign and _scale_factor(node.value):
                return True
        elif type(node) is cst.Call:
            name = last_name(node.func)
            if name in ("div", "div_", "true_divide", "divide"):
                return True
            if name in ("mul", "mul_", "multiply") and any(_scale_factor(a.value) for a in node.args):
                return True
            if name == "normalize" and normalize:  # cosine attention with a learned temperature
                return True
            parts = set(snake_parts(name or ""))
            if parts & {"norm", "l2norm", "rmsnorm"} and parts & {"q", "k", "qk", "query", "key"}:
                return True  # QK-norm (`self.q_norm(q)`): the logits' scale is learned
    return False


def _is_shape_arith(node: cst.BinaryOperation) -> bool:
    """`C // self.n_head`, `dim / heads` inside a `view(...)`: shape arithmetic, not scaling."""
    return type(node.operator) is cst.FloorDivide


# --- the sites of a file ------------------------------------------------------------------


def softmax_input(index, call: cst.Call, module_attr_ctor=None):
    """(input expression, dim literal or None/Ellipsis, is_softmax) for a softmax call."""
    qualified = index.qualify(call.func)
    if qualified in SOFTMAX_FUNCTIONS:
        first = get_arg(call, "input", 0)
        dim = get_arg(call, "dim", 1)
        return (first.value if first else None), _dim_value(dim)
    func = call.func
    if module_attr_ctor is not None:  # first: `self.softmax(x)` may call an `nn.Softmax` sub-module
        ctor_call = module_attr_ctor(call)
        if ctor_call is not None:
            first = get_arg(call, "input", 0)
            if index.qualify(ctor_call.func) in SOFTMAX_MODULES:
                return (first.value if first else None), _dim_value(get_arg(ctor_call, "dim", 0))
            # a project's softmax module (a fused scale-mask-softmax) normalises the last axis
            # unless its constructor says `dim=`
            dim = get_arg(ctor_call, "dim")
            return (first.value if first else None), (_dim_value(dim) if dim is not None else -1)
    if type(func) is cst.Attribute and func.attr.value == "softmax" and qualified is None:
        dim = get_arg(call, "dim", 0)
        return func.value, _dim_value(dim)
    return None


def _logsumexp(index, call: cst.Call) -> bool:
    return index.qualify(call.func) == "torch.logsumexp" and bool(call.args)


def _dim_value(arg: cst.Arg | None):
    if arg is None:
        return None
    value = literal_value(arg.value, default=Ellipsis)
    return value if isinstance(value, int) and not isinstance(value, bool) else Ellipsis


class AttentionIndex:
    """Softmax calls, attention sites and SDPA calls of one file, with per-function flows."""

    def __init__(self, index, softmax_module_ctor, bindings: BindingsView) -> None:
        self.index = index
        self.bindings = bindings
        self._softmax_module_ctor = softmax_module_ctor
        self._flows: dict[cst.CSTNode, FunctionFlow] = {}
        self.softmaxes: list[tuple[cst.Call, object, object]] = []  # (call, input, dim)
        self.sites: list[AttentionSite] = []
        self.sdpa: list[cst.Call] = []
        self._unattached: list[tuple[cst.Call, cst.BaseExpression, object]] = []  # softmaxes with no site
        for call in index.calls:
            if index.qualify(call.func) in SDPA:
                self.sdpa.append(call)
                continue
            found = softmax_input(index, call, softmax_module_ctor)
            if found is None:
                # `exp(dots - logsumexp(dots, dim=-1))`: a softmax over the keys spelled out (over
                # another axis it combines something else: hash rounds, mixture components)
                if _logsumexp(index, call):
                    first, dim = get_arg(call, "input", 0), get_arg(call, "dim", 1)
                    site = self._site(call, first.value, -1) if first and _dim_value(dim) == -1 else None
                    if site is not None:
                        self.sites.append(site)
                continue
            scores, dim = found
            self.softmaxes.append((call, scores, dim))
            if scores is None:
                continue
            site = self._site(call, scores, dim)
            if site is not None:
                self.sites.append(site)
            else:
                self._unattached.append((call, scores, dim))

    @cached_property
    def delegated(self) -> list[AttentionSite]:
        """Attention whose scores are computed by the callers (through `self`) of the method
        that takes the softmax (`scores = q @ k.T / math.sqrt(d); return
        self.forward_attention(v, scores, mask)`): one site per caller whose argument traces
        back to a query-key product, the product and its operands in the caller, the softmax
        in the helper. Not in `sites`
        (the helper's own masks and `dim` are judged there by the rules that read them);
        computed only when asked, for the softmaxes `sites` holds no attention for."""
        out = []
        index = self.index
        for call, scores, dim in self._unattached:
            flow = self.flow(call)
            # a method of a module class (a module-level `masked_softmax(scores, mask)` is a
            # generic utility, called with similarities that are not always attention scores)
            if type(flow.fn) is not cst.FunctionDef or index.enclosing_class(flow.fn) is None:
                continue
            chain = flow.trace(scores, flow.order_of(call, index))
            params = {name for node in chain for name in read_names(node)} & flow.params
            if not params:
                continue
            for caller_site in self.bindings.calls.callers(flow.fn):
                func = caller_site.call.func
                if type(func) is not cst.Attribute or dotted_name(func.value) != "self":
                    continue
                caller = self.flow(caller_site.call)
                at = caller.order_of(caller_site.call, index)
                for name, value in (caller_site.arguments or {}).items():
                    if name not in params:
                        continue
                    site = self._site_from(caller, at, value, call, dim)
                    if site is not None:
                        site.between = chain + site.between
                        out.append(site)
        return out

    def _site_from(self, flow: FunctionFlow, at: int, scores, softmax: cst.Call, dim) -> AttentionSite | None:
        """The attention whose scores `scores` (read at statement `at` of `flow`) trace back
        to a query-key product in `flow`."""
        index = self.index
        product = self._query_key_product(flow, scores, at)
        if product is None:
            return None
        inside = product.node
        between = flow.trace(scores, at, skip=lambda n: n is inside)
        sides: tuple[list[cst.CSTNode], list[cst.CSTNode]] = ([], [])
        upstream: list[cst.CSTNode] = []
        for side, operand in zip(sides, (product.left, product.right), strict=True):
            if operand is not None:
                traced = flow.trace(operand, flow.order_of(inside, index))
                upstream += traced
                side.extend(traced)
        site = AttentionSite(flow.fn, flow, softmax, scores, dim, product, between, upstream)
        site.sides = sides
        return site

    def flow(self, node: cst.CSTNode) -> FunctionFlow:
        fn = self.index.enclosing_function(node) or self.index.module
        flow = self._flows.get(fn)
        if flow is None:
            flow = self._flows[fn] = FunctionFlow(fn, self.bindings)
        return flow

    def caller_operands(self, flow: FunctionFlow, nodes) -> list[tuple[FunctionFlow, list[cst.CSTNode]]]:
        """Helper methods (`def _attend(self, q, k, v)`): what the callers in the same class
        pass for the parameters that `nodes` read, traced in each caller."""
        fn = flow.fn
        if type(fn) is not cst.FunctionDef:
            return []
        owner = self.index.enclosing_class(fn)
        if owner is None:
            return []
        read = {name for node in nodes for name in read_names(node)} & flow.params
        out = []
        calls = self.bindings.calls
        found = [(site.call, site.arguments) for site in calls.callers(fn)
                 if type(site.call.func) is cst.Attribute and dotted_name(site.call.func.value) == "self"
                 and self.index.enclosing_class(site.call) is owner]
        if fn.name.value == "forward":
            # a module class held as a sub-module of another class of the file:
            # `self.attention = DotAttention(...)` then `self.attention(q, k, v)`
            for call, _, _ in calls.complete_sites(fn) or ():
                if self.index.enclosing_class(call) is not owner:
                    found.append((call, calls.bind(call, fn)))
        for call, arguments in found:
            caller = self.flow(call)
            at = caller.order_of(call, self.index)
            traced = []
            for name, value in (arguments or {}).items():
                if name in read:
                    traced += caller.trace(value, at)
            out.append((caller, traced))
        return out

    def _site(self, call, scores, dim) -> AttentionSite | None:
        """`_site_from` at the softmax `call`, with what the callers of its function pass in
        (a helper method given q and k: `callers`, and each side's upstream)."""
        flow = self.flow(call)
        site = self._site_from(flow, flow.order_of(call, self.index), scores, call, dim)
        if site is None:
            return None
        site.callers = [node for _, nodes in self.caller_operands(flow, site.upstream) for node in nodes]
        if self._softmax_module_ctor is not None and type(call) is cst.Call:
            site.softmax_ctor = self._softmax_module_ctor(call)
        for side in site.sides:
            side += [node for _, nodes in self.caller_operands(flow, side) for node in nodes]
        return site

    def _query_key_product(self, flow, scores, at):
        """The first query-key product on the trace of `scores` in `flow`, or None. Scores
        summed from several products (a content term `q @ k^T` plus relative-position
        terms, each an einsum of the queries or the keys with a position table, as in
        BERT's `relative_key_query`) name the keys' axis only where every product agrees:
        the axis a position term adds is the queries' or the keys' as its operands go,
        which the spelling alone does not tell."""
        found: list[Product] = []
        for node in flow.trace(scores, at):
            for sub in walk(node):
                candidate = as_product(self.index, sub)
                if candidate is not None and self._is_query_key(candidate, flow, at):
                    if found and found[0].key_axis is None:
                        return found[0]
                    found.append(candidate)
        if not found:
            return None
        first = found[0]
        if any(_keys_axis(other, first.ndim) != first.key_axis for other in found[1:]):
            return replace(first, key_axis=None)
        return first

    def _is_query_key(self, product: Product, flow: FunctionFlow, at: int) -> bool:
        """A query-key product: einsum contracting features, or a matmul whose right operand
        is (traced back to) a transposed tensor."""
        if product.einsum:
            return True
        if product.right is None:
            return False
        for node in flow.trace(product.right, flow.order_of(product.node, self.index)):
            if is_transposed(node):
                return True
        return False


def illustration(index, site: AttentionSite) -> bool:
    """An attention computed at the top level of a module (a notebook cell, a script's
    straight-line code), outside any function, class or loop: no model holds it and
    nothing trains through it; it shows a step, its result printed or inspected."""
    return type(site.function) is cst.Module and not index.enclosing_loops(site.softmax) \
        and not index.enclosing_loops(site.product.node)


def attention_operands(attention: AttentionIndex) -> list[tuple[FunctionFlow, list[cst.CSTNode]]]:
    """For each attention (hand-written site or SDPA call): what its query and key (and,
    for SDPA, value) were computed from."""
    out = []
    for site in attention.sites:
        out.append((site.flow, site.upstream))
        out += attention.caller_operands(site.flow, site.upstream)
    for call in attention.sdpa:
        flow = attention.flow(call)
        at = flow.order_of(call, attention.index)
        nodes = []
        for position, keyword in enumerate(("query", "key", "value")):
            arg = get_arg(call, keyword, position)
            if arg is not None:
                nodes += flow.trace(arg.value, at)
        out.append((flow, nodes))
    return out


_HEAD_PARTS = {"head", "heads", "nh", "nhead", "nheads"}
_TIME_PARTS = {"seq", "len", "length", "seqlen", "ctx", "time", "tokens", "t", "l", "s", "n", "tgt", "src", "q"}


def head_like(expr) -> bool:
    name = last_name(expr)
    if name is None:
        return False
    parts = set(snake_parts(name))
    return bool(parts & _HEAD_PARTS) or name in ("h", "H")


def time_like(expr) -> bool:
    """`T`, `seq_len`, `x.size(1)`, `x.shape[1]`, or `-1` (absorbs the time axis)."""
    if literal_value(expr, None) == -1:
        return True
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "size":
        return len(expr.args) == 1 and literal_value(expr.args[0].value, None) == 1
    if (type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape"
            and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index):
        return literal_value(expr.slice[0].slice.value, None) == 1
    name = last_name(expr)
    if name is None:
        return False
    parts = snake_parts(name)
    return name in ("T", "L", "S", "N", "t", "l") or (len(parts) > 0 and all(p in _TIME_PARTS for p in parts)
                                                      and len(name) > 1)


def head_dim_like(expr) -> bool:
    """`head_dim`, `self.head_size`, `hs`, `d_k`, `C // self.n_head`."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.FloorDivide, cst.Divide):
        return True
    name = last_name(expr)
    if name is None:
        return False
    parts = set(snake_parts(name))
    return bool(parts & {"dim", "hd", "hs", "dk", "d", "size", "headdim"})


def _batch_times_heads(expr) -> bool:
    """`batch_size * self.num_heads`, `B * h`, `x.size(0) * heads`."""
    if type(expr) is not cst.BinaryOperation or type(expr.operator) is not cst.Multiply:
        return False
    for first, second in ((expr.left, expr.right), (expr.right, expr.left)):
        if head_like(second) and _batch_like(first):
            return True
    return False


def _batch_like(expr) -> bool:
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "size":
        return len(expr.args) == 1 and literal_value(expr.args[0].value, None) == 0
    if (type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "shape"
            and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index):
        return literal_value(expr.slice[0].slice.value, None) == 0
    name = last_name(expr)
    return name is not None and (name in ("B", "b", "N", "bs", "bsz", "nb") or "batch" in snake_parts(name))


def shape_args(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The dimensions of `x.view(a, b, c)` / `x.reshape((a, b, c))`, else None."""
    if type(call.func) is not cst.Attribute or call.func.attr.value not in ("view", "reshape"):
        return None
    args = [a.value for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return None
    if len(args) == 1 and (type(args[0]) is cst.Tuple or type(args[0]) is cst.List):
        return [el.value for el in args[0].elements]
    return args


def head_splits_before_time(attention: AttentionIndex) -> list[cst.Call]:
    """`x.view(B, n_heads, T, d)` on the way to an attention, from a tensor that was not
    transposed: the head axis is carved out of the time axis."""
    out = []
    seen = set()
    for flow, nodes in attention_operands(attention):
        for node in nodes:
            for sub in walk(node):
                if type(sub) is not cst.Call or id(sub) in seen:
                    continue
                dims = shape_args(sub)
                if dims is not None and len(dims) == 3 and _batch_times_heads(dims[0]) and time_like(dims[1]) \
                        and head_dim_like(dims[2]):
                    pass  # `x.view(B * n_heads, -1, d)`: heads folded into the batch, carved out of time
                elif dims is None or len(dims) != 4 or not head_like(dims[1]) or not time_like(dims[2]):
                    continue
                elif literal_value(dims[2], None) == -1 and not head_dim_like(dims[3]):
                    continue  # `(B, heads, -1, N)` of a channels-first feature map is fine
                receiver = sub.func.value  # type: ignore[attr-defined]  # an Attribute: shape_args saw `x.view(...)`
                at = flow.order_of(sub, attention.index)
                if any(is_transposed(n) for n in flow.trace(receiver, at)):
                    continue
                seen.add(id(sub))
                out.append(sub)
    return out
