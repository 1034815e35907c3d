"""TL103 unused-mask-argument: a `forward` (or a function it calls) takes a mask and never
reads it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import dotted_name, last_name, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.attention import SDPA
from tlint.views.bindings import PARAM, assignment_targets
from tlint.views.value_flow import ParameterFlow
from tlint.views.vocabulary import documented_unused, string_literals

if TYPE_CHECKING:
    from tlint.context import FileContext


def _is_stub(fn: cst.FunctionDef) -> bool:
    """Abstract or placeholder bodies: docstring, `...`, `pass`, `raise NotImplementedError`."""
    body = fn.body.body if type(fn.body) is cst.IndentedBlock else [fn.body]
    for stmt in body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Pass:
                    continue
                if type(small) is cst.Expr and type(small.value) in (cst.SimpleString, cst.Ellipsis,
                                                                     cst.ConcatenatedString):
                    continue
                if type(small) is cst.Raise:
                    continue
                return False
        else:
            return False
    return True


def _reads(fn: cst.FunctionDef) -> tuple[set[str], bool]:
    """Names read in `fn` (nested functions included), and whether it inspects locals()."""
    names: set[str] = set()
    dynamic = False
    for node in walk(fn.body):
        if type(node) is cst.Name:
            names.add(node.value)
        elif type(node) is cst.Call and dotted_name(node.func) in ("locals", "vars"):
            dynamic = True
    return names, dynamic


def _assigned_only(fn: cst.FunctionDef, name: str) -> bool:
    """True if every occurrence of `name` in `fn` is an assignment target or a `del`."""
    targets: set[int] = set()
    for node in walk(fn.body):
        if type(node) is cst.Del:
            for n in walk(node.target):
                if type(n) is cst.Name:
                    targets.add(id(n))
        elif type(node) is cst.AssignTarget:
            if type(node.target) is cst.Name:
                targets.add(id(node.target))
    occurrences = [n for n in walk(fn.body) if type(n) is cst.Name and n.value == name]
    return bool(occurrences) and all(id(n) in targets for n in occurrences)


def _feeds_only_itself(fn: cst.FunctionDef, name: str) -> bool:
    """Every read of `name` computes a new value of `name` itself (`mask = mask.masked_fill(
    mask.bool(), -1e8)`) or tests it against None: the converted mask reaches nothing."""
    allowed: set[int] = set()
    rebinds = False
    for node in walk(fn.body):
        if (type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name
                and node.targets[0].target.value == name):
            allowed |= {id(n) for n in walk(node)}
            rebinds = True
        elif (type(node) is cst.Comparison and type(node.left) is cst.Name and node.left.value == name
              and len(node.comparisons) == 1 and type(node.comparisons[0].operator) in (cst.Is, cst.IsNot)
              and type(node.comparisons[0].comparator) is cst.Name
              and node.comparisons[0].comparator.value == "None"):
            allowed.add(id(node.left))
    occurrences = [n for n in walk(fn.body) if type(n) is cst.Name and n.value == name]
    return rebinds and all(id(n) in allowed for n in occurrences)


def _none_tests(fn: cst.FunctionDef, name: str) -> bool:
    """Every read of `name` tests it against None (`if mask is not None:`), and no branch
    such a test guards refuses it loudly (a `raise` or a warning): the mask's value is
    never used."""
    allowed: set[int] = set()
    for node in walk(fn.body):
        if (type(node) is cst.Comparison and type(node.left) is cst.Name and node.left.value == name
                and len(node.comparisons) == 1 and type(node.comparisons[0].operator) in (cst.Is, cst.IsNot)
                and type(node.comparisons[0].comparator) is cst.Name
                and node.comparisons[0].comparator.value == "None"):
            allowed.add(id(node.left))
        elif type(node) is cst.If and any(type(n) is cst.Name and n.value == name for n in walk(node.test)) \
                and any(type(n) is cst.Raise or (type(n) is cst.Call and "warn" in (last_name(n.func) or ""))
                        for n in walk(node)):
            return False
    occurrences = [n for n in walk(fn.body) if type(n) is cst.Name and n.value == name]
    return bool(occurrences) and all(id(n) in allowed for n in occurrences)


_PRESENCE_CALLS = frozenset({"exists", "is_none", "is_not_none", "isinstance", "len", "torch.is_tensor"})


def _inspected_only(fn: cst.FunctionDef, name: str) -> bool:
    """Every read of `name` only inspects the mask: a None test (`mask is not None`,
    `exists(mask)`), its shape, size, dtype or device, an `assert` or the condition of an
    `if`/`while` (`if key_padding_mask.max() > 0:`), or it computes a new value of `name`
    itself (`mask = rearrange(mask, "b j -> b () () j")`), and no guarded branch refuses it
    loudly. The mask's values never reach the scores."""
    allowed: set[int] = set()
    node: Any  # dispatched on `type(node)`, which mypy does not narrow by
    for node in walk(fn.body):
        kind = type(node)
        if kind is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name \
                and node.targets[0].target.value == name:
            allowed.update(id(n) for n in walk(node))
        elif kind is cst.Assert or (kind in (cst.If, cst.While) and any(
                type(n) is cst.Name and n.value == name for n in walk(node.test))):
            if kind is not cst.Assert and (node.test is not None and _bare(node.test, name)):
                return False  # `if mask_future_timesteps:`: a switch, not a mask
            # a branch on the mask's presence alone that raises or warns refuses it loudly (one
            # testing other names too refuses a combination; one testing its shape validates it)
            if kind is not cst.Assert and _presence_test(node.test, name) \
                    and any(type(n) is cst.Raise or (type(n) is cst.Call and "warn" in (last_name(n.func) or ""))
                            for n in walk(node)):
                return False
            allowed.update(id(n) for n in walk(node.test))
        elif kind is cst.Attribute and type(node.value) is cst.Name and node.value.value == name \
                and node.attr.value in _SHAPE_ATTRS:
            allowed.add(id(node.value))
        elif kind is cst.Call and len(node.args) >= 1 and dotted_name(node.func) in _PRESENCE_CALLS \
                and type(node.args[0].value) is cst.Name and node.args[0].value.value == name:
            allowed.add(id(node.args[0].value))
        elif kind is cst.Comparison and type(node.left) is cst.Name and node.left.value == name \
                and len(node.comparisons) == 1 and type(node.comparisons[0].operator) in (cst.Is, cst.IsNot):
            allowed.add(id(node.left))
    occurrences = [n for n in walk(fn.body) if type(n) is cst.Name and n.value == name]
    return bool(occurrences) and all(id(n) in allowed for n in occurrences)


