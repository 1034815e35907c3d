"""Project facts: small serialisable statements each file makes, for cross-file rules.

A fact is (kind, node, data). The engine turns the node into a range and keeps the facts
of every file of the project; a rule's `ctx.report(..., when=ProjectCondition(...))` is
decided on the facts of related files. Kinds so far:

- `pads`: the file pads sequences (tokenizer call with truthy `padding=` or
  `pad_to_max_length=True`, a padding collator, `pad_sequence`, `F.pad` on ids,
  `tokenizer.pad`, `torch.full(..., pad_id)`, `ids + [pad_id] * n`).
- `transformer`: the file builds or loads a transformer (imports `transformers`, uses a
  `torch.nn` transformer/attention module or `scaled_dot_product_attention`, or defines an
  attention/transformer class and computes a softmax).
- `warmup`: the file sets up a learning-rate warmup (see `views.training.warmup_sites`).
- `masks-pad-labels`: the file keeps pad positions out of the loss (a label-masking
  collator, a `-100` written into labels, a loss `ignore_index` other than -100).
- `pad-labels-by-id`: label masking keyed on the pad *id* (`DataCollatorForLanguageModeling
  (mlm=False)`, `labels == pad_token_id`, `ignore_index=tokenizer.pad_token_id`).
- `distinct-pad`: a pad token of its own is added (`add_special_tokens({"pad_token": ...})`).
- `feeds-training`: the file builds a `DataLoader` or a Hugging Face trainer.
- `static-shapes`: the file imports `torch_xla` or `diffusers` (fixed-length text wanted).
- `tokenizer`: a tokenizer built `from_pretrained`, with `checkpoint` (literal or None),
  `options` (literal construction arguments), `dynamic` (options given non-literally),
  `var`, `function`, `with_model` (the file loads a model from the same literal
  checkpoint) and `test_file`.
- `tokenizer-saved`: `save_pretrained(<literal folder>)`, with `folder`.
- `positional-table`: a positional table of a literal size (`size`, `what`, `origins`:
  the names the value was read through, `via`: the parameter/field whose default gave it);
  reported at the literal (TL206).
- `sequence-length`: a literal sequence length the data is built with (`length`, `what`,
  `origins`, `via`): tokenizer `max_length=`, `block_size=`/`seq_len=` of data classes.
- `call-args`: which parameters the calls of a name give (`callee`, `keywords`,
  `positional`, `star`): a default counts only where calls leave it out.
- `size-override`: `config.block_size = ...` set after construction (`name`).

Adding a kind: write an extractor below and list it in `EXTRACTORS`.
"""

from __future__ import annotations

import math

import libcst as cst

from tlint.context import ViewError, register_view

from tlint.cst import (
    dotted_name,
    get_arg,
    has_star_kwargs,
    is_literal,
    keywords,
    last_name,
    literal_value,
    snake_parts,
    walk,
)

PADDING_COLLATORS = frozenset(
    {
        "transformers.DataCollatorWithPadding",
        "transformers.DataCollatorForLanguageModeling",
        "transformers.DataCollatorForSeq2Seq",
        "transformers.DataCollatorForTokenClassification",
        "transformers.DataCollatorForWholeWordMask",
        "transformers.DataCollatorForPermutationLanguageModeling",
        "trl.DataCollatorForCompletionOnlyLM",
    }
)
PAD_SEQUENCE = frozenset({"torch.nn.utils.rnn.pad_sequence", "torch.nn.utils.rnn.pack_padded_sequence"})
FUNCTIONAL_PAD = frozenset({"torch.nn.functional.pad"})
FULL_TENSORS = frozenset({"torch.full", "torch.full_like"})
TRANSFORMER_MODULES = frozenset(
    {
        "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
        "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.MultiheadAttention",
        "torch.nn.functional.scaled_dot_product_attention",
    }
)
_TRANSFORMER_CLASS_WORDS = ("attention", "transformer", "gpt", "bert", "llama", "selfattn")
_NO_PADDING = (False, None, "do_not_pad")


def tokenizer_like(index, expr: cst.BaseExpression) -> bool:
    """Is `expr` (the callee or receiver) a tokenizer/processor, by its name or origin?"""
    name = last_name(expr)
    if name is None:
        return False
    parts = snake_parts(name)
    if any(p.startswith("tok") or p in ("processor", "encoder_fn") for p in parts):
        return True
    return name in _tokenizer_variables(index)


def _tokenizer_variables(index) -> set[str]:
    cached = getattr(index, "_tokenizer_vars", None)
    if cached is None:
        cached = set()
        for node in index.assignments:
            if type(node) is cst.Assign and type(node.value) is cst.Call:
                callee = index.call_name(node.value) or ""
                if "Tokenizer" in callee or "Processor" in callee:
                    for target in node.targets:
                        name = last_name(target.target)
                        if name:
                            cached.add(name)
        index._tokenizer_vars = cached
    return cached


