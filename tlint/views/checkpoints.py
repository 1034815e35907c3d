"""What a checkpoint name read in the code says: `X.from_pretrained("gpt2")` loads a
decoder-only model whose tokenizer pads on the right. Shared by the padding facts
(`facts_data`: a tokenizer of such a checkpoint pads on the right, `pads_on_the_right`) and
TL101 (a model of such a checkpoint is causal). Nothing here is computed per file or registered on
`FileContext`; `checkpoint_of` reads the bindings view it is given.
"""

from __future__ import annotations

import re

import libcst as cst

from tlint.cst import get_arg
from tlint.views.bindings import ASSIGN

# decoder-only checkpoint families whose tokenizers pad on the right unless told otherwise
# (GPT-2's byte-level BPE tokenizer, which OPT, GPT-Neo and GPT-J reuse; GPT-NeoX/Pythia)
_RIGHT_PADDING_DECODERS = re.compile(
    r"(?:^|[-_/])(?:distil)?gpt-?2(?:$|[-_.])|(?:^|[-_/])opt(?:$|[-_.])|gpt-?neo|gpt-?j(?:$|[-_.])|pythia|dialogpt")


def right_padding_decoder(checkpoint: str) -> bool:
    """`checkpoint` names a decoder-only family whose tokenizer pads on the right by default:
    `gpt2`, `facebook/opt-350m`, `Salesforce/blip2-opt-2.7b` (OPT decodes), `EleutherAI/gpt-neo-125m`,
    `EleutherAI/pythia-160m`; not `bigscience/bloom` or Llama (their tokenizers pad on the left)."""
    return bool(_RIGHT_PADDING_DECODERS.search(checkpoint.lower().rsplit("/", 1)[-1]))


def checkpoint_of(ctx, expr: cst.BaseExpression, depth: int = 0) -> str | None:
    """The checkpoint literal `expr` was loaded from: `X.from_pretrained("name", ...)`, through
    local names, attributes of one (`processor.tokenizer`), methods called on one
    (`.to(device)`) and functions given it first (`get_peft_model(model, config)`); None
    when it cannot be read here."""
    for _ in range(6):
        if depth > 6:
            return None
        if type(expr) is cst.Attribute:
            expr = expr.value
        elif type(expr) is cst.Name:
            if expr.value in ctx.index.imports.aliases:
                return None
            reaching = ctx.bindings.reaching(expr)  # a global read in a function: all its bindings
            if not reaching or any(b.kind != ASSIGN or b.value is None for b in reaching):
                return None
            if len(reaching) > 1:
                found = {checkpoint_of(ctx, b.value, depth + 1) for b in reaching}
                return found.pop() if len(found) == 1 else None
            expr, depth = reaching[0].value, depth + 1
        elif type(expr) is cst.Call:
            if type(expr.func) is cst.Attribute and expr.func.attr.value == "from_pretrained":
                first = get_arg(expr, "pretrained_model_name_or_path", 0)
                value = ctx.bindings.value(first.value, None) if first is not None else None
                return value if isinstance(value, str) else None
            func = expr.func
            if type(func) is cst.Attribute and not (type(func.value) is cst.Name
                                                     and func.value.value in ctx.index.imports.aliases):
                expr, depth = func.value, depth + 1  # `model.to(device)`, `model.cuda()`: the model
                continue
            first = get_arg(expr, None, 0)  # `get_peft_model(model, config)`: what it wraps
            if first is None:
                return None
            expr, depth = first.value, depth + 1
        else:
            return None
    return None


def pads_on_the_right(ctx, tokenizer: cst.BaseExpression) -> bool:
    """`tokenizer` is loaded in this file from a checkpoint whose tokenizer pads on the right
    (`right_padding_decoder`), and the file never sets a `padding_side`."""
    if "padding_side" in ctx.index.identifiers:
        return False
    checkpoint = checkpoint_of(ctx, tokenizer)
    return checkpoint is not None and right_padding_decoder(checkpoint)
