"""TL205 positional-encoding-unused: a positional table built in `__init__` and never
used, or a token-embedding + attention model with no positional information at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.model import TORCH_ATTENTION
from tlint.views.vocabulary import POSITIONAL_PARTS, is_positional_name

if TYPE_CHECKING:
    from tlint.context import FileContext

_POSITION_WORDS = POSITIONAL_PARTS | {"rotary", "alibi", "relative", "rel", "sinusoidal", "sincos", "rotate", "freqs",
                                      "cis", "xpos", "bucket", "buckets"}
_NOT_TABLES = frozenset({"torch.nn.Dropout", "torch.nn.Identity", "torch.nn.LayerNorm", "torch.nn.RMSNorm",
                         "torch.nn.GELU", "torch.nn.ReLU", "torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d"})
_INIT_METHODS = frozenset({"__init__", "_init_weights", "init_weights", "reset_parameters", "_reset_parameters",
                           "initialize_weights", "_initialize_weights", "extra_repr", "__repr__"})


def positional_tables(module_class) -> dict[str, cst.Call]:
    """Positional attributes of a module class: name -> the constructor/registration call."""
    out: dict[str, cst.Call] = {}
    for name, sub in module_class.attributes.items():
        # an unresolved callee (a local helper such as `default(...)`) may return a flag
        if not is_positional_name(name) or sub.call is None or sub.ctor is None or sub.ctor in _NOT_TABLES:
            continue
        if sub.ctor in ("int", "float", "bool", "str", "getattr"):
            continue
        out[name] = sub.call
    # members of a container: `self.transformer = nn.ModuleDict(dict(wpe=nn.Embedding(...)))`
    for top in module_class.attributes.values():
        for sub in top.nested()[1:]:
            if (is_positional_name(sub.name) and sub.call is not None and sub.ctor is not None
                    and sub.ctor not in _NOT_TABLES and not sub.children):
                out.setdefault(sub.path, sub.call)
    for name, call in module_class.buffers.items():
        if is_positional_name(name):
            out.setdefault(name, call)
    return out


def _handed_over(module_class) -> set[str]:
    """Attributes that `__init__` passes to another constructor (`Block(rope=self.rope)`)."""
    init = module_class.methods.get("__init__")
    out: set[str] = set()
    if init is None:
        return out
    index = module_class.view.index
    # a helper defined inside `__init__` (`def freeze_module_params(m): ...`) sets the
    # module up; it is not another module taking it over
    local = {node.name.value for node in walk(init.body) if type(node) is cst.FunctionDef}
    for call in index.statement_calls.get(init, ()):
        if type(call.func) is cst.Name and call.func.value in local:
            continue
        for arg in call.args:
            for node in walk(arg.value):
                if type(node) is cst.Attribute and dotted_name(node.value) == "self":
                    out.add(node.attr.value)
    return out


def _self_handed_to_a_call(module_class) -> bool:
    """A method (not weight initialisation) passes the module itself to a function, as
    Hugging Face does with `eager_attention_forward(self, query, key, ...)`."""
    for method, fn in module_class.methods.items():
        if method in _INIT_METHODS:
            continue
        for call in module_class.calls_of(fn):
            if any(type(arg.value) is cst.Name and arg.value.value == "self" for arg in call.args):
                return True
    return False


def _read_through_parameters(index) -> set[str]:
    """Attribute names that module-level functions (not weight initialisation) read from
    one of their parameters: `module.pos_bias_u` in `def attention(module, query, ...)`."""
    out: set[str] = set()
    for fn in index.functions:
        if type(index.parent(fn)) is not cst.Module or fn.name.value in _INIT_METHODS:
            continue
        params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
        for node in walk(fn.body):
            if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value in params:
                out.add(node.attr.value)
    return out


_INDEX_CHAIN = frozenset({"expand", "unsqueeze", "view", "reshape", "long", "int", "to", "clone", "repeat"})


def _index_buffer(call: cst.Call) -> bool:
    """A buffer of position *indices* (`register_buffer("position_ids", torch.arange(n))`,
    `nn.Buffer(torch.arange(n).expand((1, -1)))`): kept for serialization and slicing, it
    is not a positional encoding table; the table it indexes is checked on its own."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter"):
        value = call.args[1].value if len(call.args) > 1 else None
    else:
        value = call.args[0].value if call.args else None
    while value is not None:
        if type(value) is cst.Subscript:
            value = value.value
        elif (type(value) is cst.Call and type(value.func) is cst.Attribute
              and value.func.attr.value in _INDEX_CHAIN):
            value = value.func.value
        else:
            break
    return type(value) is cst.Call and (dotted_name(value.func) or "").split(".")[-1] == "arange"


