"""Project facts of the data pipeline (see `tlint.views.facts`): padding (`pads`), label
masking (`masks-pad-labels`, `pad-labels-by-id`), pad tokens (`distinct-pad`), what feeds
training (`feeds-training`, `static-shapes`) and tokenizers (`tokenizer`,
`tokenizer-saved`), with the helpers the data rules share (`tokenizer_like`,
`tokenizer_encode_calls`, `pads_in_call`, `unpadded_ids`, ...). Its public names are
re-exported from `tlint.views.facts`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import (
    dotted_name,
    get_arg,
    has_star_kwargs,
    is_literal,
    last_name,
    literal_value,
    snake_parts,
    walk,
)
from tlint.fact_data import TokenizerFact, TokenizerSavedFact
from tlint.views.bindings import ASSIGN
from tlint.views.checkpoints import pads_on_the_right
from tlint.views.vocabulary import is_pad_token_name

if TYPE_CHECKING:
    from tlint.source import FileIndex
    from tlint.views.data import DataView

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
_NO_PADDING = (False, None, "do_not_pad")


def tokenizer_like(data: DataView, expr: cst.BaseExpression) -> bool:
    """Is `expr` (the callee or receiver) a tokenizer/processor, by its name or origin?"""
    name = last_name(expr)
    if name is None:
        return False
    parts = snake_parts(name)
    if any(p.startswith("tok") or p in ("processor", "encoder_fn") for p in parts):
        return True
    return name in data.tokenizer_variables


def tokenizer_variables(index: FileIndex) -> set[str]:
    """Names (last parts) assigned a `*Tokenizer*`/`*Processor*` construction."""
    out: set[str] = set()
    for node in index.assignments:
        if type(node) is cst.Assign and type(node.value) is cst.Call:
            callee = index.call_name(node.value) or ""
            if "Tokenizer" in callee or "Processor" in callee:
                for target in node.targets:
                    name = last_name(target.target)
                    if name:
                        out.add(name)
    return out


def padding_sites(ctx):
    index, data = ctx.index, ctx.data
    for call in index.calls:
        qualified = index.qualify(call.func)
        if qualified in PADDING_COLLATORS or qualified in PAD_SEQUENCE:
            yield call
            continue
        if qualified in FUNCTIONAL_PAD:
            first = get_arg(call, "input", 0)
            name = last_name(first.value) if first else None
            if name and (any(p in ("ids", "tokens", "token", "input") for p in snake_parts(name))
                         or type(first.value) is cst.Name and _embedded(ctx, call, name)):  # type: ignore[union-attr]
                yield call
            continue
        func = call.func
        if (type(func) is cst.Attribute and func.attr.value in ("pad", "enable_padding")
                and tokenizer_like(data, func.value)):
            yield call
            continue
        if qualified in FULL_TENSORS or (type(func) is cst.Attribute and func.attr.value == "new_full"):
            fill = get_arg(call, "fill_value", 1)
            if fill is not None and pad_id_like(fill.value):
                yield call  # `torch.full((B, T), pad_id)`: a batch of ids pre-filled with padding
            continue
        if not pads_in_call(call) or _media_only(call):
            continue
        receiver = func.value if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS else func
        if tokenizer_like(data, receiver):
            yield call
    if "pad" in ctx.text or "PAD" in ctx.text:
        yield from _list_padding(index)


# a processor's inputs that are not text: `processor(images=..., padding="max_length")` pads no ids
_MEDIA_KEYWORDS = frozenset({"images", "image", "audio", "audios", "videos", "video", "pixel_values", "raw_speech"})
_TEXT_KEYWORDS = frozenset({"text", "text_pair", "text_target", "input_ids", "conversation", "messages", "prompt"})


def _media_only(call: cst.Call) -> bool:
    """A processor called on images or audio alone (keywords only, none of them text)."""
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    return (all(arg.keyword is not None for arg in call.args) and bool(keywords & _MEDIA_KEYWORDS)
            and not keywords & _TEXT_KEYWORDS)


def pads_sites(ctx):
    """The `pads` facts: the file's padding sites (`padding_sites`, found once per file)."""
    return ctx.data.padding(ctx)


_CONCATENATE = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})


def unsided_padding_sites(ctx):
    """The padding sites whose pads may come before the text (`pads-unsided`): all but
    those that provably pad on the right, at the end of each sequence — `pad_sequence`
    (without `padding_side="left"`), `F.pad(ids, (0, n))`, `torch.cat((ids, torch.full(...,
    pad_id)))`, `ids + [pad_id] * n`, `ids += [pad_id] * n`. A tokenizer or collator pads on its tokenizer's
    `padding_side`, which the checkpoint decides: not provably right."""
    return [site for site in ctx.data.padding(ctx) if not _pads_right(ctx, site)]