def padding_sites(ctx):
    index = ctx.index
    for call in index.calls:
        qualified = index.qualify(call.func)
        if qualified in PADDING_COLLATORS or qualified in PAD_SEQUENCE:
            yield call
            continue
        if qualified in FUNCTIONAL_PAD:
            first = get_arg(call, "input", 0)
            name = last_name(first.value) if first else None
            if name and any(p in ("ids", "tokens", "token", "input") for p in snake_parts(name)):
                yield call
            continue
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in ("pad", "enable_padding") and tokenizer_like(index, func.value):
            yield call
            continue
        if qualified in FULL_TENSORS or (type(func) is cst.Attribute and func.attr.value == "new_full"):
            fill = get_arg(call, "fill_value", 1)
            if fill is not None and pad_id_like(fill.value):
                yield call  # `torch.full((B, T), pad_id)`: a batch of ids pre-filled with padding
            continue
        if not pads_in_call(call):
            continue
        receiver = func.value if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS else func
        if tokenizer_like(index, receiver):
            yield call
    if "pad" in ctx.text:
        yield from _list_padding(index)


def _list_padding(index):
    """`ids + [pad_id] * (max_len - len(ids))`: padding a list of ids by hand."""
    roots = [node.value for node in index.assignments if node.value is not None]
    roots += [arg.value for call in index.calls for arg in call.args]
    for root in roots:
        for node in walk(root):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
                for side in (node.left, node.right):
                    if type(side) is cst.List and len(side.elements) == 1 and pad_id_like(side.elements[0].value):
                        yield node
                        return


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


# --- tokenizers, ids and labels (data-pipeline rules) -----------------------------------

TOKENIZER_ENCODE_METHODS = frozenset({"__call__", "encode", "encode_plus", "batch_encode_plus", "apply_chat_template"})
LABEL_MASKING_COLLATORS = frozenset(
    {
        "transformers.DataCollatorForLanguageModeling",
        "transformers.DataCollatorForSeq2Seq",
        "transformers.DataCollatorForWholeWordMask",
        "transformers.DataCollatorForPermutationLanguageModeling",
        "trl.DataCollatorForCompletionOnlyLM",
    }
)
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_TOKENIZER_WORDS = ("tokenizer", "tokenizers", "tokeniser", "tok", "tknzr", "processor")
_NONFINITE_NAMES = {
    "math.inf": math.inf, "math.nan": math.nan, "numpy.inf": math.inf, "numpy.Inf": math.inf,
    "numpy.PINF": math.inf, "numpy.NINF": -math.inf, "numpy.nan": math.nan, "numpy.NaN": math.nan,
    "numpy.NAN": math.nan, "torch.inf": math.inf, "torch.nan": math.nan,
}
TOKENIZER_OPTIONS = ("padding_side", "truncation_side", "model_max_length", "do_lower_case", "add_prefix_space",
                     "use_fast")


def tokenizer_object(index, expr: cst.BaseExpression | None) -> bool:
    """Is `expr` a tokenizer object (`tokenizer`, `self.tok`, a variable assigned from a
    `*Tokenizer*` class)? Stricter than `tokenizer_like`: `tokens`, `tokenize` are not."""
    name = last_name(expr)
    if name is None:
        return False
    if any(p in _TOKENIZER_WORDS or p.startswith("tokenizer") for p in snake_parts(name)):
        return True
    return name in _tokenizer_variables(index)


def tokenizer_encode_calls(index) -> list[cst.Call]:
    """Calls that encode text with a tokenizer: `tokenizer(texts, ...)`, `self.tok(...)`,
    `tokenizer.encode_plus(...)`. A local function (`tokenize(batch)`) is a wrapper, not one."""
    cached = getattr(index, "_tokenizer_encode_calls", None)
    if cached is None:
        cached = []
        for call in index.calls:
            func = call.func
            receiver = func.value if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS else func
            if type(receiver) is cst.Name and receiver.value in index.functions_by_name:
                continue
            if tokenizer_object(index, receiver):
                cached.append(call)
        index._tokenizer_encode_calls = cached
    return cached


def pads_in_call(call: cst.Call) -> bool:
    """The call asks for padding: truthy `padding=` (not `False`/`"do_not_pad"`/an int), or
    the legacy `pad_to_max_length=True`."""
    legacy = get_arg(call, "pad_to_max_length")
    if legacy is not None and literal_value(legacy.value, default=True) not in _NO_PADDING:
        return True
    padding = get_arg(call, "padding")
    if padding is None:
        return False
    value = literal_value(padding.value, default=Ellipsis)
    return not (value in _NO_PADDING or (isinstance(value, int) and not isinstance(value, bool)))


def nonfinite_value(index, expr: cst.BaseExpression | None) -> float | None:
    """NaN or ±inf written as a literal (`float("nan")`, `-math.inf`, `np.nan`), else None."""
    if expr is None:
        return None
    if type(expr) is cst.UnaryOperation and type(expr.operator) in (cst.Minus, cst.Plus):
        inner = nonfinite_value(index, expr.expression)
        return None if inner is None else (-inner if type(expr.operator) is cst.Minus else inner)
    value = literal_value(expr, default=None)
    if isinstance(value, float) and not math.isfinite(value):
        return value
    return _NONFINITE_NAMES.get(index.qualify(expr) or "")


def pad_id_like(expr: cst.BaseExpression | None) -> bool:
    """`tokenizer.pad_token_id`, `pad_id`, `PAD_IDX`, `self.padding_idx`: a pad token id."""
    name = last_name(expr)
    if name is None:
        return False
    parts = snake_parts(name)
    return any(p.startswith("pad") for p in parts) and any(p in ("id", "idx", "index", "ids") for p in parts)


