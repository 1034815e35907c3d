"""Project facts of models and training (see `tlint.views.facts`): the file builds a
transformer (`transformer`), sets up an LR warmup (`warmup`), positional tables and the
sequence lengths the data is built with (`positional-table`, `sequence-length`, TL206),
which parameters calls give (`call-args`), config sizes set after construction
(`size-override`), and the model structure that spans files (`norm-residual`,
`module-parts`, `block-stack`: TL201, TL202). Its public names are re-exported from
`tlint.views.facts`.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from tlint.cst import get_arg, keywords, last_name, literal_value, snake_parts, walk
from tlint.fact_data import (
    BlockStackFact,
    CallArgsFact,
    ModulePartsFact,
    NormResidualFact,
    PositionalTableFact,
    SequenceLengthFact,
    SizeOverrideFact,
    Via,
)
from tlint.views.bindings import assignment_targets
from tlint.views.facts_data import tokenizer_object

TRANSFORMER_MODULES = frozenset(
    {
        "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
        "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.MultiheadAttention",
        "torch.nn.functional.scaled_dot_product_attention",
    }
)
_TRANSFORMER_CLASS_WORDS = ("attention", "transformer", "gpt", "bert", "llama", "selfattn")


def transformer_sites(ctx):
    index = ctx.index
    if index.imports.imports_module("transformers"):
        yield index.module.body[0] if index.module.body else index.module
        return
    for call in index.calls:
        if index.qualify(call.func) in TRANSFORMER_MODULES:
            yield call
            return
    # A class named like attention/transformer counts only with attention arithmetic in
    # the file (a softmax): `TransformerNet` of neural style transfer is a CNN.
    if not any(last_name(call.func) == "softmax" for call in index.calls):
        return
    for cls in index.classes:
        lowered = cls.name.value.lower()
        if "graph" not in lowered and any(word in lowered for word in _TRANSFORMER_CLASS_WORDS):
            yield cls.name
            return


def _warmup_sites(ctx):
    from tlint.views.training import warmup_sites

    return warmup_sites(ctx)


# --- positional tables and data sequence lengths (TL206) --------------------------------


# snake_case name parts of a positional table (`wpe`, `pos_emb`, `embed_positions`, `pe`)
POSITIONAL_NAME_PARTS = frozenset({"pos", "position", "positional", "positions", "pe", "wpe"})
# keyword/field names that size a positional table, on a model config (`GPT2Config`, `GPTConfig`)
CONFIG_TABLE_KEYS = ("n_positions", "n_ctx", "max_position_embeddings", "block_size", "max_seq_len")
# ... and on a positional module or model constructor (`PositionalEncoding(d, max_len=...)`)
CALL_TABLE_KEYS = ("max_len", "max_seq_len", "n_positions", "max_position_embeddings", "num_positions",
                   "max_positions")
# keywords that set the sequence length of the data, on a tokenizer or a data class/function
DATA_LENGTH_KEYS = ("max_length", "max_seq_length", "max_seq_len", "max_len", "seq_len", "seq_length", "block_size")
_DATA_WORDS = frozenset({"data", "dataset", "datasets", "loader", "collator", "collate", "sampler", "batch",
                         "batches", "batcher", "corpus", "chunks", "chunk", "texts", "examples"})
_NOT_MODEL_WORDS = _DATA_WORDS | {"tokenizer", "trainer", "train", "training", "args", "arguments", "generation",
                                  "eval", "pipeline", "optimizer", "scheduler"}
_TENSOR_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.randn", "torch.rand",
                               "torch.Tensor", "torch.FloatTensor"})
_EMBEDDINGS = frozenset({"torch.nn.Embedding"})
# `block_size`/`max_seq_len` size positions only on a language-model config: adapter
# configs (`C3AConfig(block_size=...)`) and block-sparse settings use the names too.
_AMBIGUOUS_TABLE_KEYS = frozenset({"block_size", "max_seq_len"})
_MODEL_WORDS = frozenset({"gpt", "gpt2", "lm", "transformer", "model", "decoder", "encoder", "bert", "llama"})
_MODEL_FIELDS = frozenset({"vocab_size", "n_layer", "n_layers", "num_layers", "n_head", "n_heads", "num_heads",
                           "n_embd", "d_model", "hidden_size", "dim"})
# name parts of a size that counts positions (`max_len`, `n_positions`, `block_size`, `n_ctx`)
_LENGTH_PARTS = frozenset({"len", "maxlen", "length", "positions", "position", "seq", "ctx", "context", "block"})
_PARAMETER_WRAPPERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _positional_name(name: str | None) -> bool:
    return name is not None and bool(set(snake_parts(name)) & POSITIONAL_NAME_PARTS)


def _camel(name: str | None) -> TypeGuard[str]:
    return bool(name and name[:1].isupper() and not name.isupper())


def _int_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _param_via(index, expr: cst.CSTNode) -> Via | None:
    """When `expr` is a parameter's default: which call supplies the parameter, as
    {"callee", "param", "index"} (`index` None for keyword-only); the class name for
    `__init__`. {"callee": None} when it cannot be told (a lambda, a nested method)."""
    param = index.parent(expr)
    if type(param) is not cst.Param or param.default is not expr:
        return None
    params = index.parent(param)
    fn = index.parent(params)
    if type(params) is not cst.Parameters or type(fn) is not cst.FunctionDef:
        return Via(None, param.name.value, None)
    positional = [*params.posonly_params, *params.params]
    scope = index.enclosing_scope(fn)
    if type(scope) is cst.ClassDef:
        positional = positional[1:]  # self / cls
        callee = scope.name.value if fn.name.value == "__init__" else None
    else:
        callee = fn.name.value
    position = next((i for i, p in enumerate(positional) if p is param), None)
    return Via(callee, param.name.value, position)


def resolve_size(ctx, expr: cst.BaseExpression | None, *, options: bool = False):
    """A positive int size as the program runs by default, or None: a literal, followed
    through names bound once (module constants, locals), parameter defaults and
    `self.<attr>` assigned once; with `options`, also `args.<name>`-style option
    defaults (argparse, dataclass fields; see `TrainingView.literal`). Arithmetic is not
    followed. Returns (value, literal node, origins: the names read on the way, via: the
    parameter whose default supplied it, see `_param_via`)."""
    index = ctx.index
    origins: list[str] = []
    via = None
    for _ in range(6):
        if expr is None:
            return None
        value = literal_value(expr, default=None)
        if _int_size(value):
            return value, expr, origins, via
        if type(expr) is cst.Name:
            bound = ctx.bindings.expression(expr)
            origins.append(expr.value)
            if bound is not None and via is None:
                via = _param_via(index, bound)
            expr = bound
        elif type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            origins.append(expr.attr.value)
            assigned = ctx.bindings.attribute(expr)
            expr = assigned[0].value if len(assigned) == 1 else None
        elif options and type(expr) is cst.Attribute and index.qualify(expr) is None:
            value = ctx.bindings.value(expr, default=None)
            if not _int_size(value):
                return None
            return value, expr, [*origins, expr.attr.value], via
        else:
            return None
    return None


def _assigned_name(index, node: cst.CSTNode) -> str | None:
    """The name `node`'s value is stored under: `self.wpe = <node>`, `pe = <node>`,
    `self.register_buffer("pe", <node>)`, through `nn.Parameter(...)`."""
    for anc in index.ancestors(node):
        if type(anc) in (cst.Assign, cst.AnnAssign):
            targets = assignment_targets(anc)
            return last_name(targets[0]) if len(targets) == 1 else None
        if type(anc) is cst.Call and type(anc.func) is cst.Attribute \
                and anc.func.attr.value in ("register_buffer", "register_parameter") and anc.args:
            value = literal_value(anc.args[0].value, default=None)
            return value if isinstance(value, str) else None
        if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda)):
            return None
    return None


def _tensor_rows(call: cst.Call) -> cst.BaseExpression | None:
    """The row count of a `(N, d)` or `(1, N, d)` tensor factory call."""
    if any(a.keyword is not None or a.star for a in call.args):
        return None
    dims = [a.value for a in call.args]
    if len(dims) == 1 and (type(dims[0]) is cst.Tuple or type(dims[0]) is cst.List):
        dims = [e.value for e in dims[0].elements]
    if len(dims) == 2:
        return dims[0]
    if len(dims) == 3 and literal_value(dims[0], default=None) == 1:
        return dims[1]
    return None


def _matrix_operand(index, call: cst.Call, target: str | None) -> bool:
    """The tensor stored under `target` is an operand of a matrix product in its class (or
    module): `coords @ self.positional_embedding`, `torch.matmul(x, pe)`. Its rows then
    match the width of what it multiplies (2 coordinates of a point), not positions."""
    if target is None:
        return False
    scope = index.enclosing_class(call) or index.module

    def names_target(expr) -> bool:
        return last_name(expr) == target and type(expr) in (cst.Name, cst.Attribute)

    for node in walk(scope):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:
            if names_target(node.left) or names_target(node.right):
                return True
        elif type(node) is cst.Call and last_name(node.func) in ("matmul", "mm", "bmm", "einsum"):
            if any(names_target(arg.value) for arg in node.args):
                return True
    return False


def _table_fact(ctx, expr, what: str):
    resolved = resolve_size(ctx, expr)
    if resolved is None:
        return None
    size, literal, origins, via = resolved
    return literal, PositionalTableFact(size, what, origins, via)


def positional_table_sites(ctx):
    """Positional tables of a literal size (see `resolve_size`): a positional-named
    `nn.Embedding(N, d)`; a positional-named `(N, d)`/`(1, N, d)` tensor (`nn.Parameter(
    torch.zeros(1, N, d))`, a sinusoidal `pe = torch.zeros(N, d)`, any such tensor in a
    positional class); `n_positions`/`max_position_embeddings`/`block_size`/... given to
    a model `*Config(...)` or set as a config class field default; `max_len=`-style
    keywords given to a positional module or model constructor. Reported at the literal.
    Not in test files (tiny models next to unrelated fixtures)."""
    index = ctx.index
    if ctx.is_test_file:
        return
    seen: set[int] = set()

    def emit(item):
        if item is not None and id(item[0]) not in seen:
            seen.add(id(item[0]))
            yield item

    for call in index.calls:
        qualified = index.qualify(call.func)
        callee = last_name(call.func)
        if qualified in _EMBEDDINGS:
            target = _assigned_name(index, call)
            if _positional_name(target):
                size = get_arg(call, "num_embeddings", 0)
                yield from emit(_table_fact(ctx, size.value if size else None, f"`{target} = nn.Embedding(...)`"))
        elif qualified in _TENSOR_FACTORIES:
            rows = _tensor_rows(call)
            if rows is None or literal_value(rows, default=None) == 1:
                continue  # one row: a vector shared by every position (broadcast), never too short
            target = _assigned_name(index, call)
            cls = index.enclosing_class(call)
            if (_positional_name(target) or (cls is not None and _positional_name(cls.name.value))) \
                    and _matrix_operand(index, call, target):
                continue  # `coords @ self.positional_embedding`: a projection (random Fourier features)
            if _positional_name(target):
                yield from emit(_table_fact(ctx, rows, f"`{target}`"))
            elif cls is not None and _positional_name(cls.name.value):
                # any (N, d) tensor of a positional class whose N counts positions
                # (`max_len`), not a bank of distance buckets
                item = _table_fact(ctx, rows, f"`{target or 'the table'}` of `{cls.name.value}`")
                if item is not None and item[1].origins and set(snake_parts(item[1].origins[0])) & _LENGTH_PARTS:
                    yield from emit(item)
        elif _camel(callee) and qualified not in _PARAMETER_WRAPPERS:
            parts = set(snake_parts(callee))
            if parts & _NOT_MODEL_WORDS:
                continue
            keys = CONFIG_TABLE_KEYS if callee.endswith("Config") else CALL_TABLE_KEYS
            model_like = bool(parts & _MODEL_WORDS) or bool(keywords(call) & _MODEL_FIELDS)
            for key in keys:
                arg = get_arg(call, key)
                if arg is not None and (model_like or key not in _AMBIGUOUS_TABLE_KEYS):
                    yield from emit(_table_fact(ctx, arg.value, f"`{key}=` of `{callee}(...)`"))
    for cls in index.classes:
        name = cls.name.value
        if not name.endswith("Config") or set(snake_parts(name)) & _NOT_MODEL_WORDS \
                or type(cls.body) is not cst.IndentedBlock:
            continue
        model_like = bool(set(snake_parts(name)) & _MODEL_WORDS) or bool(_class_fields(cls) & _MODEL_FIELDS)
        position = 0
        for statement in cls.body.body:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is cst.AnnAssign:
                    field, value = last_name(small.target), small.value
                elif type(small) is cst.Assign and len(small.targets) == 1:
                    field, value = last_name(small.targets[0].target), small.value
                else:
                    continue
                if type(small) is cst.AnnAssign:
                    position += 1
                if field in CONFIG_TABLE_KEYS and _int_size(literal_value(value, default=None)) \
                        and (model_like or field not in _AMBIGUOUS_TABLE_KEYS):
                    via = Via(name, field, position - 1 if type(small) is cst.AnnAssign else None)
                    yield from emit((value, PositionalTableFact(literal_value(value), f"`{name}.{field}`",
                                                                [field], via)))


def _class_fields(cls: cst.ClassDef) -> set[str | None]:
    out: set[str | None] = set()  # (None for a target that is not a name: `x[0]: int = 1`)
    if type(cls.body) is cst.IndentedBlock:
        for statement in cls.body.body:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.AnnAssign:
                        out.add(last_name(small.target))
                    elif type(small) is cst.Assign and len(small.targets) == 1:
                        out.add(last_name(small.targets[0].target))
    return out


def sequence_length_sites(ctx):
    """Sequence lengths the data is built with: `max_length=` of a tokenizer call
    (encode, `tokenizer.pad`), and `max_length`/`block_size`/`seq_len`/... keywords given
    to a data class or function (`*Dataset`, `*Collator`, `group_texts`); literal values
    (see `resolve_size`, option defaults included). Reported in the table's message.
    Not in test files."""
    index = ctx.index
    if ctx.is_test_file:
        return
    calls = list(ctx.data.tokenizer_encode_calls)
    calls += [c for c in index.calls if type(c.func) is cst.Attribute and c.func.attr.value == "pad"
              and tokenizer_object(ctx.data, c.func.value)]
    seen: set[int] = set()
    for call in calls:
        arg = get_arg(call, "max_length")
        resolved = resolve_size(ctx, arg.value, options=True) if arg is not None else None
        if resolved is not None and id(call) not in seen:
            seen.add(id(call))
            yield arg, SequenceLengthFact(resolved[0], "`max_length=` of the tokenizer", resolved[2], resolved[3])
    for call in index.calls:
        callee = last_name(call.func)
        if callee is None or id(call) in seen or not set(snake_parts(callee)) & _DATA_WORDS:
            continue
        for key in DATA_LENGTH_KEYS:
            arg = get_arg(call, key)
            resolved = resolve_size(ctx, arg.value, options=True) if arg is not None else None
            if resolved is not None:
                yield arg, SequenceLengthFact(resolved[0], f"`{key}=` of `{callee}(...)`", resolved[2], resolved[3])
                break
    if any(word in ctx.text for word in _CHUNK_WORDS):
        yield from _chunk_slices(ctx)


# `data[i:i + block_size]`: a window of the token stream (nanoGPT's `get_batch`)
_CHUNK_WORDS = ("block_size", "seq_len", "seq_length", "context_length", "ctx_len")
_STREAM_PARTS = frozenset({"data", "tokens", "token", "ids", "corpus", "text", "train", "val", "stream", "buf"})


def _chunk_slices(ctx):
    index = ctx.index
    roots = [node.value for node in index.assignments if node.value is not None]
    roots += [arg.value for call in index.calls for arg in call.args]
    seen: set[int] = set()
    for root in roots:
        for node in walk(root):
            if id(node) in seen or type(node) is not cst.Subscript or len(node.slice) != 1:
                continue
            seen.add(id(node))
            window = node.slice[0].slice
            if type(window) is not cst.Slice or window.step is not None:
                continue
            upper = window.upper
            if not (type(upper) is cst.BinaryOperation and type(upper.operator) is cst.Add):
                continue
            size = upper.right
            name = last_name(size)
            stream = last_name(node.value)
            if name is None or stream is None or not set(snake_parts(stream)) & _STREAM_PARTS:
                continue
            if not (name in _CHUNK_WORDS or name.lower() in _CHUNK_WORDS):
                continue
            resolved = resolve_size(ctx, size, options=True)
            if resolved is not None:
                yield node, SequenceLengthFact(resolved[0], f"`{stream}[i:i + {name}]` windows", resolved[2],
                                               resolved[3])


def call_args_sites(ctx):
    """Which parameters calls give, for defaults that only count when not overridden:
    a `CallArgsFact` (callee: last name, keywords, positional count, star: *args/**kwargs given),
    for calls of a plain name (`build(...)`) or of a class (`model.GPT(...)`)."""
    seen = set()
    for call in ctx.index.calls:
        func = call.func
        if type(func) is cst.Name:
            callee = func.value
        elif type(func) is cst.Attribute and _camel(func.attr.value):
            callee = func.attr.value
        else:
            continue
        star = any(a.star for a in call.args)
        keys = tuple(sorted(a.keyword.value for a in call.args if a.keyword is not None))
        positional = sum(1 for a in call.args if a.keyword is None and not a.star)
        key = (callee, keys, positional, star)
        if key not in seen:
            seen.add(key)
            yield call, CallArgsFact(callee, list(keys), positional, star)


def size_override_sites(ctx):
    """`config.block_size = ...` (not `self.`): a config field set after construction."""
    for node in ctx.index.assignments:
        targets = assignment_targets(node)
        for target in targets:
            if type(target) is cst.Attribute and target.attr.value in CONFIG_TABLE_KEYS \
                    and not (type(target.value) is cst.Name and target.value.value == "self"):
                yield node, SizeOverrideFact(target.attr.value)


# --- model structure across files (TL201, TL202) -----------------------------------------


def norm_residual_sites(ctx):
    """The residuals of the models of the file that are parts to be assembled elsewhere: a
    composition group whose residuals all have one norm placement and that holds no list of
    its own blocks (a complete stack is judged in its file). One fact per residual, at its
    statement (TL201 compares them with the other parts a block of another file holds)."""
    view = ctx.models
    for group in view.groups():
        names = {module_class.name for module_class in group}
        if any(sub.is_list and sub.ctor in names for module_class in group for sub in module_class.submodules()):
            continue
        items = [(residual, module_class.name) for module_class in group for residual in module_class.residuals()
                 if residual.style in ("pre", "post")]
        if len({residual.style for residual, _ in items}) != 1:
            continue
        model = sorted(names)
        for residual, owner in items:
            yield residual.node, NormResidualFact(owner, residual.style, model)


def _imported_class(view, ctor: str | None) -> str | None:
    """The class name a sub-module's constructor names when it is defined in another file
    (not torch's, not one of this file's classes)."""
    if not ctor or ctor in view.classes or ctor.startswith("torch.") or "." not in ctor:
        return None
    name = ctor.rsplit(".", 1)[1]
    return name if name[:1].isupper() else None  # a class (`FFN`, `EncoderLayer`), not a factory


def module_parts_sites(ctx):
    """Module classes holding sub-modules of classes defined in other files."""
    view = ctx.models
    for module_class in view.classes.values():
        parts = sorted({name for sub in module_class.submodules()
                        if (name := _imported_class(view, sub.ctor)) is not None})
        if parts:
            yield module_class.node, ModulePartsFact(module_class.name, parts)


def block_stack_sites(ctx):
    """`for block in self.blocks:` in `forward` over a list of blocks of a class defined in
    another file, with no norm applied after the loop (TL202 asks the related files whether
    those blocks are pre-norm)."""
    view = ctx.models
    index = ctx.index
    for module_class in view.classes.values():
        forward = module_class.forward
        if forward is None:
            continue
        for loop in walk(forward.body, into_functions=False):
            if type(loop) is not cst.For:
                continue
            iterable = loop.iter
            if type(iterable) is cst.Call:
                iterable = iterable.args[0].value if iterable.args else iterable  # `enumerate(self.blocks)`
            sub = module_class.attribute_of(iterable) if type(iterable) is not cst.Name else None
            element = _imported_class(view, sub.ctor) if sub is not None and sub.is_list else None
            if element is None or sub is None:
                continue
            start = index.position[id(loop)]
            if any(module_class.is_norm_call(call) and index.position[id(call)] > start
                   and not index.is_inside(call, loop) for call in module_class.calls_of(forward)):
                continue
            yield loop, BlockStackFact(module_class.name, element, sub.path)