def _pads_right(ctx, site: cst.CSTNode) -> bool:
    index = ctx.index
    if type(site) is cst.BinaryOperation:  # `[pad_id] * n` of `_list_padding`
        parent = index.parent(site)
        if type(parent) is cst.AugAssign:  # `ids += [pad_id] * n`
            return type(parent.operator) is cst.AddAssign
        return type(parent) is cst.BinaryOperation and type(parent.operator) is cst.Add and parent.right is site
    if type(site) is not cst.Call:
        return False
    qualified = index.qualify(site.func)
    if qualified in PAD_SEQUENCE:
        side = get_arg(site, "padding_side")
        return side is None or literal_value(side.value, default=None) == "right"
    if qualified in FUNCTIONAL_PAD:
        amounts = get_arg(site, "pad", 1)
        value = amounts.value if amounts is not None else None
        return (type(value) in (cst.Tuple, cst.List) and bool(value.elements)  # type: ignore[union-attr]
                and literal_value(value.elements[0].value, default=None) == 0)  # type: ignore[union-attr]
    if qualified in FULL_TENSORS or (type(site.func) is cst.Attribute and site.func.attr.value == "new_full"):
        element = index.parent(site)
        sequence = index.parent(element)
        call = index.parent(index.parent(sequence)) if sequence is not None else None
        return (type(element) is cst.Element and type(sequence) in (cst.Tuple, cst.List)
                and sequence.elements[0] is not element
                and type(call) is cst.Call and index.qualify(call.func) in _CONCATENATE)
    return _right_padding_tokenizer(ctx, site)


def _right_padding_tokenizer(ctx, site: cst.Call) -> bool:
    """A tokenizer call (or padding collator) of a checkpoint that pads on the right."""
    func = site.func
    if ctx.index.qualify(func) in PADDING_COLLATORS:
        tokenizer = get_arg(site, "tokenizer", 0)
        return tokenizer is not None and pads_on_the_right(ctx, tokenizer.value)
    if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS | {"pad"}:
        return pads_on_the_right(ctx, func.value)
    return pads_on_the_right(ctx, func)


def _list_padding(index):
    """`ids + [pad_id] * (max_len - len(ids))`, `tokens + [PAD] * n`: padding a list of ids,
    or of tokens later converted to ids, by hand."""
    roots = [node.value for node in index.assignments if node.value is not None]
    roots += [arg.value for call in index.calls for arg in call.args]
    for root in roots:
        for node in walk(root):
            if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
                for side in (node.left, node.right):
                    element = side.elements[0].value if type(side) is cst.List and len(side.elements) == 1 else None
                    if element is not None and (pad_id_like(element) or is_pad_token_name(last_name(element))):
                        yield node
                        return


# --- tokenizers, ids and labels (data-pipeline rules) -----------------------------------


TOKENIZER_ENCODE_METHODS = frozenset({"__call__", "encode", "encode_plus", "batch_encode_plus", "apply_chat_template",
                                      "prepare_seq2seq_batch"})
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


def tokenizer_object(data: DataView, expr: cst.BaseExpression | None) -> bool:
    """Is `expr` a tokenizer object (`tokenizer`, `self.tok`, a variable assigned from a
    `*Tokenizer*` class)? Stricter than `tokenizer_like`: `tokens`, `tokenize` are not."""
    name = last_name(expr)
    if name is None:
        return False
    if any(p in _TOKENIZER_WORDS or p.startswith("tokenizer") for p in snake_parts(name)):
        return True
    return name in data.tokenizer_variables


def tokenizer_encode_calls(data: DataView) -> list[cst.Call]:
    """Calls that encode text with a tokenizer: `tokenizer(texts, ...)`, `self.tok(...)`,
    `tokenizer.encode_plus(...)`. A local function (`tokenize(batch)`) is a wrapper, not one.
    (Computed once per file by `ctx.data.tokenizer_encode_calls`.)"""
    index = data.index
    out = []
    for call in index.calls:
        func = call.func
        receiver = (func.value if type(func) is cst.Attribute and func.attr.value in TOKENIZER_ENCODE_METHODS
                    else func)
        if type(receiver) is cst.Name and receiver.value in index.functions_by_name:
            continue
        if tokenizer_object(data, receiver):
            out.append(call)
    return out