def eos_like(expr: cst.BaseExpression | None) -> bool:
    """`tokenizer.eos_token`, `eos_token_id`, `config.eos_token_id`."""
    name = last_name(expr)
    return name is not None and "eos" in snake_parts(name)


def module_constant(index, expr: cst.BaseExpression | None):
    """A literal, or a module-level name assigned a literal exactly once; else Ellipsis."""
    value = literal_value(expr, default=Ellipsis)
    if value is not Ellipsis or type(expr) is not cst.Name:
        return value
    constants = getattr(index, "_module_constants", None)
    if constants is None:
        constants, seen = {}, set()
        for stmt in index.module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                        name = small.targets[0].target.value
                        if name in seen:
                            constants.pop(name, None)
                        else:
                            seen.add(name)
                            constants[name] = literal_value(small.value, default=Ellipsis)
        index._module_constants = constants
    return constants.get(expr.value, Ellipsis)


# ids and labels: shared by TL101 (unpadded ids) and TL106 (labels copied from ids)

_TENSOR_METHODS = {"to", "cuda", "cpu", "long", "int", "unsqueeze", "view", "reshape", "clone", "detach"}
# torch constructors whose ids can hold no padding when built from literals or at random
_LITERAL_TENSORS = {"torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor"}
_SYNTHETIC_TENSORS = {"torch.randint", "torch.arange"}


def ids_expression(expr: cst.BaseExpression, ids_names: set[str]) -> bool:
    """`batch["input_ids"]`, `enc.input_ids`, or a name holding input ids."""
    if type(expr) is cst.Subscript and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if type(index) is cst.Index and type(index.value) is cst.SimpleString:
            return index.value.evaluated_value == "input_ids"
    if type(expr) is cst.Attribute:
        return expr.attr.value == "input_ids"
    if type(expr) is cst.Name:
        return expr.value in ids_names or expr.value == "input_ids"
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("to", "cuda"):
        return ids_expression(expr.func.value, ids_names)
    return False


def ids_variables(index) -> set[str]:
    """Local names assigned input ids (`ids = batch["input_ids"]`)."""
    cached = getattr(index, "_ids_variables", None)
    if cached is None:
        cached = set()
        for node in index.assignments:
            if type(node) is cst.Assign and ids_expression(node.value, set()):
                cached.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
        index._ids_variables = cached
    return cached


def _literal_data(expr: cst.BaseExpression) -> bool:
    """A (nested) list/tuple of literal numbers: `[[0, 2, 3, 1]]`."""
    if type(expr) in (cst.List, cst.Tuple):
        return all(_literal_data(el.value) for el in expr.elements if type(el) is not cst.StarredElement)
    return is_literal(expr)


def enables_padding(index) -> bool:
    """`tok.enable_padding(...)` (the `tokenizers` library): later encodes pad by default."""
    return any(type(c.func) is cst.Attribute and c.func.attr.value == "enable_padding" for c in index.calls)


def unpadded_ids(index, expr: cst.BaseExpression, scope, depth: int = 0) -> bool:
    """Is `expr` provably unpadded ids: a tokenizer call without (truthy) padding, synthetic
    ids (`torch.randint`, a literal `torch.tensor([[...]])`), or a local variable every
    assignment of which is one of those? (Taken from it by `["input_ids"]`/`.input_ids`,
    moved with `.to(device)`, … .)"""
    if depth > 4:
        return False
    while True:
        func = expr.func if type(expr) is cst.Call else None
        if type(func) is cst.Attribute and func.attr.value in _TENSOR_METHODS:
            expr = func.value
        elif type(expr) is cst.Subscript or (type(expr) is cst.Attribute and expr.attr.value == "input_ids"):
            expr = expr.value
        else:
            break
    if type(expr) is cst.Call:
        qualified = index.qualify(expr.func)
        if qualified in _SYNTHETIC_TENSORS:
            return True
        if qualified in _LITERAL_TENSORS:
            return bool(expr.args) and _literal_data(expr.args[0].value)
        func = expr.func
        receiver = func.value if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS else func
        if not tokenizer_like(index, receiver) or enables_padding(index):
            return False
        padding = get_arg(expr, "padding")
        return padding is None or literal_value(padding.value, default=Ellipsis) in _NO_PADDING
    if type(expr) is cst.Name:
        return _unpadded_name(index, expr.value, scope, depth)
    return False


def _unpadded_name(index, name: str, scope, depth: int) -> bool:
    """Every binding of `name` in `scope` is an unpadded source (and there is one)."""
    if type(scope) is cst.FunctionDef:
        params = scope.params
        if any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
            return False
    values = []
    body = scope.body if type(scope) is cst.FunctionDef else scope
    for node in walk(body, into_functions=False):
        if type(node) in (cst.For, cst.CompFor):
            if any(type(n) is cst.Name and n.value == name for n in walk(node.target)):
                return False
        elif type(node) in (cst.WithItem, cst.NamedExpr):
            if type(node) is cst.WithItem:
                target = node.asname.name if node.asname else None
            else:
                target = node.target
            if target is not None and any(type(n) is cst.Name and n.value == name for n in walk(target)):
                return False
        elif type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            for target in targets:
                if type(target) is cst.Name and target.value == name:
                    if type(node) is cst.AugAssign or node.value is None:
                        return False
                    values.append(node.value)
                elif any(type(n) is cst.Name and n.value == name for n in walk(target)):
                    return False  # unpacked: origin unknown
    return bool(values) and all(unpadded_ids(index, value, scope, depth + 1) for value in values)