_FACTORIES = frozenset({"zeros", "ones", "randn", "rand", "empty", "Tensor", "FloatTensor"})
_ORDER_AWARE = frozenset({"torch.nn.GRU", "torch.nn.LSTM", "torch.nn.RNN", "torch.nn.GRUCell", "torch.nn.LSTMCell",
                          "torch.nn.RNNCell", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d",
                          "torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d"})
_INTEGER_DTYPES = frozenset({"long", "int", "int64", "int32", "int16", "int8", "uint8", "bool"})


def _integer_tensor(call: cst.Call) -> bool:
    """Positions counted, not encoded: a tensor of an integer dtype (`torch.zeros(batch,
    dtype=torch.long)`, a KV cache's per-sample position counter) holds indices; an
    encoding is a float table added to the embeddings."""
    values: list[cst.BaseExpression] = [call]
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter"):
        values = [call.args[1].value] if len(call.args) > 1 else []
    elif (dotted_name(func) or "").split(".")[-1] in ("Parameter", "Buffer") and call.args:
        values = [call.args[0].value]
    for value in values:
        if type(value) is not cst.Call:
            continue
        if type(value.func) is cst.Attribute and value.func.attr.value in _INTEGER_DTYPES and not value.args:
            return True  # `torch.zeros(n).long()`
        dtype = get_arg(value, "dtype")
        if dtype is not None and (dotted_name(dtype.value) or "").split(".")[-1] in _INTEGER_DTYPES:
            return True
    return False


def _one_vector(call: cst.Call) -> bool:
    """A single learned vector (`nn.Parameter(torch.zeros(1, 1, d))`, `torch.randn(1, d)`):
    it is the same for every position, so it carries no order whether used or not (a
    "no memory" embedding, the position of a class token)."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter"):
        value = call.args[1].value if len(call.args) > 1 else None
    elif (dotted_name(func) or "").split(".")[-1] in ("Parameter", "Buffer"):
        value = call.args[0].value if call.args else None
    else:
        value = call
    if type(value) is not cst.Call or (dotted_name(value.func) or "").split(".")[-1] not in _FACTORIES:
        return False
    dims = [arg.value for arg in value.args if arg.keyword is None and not arg.star]
    if len(dims) == 1 and (type(dims[0]) is cst.Tuple or type(dims[0]) is cst.List):
        dims = [element.value for element in dims[0].elements]
    return len(dims) >= 2 and all(type(d) is cst.Integer and d.value == "1" for d in dims[:-1])


def _single_name_target(statement) -> str | None:
    """`x = ...` as a whole statement line: the name `x`."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if type(assign) is cst.Assign and len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name:
        return assign.targets[0].target.value
    return None


def _applies(value, name: str) -> bool:
    """`value` calls or indexes `self.<name>`."""
    return any(type(node) is cst.Attribute and node.attr.value == name and type(node.value) is cst.Name
               and node.value.value == "self" for node in walk(value))


def _applies_member(module_class, value, name: str) -> bool:
    """`value` calls or indexes the container member `self.<a>.<b>` (`self.a["b"]`)."""
    for node in walk(value):
        if type(node) is cst.Call:
            sub = module_class.attribute_of(node.func)
            if sub is not None and sub.path == name:
                return True
    return False