def pads_in_call(call: cst.Call) -> bool:
    """The call asks for padding: truthy `padding=` (not `False`/`"do_not_pad"`/an int), the
    legacy `pad_to_max_length=True`, or the older `prepare_seq2seq_batch(...)`, which pads to
    the longest unless told otherwise."""
    legacy = get_arg(call, "pad_to_max_length")
    if legacy is not None and literal_value(legacy.value, default=True) not in _NO_PADDING:
        return True
    padding = get_arg(call, "padding")
    if padding is None:
        return type(call.func) is cst.Attribute and call.func.attr.value == "prepare_seq2seq_batch"
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


def module_constant(data: DataView, expr: cst.BaseExpression | None):
    """A literal, or a name whose value as the program runs by default is a literal
    (`ctx.bindings`); else Ellipsis."""
    value = literal_value(expr, default=Ellipsis)
    if value is not Ellipsis or type(expr) is not cst.Name:
        return value
    return data.bindings.value(expr, Ellipsis)


# ids and labels: shared by TL101 (unpadded ids) and TL106 (labels copied from ids)

_TENSOR_METHODS = {"to", "cuda", "cpu", "long", "int", "unsqueeze", "view", "reshape", "clone", "detach"}
# torch constructors whose ids can hold no padding when built from literals or at random
_LITERAL_TENSORS = {"torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor"}
_SYNTHETIC_TENSORS = {"torch.randint", "torch.arange"}


def _ids_word(name: object) -> bool:
    """`input_ids`, and any key or name ending in it (`padded_input_ids`, `chosen_input_ids`)."""
    return isinstance(name, str) and (name == "input_ids" or name.endswith("_input_ids"))


def ids_expression(expr: cst.BaseExpression, ids_names: set[str]) -> bool:
    """`batch["input_ids"]`, `enc.input_ids` (any key or attribute ending in `input_ids`:
    `batch["chosen_input_ids"]`), or a name holding input ids (`new_input_ids` included)."""
    if type(expr) is cst.Subscript and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if type(index) is cst.Index and type(index.value) is cst.SimpleString:
            return _ids_word(index.value.evaluated_value)
    if type(expr) is cst.Attribute:
        return _ids_word(expr.attr.value)
    if type(expr) is cst.Name:
        return expr.value in ids_names or _ids_word(expr.value)
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("to", "cuda"):
        return ids_expression(expr.func.value, ids_names)
    return False


def ids_variables(index: FileIndex) -> set[str]:
    """Local names assigned input ids (`ids = batch["input_ids"]`), or a tokenizer's
    conversion of tokens to ids (`indexed_tokens = [tok.convert_tokens_to_ids(s) for s in
    batch]`, `torch.tensor(...)` of one); once per file as `ctx.data.ids_variables`."""
    out: set[str] = set()
    for node in index.assignments:
        if type(node) is cst.Assign and (ids_expression(node.value, set()) or _converts_to_ids(node.value)):
            out.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
    return out


_TENSOR_CONSTRUCTORS = frozenset({"torch.tensor", "torch.LongTensor", "torch.as_tensor"})


def _converts_to_ids(expr: cst.BaseExpression) -> bool:
    """`tokenizer.convert_tokens_to_ids(tokens)`, in a list comprehension or a list, made a
    tensor (`torch.tensor(...)`) or moved (`.to(device)`)."""
    for _ in range(6):
        if type(expr) is cst.ListComp:
            expr = expr.elt
        elif type(expr) is cst.List and expr.elements:
            expr = expr.elements[0].value
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute:
            method = expr.func.attr.value
            if method == "convert_tokens_to_ids":
                return True
            if method not in ("to", "cuda", "long"):
                return False
            expr = expr.func.value
        elif type(expr) is cst.Call and dotted_name(expr.func) in _TENSOR_CONSTRUCTORS and expr.args:
            expr = expr.args[0].value
        else:
            return False
    return False


def _embedded(ctx, node: cst.CSTNode, name: str) -> bool:
    """`name`, where `node` is, holds ids fed to an embedding lookup (`embedded_ids`)."""
    scope = ctx.index.enclosing_function(node) or ctx.index.module
    return (id(scope), name) in ctx.data.embedded_ids(ctx)


def _literal_data(expr: cst.BaseExpression) -> bool:
    """A (nested) list/tuple of literal numbers: `[[0, 2, 3, 1]]`."""
    if type(expr) is cst.List or type(expr) is cst.Tuple:
        return all(_literal_data(el.value) for el in expr.elements if type(el) is not cst.StarredElement)
    return is_literal(expr)