def _presence_test(test: cst.BaseExpression, name: str) -> bool:
    """`name is not None` / `name is None` / `exists(name)`, alone."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test = test.expression
    if type(test) is cst.Call:
        return dotted_name(test.func) in _PRESENCE_CALLS and len(test.args) == 1 \
            and type(test.args[0].value) is cst.Name and test.args[0].value.value == name
    return (type(test) is cst.Comparison and type(test.left) is cst.Name and test.left.value == name
            and len(test.comparisons) == 1 and type(test.comparisons[0].operator) in (cst.Is, cst.IsNot))


def _bare(test: cst.BaseExpression, name: str) -> bool:
    """`name` or `not name` (a boolean operand included): the parameter is a switch."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test = test.expression
    if type(test) is cst.BooleanOperation:
        return _bare(test.left, name) or _bare(test.right, name)
    return type(test) is cst.Name and test.value == name


_ENCODER_PARTS = frozenset({"encoder", "transformer", "backbone", "bert", "roberta", "model", "decoder", "lm"})


def _runs_encoder(fn: cst.FunctionDef) -> bool:
    """`self.encoder(input_ids)`, `self.bert(...)`: the function runs a sequence model of its
    own, which mixes positions and could take the mask."""
    for node in walk(fn.body):
        if (type(node) is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name
                and node.func.value.value == "self"
                and set(snake_parts(node.func.attr.value)) & _ENCODER_PARTS):
            return True
    return False


_ATTENTION_CALLS = {"softmax", "log_softmax", "scaled_dot_product_attention", "matmul", "bmm",
                    "baddbmm", "einsum", "masked_fill", "masked_fill_", "where"}


def _does_attention(fn: cst.FunctionDef) -> bool:
    """The function mixes positions itself: a softmax, a matrix product, an attention call."""
    for node in walk(fn.body):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:
            return True
        if type(node) is cst.Call:
            name = last_name(node.func) or ""
            if name in _ATTENTION_CALLS or "attention" in name.lower() or "attn" in name.lower():
                return True
    return False


_SHAPE_ATTRS = {"shape", "device", "dtype", "ndim", "size", "dim"}


