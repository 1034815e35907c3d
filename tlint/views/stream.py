"""The residual stream of a module class: which sub-layers its `forward` applies, and
whether each sub-layer's output reaches the stream through an addition with the
stream's earlier value.

`ModuleClass.stream()` (see `tlint.views.model`) returns a `BlockStream`:

- `uses`: every call of a learned sub-layer made by `forward` (and by the helper methods
  it calls, `self._sa_block(x)` / `self._ff_block(x)` as in `nn.TransformerEncoderLayer`),
  each with its kind: `"attention"` (a leaf attention: `nn.MultiheadAttention`, a class of
  the file whose methods do softmax/SDPA attention, or an attribute named `attn`,
  `self_attn`, `attention`, ...), `"mlp"` (`nn.Sequential` of `Linear`, an MLP class,
  `mlp`/`ffn`/`feed_forward`/`ff`/`fc1`/`linear1` attributes), `"block"` (a sub-layer that
  keeps its own residual: `nn.TransformerEncoderLayer`, a class of the file whose
  `forward` returns its input plus something) or `"other"` (projections, unknown);
- `has_norm`: whether `forward` (or its helpers) applies a norm;
- `writes`: the statements of `forward` that write the stream — assignments whose value
  carries an attention/MLP output, and the `return` — each saying whether the value keeps
  an identity path from the stream (`keeps_stream`) and whether it `overwrites` it (the
  target held the stream, the value carries a sub-layer output but not the stream's
  earlier value, and no other name holds the stream to add it back later, as fairseq's
  `residual = x; ...; x = residual + x`).

The analysis is an abstract evaluation of `forward` in source order. Every value is
described by the stream versions it carries through an identity path (`skip`: the input
stream, through additions, norms, dropout, scaling, reshapes and plain functions) and by
the attention/MLP calls it was computed through (`branches`). A learned sub-layer call
breaks the identity path — unless it is a class of the file whose `forward` keeps one of
its parameters (`BertSelfOutput`'s `LayerNorm(hidden + input_tensor)`, a `Residual`
wrapper), which `passthrough_params()` summarises — and a helper method of the class is
evaluated in place with its parameters bound to the arguments. The stream is the first
parameter of `forward` (`x`, `hidden_states`, `tgt`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from tlint.cst import dotted_name, get_arg, snake_parts, walk

_ATTENTION_NAME_PARTS = ("attn", "attention")
_MLP_NAME_PARTS = frozenset({"mlp", "ffn", "ff", "ffw", "ffwd", "fc1", "fc2", "linear1", "linear2",
                             "feedforward", "intermediate", "mlps"})
_CONTAINER_PARTS = frozenset({"layers", "blocks", "encoder", "decoder", "transformer", "stack", "head", "heads",
                              "tower", "backbone", "model", "trunk", "stages", "classifier"})
_NOT_ATTENTION_PARTS = frozenset({"proj", "projection", "out", "bias", "mask", "scale", "pool", "weights",
                                  "gate", "logits", "temperature"})
_MLP_CLASS_WORDS = ("mlp", "feedforward", "ffn", "swiglu", "geglu")
_LINEAR = frozenset({"torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.LazyLinear"})
_SHAPE_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "training"})
_SHAPE_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension", "get_device", "stride",
                            "data_ptr", "is_contiguous", "item", "tolist"})
_SHAPE_FUNCTIONS = frozenset({"len", "isinstance", "int", "float", "bool", "str", "range", "enumerate",
                              "hasattr", "getattr", "print"})
_MAX_DEPTH = 4
_OPTION_PARTS = frozenset({"skip", "residual", "shortcut", "first", "identity"})  # an option that drops a residual


@dataclass(frozen=True)
class Val:
    skip: frozenset = frozenset()  # stream versions reaching the value through an identity path
    branches: frozenset = frozenset()  # ids of the attention/MLP calls it was computed through

    def __or__(self, other: Val) -> Val:
        return Val(self.skip | other.skip, self.branches | other.branches)


_EMPTY = Val()


@dataclass
class SublayerUse:
    """A call of a learned sub-layer of the class (in `forward` or a helper method)."""

    call: cst.Call
    name: str  # the attribute (`attn`, `mlp`, `layers`)
    kind: str  # "attention" | "mlp" | "block" | "other"
    source: Val = Val()  # what its input (an attention's query) was computed from


@dataclass
class StreamWrite:
    """A statement of `forward` that writes a value carrying attention/MLP output."""

    node: cst.CSTNode  # Assign / AugAssign / AnnAssign / Return
    target: str | None  # the name written (None for `return`)
    uses: list[SublayerUse]  # the attention/MLP calls the value was computed through
    keeps_stream: bool  # the value carries the stream's earlier value (a residual)
    overwrites: bool = False  # it replaces the stream, and nothing adds the stream back


@dataclass
class BlockStream:
    module_class: object
    uses: list[SublayerUse] = field(default_factory=list)
    writes: list[StreamWrite] = field(default_factory=list)
    has_norm: bool = False

    def kinds(self) -> set[str]:
        return {use.kind for use in self.uses}

    def is_transformer_block(self) -> bool:
        """`forward` itself applies a leaf attention sub-layer, an MLP sub-layer and a norm."""
        kinds = self.kinds()
        return "attention" in kinds and "mlp" in kinds and self.has_norm

    def overwrites(self) -> list[StreamWrite]:
        return [write for write in self.writes if write.overwrites]


# --- classification of sub-layers ---------------------------------------------------------


def _name_is_attention(name: str) -> bool:
    if _name_is_container(name):
        return False
    parts = snake_parts(name)
    if set(parts) & _NOT_ATTENTION_PARTS:  # `attn_out_proj`, `attn_bias`: a piece of one
        return False
    if any("pool" in part for part in parts):  # `attnpool`: attention pooling onto learned queries
        return False
    # `att` alone (`self.att`: minGPT-style and RWKV's time-mixing token mixer), not `attr`/`attach`
    return any(word in part for part in parts for word in _ATTENTION_NAME_PARTS) or "att" in parts


def _name_is_container(name: str) -> bool:
    """`attn_layers`, `transformer_blocks`, `mlp_head`: a whole stack or an output head,
    not a leaf sub-layer of a block."""
    return bool(set(snake_parts(name)) & _CONTAINER_PARTS)


def _name_is_mlp(name: str) -> bool:
    if _name_is_container(name):
        return False
    lowered = name.lower().replace("_", "")
    if "feedforward" in lowered:
        return True
    parts = {p for p in snake_parts(name)} | {p.rstrip("0123456789") for p in snake_parts(name)}
    if "c" in parts and "fc" in parts:  # GPT-2's `c_fc`
        return True
    return bool(parts & _MLP_NAME_PARTS) or any(p.startswith(("mlp", "ffn")) for p in parts)  # minGPT's `mlpf`


def _class_word_is_mlp(ctor: str) -> bool:
    last = ctor.rsplit(".", 1)[-1].lower()
    return any(word in last for word in _MLP_CLASS_WORDS)


def _class_word_is_attention(ctor: str) -> bool:
    last = ctor.rsplit(".", 1)[-1].lower()
    # an attention pooler (`AttentionalPooler`, CLIP's `AttentionPool2d`) maps the sequence onto
    # learned queries: a new stream, not a token mixer of a block
    return ("attention" in last or "attn" in last) and not any(
        w in last for w in ("block", "layer", "residual", "pool"))


def sublayer_kind(module_class, sub) -> str:
    """The kind of a sub-module (`SubModule`): attention, mlp, block or other."""
    from tlint.views.model import TORCH_ATTENTION

    view = module_class.view
    ctor = sub.ctor or ""
    if ctor == "torch.nn.MultiheadAttention":
        return "attention"
    if ctor in TORCH_ATTENTION:
        return "block"
    if "residual" in ctor.rsplit(".", 1)[-1].lower():
        return "block"
    local = view.classes.get(ctor)
    if local is not None and local is not module_class:
        if local.passthrough_params():
            return "block"
        if view.does_attention(local):
            return "block" if local.stream().is_transformer_block() else "attention"
        if _name_is_attention(sub.name) or _class_word_is_attention(ctor):
            return "attention"  # attention computed by a function (`eager_attention_forward`)
        if _class_word_is_mlp(ctor) or _name_is_mlp(sub.name) or view.is_mlp_class(local):
            return "mlp"
        return "other"
    if ctor == "torch.nn.Sequential" and sub.call is not None and any(
            view.index.qualify(arg.value.func) in _LINEAR for arg in sub.call.args if type(arg.value) is cst.Call):
        return "mlp"
    if ctor in _LINEAR:
        return "mlp" if _name_is_mlp(sub.name) else "other"
    if ctor.startswith("torch.nn.") and ctor not in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        return "other"
    if _name_is_attention(sub.name) or (ctor and _class_word_is_attention(ctor)):
        return "attention"
    if _name_is_mlp(sub.name) or (ctor and _class_word_is_mlp(ctor)):
        return "mlp"
    return "other"


# --- the evaluation -----------------------------------------------------------------------


_QUERY_PARAMS = ("query", "queries", "q", "hidden_states", "hidden_state", "x", "tgt", "src", "inputs", "input",
                 "hidden", "h")


def _input_arg(local, call: cst.Call) -> cst.Arg | None:
    """The argument a sub-layer call transforms: its query, for attention. For a class of
    the file, the parameter of its `forward` named like one (`AriaCrossAttention(kv,
    hidden_states)` takes the query second); otherwise `query=` or the first argument."""
    fn = local.forward if local is not None else None
    if fn is not None:
        positional = [n for n in _positional(fn) if n != "self"]
        for wanted in _QUERY_PARAMS:
            if wanted in positional:
                return get_arg(call, wanted, positional.index(wanted))
    return get_arg(call, "query", 0) or get_arg(call, "hidden_states", 0) or get_arg(call, "x", 0)


def _params(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    return [param.name.value for param in (*p.posonly_params, *p.params, *p.kwonly_params)]


def _positional(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    return [param.name.value for param in (*p.posonly_params, *p.params)]


class _Evaluator:
    """Abstract evaluation of one method body (see the module docstring)."""

    def __init__(self, module_class, stream: BlockStream | None, depth: int = 0, active=()) -> None:
        self.module_class = module_class
        self.view = module_class.view
        self.stream = stream  # None: summary mode (no uses, no writes recorded)
        self.depth = depth
        self.active = set(active)  # helper methods being evaluated (recursion guard)
        self.env: dict[str, Val] = {}
        self.returns: list[Val] = []
        self.fresh = 0
        self.uses: dict[int, SublayerUse] = {}
        self.has_norm = False

    def new_version(self) -> frozenset:
        self.fresh += 1
        return frozenset({("v", self.fresh)})

    # expressions ---------------------------------------------------------------------------

    def eval(self, expr) -> Val:
        if expr is None:
            return _EMPTY
        if type(expr) is cst.Name:
            return self.env.get(expr.value, _EMPTY)
        if type(expr) is cst.Attribute:
            if expr.attr.value in _SHAPE_ATTRS:
                return _EMPTY
            return self.eval(expr.value)
        if type(expr) is cst.Subscript:
            return self.eval(expr.value)
        if type(expr) is cst.BinaryOperation:
            left, right = self.eval(expr.left), self.eval(expr.right)
            if type(expr.operator) is cst.MatrixMultiply:
                return Val(frozenset(), left.branches | right.branches)
            return left | right
        if type(expr) is cst.UnaryOperation:
            return self.eval(expr.expression)
        if type(expr) is cst.IfExp:
            return self.eval(expr.body) | self.eval(expr.orelse)
        if type(expr) in (cst.Tuple, cst.List):
            out = _EMPTY
            for element in expr.elements:
                out = out | self.eval(element.value)
            return out
        if type(expr) is cst.Call:
            return self.eval_call(expr)
        if type(expr) in (cst.BooleanOperation,):
            return self.eval(expr.left) | self.eval(expr.right)
        return _EMPTY

    def _args_union(self, call: cst.Call) -> Val:
        out = _EMPTY
        for arg in call.args:
            out = out | self.eval(arg.value)
        return out

    def eval_call(self, call: cst.Call) -> Val:
        mc = self.module_class
        func = call.func
        name = dotted_name(func)
        if name in _SHAPE_FUNCTIONS:
            return _EMPTY
        if type(func) is cst.Attribute and func.attr.value in _SHAPE_METHODS:
            return _EMPTY
        # a helper method of the class: evaluated in place
        if (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
                and func.attr.value in mc.methods and func.attr.value != "forward"
                and func.attr.value not in mc.attributes):
            if mc.is_norm_call(call):  # `self.maybe_layer_norm(self.ln, x, before=True)` (fairseq)
                self.has_norm = True
            return self.eval_helper(mc.methods[func.attr.value], call)
        if mc.is_norm_call(call):
            self.has_norm = True
            first = call.args[0].value if call.args else None
            if first is None and type(func) is cst.Attribute and func.attr.value in ("layer_norm", "rms_norm"):
                return self.eval(func.value)
            rest = _EMPTY
            for arg in call.args[1:]:
                rest = rest | self.eval(arg.value)
            return self.eval(first) | Val(frozenset(), rest.branches)
        if mc.is_sublayer_call(call):
            sub = mc.attribute_of(call.func)
            kind = self.view.sublayer_kind(mc, sub)
            values = {id(arg): self.eval(arg.value) for arg in call.args}
            args = _EMPTY
            for value in values.values():
                args = args | value
            branches = args.branches
            query_arg = _input_arg(self.view.classes.get(sub.ctor or ""), call)
            source = values.get(id(query_arg), args) if query_arg is not None else args
            if kind in ("attention", "mlp"):
                branches = branches | {id(call)}
                self.uses[id(call)] = SublayerUse(call, sub.name, kind, source)
            elif self.stream is not None:
                self.uses[id(call)] = SublayerUse(call, sub.name, kind, source)
            skip: frozenset[Any] = frozenset()
            local = self.view.classes.get(sub.ctor or "")
            if kind == "block" and local is not None and local is not mc:
                skip = self._passthrough(local, call, values)
            elif kind not in ("attention", "mlp") and self.stream is not None:
                # a projection, shortcut, layer scale, a block of its own, an unknown module:
                # the stream it is applied to stays the stream (`x = self.proj(x)` when the
                # width changes, `self.shortcut(x) + ...`); only attention/MLP break it.
                # (Summaries, `passthrough_params`, are strict: any learned layer breaks it.)
                skip = args.skip
            return Val(skip, branches)
        # anything else (a function, a tensor method, an unknown callable): values flow through
        out = self._args_union(call)
        if type(func) is cst.Attribute:
            out = out | self.eval(func.value)
        return out

    def _passthrough(self, local, call: cst.Call, values: dict[int, Val]) -> frozenset:
        keep = local.passthrough_params()
        fn = local.forward
        if fn is None or not keep:
            return frozenset()
        positional = [n for n in _positional(fn) if n != "self"]
        out: frozenset[Any] = frozenset()
        for position, param in enumerate(positional):
            if param in keep:
                arg = get_arg(call, param, position)
                if arg is not None:
                    out |= values.get(id(arg), _EMPTY).skip
        for param in keep - set(positional):
            arg = get_arg(call, param)
            if arg is not None:
                out |= values.get(id(arg), _EMPTY).skip
        return out

    def eval_helper(self, fn: cst.FunctionDef, call: cst.Call) -> Val:
        if self.depth >= _MAX_DEPTH or fn.name.value in self.active:
            return self._args_union(call)
        inner = _Evaluator(self.module_class, self.stream, self.depth + 1, self.active | {fn.name.value})
        positional = [n for n in _positional(fn)][1:]  # after self
        for position, param in enumerate(positional):
            arg = get_arg(call, param, position)
            if arg is not None:
                inner.env[param] = self.eval(arg.value)
        for param in _params(fn):
            if param not in inner.env:
                arg = get_arg(call, param)
                if arg is not None:
                    inner.env[param] = self.eval(arg.value)
        inner.run(fn.body)
        self.uses.update(inner.uses)
        self.has_norm = self.has_norm or inner.has_norm
        out = _EMPTY
        for value in inner.returns:
            out = out | value
        return out

    # statements ----------------------------------------------------------------------------

    def run(self, body) -> None:
        self._flat = list(_statements(body))
        self._number = {id(stmt): number for number, (stmt, _) in enumerate(self._flat)}
        self._reads = [_names_read(stmt) for stmt, _ in self._flat]
        self._writes = [_names_written(stmt) for stmt, _ in self._flat]
        self._exec(body)

    def _exec(self, body) -> None:
        """Run a body; the two sides of an `if` start from the same state and are merged
        (a name keeps the stream if either side keeps it)."""
        if type(body) is cst.If:
            before = dict(self.env)
            self._exec(body.body)
            after_body = self.env
            self.env = dict(before)
            if body.orelse is not None:
                self._exec(body.orelse)
            for name in set(after_body) | set(self.env):
                self.env[name] = after_body.get(name, _EMPTY) | self.env.get(name, _EMPTY)
        elif type(body) is cst.Else:
            self._exec(body.body)
        elif type(body) in (cst.IndentedBlock, cst.SimpleStatementSuite):
            for stmt in body.body:
                self._exec(stmt)
        elif type(body) is cst.SimpleStatementLine:
            for small in body.body:
                self.step(small, self._number.get(id(small), 0))
        elif type(body) in (cst.For, cst.With):
            self.step(body, self._number.get(id(body), 0))
            self._exec(body.body)
            if type(body) is cst.For and body.orelse is not None:
                self._exec(body.orelse)
        elif type(body) is cst.While:
            self._exec(body.body)
        elif type(body) is cst.Try:
            self._exec(body.body)
            for handler in body.handlers:
                self._exec(handler.body)
            if body.orelse is not None:
                self._exec(body.orelse)
            if body.finalbody is not None:
                self._exec(body.finalbody.body)

    def _read_later(self, name: str, number: int) -> bool:
        """Is `name` read by a statement after statement `number` that can run after it
        (not on the other side of an `if` the statement sits in)?"""
        own = self._flat[number][1]
        path = dict(own)
        for later in range(number + 1, len(self._flat)):
            later_path = self._flat[later][1]
            if any(key in path and path[key] != side for key, side in later_path):
                continue
            if name in self._reads[later]:
                return True
            if name in self._writes[later] and own[:len(later_path)] == later_path:
                return False  # rebound first (`residual = x` again) on every path from here
        return False

    def step(self, stmt, number: int) -> None:
        if type(stmt) is cst.Assign:
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self.assign(stmt, target.target, stmt.value, value, number)
        elif type(stmt) is cst.AnnAssign and stmt.value is not None:
            self.assign(stmt, stmt.target, stmt.value, self.eval(stmt.value), number)
        elif type(stmt) is cst.AugAssign and type(stmt.target) is cst.Name:
            name = stmt.target.value
            value = self.env.get(name, _EMPTY) | self.eval(stmt.value)
            if value.branches and self.stream is not None and self.depth == 0:
                self.stream.writes.append(StreamWrite(stmt, name, self._uses_of(value, self.env.get(name, _EMPTY)),
                                                  bool(value.skip)))
            self.env[name] = value
        elif type(stmt) is cst.Return:
            value = self.eval(stmt.value.elements[0].value if type(stmt.value) is cst.Tuple
                              and stmt.value.elements else stmt.value)
            self.returns.append(value)
            if value.branches and self.stream is not None and self.depth == 0:
                earlier = _EMPTY
                for held in self.env.values():
                    if held.skip:
                        earlier = earlier | held
                overwrite = not value.skip and bool(earlier.skip) and self._consumes(value, earlier)
                self.stream.writes.append(StreamWrite(stmt, None, self._uses_of(value, earlier), bool(value.skip),
                                                      overwrite))
        elif type(stmt) is cst.For:
            value = self.eval(stmt.iter)
            for name in _names_of(stmt.target):
                self.env[name] = Val(frozenset(), value.branches)
        elif type(stmt) is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    for name in _names_of(item.asname.name):
                        self.env[name] = self.eval(item.item)
        elif type(stmt) is cst.Expr:
            self.eval(stmt.value)

    def _uses_of(self, value: Val, earlier: Val = _EMPTY) -> list[SublayerUse]:
        """The attention/MLP calls `value` went through that `earlier` had not (all of them
        when that leaves none), in source order."""
        branches = (value.branches - earlier.branches) or value.branches
        return [use for key, use in self.uses.items() if key in branches]

    def assign(self, stmt, target, value_expr, value: Val, number: int) -> None:
        if type(target) in (cst.Tuple, cst.List):
            elements = [el.value for el in target.elements]
            if type(value_expr) in (cst.Tuple, cst.List) and len(value_expr.elements) == len(elements):
                for element, sub_expr in zip(elements, value_expr.elements):
                    self.assign(stmt, element, sub_expr.value, self.eval(sub_expr.value), number)
                return
            for element in elements:
                self.assign(stmt, element, None, value, number)
            return
        if type(target) is cst.StarredElement:
            target = target.value
        if type(target) is not cst.Name:
            return
        name = target.value
        before = self.env.get(name, _EMPTY)
        if value.branches and self.stream is not None and self.depth == 0:
            # the sub-layers applied on the way from the stream's earlier value to this one
            write = StreamWrite(stmt, name, self._uses_of(value, before), bool(value.skip))
            if (not value.skip and before.skip and self._consumes(value, before)
                    and not self._kept_elsewhere(name, before, number, stmt)
                    and not self._residual_option(stmt, write.uses)):
                write.overwrites = True
                value = Val(self.new_version(), frozenset())  # report once; the new value is the stream now
            self.stream.writes.append(write)
        self.env[name] = value

    def _residual_option(self, stmt, uses: list[SublayerUse]) -> bool:
        """`if self.skip_first_layer_pe: q = self.attn(q) else: q = q + self.attn(q)` (SAM):
        one side of an `if` on an option named for the choice (`skip`, `residual`,
        `shortcut`, `first`, `identity`) applies the same sub-layer and adds a residual, this side
        applies it without one and adds nothing after it — a configured choice. A side that
        does add something after the overwrite meant a residual and got it wrong."""
        index = self.view.index
        names = {use.name for use in uses}
        child = stmt
        for anc in index.ancestors(stmt):
            if type(anc) in (cst.FunctionDef, cst.ClassDef):
                return False
            if type(anc) is cst.If and (child is anc.body or child is anc.orelse):
                if anc.orelse is None or not any(
                        type(n) is cst.Name and set(snake_parts(n.value)) & _OPTION_PARTS for n in walk(anc.test)):
                    return False  # `if attention_dropout == 0:` chooses the dropout, not the residual
                this, other = (anc.body, anc.orelse) if child is anc.body else (anc.orelse, anc.body)
                after = False
                for node, _ in _statements(this):
                    if node is stmt:
                        after = True
                    elif after and _adds(node):
                        return False
                other_nodes = [node for node, _ in _statements(other)]
                calls_same = any(type(n) is cst.Call and type(n.func) is cst.Attribute
                                 and dotted_name(n.func.value) == "self" and n.func.attr.value in names
                                 for node in other_nodes for n in walk(node))
                return calls_same and any(_adds(node) for node in other_nodes)
            child = anc
        return False

    def _consumes(self, value: Val, stream: Val) -> bool:
        """Was one of the new attention/MLP calls of `value` applied to `stream` (directly,
        or to the output of a call that was)? An attention whose query is something else
        (a learned probe, a perceiver's latents) starts a new stream instead."""
        seen = set()
        todo = list(value.branches - stream.branches)
        while todo:
            key = todo.pop()
            if key in seen or key not in self.uses:
                continue
            seen.add(key)
            source = self.uses[key].source
            if source.skip & stream.skip:
                return True
            todo.extend(source.branches)
        return False

    def _kept_elsewhere(self, name: str, before: Val, number: int, stmt) -> bool:
        """Another name (not written by this statement) holds the stream and is read later
        (`residual = x`)."""
        written = set()
        if type(stmt) is cst.Assign:
            for target in stmt.targets:
                written.update(_names_of(target.target))
        written.add(name)
        return any(other not in written and value.skip & before.skip and self._read_later(other, number)
                   for other, value in self.env.items())


def _statements(body, path=()):
    """(statement, if-path) for the simple statements (and the headers of `for`/`with`)
    of a body, in source order, entering compound statements but not nested functions or
    classes. The path lists the `(id(if), side)` choices the statement sits under."""
    if type(body) is cst.If:
        yield from _statements(body.body, path + ((id(body), True),))
        if body.orelse is not None:
            yield from _statements(body.orelse, path + ((id(body), False),))
        return
    if type(body) is cst.Else:
        yield from _statements(body.body, path)
        return
    if type(body) in (cst.IndentedBlock, cst.SimpleStatementSuite):
        for stmt in body.body:
            yield from _statements(stmt, path)
        return
    if type(body) is cst.SimpleStatementLine:
        for small in body.body:
            yield small, path
        return
    if type(body) in (cst.For, cst.With):
        yield body, path
        yield from _statements(body.body, path)
        if type(body) is cst.For and body.orelse is not None:
            yield from _statements(body.orelse, path)
        return
    if type(body) is cst.While:
        yield from _statements(body.body, path)
        return
    if type(body) is cst.Try:
        yield from _statements(body.body, path)
        for handler in body.handlers:
            yield from _statements(handler.body, path)
        if body.orelse is not None:
            yield from _statements(body.orelse, path)
        if body.finalbody is not None:
            yield from _statements(body.finalbody.body, path)


def _names_of(target) -> list[str]:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        out = []
        for element in target.elements:
            out += _names_of(element.value)
        return out
    if type(target) is cst.StarredElement:
        return _names_of(target.value)
    return []


def _adds(stmt) -> bool:
    """Does the statement write a sum (`x = a + b`, `x += h`, `torch.add(...)`)?"""
    if type(stmt) is cst.AugAssign:
        return type(stmt.operator) is cst.AddAssign
    if type(stmt) not in (cst.Assign, cst.AnnAssign) or stmt.value is None:
        return False
    for node in walk(stmt.value):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
            return True
        if type(node) is cst.Call and (dotted_name(node.func) or "").endswith("add"):
            return True
    return False


def _names_written(stmt) -> set[str]:
    """Names a statement binds anew (`+=` and in-place updates are not rebinding)."""
    if type(stmt) is cst.Assign:
        return {name for target in stmt.targets for name in _names_of(target.target)}
    if type(stmt) is cst.AnnAssign and stmt.value is not None:
        return set(_names_of(stmt.target))
    if type(stmt) is cst.For:
        return set(_names_of(stmt.target))
    return set()


def _names_read(stmt) -> set[str]:
    from tlint.views.attention import read_names

    if type(stmt) in (cst.For,):
        return set(read_names(stmt.iter))
    if type(stmt) is cst.With:
        return {n for item in stmt.items for n in read_names(item.item)}
    if type(stmt) is cst.Assign:
        return set(read_names(stmt.value))
    if type(stmt) is cst.AnnAssign:
        return set(read_names(stmt.value)) if stmt.value is not None else set()
    return set(read_names(stmt))


def analyse_block(module_class) -> BlockStream:
    stream = BlockStream(module_class)
    fn = module_class.forward
    if fn is None:
        return stream
    evaluator = _Evaluator(module_class, stream)
    # every positional input may be a stream (`forward(self, x, x_cls)` in CaiT updates
    # the second one); what is never overwritten by a sub-layer does not matter
    for name in _positional(fn):
        if name != "self":
            evaluator.env[name] = Val(evaluator.new_version())
    evaluator.run(fn.body)
    stream.uses = list(evaluator.uses.values())
    stream.has_norm = evaluator.has_norm
    return stream


def passthrough_params(module_class) -> frozenset:
    """The parameters of `forward` whose value reaches its return through an identity path."""
    fn = module_class.forward
    if fn is None:
        return frozenset()
    evaluator = _Evaluator(module_class, None)
    tags = {}
    for name in _params(fn):
        if name != "self":
            tags[("p", name)] = name
            evaluator.env[name] = Val(frozenset({("p", name)}))
    evaluator.run(fn.body)
    out = set()
    for value in evaluator.returns:
        out |= {tags[tag] for tag in value.skip if tag in tags}
    return frozenset(out)