def enables_padding(index) -> bool:
    """`tok.enable_padding(...)` (the `tokenizers` library): later encodes pad by default."""
    return any(type(c.func) is cst.Attribute and c.func.attr.value == "enable_padding" for c in index.calls)


def unpadded_ids(data: DataView, expr: cst.BaseExpression, scope, depth: int = 0) -> bool:
    """Is `expr` provably unpadded ids: a tokenizer call without (truthy) padding, synthetic
    ids (`torch.randint`, a literal `torch.tensor([[...]])`), or a local variable every
    assignment of which is one of those? (Taken from it by `["input_ids"]`/`.input_ids`,
    moved with `.to(device)`, … .)"""
    if depth > 4:
        return False
    index = data.index
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
        if not tokenizer_like(data, receiver) or enables_padding(index):
            return False
        return not pads_in_call(expr)
    if type(expr) is cst.Name:
        return _unpadded_name(data, expr.value, scope, depth)
    return False


def _unpadded_name(data: DataView, name: str, scope, depth: int) -> bool:
    """Every binding of `name` in `scope` is an unpadded source (and there is one)."""
    values = []
    for binding in data.bindings.in_scope(scope, name):
        if binding.kind != ASSIGN or binding.value is None:
            return False  # a parameter, a loop/`with` target, `+=`, unpacked: origin unknown
        values.append(binding.value)
    return bool(values) and all(unpadded_ids(data, value, scope, depth + 1) for value in values)


def _minus_100(expr: cst.CSTNode) -> bool:
    return literal_value(expr, default=None) == -100


def _ignore_constant(expr: cst.CSTNode) -> bool:
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


def masks_pad_labels_sites(ctx):
    """Pad positions kept out of the loss: a label-masking collator, a -100 written into
    labels, or a loss `ignore_index` other than the default -100 (the pad id; a name whose
    value as the program runs by default is -100 is the default)."""
    index = ctx.index
    for call in index.calls:
        if index.qualify(call.func) in LABEL_MASKING_COLLATORS or get_arg(call, "label_pad_token_id"):
            yield call
            return
    masking = ctx.data.label_masking
    if masking.writes_ignore_label:
        yield index.module
        return
    for arg in masking.ignore_index_args:
        # `ignore_index=pad_id` where `pad_id` is -100 as the program runs by default (a
        # parameter defaulting to -100 that no call here sets) keeps the pads in the loss
        if not _minus_100(arg.value) and ctx.bindings.value(arg.value, Ellipsis) != -100:
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
    masking = ctx.data.label_masking
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
            key = inner.value.evaluated_value
            return key if isinstance(key, str) else ""  # `batch[b"labels"]`: a bytes key is no label name
    return ""


def pad_is_eos_sites(data: DataView):
    """`tokenizer.pad_token = tokenizer.eos_token`, `tok.pad_token_id = tok.eos_token_id`,
    `tokenizer.add_special_tokens({"pad_token": tokenizer.eos_token})`."""
    index = data.index
    for node in index.assignments:
        if type(node) is cst.Assign and eos_like(node.value):
            for target in node.targets:
                t = target.target
                if type(t) is cst.Attribute and t.attr.value in ("pad_token", "pad_token_id") \
                        and tokenizer_object(data, t.value):
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
    index, data = ctx.index, ctx.data
    for call, value in _pad_token_settings(index):
        if not eos_like(value) and not _eos_literal(value):
            yield call
            return
    for node in index.assignments:
        if type(node) is cst.Assign and not eos_like(node.value) and not _eos_literal(node.value):
            for target in node.targets:
                t = target.target
                if type(t) is cst.Attribute and t.attr.value == "pad_token" and tokenizer_object(data, t.value):
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
        if qualified in DATA_LOADERS or (qualified.startswith(("transformers.", "trl."))
                                         and qualified.endswith("Trainer")):
            yield call
            return


def static_shapes_sites(ctx):
    """Code that wants fixed-length text: XLA/TPU (`torch_xla`: every new shape recompiles)
    or diffusion pipelines (`diffusers`: the CLIP text encoder is conditioned on prompts
    padded to its full length)."""
    imports = ctx.index.imports
    if imports.imports_module("torch_xla") or imports.imports_module("diffusers"):
        yield ctx.index.module