def _minus_100(expr: cst.BaseExpression) -> bool:
    return literal_value(expr, default=None) == -100


def _ignore_constant(expr: cst.BaseExpression) -> bool:
    """`IGNORE_INDEX`, `IGNORE_TOKEN_ID`, `label_pad_token_id`: names of the -100 label."""
    return type(expr) is cst.Name and _ignore_name(expr.value)


def _ignore_name(name: str) -> bool:
    parts = snake_parts(name)
    return ("ignore" in parts and any(p in ("index", "idx", "id") for p in parts)) or parts[:2] == ["label", "pad"]


_ASSIGNMENTS = (cst.Assign, cst.AugAssign, cst.AnnAssign)
_STATEMENT_LEVEL = (cst.SimpleStatementLine, cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)


def _covering(index, node: cst.CSTNode) -> cst.CSTNode | None:
    """The assignment around `node`, else the outermost call that has it inside one of
    its arguments (not `ignore_index=`), else None."""
    outermost = None
    below = inner = node  # the ancestor's child and grandchild on the way up
    for anc in index.ancestors(node):
        kind = type(anc)
        if kind in _ASSIGNMENTS:
            return anc
        if kind is cst.Call and type(below) is cst.Arg and below.value is inner and (
                below.keyword is None or below.keyword.value != "ignore_index"):
            outermost = anc
        elif kind in _STATEMENT_LEVEL:
            break
        below, inner = anc, below
    return outermost


class LabelMasking:
    """How a file keeps positions out of the loss: `-100` written into labels, loss
    `ignore_index` arguments, comparisons with a pad id. Read from assignments and call
    arguments (where such values live), once per file."""

    def __init__(self, index) -> None:
        self.writes_ignore_label = False  # a -100 (or IGNORE_INDEX) outside `ignore_index=`
        self.ignore_index_args: list[cst.Arg] = []
        self.pad_id_compares: list[tuple[cst.Comparison, cst.CSTNode]] = []  # (compare, statement)
        for call in index.calls:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "ignore_index":
                    self.ignore_index_args.append(arg)
        # The values looked at are those inside an assignment or a call's argument (not
        # `ignore_index=`); each comparison is charged to that assignment, else to the
        # outermost such call, and they are listed assignments first, then calls, each in
        # source order. The few candidate nodes are found first, their place after.
        ignore_names = {name for name in index.identifiers if _ignore_name(name)}
        compares = []
        for node in index.order:
            kind = type(node)
            if kind is cst.Name:
                if node.value in ignore_names and not self.writes_ignore_label and _covering(index, node) \
                        and not self._inside_ignore_index(index, node):
                    self.writes_ignore_label = True
            elif kind is cst.UnaryOperation or kind is cst.Call:
                if not self.writes_ignore_label and _minus_100(node) and _covering(index, node) \
                        and not self._inside_ignore_index(index, node):
                    self.writes_ignore_label = True
            elif kind is cst.Comparison and any(
                    type(t.operator) in (cst.Equal, cst.NotEqual) for t in node.comparisons):
                operands = [node.left, *(t.comparator for t in node.comparisons)]
                if any(pad_id_like(o) for o in operands):
                    statement = _covering(index, node)
                    if statement is not None:
                        assigned = type(statement) is not cst.Call
                        compares.append((not assigned, index.position[id(statement)], index.position[id(node)],
                                         node, statement))
        compares.sort(key=lambda entry: entry[:3])
        self.pad_id_compares = [(node, statement) for *_, node, statement in compares]

    @staticmethod
    def _inside_ignore_index(index, node) -> bool:
        for anc in index.ancestors(node):
            if type(anc) is cst.Arg:
                return anc.keyword is not None and anc.keyword.value == "ignore_index"
            if isinstance(anc, (cst.Call, cst.BaseSmallStatement)):
                return False
        return False


def label_masking(index) -> LabelMasking:
    cached = getattr(index, "_label_masking", None)
    if cached is None:
        cached = index._label_masking = LabelMasking(index)
    return cached


def masks_pad_labels_sites(ctx):
    """Pad positions kept out of the loss: a label-masking collator, a -100 written into
    labels, or a loss `ignore_index` other than the default -100 (the pad id)."""
    index = ctx.index
    for call in index.calls:
        if index.qualify(call.func) in LABEL_MASKING_COLLATORS or get_arg(call, "label_pad_token_id"):
            yield call
            return
    masking = label_masking(index)
    if masking.writes_ignore_label:
        yield index.module
        return
    for arg in masking.ignore_index_args:
        if not _minus_100(arg.value):
            yield arg
            return