def _reads_only_shapes(fn: cst.FunctionDef, names: list[str]) -> bool:
    """Every read of each of `names` takes only its shape, size, device or dtype
    (`x.shape[-2:]`, `x.size(0)`, `x.device`): the function builds its output from the
    geometry of its inputs (a learned or sine grid position embedding), never from their
    values, so there is nothing a mask could be applied to."""
    if not names:
        return False
    wanted = set(names)
    allowed: set[int] = set()
    for node in walk(fn.body):
        if (type(node) is cst.Attribute and type(node.value) is cst.Name
                and node.value.value in wanted and node.attr.value in _SHAPE_ATTRS):
            allowed.add(id(node.value))
    occurrences = [n for n in walk(fn.body) if type(n) is cst.Name and n.value in wanted]
    return bool(occurrences) and all(id(n) in allowed for n in occurrences)


_CROSS_WORDS = ("encoder", "cross")


def _masks_encoder_states(fn: cst.FunctionDef, params: list[cst.Param], other_masks: list[str]) -> bool:
    """Another mask the function reads is applied to the encoder-side states itself: it
    appears in one statement with `encoder_hidden_states` or a value derived from it
    (`value = self.value_proj(encoder_hidden_states)`; `value = value.masked_fill(~attention_mask, 0)`).
    The padding mask of the attended states then arrives under that other name (multi-scale
    deformable attention sharing its signature with the decoder layers), and the separate
    encoder/cross mask is redundant."""
    tainted = {p.name.value for p in params
               if any(w in p.name.value.lower() for w in _CROSS_WORDS) and "mask" not in p.name.value.lower()}
    if not tainted or not other_masks:
        return False
    node: Any  # dispatched on `type(node) in (...)`, which mypy does not narrow by
    for node in walk(fn.body):
        if type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr, cst.Return):
            value = node.value
            if value is None:
                continue
            used = {n.value for n in walk(value) if type(n) is cst.Name}
            if used & tainted and used & set(other_masks):
                return True
            if used & tainted and type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
                targets = assignment_targets(node)
                for target in targets:
                    tainted |= {n.value for n in walk(target) if type(n) is cst.Name}
    return False


def _position_wise(fn: cst.FunctionDef, module_class) -> bool:
    """The function only adds, scales and normalises its inputs: it calls a norm of the
    class (`self.LayerNorm(a + b)`), every other call builds a raised error, and nothing
    is indexed or looped over. No position sees another, so there is nothing a padding mask could keep out
    (a link or fusion layer of a cross-modal tower taking the mask of its neighbours)."""
    if module_class is None:
        return False
    raised: set[int] = set()
    for node in walk(fn.body):
        if type(node) is cst.Raise:
            raised |= {id(n) for n in walk(node)}
    normalises = False
    for node in walk(fn.body):
        if id(node) in raised:
            continue
        if type(node) in (cst.Subscript, cst.Lambda, cst.For, cst.While):
            return False
        if type(node) is cst.Call:
            if not module_class.is_norm_call(node):
                return False
            normalises = True
    # an identity or placeholder body (`return x`) is not a layer that normalises
    return normalises


_PER_POSITION = frozenset({
    "torch.nn.Linear", "torch.nn.LayerNorm", "torch.nn.RMSNorm", "torch.nn.Dropout", "torch.nn.Identity",
    "torch.nn.GELU", "torch.nn.ReLU", "torch.nn.SiLU", "torch.nn.Tanh", "torch.nn.Sigmoid", "torch.nn.Mish",
    "torch.nn.LeakyReLU", "torch.nn.ELU", "torch.nn.GLU", "torch.nn.Softplus",
    "torch.nn.functional.gelu", "torch.nn.functional.relu", "torch.nn.functional.silu",
    "torch.nn.functional.dropout", "torch.nn.functional.layer_norm", "torch.nn.functional.linear",
    "torch.nn.functional.glu", "torch.tanh", "torch.sigmoid", "torch.relu"})


def _per_position_layers(fn: cst.FunctionDef, module_class) -> bool:
    """Every call of the function applies a per-position layer: a sub-module built as
    `nn.Linear`, a norm, dropout or an activation (or an `nn.Sequential` of only those), or
    the same as a function (`F.gelu`); nothing is indexed or looped over. A feed-forward
    block that takes the layers' uniform `mask` argument has nothing to mask."""
    if module_class is None:
        return False
    index = module_class.view.index
    calls = 0
    for node in walk(fn.body):
        if type(node) in (cst.Subscript, cst.Lambda, cst.For, cst.While):
            return False
        if type(node) is not cst.Call:
            continue
        calls += 1
        sub = module_class.attribute_of(node.func)
        if sub is not None:
            members = [member for member in sub.nested() if member is not sub] or [sub]
            if not all(member.ctor in _PER_POSITION for member in members):
                return False
        elif index.qualify(node.func) not in _PER_POSITION:
            return False
    return calls > 0