def _never_read_after(index, fn, statement, target: str) -> bool:
    """Nothing in `fn` after `statement` reads `target`, and no loop around the statement
    reads it (the next iteration could)."""
    start = index.position[id(statement)]
    inside = {id(n) for n in walk(statement)}
    loops = index.enclosing_loops(statement)
    for node in walk(fn.body):
        if type(node) is cst.Name and node.value == target and id(node) not in inside:
            if _updated_in_place(index, node):
                continue  # `pos.mul_(scale)` changes the value, it does not hand it on
            if index.position[id(node)] > start or any(index.is_inside(node, loop) for loop in loops):
                return False
    return True


def _updated_in_place(index, name: cst.Name) -> bool:
    """`name.mul_(...)` as a statement of its own: an in-place update, not a read."""
    attribute = index.parent(name)
    if not isinstance(attribute, cst.Attribute) or attribute.value is not name:
        return False
    method = attribute.attr.value
    call = index.parent(attribute)
    return (isinstance(call, cst.Call) and call.func is attribute and method.endswith("_")
            and not method.startswith("_") and type(index.parent(call)) is cst.Expr)


def _read_in(module_class, name: str) -> bool:
    """`self.<name>` (or the container member `self.<a>.<b>`, or its whole container) is read
    in a method other than weight initialisation."""
    if "." not in name:
        return bool(set(module_class.reads.get(name, ())) - _INIT_METHODS)
    reads = module_class.member_reads
    parts = name.split(".")
    paths = [name] + [".".join(parts[:i]) + ".*" for i in range(1, len(parts))]
    return any(set(reads.get(path, ())) - _INIT_METHODS for path in paths)


_SIZE_ATTRS = frozenset({"max_positions", "num_embeddings", "embedding_dim", "max_len", "max_seq_len", "shape",
                         "dtype", "device", "size"})
_PRESENCE = frozenset({"exists", "is_none", "is_not_none", "isinstance", "hasattr"})


def _only_inspected(module_class, name: str) -> bool:
    """Every read of `self.<name>` outside weight initialisation only inspects it: a test
    against None (`if self.embed_positions is not None:`, `exists(self.pos_emb)`), or its
    size (`self.embed_positions.max_positions`, `.num_embeddings`): the table is never
    applied (the addition that used it is gone)."""
    index = module_class.view.index
    found = False
    for method in set(module_class.reads.get(name, ())) - _INIT_METHODS:
        fn = module_class.methods.get(method)
        if fn is None:
            return False
        for node in walk(fn.body):
            if not (type(node) is cst.Attribute and node.attr.value == name and type(node.value) is cst.Name
                    and node.value.value == "self"):
                continue
            found = True
            parent = index.parent(node)
            if type(parent) is cst.Comparison and parent.left is node and len(parent.comparisons) == 1 \
                    and type(parent.comparisons[0].operator) in (cst.Is, cst.IsNot):
                continue
            if type(parent) is cst.Attribute and parent.attr.value in _SIZE_ATTRS:
                continue
            if type(parent) is cst.Arg and type(grand := index.parent(parent)) is cst.Call \
                    and dotted_name(grand.func) in _PRESENCE:
                continue
            return False
    return found


def _read_through_owners(index) -> set[str]:
    """Attribute names read through another attribute in a method other than weight
    initialisation: `self.embeddings.position_embeddings(...)` in the parent model reads the
    child's table."""
    out: set[str] = set()
    for fn in index.functions:
        if fn.name.value in _INIT_METHODS:
            continue
        for node in walk(fn.body):
            if type(node) is cst.Attribute and type(node.value) is cst.Attribute:
                root = node.value.value
                while type(root) is cst.Attribute:  # `self.inner.t.wpe`: a member of a member
                    root = root.value
                if type(root) is cst.Name and root.value == "self":
                    out.add(node.attr.value)
    return out


def _behaviour_inherited(module_class, ctx) -> bool:
    """The class defines no `forward` and derives from a class of another module (not torch):
    its forward, which reads the table, lives in that file (a modular/template subclass that
    only swaps `__init__`)."""
    if module_class.forward is not None:
        return False
    for base in module_class.node.bases:
        name = dotted_name(base.value)
        qualified = ctx.index.qualify(base.value) or name or ""
        if name in ctx.models.classes or qualified.startswith("torch."):
            continue
        return True
    return False