def pad_labels_by_id_sites(ctx):
    """Label masking keyed on the pad id, which also hides EOS when pad == eos:
    `DataCollatorForLanguageModeling(mlm=False)` (it sets labels == pad_token_id to -100),
    `labels[labels == pad_token_id] = -100`, `ignore_index=tokenizer.pad_token_id`."""
    index = ctx.index
    for call in index.calls:
        qualified = index.qualify(call.func)
        if qualified == "transformers.DataCollatorForLanguageModeling":
            mlm = get_arg(call, "mlm", 1)
            if mlm is not None and literal_value(mlm.value, default=True) is False:
                yield call
                return
        elif qualified == "trl.DataCollatorForCompletionOnlyLM":
            yield call
            return
    masking = label_masking(index)
    for arg in masking.ignore_index_args:
        if pad_id_like(arg.value):
            yield arg
            return
    for compare, statement in masking.pad_id_compares:
        operands = [compare.left, *(t.comparator for t in compare.comparisons)]
        labels = any("label" in (last_name(o) or "").lower() or "labels" in _subscript_key(o) for o in operands)
        if labels or any(_minus_100(n) or _ignore_constant(n) for n in walk(statement)):
            yield compare
            return


def _subscript_key(expr: cst.BaseExpression) -> str:
    if type(expr) is cst.Subscript and len(expr.slice) == 1:
        inner = expr.slice[0].slice
        if type(inner) is cst.Index and type(inner.value) is cst.SimpleString:
            return inner.value.evaluated_value or ""
    return ""


def pad_is_eos_sites(index):
    """`tokenizer.pad_token = tokenizer.eos_token`, `tok.pad_token_id = tok.eos_token_id`,
    `tokenizer.add_special_tokens({"pad_token": tokenizer.eos_token})`."""
    for node in index.assignments:
        if type(node) is cst.Assign and eos_like(node.value):
            for target in node.targets:
                t = target.target
                if type(t) is cst.Attribute and t.attr.value in ("pad_token", "pad_token_id") \
                        and tokenizer_object(index, t.value):
                    yield node
                    break
    for call, value in _pad_token_settings(index):
        if eos_like(value):
            yield call


def _pad_token_settings(index):
    """(call, value) of `add_special_tokens({"pad_token": value})` and `pad_token=value`."""
    for call in index.calls:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "add_special_tokens" and call.args:
            mapping = call.args[0].value
            if type(mapping) is cst.Dict:
                for element in mapping.elements:
                    if type(element) is cst.DictElement and literal_value(element.key, default=None) == "pad_token":
                        yield call, element.value
            elif type(mapping) is cst.Call and dotted_name(mapping.func) == "dict":
                pad = get_arg(mapping, "pad_token")
                if pad is not None:
                    yield call, pad.value
        elif type(func) is cst.Attribute and func.attr.value == "from_pretrained":
            pad = get_arg(call, "pad_token")
            if pad is not None:
                yield call, pad.value


def distinct_pad_sites(ctx):
    """A pad token that is not EOS: `add_special_tokens({"pad_token": "[PAD]"})`,
    `tokenizer.pad_token = tokenizer.unk_token`, `from_pretrained(..., pad_token="<pad>")`."""
    index = ctx.index
    for call, value in _pad_token_settings(index):
        if not eos_like(value) and not _eos_literal(value):
            yield call
            return
    for node in index.assignments:
        if type(node) is cst.Assign and not eos_like(node.value) and not _eos_literal(node.value):
            for target in node.targets:
                t = target.target
                if type(t) is cst.Attribute and t.attr.value == "pad_token" and tokenizer_object(index, t.value):
                    yield node
                    return


def _eos_literal(expr) -> bool:
    value = literal_value(expr, default=None)
    return isinstance(value, str) and ("endoftext" in value or value in ("</s>", "<eos>", "<|eot_id|>", "<|im_end|>"))


def feeds_training_sites(ctx):
    """A `DataLoader` or a Hugging Face/TRL trainer is built here."""
    index = ctx.index
    for call in index.calls:
        qualified = index.qualify(call.func) or ""
        if qualified in DATA_LOADERS or (qualified.startswith(("transformers.", "trl.")) and qualified.endswith("Trainer")):
            yield call
            return


def static_shapes_sites(ctx):
    """Code that wants fixed-length text: XLA/TPU (`torch_xla`: every new shape recompiles)
    or diffusion pipelines (`diffusers`: the CLIP text encoder is conditioned on prompts
    padded to its full length)."""
    imports = ctx.index.imports
    if imports.imports_module("torch_xla") or imports.imports_module("diffusers"):
        yield ctx.index.module


def _checkpoint_of(index, call: cst.Call):
    arg = get_arg(call, "pretrained_model_name_or_path", 0)
    value = module_constant(index, arg.value) if arg is not None else Ellipsis
    return value if isinstance(value, str) else None


def _pretrained_class(index, call: cst.Call) -> str | None:
    """`AutoTokenizer` of `AutoTokenizer.from_pretrained(...)` (through imports), else None."""
    func = call.func
    if not (type(func) is cst.Attribute and func.attr.value == "from_pretrained"):
        return None
    name = index.qualify(func.value) or dotted_name(func.value)
    return name.rsplit(".", 1)[-1] if name else None


