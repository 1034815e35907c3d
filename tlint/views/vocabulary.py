"""Names and words several rules share: what marks a padding mask or a positional table by
its name, and what text says an argument is unused on purpose.

Rules never import one another; a word list or a name test that more than one rule needs
lives here (TL102 and TL210 ask `is_padding_mask_name`, the padding facts
`is_pad_token_name`, TL204 and TL205 `is_positional_name`, TL101 and TL103
`documented_unused` over `string_literals`). It is not
a view: nothing here is computed per file or registered on `FileContext`.
"""

from __future__ import annotations

import re

import libcst as cst

from tlint.cst import literal_value, snake_parts, walk

# --- padding masks (TL102, TL210) ----------------------------------------------------------

_PADDING_PARAM_NAMES = {"attention_mask", "key_padding_mask", "src_key_padding_mask", "padding_mask",
                        "pad_mask", "tgt_key_padding_mask", "memory_key_padding_mask", "attn_mask_pad",
                        # which input positions hold tokens (BERT's `input_mask`, `seq_mask`)
                        "input_mask", "inputs_mask", "seq_mask", "sequence_mask"}


def is_padding_mask_name(name: str) -> bool:
    """A parameter name that says it holds a padding mask (`attention_mask`, `pad_mask`,
    `src_key_padding_mask`, any snake_case part `pad`)."""
    lowered = name.lower()
    return lowered in _PADDING_PARAM_NAMES or "pad" in snake_parts(name) or "padding" in lowered


# --- positional tables (TL204, TL205) ------------------------------------------------------

def is_pad_token_name(name: str | None) -> bool:
    """`PAD`, `pad_token`, `tokenizer.pad_token`'s last part: the pad token itself (a token
    list padded with it, `tokens + [PAD] * n`, becomes padded ids once converted)."""
    return snake_parts(name or "") in (["pad"], ["pad", "token"], ["pad", "tok"])


POSITIONAL_PARTS = frozenset({"pos", "position", "positional", "positions", "pe", "wpe", "rope"})


def is_positional_name(name: str) -> bool:
    """An attribute name with a snake_case part that says "position" (`pos_emb`, `wpe`, `pe`)."""
    return bool(set(snake_parts(name)) & POSITIONAL_PARTS)


# --- arguments documented as unused (TL101, TL103) -----------------------------------------

# Words that say an argument is ignored on purpose, in a docstring or a warning message.
_IGNORED_WORDS = re.compile(
    r"\b(unused|not used|never used|ignored|is ignored|not supported|does not support|"
    r"doesn't support|no effect|compatib\w*|deprecated|placeholder|kept for|for bc)\b",
    re.IGNORECASE,
)
_NEXT_ENTRY = re.compile(r"\n\s*\n|\n\s*`?\w+`?\s*(\(|:)")


def string_literals(node: cst.CSTNode) -> list[str]:
    """The values of the string literals under `node` (docstrings and messages included)."""
    out = []
    for n in walk(node):
        if type(n) in (cst.SimpleString, cst.ConcatenatedString):
            value = literal_value(n, None)
            if isinstance(value, str):
                out.append(value)
    return out


def documented_unused(texts: list[str], name: str) -> bool:
    """Some text names `name` and, within the same sentence or two, says it is unused,
    ignored, unsupported, deprecated or kept for compatibility."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
    for text in texts:
        for match in pattern.finditer(text):
            # from the start of its line to the end of its description: the next
            # documented argument (`head_mask (...)`, `head_mask:`) or a blank line ends it
            start = text.rfind("\n", 0, match.start()) + 1
            after = text[match.end(): match.end() + 240]
            end = _NEXT_ENTRY.search(after)
            window = text[start: match.end()] + (after[: end.start()] if end else after)
            if _IGNORED_WORDS.search(window):
                return True
    return False
