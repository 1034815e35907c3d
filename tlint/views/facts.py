"""Project facts: small serialisable statements each file makes, for cross-file rules.

A fact is (kind, node, data). The engine turns the node into a range and keeps the facts
of every file of the project; a rule's `ctx.report(..., when=ProjectCondition(...))` is
decided on the facts of related files. Kinds so far:

- `pads`: the file pads sequences (tokenizer call with truthy `padding=`, a padding
  collator, `pad_sequence`, `F.pad` on ids, `tokenizer.pad`).
- `transformer`: the file builds or loads a transformer (imports `transformers`, uses a
  `torch.nn` transformer/attention module or `scaled_dot_product_attention`, or defines an
  attention/transformer class and computes a softmax).
- `warmup`: the file sets up a learning-rate warmup (see `views.training.warmup_sites`).

Adding a kind: write an extractor below and list it in `EXTRACTORS`.
"""

from __future__ import annotations

import libcst as cst

from tlint.cst import get_arg, last_name, literal_value, snake_parts

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
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call):
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
        if isinstance(func, cst.Attribute) and func.attr.value in ("pad", "enable_padding") and tokenizer_like(index, func.value):
            yield call
            continue
        padding = get_arg(call, "padding")
        if padding is None:
            continue
        value = literal_value(padding.value, default=Ellipsis)
        if value in _NO_PADDING or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        receiver = func.value if isinstance(func, cst.Attribute) and func.attr.value in (
            "__call__", "batch_encode_plus", "encode_plus", "encode", "apply_chat_template") else func
        if tokenizer_like(index, receiver):
            yield call


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


EXTRACTORS = (("pads", padding_sites), ("transformer", transformer_sites), ("warmup", _warmup_sites))
# Fact kinds that cross-file rules report at: only these get a (costly) source range.
POSITIONED: frozenset[str] = frozenset()


def extract_facts(ctx) -> list[tuple[str, cst.CSTNode, dict]]:
    """(kind, node, data) for every fact of the file; an extractor yields a node, or a
    (node, data) pair when the fact carries values (e.g. a tokenizer's arguments)."""
    facts = []
    for kind, extractor in EXTRACTORS:
        for item in extractor(ctx):
            node, data = item if isinstance(item, tuple) else (item, {})
            facts.append((kind, node, data))
    return facts