def _no_attention_inside(fn: cst.FunctionDef, module_class, name: str) -> bool:
    """An attention mask (`attention_mask`, `attn_mask`) taken by a block that computes no
    attention: neither the function nor any sub-module of its class does (no softmax,
    attention site, SDPA or torch attention module, `ModelView.does_attention`), and every
    call of the function is a norm, a per-position layer or a module class of this file
    whose `forward` takes no mask at all (a state-space or convolution mixer keeping the
    layer interface of the attention blocks beside it). There is no attention to mask."""
    if module_class is None or not {"attention", "attn"} & set(snake_parts(name)) or _does_attention(fn):
        return False
    view = module_class.view
    if view.does_attention(module_class):
        return False
    calls = 0
    for node in walk(fn.body):
        if type(node) is not cst.Call or module_class.is_norm_call(node):
            continue
        calls += 1
        sub = module_class.attribute_of(node.func)
        if sub is None:
            if view.index.qualify(node.func) not in _PER_POSITION:
                return False
            continue
        for member in [member for member in sub.nested() if member is not sub] or [sub]:
            inner = view.classes.get(member.ctor or "")
            if member.ctor in _PER_POSITION:
                continue
            if inner is None or inner.forward is None or type(inner.forward.params.star_kwarg) is cst.Param \
                    or any("mask" in p.name.value.lower() for p in inner.forward_params()):
                return False
    return calls > 0


_CAUSAL_PARTS = frozenset({"causal", "future", "subsequent", "tgt", "look", "lookahead", "autoregressive"})


def _adapts_narrower_parent(fn: cst.FunctionDef, module_class, name: str) -> bool:
    """The method only hands over to the same method of its parent class in this file
    (`return super().forward(x, padding_mask, pos)`), passes on every mask the parent can
    take, and the parent has no parameter left for this one: a signature adapter to a layer
    interface the parent does not have (not a causal mask, which a subclass drops at the
    cost of the future leaking in)."""
    if module_class is None or set(snake_parts(name)) & _CAUSAL_PARTS:
        return False
    body = [stmt for stmt in (fn.body.body if type(fn.body) is cst.IndentedBlock else ())
            if not (type(stmt) is cst.SimpleStatementLine and type(stmt.body[0]) is cst.Expr
                    and type(stmt.body[0].value) in (cst.SimpleString, cst.ConcatenatedString))]
    if len(body) != 1 or type(body[0]) is not cst.SimpleStatementLine or type(body[0].body[0]) is not cst.Return:
        return False
    call = body[0].body[0].value
    if not (type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == fn.name.value
            and type(call.func.value) is cst.Call and dotted_name(call.func.value.func) == "super"):
        return False
    view = module_class.view
    parents = [view.classes.get(dotted_name(base.value) or "") for base in module_class.node.bases]
    parent = next((p.methods.get(fn.name.value) for p in parents if p is not None and fn.name.value in p.methods),
                  None)
    if parent is None or type(parent.params.star_kwarg) is cst.Param or any(arg.star for arg in call.args):
        return False
    own_masks = {p for p in _param_names(fn) if "mask" in p.lower() and p != name}
    passed = {arg.value.value for arg in call.args if type(arg.value) is cst.Name and arg.value.value in own_masks}
    parent_masks = [p for p in _param_names(parent) if "mask" in p.lower()]
    return bool(passed) and len(parent_masks) <= len(passed)


def _param_names(fn: cst.FunctionDef) -> tuple[str, ...]:
    params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    return tuple(p.name.value for p in params)


def _builds(cls: cst.ClassDef, name: str) -> bool:
    """`cls` constructs a `name` (`self.ff = FeedForward(d)`): it is its caller, not a sibling."""
    return any(type(node) is cst.Call and (dotted_name(node.func) or "").split(".")[-1] == name
               for node in walk(cls.body))


_OMITTED = object()
_UNKNOWN = object()


def _is_none(expr) -> bool:
    return type(expr) is cst.Name and expr.value == "None"