def _self_handed_to_an_outside_function(module_class) -> bool:
    """A method passes the module itself to a positional or attention function this file does
    not define (`_apply_relative_position_encoding(self, q, k)` imported from another
    modeling file): it may read any attribute. Other helpers that take the module
    (`is_fsdp_managed_module(self)`) do not count."""
    index = module_class.view.index
    local = {fn.name.value for fn in index.functions if type(index.parent(fn)) is cst.Module}
    for method, fn in module_class.methods.items():
        if method in _INIT_METHODS:
            continue
        for call in module_class.calls_of(fn):
            if any(type(arg.value) is cst.Name and arg.value.value == "self" for arg in call.args):
                name = dotted_name(call.func)
                if (name is not None and "." not in name and name not in local
                        and set(snake_parts(name)) & (_POSITION_WORDS | {"attention", "attn"})):
                    return True
    return False


def _calls_an_inherited_method(module_class) -> bool:
    """A class with a base from another module (`opaque_base`) calls `self.<m>(...)` where
    `m` is neither defined in this file nor an attribute the class or its local bases set:
    a method inherited from that module (`self.interpolate_pos_encoding(embeddings, h, w)`
    of a ViT subclass), which may apply the table the class itself only tests against None."""
    if not module_class.opaque_base:
        return False
    defined = {fn.name.value for fn in module_class.view.index.functions}
    for method, fn in module_class.methods.items():
        if method in _INIT_METHODS:
            continue
        for call in module_class.calls_of(fn):
            func = call.func
            if (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
                    and func.attr.value not in defined and func.attr.value not in module_class.attributes
                    and func.attr.value not in module_class.inherited):
                return True
    return False