def tokenizer_sites(ctx):
    """Tokenizers built with `*Tokenizer*.from_pretrained`: their literal checkpoint and
    literal construction options (see `TOKENIZER_OPTIONS`)."""
    index = ctx.index
    model_checkpoints = set()
    tokenizers = []
    for call in index.calls:
        cls = _pretrained_class(index, call)
        if cls is None or cls[:1].islower():
            continue
        if "Tokenizer" in cls:
            tokenizers.append(call)
        elif "Config" not in cls and "Processor" not in cls and "Extractor" not in cls:
            checkpoint = _checkpoint_of(index, call)
            if checkpoint is not None:
                model_checkpoints.add(checkpoint)
    for call in tokenizers:
        options, dynamic = {}, []
        for key in TOKENIZER_OPTIONS:
            arg = get_arg(call, key)
            if arg is None:
                continue
            value = module_constant(index, arg.value)
            if value is Ellipsis:
                dynamic.append(key)
            else:
                options[key] = value
        if has_star_kwargs(call):
            dynamic.append("**")
        parent = index.parent(call)
        var = None
        if type(parent) is cst.Assign:
            var = last_name(parent.targets[0].target)
        else:
            function = index.enclosing_function(call)
            var = function.name.value if function is not None else None
        checkpoint = _checkpoint_of(index, call)
        function = index.enclosing_function(call)
        yield call, {"checkpoint": checkpoint, "options": options, "dynamic": dynamic, "var": var,
                     "function": function.name.value if function is not None else None,
                     "with_model": checkpoint is not None and checkpoint in model_checkpoints,
                     "test_file": ctx.is_test_file,
                     "decode_only": _decode_only(index, parent.targets[0].target)
                     if type(parent) is cst.Assign and len(parent.targets) == 1 else False}


_DECODE_METHODS = frozenset({"decode", "batch_decode", "convert_ids_to_tokens", "convert_tokens_to_string"})


def _decode_only(index, target: cst.BaseExpression) -> bool:
    """The tokenizer assigned to `target` (`tok`, `self.bpe_tokenizer`) is used in the file,
    and only to decode ids (`.decode`, `.batch_decode`, ...): it turns the outputs of its own
    head back into text and never encodes the text a model is trained or evaluated on."""
    spelled = dotted_name(target)
    if spelled is None:
        return False
    uses = 0
    for call in index.calls:
        func = call.func
        if dotted_name(func) == spelled:
            return False  # `tok(texts)`: encodes
        if type(func) is cst.Attribute and dotted_name(func.value) == spelled:
            if func.attr.value not in _DECODE_METHODS:
                return False
            uses += 1
    if uses == 0:
        return False
    # any other mention (`return tok`, `Trainer(tokenizer=tok)`) may encode elsewhere
    kind = type(target)
    mentions = sum(1 for node in walk(index.module) if isinstance(node, kind) and dotted_name(node) == spelled)
    return mentions == uses + 1


def tokenizer_saved_sites(ctx):
    """`save_pretrained(folder)`: `folder` is the literal path, or None when computed."""
    index = ctx.index
    for call in index.calls:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "save_pretrained" and call.args:
            value = module_constant(index, call.args[0].value)
            yield call, {"folder": value.rstrip("/") if isinstance(value, str) else None}


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


def _camel(name: str | None) -> bool:
    return bool(name) and name[:1].isupper() and not name.isupper()


def _int_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _param_via(index, expr: cst.CSTNode) -> dict | None:
    """When `expr` is a parameter's default: which call supplies the parameter, as
    {"callee", "param", "index"} (`index` None for keyword-only); the class name for
    `__init__`. {"callee": None} when it cannot be told (a lambda, a nested method)."""
    param = index.parent(expr)
    if type(param) is not cst.Param or param.default is not expr:
        return None
    params = index.parent(param)
    fn = index.parent(params)
    if type(params) is not cst.Parameters or type(fn) is not cst.FunctionDef:
        return {"callee": None, "param": param.name.value, "index": None}
    positional = [*params.posonly_params, *params.params]
    scope = index.enclosing_scope(fn)
    if type(scope) is cst.ClassDef:
        positional = positional[1:]  # self / cls
        callee = scope.name.value if fn.name.value == "__init__" else None
    else:
        callee = fn.name.value
    position = next((i for i, p in enumerate(positional) if p is param), None)
    return {"callee": callee, "param": param.name.value, "index": position}


def _self_attribute_value(index, expr: cst.Attribute) -> cst.BaseExpression | None:
    """The one value `self.<attr>` is assigned in its class (`self.max_len = max_len`)."""
    cls = index.enclosing_class(expr)
    if cls is None:
        return None
    values = []
    for node in index.assignments:
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        for target in targets:
            if (type(target) is cst.Attribute and target.attr.value == expr.attr.value
                    and type(target.value) is cst.Name and target.value.value == "self"
                    and index.enclosing_class(node) is cls):
                values.append(None if type(node) is cst.AugAssign else node.value)
    return values[0] if len(values) == 1 else None


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
            bound = ctx.training.binding(expr)
            origins.append(expr.value)
            if bound is not None and via is None:
                via = _param_via(index, bound)
            expr = bound
        elif type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            origins.append(expr.attr.value)
            expr = _self_attribute_value(index, expr)
        elif options and type(expr) is cst.Attribute and index.qualify(expr) is None:
            value = ctx.training.literal(expr, default=None)
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
            targets = [t.target for t in anc.targets] if type(anc) is cst.Assign else [anc.target]
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
    if len(dims) == 1 and type(dims[0]) in (cst.Tuple, cst.List):
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
    return literal, {"size": size, "what": what, "origins": origins, "via": via}


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
                if item is not None and item[1]["origins"] and set(snake_parts(item[1]["origins"][0])) & _LENGTH_PARTS:
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
                    via = {"callee": name, "param": field, "index": position - 1 if type(small) is cst.AnnAssign
                           else None}
                    yield from emit((value, {"size": literal_value(value), "what": f"`{name}.{field}`",
                                             "origins": [field], "via": via}))