def _argument_for(call: cst.Call, fn: cst.FunctionDef, name: str, bound: bool):
    """What `call` passes for parameter `name` of `fn`: the expression, `_OMITTED`, or
    `_UNKNOWN` when a `*args`/`**kwargs` spread may carry it. `bound`: the call goes through
    an instance or `self`, so the first parameter is implicit."""
    positional = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if bound:
        positional = positional[1:]
    index = 0
    for arg in call.args:
        if arg.star:
            return _UNKNOWN
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
            continue
        if index < len(positional) and positional[index] == name:
            return arg.value
        index += 1
    return _OMITTED


def _rebound(fn: cst.FunctionDef, name: str) -> bool:
    """`name` is assigned anywhere in `fn` (`mask = build(mask)`, a loop or `with` target)."""
    node: Any  # dispatched on `type(node) in (...)`, which mypy does not narrow by
    for node in walk(fn.body):
        targets: tuple[cst.CSTNode, ...] = ()
        if type(node) is cst.AssignTarget:
            targets = (node.target,)
        elif type(node) in (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr):
            targets = (node.target,)
        elif type(node) is cst.AsName:
            targets = (node.name,)
        if any(type(n) is cst.Name and n.value == name for t in targets for n in walk(t)):
            return True
    return False


# Tensor methods and torch functions that copy, convert or create a tensor without mixing
# positions (no reduction, no product, no sub-layer).
_COPY_CALLS = {"clone", "detach", "to", "float", "half", "double", "long", "int", "bool", "type",
               "contiguous", "new_full", "new_zeros", "new_ones", "new_empty", "new_tensor",
               "zeros_like", "ones_like", "full_like", "empty_like", "size", "dim"}


def _copies_only(fn: cst.FunctionDef) -> bool:
    """The function only copies, converts and index-writes tensors: every call it makes is
    one of `_COPY_CALLS` (`x.clone()`, `torch.zeros_like(x)`), never a sub-layer, a helper,
    a reduction or an attention; so no position of its output sees another."""
    for node in walk(fn.body):
        if type(node) is cst.Call and (last_name(node.func) not in _COPY_CALLS
                                           or (dotted_name(node.func) or "").startswith("self.")):
            return False
        if type(node) in (cst.Lambda, cst.FunctionDef, cst.For, cst.While) and node is not fn:
            return False
    return not _does_attention(fn)


_RESHAPE_CALLS = {"view", "reshape", "split", "chunk", "transpose", "permute", "unsqueeze", "squeeze", "expand",
                  "flatten", "unflatten", "repeat_interleave", "cat", "stack", "int", "len", "tuple", "list"}


def _projects_only(fn: cst.FunctionDef, module_class) -> bool:
    """The function only applies linear projections of its class (`self.query_key_value(x)`:
    a sub-module built as a `*Linear` layer or another per-position layer) and reshapes,
    splits and copies their results: it prepares the queries, keys and values, and no
    position of its output sees another (no reduction, product or attention)."""
    if module_class is None or _does_attention(fn):
        return False
    for node in walk(fn.body):
        if type(node) in (cst.Lambda, cst.For, cst.While) or (type(node) is cst.FunctionDef and node is not fn):
            return False
        if type(node) is not cst.Call:
            continue
        name = last_name(node.func) or ""
        sub = module_class.attribute_of(node.func)
        if sub is not None:
            members = [member for member in sub.nested() if member is not sub] or [sub]
            if not all(m.ctor in _PER_POSITION or _callee(m).endswith("Linear") for m in members):
                return False
        elif (name not in _COPY_CALLS and name not in _RESHAPE_CALLS) \
                or (dotted_name(node.func) or "").startswith("self."):
            return False
    return True


def _callee(sub) -> str:
    """The constructor a sub-module is built with, resolved or as written (`ColumnParallelLinear`)."""
    return sub.ctor or (last_name(sub.call.func) if sub.call is not None else None) or ""