class PositionalEncodingUnused(Rule):
    code = "TL205"
    name = "positional-encoding-unused"
    kind = "defect"
    # pre-filter: module classes: a torch.nn/HF/Lightning base (through an import) or `forward`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
    summary = "A positional table is never used, or a token model has no positional information."
    probes = ("position-blind", "grad-flow")

    def check(self, ctx: FileContext) -> None:
        view = ctx.models
        through_parameters: set[str] | None = None
        through_owners: set[str] | None = None
        for module_class in view.classes.values():
            tables = positional_tables(module_class)
            # another positional table or module of the class that is applied: the model
            # sees positions through it, so the message says this one is dead weight instead
            applied = sorted(name for name, call in tables.items()
                             if _read_in(module_class, name) and not _index_buffer(call))
            for name, call in tables.items():
                inspected = "." not in name and _read_in(module_class, name) and _only_inspected(module_class, name)
                if (_read_in(module_class, name) and not inspected) or name.split(".")[0] in _handed_over(module_class):
                    continue
                if (_index_buffer(call) or _one_vector(call) or _integer_tensor(call)
                        or _behaviour_inherited(module_class, ctx)):
                    continue
                if through_owners is None:
                    through_owners = _read_through_owners(ctx.index)
                # (a member `a.b`: read as `<owner>.a.b` by another class)
                if name.rsplit(".", 1)[-1] in through_owners or _self_handed_to_an_outside_function(module_class):
                    continue
                if _self_handed_to_a_call(module_class):
                    if through_parameters is None:
                        through_parameters = _read_through_parameters(ctx.index)
                    if name in through_parameters:
                        continue
                if inspected and _calls_an_inherited_method(module_class):
                    continue
                if inspected:
                    ctx.report(call, f"positional table `self.{name}` is built in `__init__` and only tested "
                                     "against None or asked its size, never applied: the model sees the tokens "
                                     "as an unordered set (attention is permutation-invariant); add it to the "
                                     "token embeddings in `forward`")
                    continue
                if applied:
                    ctx.report(call, f"positional table `self.{name}` is built in `__init__` but never used, while "
                                     f"`self.{applied[0]}` gives the positions: either it is dead weight (remove it) "
                                     "or it is the encoding meant to be added to the token embeddings in `forward`")
                    continue
                ctx.report(call, f"positional table `self.{name}` is built in `__init__` but never used: the model "
                                 "sees the tokens as an unordered set (attention is permutation-invariant); add "
                                 "it to the token embeddings in `forward`")
            for name in applied:
                self._check_overwritten(ctx, module_class, name)
        self._check_position_blind(ctx)

    @staticmethod
    def _check_overwritten(ctx, module_class, name: str) -> None:
        """`x = self.pos(e)` then `x = dropout(e)`: the statement after the one that applies
        the table and that mentions `x` again binds `x` anew without reading it; or nothing
        after it in the function reads `x` at all (`pos_emb = self.wpe(pos)`, then
        `x = tok_emb` alone). A member of a container is matched by its path
        (`self.transformer.wpe`)."""
        top = name.split(".")[0]
        index = ctx.index
        for method, fn in module_class.methods.items():
            if method in _INIT_METHODS:
                continue
            for block in walk(fn.body):
                if type(block) is not cst.IndentedBlock:
                    continue
                statements = block.body
                for at, statement in enumerate(statements):
                    target = _single_name_target(statement)
                    if target is None:
                        continue
                    value = statement.body[0].value  # type: ignore[attr-defined]
                    if not (_applies(value, top) if "." not in name else _applies_member(module_class, value, name)):
                        continue
                    if _never_read_after(index, fn, statement, target):
                        ctx.report(statement, f"`{target}` receives the positional encoding `self.{name}` and is "
                                              "never read afterwards: the positions never reach the model; add "
                                              f"`{target}` to the token embeddings")
                        continue
                    if "." in name:
                        continue
                    for later in statements[at + 1:]:
                        mentions = [n for n in walk(later) if type(n) is cst.Name and n.value == target]
                        if not mentions:
                            continue
                        if _single_name_target(later) == target and not any(
                                type(n) is cst.Name and n.value == target
                                for n in walk(later.body[0].value)):  # type: ignore[attr-defined]
                            ctx.report(statement, f"`{target}` receives the positional encoding `self.{top}` and "
                                                  "is bound anew before it is read: the positions never reach the "
                                                  f"model; compute the next step from `{target}`")
                        break

    @staticmethod
    def _check_position_blind(ctx) -> None:
        view = ctx.models
        index = ctx.index
        if any(set(snake_parts(identifier)) & _POSITION_WORDS for identifier in index.identifiers):
            return
        owners = [view.class_of(site.softmax) for site in view.attention.sites]
        owners += [view.class_of(call) for call in view.attention.sdpa]
        attention_classes = {owner.name for owner in owners if owner is not None}
        for group in view.groups():
            has_attention = any(
                module_class.name in attention_classes
                or any(sub.ctor in TORCH_ATTENTION for sub in module_class.submodules())
                for module_class in group)
            # a recurrence or a convolution sees the order of what it reads (a GRU encoder, a
            # convolutional VQ autoencoder with attention blocks)
            if not has_attention or any(sub.ctor in _ORDER_AWARE for module_class in group
                                        for sub in module_class.submodules()):
                continue
            for module_class in group:
                called = {call.func.attr.value for call in index.calls
                          if type(call.func) is cst.Attribute and dotted_name(call.func.value) == "self"
                          and view.class_of(call) is module_class}
                called |= {sub.path for call in index.calls
                           if type(call.func) is cst.Attribute and type(call.func.value) is not cst.Name
                           and view.class_of(call) is module_class
                           and (sub := module_class.attribute_of(call.func)) is not None}
                for sub in module_class.submodules():
                    # a table looked up by token ids, not learned queries read through `.weight`
                    if sub.ctor == "torch.nn.Embedding" and sub.call is not None and sub.path in called:
                        ctx.report(sub.call, f"`self.{sub.path}` embeds tokens for an attention model that has no "
                                             "positional information at all (no positional embedding, rotary, "
                                             "ALiBi or relative bias): attention is permutation-invariant, so "
                                             "the model cannot tell word order")
                        return