def _class_fields(cls: cst.ClassDef) -> set[str]:
    out = set()
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
    calls = list(tokenizer_encode_calls(index))
    calls += [c for c in index.calls if type(c.func) is cst.Attribute and c.func.attr.value == "pad"
              and tokenizer_object(index, c.func.value)]
    seen: set[int] = set()
    for call in calls:
        arg = get_arg(call, "max_length")
        resolved = resolve_size(ctx, arg.value, options=True) if arg is not None else None
        if resolved is not None and id(call) not in seen:
            seen.add(id(call))
            yield arg, {"length": resolved[0], "what": "`max_length=` of the tokenizer", "origins": resolved[2],
                        "via": resolved[3]}
    for call in index.calls:
        callee = last_name(call.func)
        if callee is None or id(call) in seen or not set(snake_parts(callee)) & _DATA_WORDS:
            continue
        for key in DATA_LENGTH_KEYS:
            arg = get_arg(call, key)
            resolved = resolve_size(ctx, arg.value, options=True) if arg is not None else None
            if resolved is not None:
                yield arg, {"length": resolved[0], "what": f"`{key}=` of `{callee}(...)`", "origins": resolved[2],
                            "via": resolved[3]}
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
                yield node, {"length": resolved[0], "what": f"`{stream}[i:i + {name}]` windows",
                             "origins": resolved[2], "via": resolved[3]}