def _checkpoint_of(data: DataView, call: cst.Call):
    arg = get_arg(call, "pretrained_model_name_or_path", 0)
    value = module_constant(data, arg.value) if arg is not None else Ellipsis
    return value if isinstance(value, str) else None


_MODEL_KEYWORD_PARTS = frozenset({"model", "pretrained", "checkpoint", "backbone"})


def _checkpoints_given_to_models(index, data: DataView) -> set[str]:
    """Literal checkpoints that a constructor or factory of the file takes under a model's
    keyword (`LanguageModelingTransformer(pretrained_model_name_or_path="gpt2")`,
    `pipeline("text-generation", model="gpt2")`, `Classifier(backbone="bert-base-cased")`):
    the file builds its model from that checkpoint, as with `AutoModel.from_pretrained`."""
    out: set[str] = set()
    for call in index.calls:
        name = (dotted_name(call.func) or "").lower()
        if any(word in name for word in ("tokenizer", "config", "processor", "extractor")):
            continue
        if call.args and call.args[0].keyword is None and "model" in snake_parts(last_name(call.func) or ""):
            value = module_constant(data, call.args[0].value)  # `get_model(model_id, ...)`: a model factory
            if isinstance(value, str):
                out.add(value)
        for arg in call.args:
            if arg.keyword is None:
                continue
            parts = set(snake_parts(arg.keyword.value))
            if not parts & _MODEL_KEYWORD_PARTS or "tokenizer" in parts:
                continue
            value = module_constant(data, arg.value)
            if isinstance(value, str):
                out.add(value)
    return out


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
    index, data = ctx.index, ctx.data
    model_checkpoints = set()
    tokenizers = []
    for call in index.calls:
        cls = _pretrained_class(index, call)
        if cls is None or cls[:1].islower():
            continue
        if "Tokenizer" in cls:
            tokenizers.append(call)
        elif "Processor" not in cls and "Extractor" not in cls and cls not in ("PeftConfig", "LoraConfig"):
            # a model or the (Auto/Generation) config one is built from; not an adapter's config
            checkpoint = _checkpoint_of(data, call)
            if checkpoint is None:  # `PeftModel.from_pretrained(base_model, adapter_id)`: the adapter's
                adapter = get_arg(call, "model_id", 1)
                value = module_constant(data, adapter.value) if adapter is not None else None
                checkpoint = value if isinstance(value, str) else None
            if checkpoint is not None:
                model_checkpoints.add(checkpoint)
    if tokenizers:
        model_checkpoints |= _checkpoints_given_to_models(index, data)
    for call in tokenizers:
        options, dynamic = {}, []
        for key in TOKENIZER_OPTIONS:
            arg = get_arg(call, key)
            if arg is None:
                continue
            value = module_constant(data, arg.value)
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
        checkpoint = _checkpoint_of(data, call)
        function = index.enclosing_function(call)
        arms = _arms(index, call)
        yield call, TokenizerFact(
            checkpoint, options, dynamic, var, function.name.value if function is not None else None,
            with_model=checkpoint is not None and checkpoint in model_checkpoints, test_file=ctx.is_test_file,
            decode_only=_decode_only(index, parent.targets[0].target)
            if type(parent) is cst.Assign and len(parent.targets) == 1 else False, arms=arms)


def _arms(index, node: cst.CSTNode) -> tuple[tuple[int, int], ...]:
    """The alternatives `node` sits in, as (position of the branching statement, which arm):
    the body or the `else`/`elif` of an `if` (or of a conditional expression), a `case` of a
    `match`, the body or a handler of a `try`. Two tokenizers in different arms of one
    statement are never both built in a run."""
    out = []
    child = node
    for parent in index.ancestors(node):
        kind = type(parent)
        arm = None
        if kind is cst.If or kind is cst.IfExp:
            arm = 0 if child is parent.body else 1 if child is parent.orelse else None
        elif kind is cst.Match:
            arm = next((i for i, case in enumerate(parent.cases) if case is child), None)
        elif kind is cst.Try or kind is cst.TryStar:
            arm = 0 if child is parent.body else next(
                (i + 1 for i, handler in enumerate(parent.handlers) if handler is child), None)
        if arm is not None:
            out.append((index.position[id(parent)], arm))
        child = parent
    return tuple(out)


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
    index, data = ctx.index, ctx.data
    for call in index.calls:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "save_pretrained" and call.args:
            value = module_constant(data, call.args[0].value)
            yield call, TokenizerSavedFact(value.rstrip("/") if isinstance(value, str) else None)
