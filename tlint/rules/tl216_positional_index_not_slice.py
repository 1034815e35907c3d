"""TL216 positional-index-not-slice: a positional table indexed with the sequence length
(`self.pe[:, x.size(1)]`) where the slice up to it (`self.pe[:, :x.size(1)]`) was meant:
one position vector is added to every token, and the model no longer knows token order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint import fixes
from tlint.cst import dotted_name, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.bindings import ASSIGN, PARAM
from tlint.views.vocabulary import is_positional_name

if TYPE_CHECKING:
    from tlint.context import FileContext

# Words that make an index a position, not a length (incremental decoding with a cache:
# `self.pe[:, past_length]`, `self.pos[:, cache.size(1)]`, `self.pe[:, offset]`).
_POSITION_WORDS = frozenset({"past", "cache", "cached", "offset", "start", "step", "prev", "previous", "cur",
                             "current", "pos", "position", "idx", "index", "kv", "memory", "mem", "history",
                             "last", "i", "t0"})
# A tensor whose length is a position: a cache or the past of incremental decoding.
_CACHE_WORDS = frozenset({"past", "cache", "cached", "kv", "memory", "mem", "history", "prev", "previous"})
_LENGTH_WORDS = frozenset({"len", "length", "seqlen", "lengths"})


def _measured(expr) -> str | None:
    """The tensor whose length `expr` is: `x.size(1)`, `x.shape[1]`, `len(x)`, `x.size()[1]`."""
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "size":
        if len(expr.args) == 1 and isinstance(literal_value(expr.args[0].value, None), int):
            return dotted_name(expr.func.value) or "?"
    if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        inner = expr.value
        if type(inner) is cst.Attribute and inner.attr.value == "shape":
            return dotted_name(inner.value) or "?"
        if type(inner) is cst.Call and type(inner.func) is cst.Attribute and inner.func.attr.value == "size" \
                and not inner.args:
            return dotted_name(inner.func.value) or "?"
    if type(expr) is cst.Call and dotted_name(expr.func) == "len" and len(expr.args) == 1:
        return dotted_name(expr.args[0].value) or "?"
    return None


def _position_word(name: str | None) -> bool:
    return bool(name) and bool(set(snake_parts(name.rsplit(".", 1)[-1])) & _POSITION_WORDS)  # type: ignore[union-attr]


def _cache_word(tensor: str | None) -> bool:
    return bool(tensor) and bool(set(snake_parts(tensor.replace(".", "_"))) & _CACHE_WORDS)  # type: ignore[union-attr]


def _shape_source(value) -> str | None:
    """`x.shape`, `x.size()`, `x.shape[:2]` -> "x": the tensor an unpacking reads."""
    if type(value) is cst.Subscript:
        value = value.value
    if type(value) is cst.Attribute and value.attr.value == "shape":
        return dotted_name(value.value) or "?"
    if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "size" \
            and not value.args:
        return dotted_name(value.func.value) or "?"
    return None


class PositionalIndexNotSlice(Rule):
    code = "TL216"
    name = "positional-index-not-slice"
    kind = "defect"
    default_enabled = False  # no real case with a fix, no ecosystem finding yet (see the CHANGELOG)
    # pre-filter: the table is a torch tensor (a buffer, a Parameter, a torch call, an Embedding's
    # weight), so the file imports torch (the positional words, `pe`, `pos`, are substrings of
    # too many words to filter on)
    tokens = frozenset({"torch"})
    summary = "A positional table is indexed with the sequence length instead of sliced up to it."
    probes = ("position-blind",)

    def check(self, ctx: FileContext) -> None:
        models = ctx.models
        for module_class in models.classes.values():
            if not any(is_positional_name(name) for name in module_class.reads):
                continue
            for method, fn in module_class.methods.items():
                if method == "__init__":
                    continue
                for node in walk(fn.body):
                    if type(node) is not cst.Subscript:
                        continue
                    table = self._table(ctx, module_class, node.value)
                    if table is None:
                        continue
                    for element in node.slice:
                        part = element.slice
                        if type(part) is not cst.Index or part.star is not None:
                            continue
                        length = self._length(ctx, part.value)
                        if length is None:
                            continue
                        value = fixes.short_code(ctx.module, part.value)
                        elements = [e.with_changes(slice=cst.Slice(lower=None, upper=part.value)) if e is element
                                    else e for e in node.slice]
                        fix = fixes.fix("unsafe", f"Slice up to it: `:{value}`",
                                        fixes.replace(node, fixes.code_at(ctx.index, node,
                                                                          node.with_changes(slice=elements))))
                        ctx.report(node, f"positional table `{table}` indexed with `{value}` ({length}): that is "
                                         "one position (past the last token's), added to every token, so the "
                                         f"model does not know token order; slice it, `[..., :{value}]`", fix=fix)
                        break

    def _table(self, ctx, module_class, expr) -> str | None:
        """`self.pe`, `self.pos_emb.weight`, `self.pos_table.data`: a positional tensor."""
        holder = expr
        if type(holder) is cst.Attribute and holder.attr.value in ("weight", "data"):
            holder = holder.value
            if type(holder) is cst.Attribute and dotted_name(holder.value) == "self" \
                    and is_positional_name(holder.attr.value):
                sub = module_class.declared(holder.attr.value)
                if sub is not None and sub.ctor == "torch.nn.Embedding":
                    return dotted_name(expr)
            return None
        if not (type(holder) is cst.Attribute and dotted_name(holder.value) == "self"
                and is_positional_name(holder.attr.value)):
            return None
        name = holder.attr.value
        if name in module_class.buffers:
            return dotted_name(expr)
        for binding in ctx.bindings.attribute(holder):
            value = binding.value
            if type(value) is cst.Call:
                ctor = ctx.index.qualify(value.func) or ""
                if ctor == "torch.nn.Parameter" or (ctor.startswith("torch.") and not ctor.startswith("torch.nn.")):
                    return dotted_name(expr)
        return None

    def _length(self, ctx, expr) -> str | None:
        """What makes `expr` a sequence length: "the length of `x`", "the length"."""
        tensor = _measured(expr)
        if tensor is not None:
            return None if _cache_word(tensor) else f"the length of `{tensor}`"
        if type(expr) is not cst.Name or _position_word(expr.value):
            return None
        reaching = ctx.bindings.reaching(expr)
        if not reaching:
            return None
        for binding in reaching:
            if binding.kind == PARAM:
                if not set(snake_parts(expr.value)) & _LENGTH_WORDS:
                    return None
                continue
            if binding.kind != ASSIGN:
                return None
            node = binding.node
            if binding.value is not None and _measured(binding.value) is not None:
                if _cache_word(_measured(binding.value)):
                    return None
                continue
            if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) in (
                    cst.Tuple, cst.List):
                source = _shape_source(node.value)
                if source is not None and not _cache_word(source):
                    continue
            return None
        return "the sequence length"