class _CallSites:
    """What the file's callers pass for a mask parameter, over `ctx.calls.complete_sites`
    (every call of a function in the file, or None when a use of it is not a seen call)."""

    def __init__(self, ctx) -> None:
        self.index = ctx.index
        self.calls = ctx.calls

    def sites(self, fn: cst.FunctionDef):
        return self.calls.complete_sites(fn)

    def never_supplied(self, fn: cst.FunctionDef, name: str, active: frozenset = frozenset()) -> bool:
        """Every call of `fn` in the file passes `None` for `name` or leaves it out (or passes
        a parameter of its own that is never supplied in turn), and there is at least one."""
        found = self.sites(fn)
        if not found:
            return False
        static = any(dotted_name(d.decorator) == "staticmethod" for d in fn.decorators)
        for call, caller, bound in found:
            value = _argument_for(call, fn, name, bound and not static)
            if value is _OMITTED or _is_none(value):
                continue
            if (value is _UNKNOWN or caller is None or type(value) is not cst.Name
                    or value.value not in _param_names(caller) or _rebound(caller, value.value)
                    or (id(caller), value.value) in active):
                return False
            if not self.never_supplied(caller, value.value, active | {(id(fn), name)}):
                return False
        return True

    def applied_by_callers(self, fn: cst.FunctionDef, name: str) -> bool:
        """Every call of `fn` passes a parameter of its caller for `name`, which the caller
        also hands to another call: the mask is applied there, not dropped."""
        found = self.sites(fn)
        if not found:
            return False
        for call, caller, bound in found:
            value = _argument_for(call, fn, name, bound)
            if caller is None or type(value) is not cst.Name or value.value not in _param_names(caller):
                return False
            elsewhere = False
            for other in self.index.statement_calls.get(caller, []):
                if other is call:
                    continue
                if any(type(arg.value) is cst.Name and arg.value.value == value.value for arg in other.args):
                    elsewhere = True
                    break
            if not elsewhere:
                return False
        return True


# masks that are not applied to attention scores
_NOT_SCORE_MASKS = frozenset({"head", "query", "q", "out", "output", "label", "labels", "loss", "pixel", "image",
                              "special", "token", "tokens", "word", "span", "value", "v"})