def call_args_sites(ctx):
    """Which parameters calls give, for defaults that only count when not overridden:
    {"callee": last name, "keywords", "positional": count, "star": *args/**kwargs given},
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
            yield call, {"callee": callee, "keywords": list(keys), "positional": positional, "star": star}


def size_override_sites(ctx):
    """`config.block_size = ...` (not `self.`): a config field set after construction."""
    for node in ctx.index.assignments:
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        for target in targets:
            if type(target) is cst.Attribute and target.attr.value in CONFIG_TABLE_KEYS \
                    and not (type(target.value) is cst.Name and target.value.value == "self"):
                yield node, {"name": target.attr.value}


EXTRACTORS = (
    ("pads", padding_sites), ("transformer", transformer_sites), ("warmup", _warmup_sites),
    ("masks-pad-labels", masks_pad_labels_sites), ("pad-labels-by-id", pad_labels_by_id_sites),
    ("distinct-pad", distinct_pad_sites), ("feeds-training", feeds_training_sites), ("static-shapes", static_shapes_sites),
    ("tokenizer", tokenizer_sites), ("tokenizer-saved", tokenizer_saved_sites),
    ("positional-table", positional_table_sites), ("sequence-length", sequence_length_sites),
    ("call-args", call_args_sites), ("size-override", size_override_sites),
)
# Fact kinds that cross-file rules report at: only these get a (costly) source range.
POSITIONED: frozenset[str] = frozenset({"tokenizer", "positional-table", "sequence-length"})

# The pre-filter (see `Rule.tokens` and tlint/engine.py): per kind, words one of which a
# file's text must contain (case-insensitively) for its extractor to yield anything. A
# qualified name keeps its last part in the text (an import alias spells the imported
# name) and its package in the import; a keyword argument keeps its keyword.
TOKENS: dict[str, frozenset[str]] = {
    "pads": frozenset({"pad", "datacollator"}),
    "transformer": frozenset({"transformer", "multiheadattention", "scaled_dot_product_attention", "softmax"}),
    # schedulers (torch `lr_scheduler`, HF `get_*_schedule*`, timm/DeepSpeed/unknown `*Sched*`,
    # `*Warmup*`), `warmup_*=` arguments and fields, TrainingArguments-like calls (`**kwargs`
    # may warm up), DeepSpeed configs, hand-written ramps (`param_group["lr"] = ...`)
    "warmup": frozenset({"sched", "warmup", "warm_up", "swalr", "trainingarguments", "deepspeed", "zero_optimization",
                         "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_clipping", '"lr"', "'lr'"}),
    # ... and a `-100` written however (`-1e2`, `-0x64`): `ast_facts` sends such a file to LibCST
    "masks-pad-labels": frozenset({"datacollator", "label_pad", "labelpad", "ignore"}),
    "pad-labels-by-id": frozenset({"datacollator", "pad"}),
    "distinct-pad": frozenset({"pad_token"}),
    "feeds-training": frozenset({"dataloader", "trainer"}),
    "static-shapes": frozenset({"torch_xla", "diffusers"}),
    "tokenizer": frozenset({"tokenizer"}),
    "tokenizer-saved": frozenset({"save_pretrained"}),
    # `torch` for `nn.Embedding` and the tensor factories (qualified through a torch import)
    "positional-table": frozenset({"torch", *CONFIG_TABLE_KEYS, *CALL_TABLE_KEYS}),
    "sequence-length": frozenset({"max_length", *DATA_LENGTH_KEYS, *_CHUNK_WORDS}),
    "call-args": frozenset(),  # any call: a pre-filtered file gets them from Python's tree (`ast_facts`)
    "size-override": frozenset(CONFIG_TABLE_KEYS),
}


def prefilter_tokens(settings) -> set[str] | None:
    """The tokens of every extractor under `settings` (None: every file is needed)."""
    from tlint.views.training import TRAINING_ARGUMENTS

    tokens: set[str] = set()
    for kind, _ in EXTRACTORS:
        needed = TOKENS.get(kind)
        if needed is None:
            return None
        tokens |= needed
    tokens |= {name.rsplit(".", 1)[-1] for name in TRAINING_ARGUMENTS}  # trl `SFTConfig(**kwargs)`
    for name in settings.view_options().warmup_schedulers:  # `warmup_sites` matches these names too
        last = str(name).rsplit(".", 1)[-1]
        if not last:
            return None
        tokens.add(last)
    return tokens


def _ast_literal(node):
    """`literal_value` on Python's tree, for numbers: -100 written as `-100`, `-1e2`,
    `-(0x64)`, `float("-100")`; else None."""
    import ast

    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _ast_literal(node.operand)
        if isinstance(inner, (int, float)):
            return -inner if isinstance(node.op, ast.USub) else inner
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" \
            and len(node.args) == 1 and not node.keywords:
        inner = _ast_literal(node.args[0])
        if isinstance(inner, str):
            try:
                return float(inner)
            except ValueError:
                return None
    return None


def ast_facts(tree) -> list[tuple[str, dict]] | None:
    """The facts of a pre-filtered file, from Python's own tree: its `call-args` (the only
    kind without tokens), as `call_args_sites` gives them. None when LibCST must read the
    file all the same: the tree holds a `-100` (a `masks-pad-labels` fact no token finds)
    or a construct LibCST refuses although Python accepts it (its TL001 is kept)."""
    import ast

    out, seen = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.UnaryOp, ast.Call)) and _ast_literal(node) == -100:
            return None
        if isinstance(node, ast.AnnAssign) and not node.simple and isinstance(node.target, ast.Name):
            return None  # `(x): int = 1`, which LibCST cannot parse: its TL001 stands
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            callee = func.id
        elif isinstance(func, ast.Attribute) and _camel(func.attr):
            callee = func.attr
        else:
            continue
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        keys = tuple(sorted(k.arg for k in node.keywords if k.arg is not None))
        positional = sum(1 for a in node.args if not isinstance(a, ast.Starred))
        key = (callee, keys, positional, star)
        if key not in seen:
            seen.add(key)
            out.append(("call-args", {"callee": callee, "keywords": list(keys), "positional": positional,
                                      "star": star}))
    return out


def ast_facts_exact(text: str) -> bool:
    """Python's tree spells identifiers as LibCST does: false when the text holds a
    character that NFKC normalisation changes (Python normalises identifiers, LibCST not)."""
    if text.isascii():
        return True
    import unicodedata

    return all(unicodedata.is_normalized("NFKC", ch) for ch in set(text) if ord(ch) > 127)


def extract_facts(ctx) -> list[tuple[str, cst.CSTNode, dict]]:
    """(kind, node, data) for every fact of the file; an extractor yields a node, or a
    (node, data) pair when the fact carries values (e.g. a tokenizer's arguments)."""
    facts = []
    for kind, extractor in EXTRACTORS:
        for item in extractor(ctx):
            node, data = item if isinstance(item, tuple) else (item, {})
            facts.append((kind, node, data))
    return facts


@register_view("facts")
def facts(ctx) -> list[tuple[str, cst.CSTNode, dict]]:
    """(kind, node, data) of every fact of the file. When an extractor raises, the others'
    facts stand: the failed one is recorded in `ctx.failed_extractors` (TL003)."""
    timer = ctx.timer
    try:
        return extract_facts(ctx) if timer is None else _extract_timed(ctx, timer)
    except RecursionError:
        raise
    except Exception:  # find the extractor that failed; the others' facts stand
        found = []
        for kind, extractor in EXTRACTORS:
            try:
                items = list(extractor(ctx))
            except RecursionError:
                raise
            except Exception as exc:  # a failed view is reported as such
                if not isinstance(exc, ViewError):
                    ctx.failed_extractors.setdefault(kind, exc)
                continue
            for item in items:
                node, data = item if isinstance(item, tuple) else (item, {})
                found.append((kind, node, data))
        return found


def _extract_timed(ctx, timer) -> list[tuple[str, cst.CSTNode, dict]]:
    """`extract_facts`, each extractor's time charged to `facts: <kind>` (`--profile`)."""
    facts = []
    for kind, extractor in EXTRACTORS:
        for item in timer(f"facts: {kind}", lambda e=extractor: list(e(ctx))):
            node, data = item if isinstance(item, tuple) else (item, {})
            facts.append((kind, node, data))
    return facts