class UnusedMaskArgument(Rule):
    code = "TL103"
    name = "unused-mask-argument"
    kind = "defect"
    tokens = frozenset({"mask"})  # pre-filter: a parameter named like a mask
    summary = "A forward (or a function it calls) takes a mask parameter and never reads it."
    probes = ("mask-leak",)

    def check(self, ctx: FileContext) -> None:
        try:
            self._check(ctx)
        finally:  # the file's state is not kept past it (it would keep the file's tree alive)
            for name in ("_texts", "_ctx", "_signatures", "_owner", "_sites", "_flows"):
                self.__dict__.pop(name, None)

    def _check(self, ctx: FileContext) -> None:
        index = ctx.index
        seen: set[int] = set()
        self._texts: list[str] | None = None
        self._ctx = ctx
        self._flows: dict[tuple[int, str], ParameterFlow] = {}
        # method name -> [(class, parameter names)] over the file, for interchangeable families
        self._signatures: dict[str, list[tuple[cst.ClassDef, tuple[str, ...]]]] = {}
        # method -> its class, over the whole file (call sites may be in any class)
        self._owner: dict[int, cst.ClassDef] = {}
        for cls in index.classes:
            body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
            for stmt in body:
                if type(stmt) is cst.FunctionDef:
                    self._signatures.setdefault(stmt.name.value, []).append((cls, _param_names(stmt)))
                    self._owner.setdefault(id(stmt), cls)
        self._sites = _CallSites(ctx)
        for cls in index.classes:
            body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
            methods = {s.name.value: s for s in body if type(s) is cst.FunctionDef}
            forward = methods.get("forward")
            if forward is None:
                continue
            for fn in self._reachable(forward, methods, index):
                if id(fn) not in seen:
                    seen.add(id(fn))
                    self._check_function(ctx, fn)
        # a mask function handed to a layer (`attention_mask_func=gpt2_attention_mask_func`):
        # the layer's forward calls it with the scores and the mask
        for callback, keyword in self._mask_callbacks(index):
            for fn in self._reachable(callback, {}, index):
                if id(fn) not in seen:
                    seen.add(id(fn))
                    self._check_function(ctx, fn, f"`{callback.name.value}` (handed to a layer as `{keyword}=`)"
                                         if fn is callback else None)

    @staticmethod
    def _mask_callbacks(index) -> list[tuple[cst.FunctionDef, str]]:
        """Functions defined at the top level of the file and passed by name, under a keyword
        naming a mask (`mask_func=`, `attention_mask_func=`), to a call of the file."""
        if not any("mask" in name.lower() and ("func" in name.lower() or "fn" in name.lower())
                   for name in index.identifiers):
            return []
        module_functions = {stmt.name.value: stmt for stmt in index.module.body if type(stmt) is cst.FunctionDef}
        out: list[tuple[cst.FunctionDef, str]] = []
        for call in index.calls:
            for arg in call.args:
                if arg.keyword is not None and type(arg.value) is cst.Name and arg.value.value in module_functions \
                        and "mask" in arg.keyword.value.lower():
                    fn = module_functions[arg.value.value]
                    if all(fn is not seen for seen, _ in out):
                        out.append((fn, arg.keyword.value))
        return out

    @staticmethod
    def _reachable(forward, methods, index) -> list[cst.FunctionDef]:
        """forward, the methods of its class it calls (`self.m(...)`), and module-level
        functions of the file it calls, transitively."""
        module_functions = {
            stmt.name.value: stmt for stmt in index.module.body if type(stmt) is cst.FunctionDef
        }
        out, stack = [], [forward]
        while stack:
            fn = stack.pop()
            if fn in out:
                continue
            out.append(fn)
            for call in index.statement_calls.get(fn, []):
                name = dotted_name(call.func)
                if name and name.startswith("self.") and name.count(".") == 1 and name[5:] in methods:
                    stack.append(methods[name[5:]])
                elif name in module_functions:
                    stack.append(module_functions[name])
        return out

    def _check_function(self, ctx, fn: cst.FunctionDef, where: str | None = None) -> None:
        if _is_stub(fn):
            return
        reads, dynamic = _reads(fn)
        if dynamic:
            return
        params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
        for param in params:
            name = param.name.value
            if "mask" not in name.lower() or name.startswith("_"):
                continue
            # a mask only tested against None counts as unread where the function attends; in
            # one that does not (`is_kernel_available(mask, ...)`) its presence picks a path;
            # where it attends, so does a mask whose value reaches nothing the function
            # returns or updates (converted, then dropped or shadowed by a causal mask)
            attends = _does_attention(fn)
            used = name in reads and not _assigned_only(fn, name) and not _feeds_only_itself(fn, name) \
                and not ((_none_tests(fn, name) or _inspected_only(fn, name)) and attends) \
                and not (attends and not self._applied(fn, name))
            # used, but on another path than the hand-written attention of the function (the
            # flash call of one branch), or only after its softmax: that attention never sees it
            bypassed = self._bypassed_site(fn, name) if used and attends else None
            if used and bypassed is None:
                continue
            if self._deleted(fn, name):
                continue
            other_mask_read = any(p.name.value != name and "mask" in p.name.value.lower()
                                  and p.name.value in reads and (not attends or self._applied(fn, p.name.value))
                                  for p in params)
            if self._ignored_on_purpose(fn, param, other_mask_read):
                continue
            if any(w in name.lower() for w in _CROSS_WORDS) and _masks_encoder_states(
                    fn, params, [p.name.value for p in params if p.name.value != name
                                 and "mask" in p.name.value.lower() and p.name.value in reads]):
                continue
            data = [p.name.value for p in params if p.name.value not in ("self", "cls")
                    and "mask" not in p.name.value.lower() and p.name.value in reads]
            if not _does_attention(fn) and _reads_only_shapes(fn, data):
                continue
            owner = self._owner.get(id(fn))
            module_class = ctx.models.classes.get(owner.name.value) if owner is not None else None
            if _position_wise(fn, module_class) or _per_position_layers(fn, module_class) \
                    or _no_attention_inside(fn, module_class, name) or _adapts_narrower_parent(fn, module_class, name):
                continue
            # nothing is dropped: every call in the file passes None or leaves the mask out
            if self._sites.never_supplied(fn, name):
                continue
            # a helper that computes no attention (it copies and index-writes tensors, a
            # token-corruption step; or projects the queries and keys), handed a mask its
            # callers also pass on to the attention that applies it
            if fn.name.value != "forward" and (_copies_only(fn) or _projects_only(fn, module_class)) \
                    and self._sites.applied_by_callers(fn, name):
                continue
            if where is None:
                where = "forward" if fn.name.value == "forward" else f"`{fn.name.value}` (called from forward)"
            how = ("never reaches the query-key scores the function soft-maxes itself (it is used elsewhere: "
                   "on another path, or after the softmax)" if bypassed is not None
                   else "is never read" if name not in reads or _assigned_only(fn, name)
                   else "is only tested against None, its value never used" if _none_tests(fn, name)
                   else "is only converted into a new value of itself, which nothing reads"
                   if _feeds_only_itself(fn, name)
                   else "is only inspected (tested, its shape checked, reshaped into itself), its values never "
                        "applied to the scores" if _inspected_only(fn, name)
                   else "is read, but nothing computed from it reaches the function's result (it is converted "
                        "or tested, then dropped)")
            ctx.report(param, f"parameter `{name}` of {where} {how}: the mask is silently ignored, "
                              "so padded or future positions are attended to")

    def _flow(self, fn: cst.FunctionDef, name: str) -> ParameterFlow:
        key = (id(fn), name)
        found: ParameterFlow | None = self._flows.get(key)
        if found is None:
            found = self._flows[key] = ParameterFlow(fn, name, self._ctx.bindings)
        return found

    def _applied(self, fn: cst.FunctionDef, name: str) -> bool:
        """Some value computed from parameter `name` reaches a sink of `fn` (a statement
        that uses it, a return, a store: `tlint.views.value_flow`)."""
        return bool(self._flow(fn, name).sinks)

    def _bypassed_site(self, fn: cst.FunctionDef, name: str):
        """The hand-written attention of `fn` (a softmax over a query-key product) when no
        attention of `fn` sees the mask: no value computed from it reaches the scores
        between the product and the softmax, nor the queries and keys. None otherwise,
        and for masks that are not meant for the scores (`head_mask` scales the
        probabilities; query, output and label masks mask something else)."""
        if set(snake_parts(name)) & _NOT_SCORE_MASKS:
            return None
        sites = [site for site in self._ctx.models.attention.sites if site.function is fn]
        if not sites:
            return None
        flow = self._flow(fn, name)
        index = self._ctx.index
        # the other path: the mask handed to an attention kernel (`F.scaled_dot_product_attention`,
        # `self.flash_attn(...)`), so it is a mask for the scores
        if not any(type(node) is cst.Call and (index.qualify(node.func) in SDPA or any(
                word in (last_name(node.func) or "").lower() for word in ("attn", "attention", "flash")))
                for sink in flow.sinks for node in index.ancestors(sink)
                if isinstance(node, cst.BaseExpression)):
            return None
        for site in sites:
            if any(flow.reaches(node) for node in (*site.between, *site.upstream)):
                return None
        return sites[0]

    def _deleted(self, fn: cst.FunctionDef, name: str) -> bool:
        """`del mask` while it still holds the parameter's own value: ignored on purpose (a
        `del` of a value computed from it, `mask = rearrange(mask, ...)`, is not)."""
        bindings = self._ctx.bindings
        for node in walk(fn.body):
            if type(node) is cst.Del:
                for n in walk(node.target):
                    if type(n) is cst.Name and n.value == name \
                            and any(b.kind == PARAM and b.scope is fn for b in bindings.reaching(n)):
                        return True
        return False

    def _ignored_on_purpose(self, fn: cst.FunctionDef, param: cst.Param, other_mask_read: bool) -> bool:
        """The parameter exists for signature compatibility, and the code says so:
        - a string of the function or its class docstring, or a message passed to a call
          anywhere in the file (a warning,
          an error) names it and says it is unused, ignored, unsupported,
          deprecated or kept for compatibility;
        - the function takes `**kwargs` and either computes no attention itself or applies
          another mask it takes: it accepts the uniform keyword set its caller passes to
          every layer (recurrent or convolution blocks beside attention ones, a deformable
          attention applying `attention_mask` but not `encoder_attention_mask`) and uses
          what it supports;
        - another class of the file defines the same method with the same parameters (an
          interchangeable family selected by configuration, such as a learned and a sine
          position embedding; not a class that builds this one, its caller) and this one
          computes no attention itself (no softmax, matrix product or attention call), so
          it has nothing to apply the mask to.
        """
        name = param.name.value
        attends = _does_attention(fn)
        if type(fn.params.star_kwarg) is cst.Param and (not attends or other_mask_read):
            return True
        owner = self._owner.get(id(fn))
        if owner is not None and not attends and not _runs_encoder(fn):
            signature = _param_names(fn)
            if any(cls is not owner and sig == signature and not _builds(cls, owner.name.value)
                   for cls, sig in self._signatures.get(fn.name.value, ())):
                return True
        local = string_literals(fn) + ([owner.get_docstring() or ""] if owner is not None else [])
        if documented_unused(local, name):
            return True
        if self._texts is None:
            # messages anywhere in the file: `logger.warning("`mask` is unused ...")`
            self._texts = [t for call in self._ctx.index.calls for arg in call.args for t in string_literals(arg.value)]
        return documented_unused(self._texts, name)
