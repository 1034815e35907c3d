"""The data view (`ctx.data`): the data-pipeline questions several rules and project facts
ask of one file, answered once per file: which names hold a tokenizer
(`tokenizer_variables`), which calls encode text with one (`tokenizer_encode_calls`),
which names hold input ids (`ids_variables`; by use, `embedded_ids`: the input of an
embedding lookup), where the file pads (`padding`), where data
read with pandas/numpy flows (`nan_flow`, `views/nan_flow.py`), where pad positions are
kept out of the loss (`label_masking`), and the value of a checkpoint name or a pad id as the program runs
by default (`constant`, through `ctx.bindings`).

The helpers that take it (`tokenizer_like(data, expr)`, `unpadded_ids(data, ...)`, ...)
live in `tlint.views.facts_data` beside the extractors that use them. Built under the
view's failure isolation (`ViewError`) and timed by `--profile`, like every view.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.context import register_view
from tlint.cst import snake_parts
from tlint.views.calls import parameters
from tlint.views.vocabulary import is_positional_name

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex
    from tlint.views.bindings import BindingsView
    from tlint.views.facts_data import LabelMasking
    from tlint.views.nan_flow import NanFlow


class DataView:
    """One file's data-pipeline helpers, computed lazily from its index and bindings."""

    def __init__(self, index: FileIndex, bindings: BindingsView) -> None:
        self.index = index
        self.bindings = bindings

    @cached_property
    def tokenizer_variables(self) -> set[str]:
        """Names (last parts) assigned a `*Tokenizer*`/`*Processor*` construction."""
        from tlint.views.facts_data import tokenizer_variables

        return tokenizer_variables(self.index)

    @cached_property
    def tokenizer_encode_calls(self) -> list[cst.Call]:
        """Calls that encode text with a tokenizer (`tokenizer(texts, ...)`, `tok.encode_plus(...)`)."""
        from tlint.views.facts_data import tokenizer_encode_calls

        return tokenizer_encode_calls(self)

    @cached_property
    def ids_variables(self) -> set[str]:
        """Local names assigned input ids (`ids = batch["input_ids"]`)."""
        from tlint.views.facts_data import ids_variables

        return ids_variables(self.index)

    @cached_property
    def label_masking(self) -> LabelMasking:
        """Where the file keeps pad positions out of the loss."""
        from tlint.views.facts_data import LabelMasking

        return LabelMasking(self.index)

    @cached_property
    def nan_flow(self) -> NanFlow:
        """Where data read with pandas/numpy flows (`views/nan_flow.py`)."""
        from tlint.views.nan_flow import NanFlow

        return NanFlow(self.index, self.bindings.calls)

    def padding(self, ctx: FileContext) -> list[cst.CSTNode]:
        """The file's padding sites (`facts_data.padding_sites`), found once for the `pads`
        and `pads-unsided` facts."""
        found = self.__dict__.get("_padding")
        if found is None:
            from tlint.views.facts_data import padding_sites

            found = self.__dict__["_padding"] = list(padding_sites(ctx))
        return found

    def embedded_ids(self, ctx: FileContext) -> set[tuple[int, str]]:
        """Names that hold token ids by how they are used (`facts_data.embedded_ids`):
        (id of the function or module, name) for each name fed to an embedding lookup, or
        passed to a parameter of the file's function that is; found once per file."""
        found = self.__dict__.get("_embedded")
        if found is None:
            found = self.__dict__["_embedded"] = embedded_ids(ctx)
        return found

    def constant(self, expr: cst.BaseExpression | None) -> Any:
        """A literal, or the value a name has as the program runs by default; Ellipsis
        when it cannot be known."""
        from tlint.views.facts_data import module_constant

        return module_constant(self, expr)


_EMBED_PARTS = frozenset({"embedding", "embeddings", "emb", "embed", "wte"})
_TOKEN_PARTS = frozenset({"token", "tokens", "tok", "word", "words", "text", "vocab", "char"})
_EMBEDDING_FUNCTIONS = frozenset({"torch.nn.functional.embedding", "torch.embedding"})
_IDS_PEEL = frozenset({"long", "int", "to", "cuda", "contiguous", "clone", "detach"})


def _embedding_lookup(ctx, call: cst.Call) -> bool:
    """`self.tok_emb(ids)` where the sub-module is an `nn.Embedding` (not a positional
    table), or, its constructor not known here (`self.token_embedding = text.token_embedding`),
    an attribute named as a token embedding (`token_embedding`, `word_embeddings`, `wte`,
    `embed_tokens`); `F.embedding(ids, weight)`."""
    func = call.func
    if type(func) is not cst.Attribute:
        return ctx.index.qualify(func) in _EMBEDDING_FUNCTIONS
    name = func.attr.value
    if "emb" not in name.lower() and name != "wte":
        return ctx.index.qualify(func) in _EMBEDDING_FUNCTIONS
    if type(func.value) is not cst.Name or func.value.value != "self":
        return False
    cls = ctx.index.enclosing_class(call)
    module_class = ctx.models.classes.get(cls.name.value) if cls is not None else None
    sub = module_class.attribute_of(func) if module_class is not None else None
    if sub is not None and sub.ctor is not None:
        return sub.ctor == "torch.nn.Embedding" and not is_positional_name(name)
    parts = set(snake_parts(name))
    return name in ("wte", "embed_tokens") or bool(parts & _EMBED_PARTS and parts & _TOKEN_PARTS)


def embedded_ids(ctx) -> set[tuple[int, str]]:
    """(id of the enclosing function, or of the module, name) for each name fed to an
    embedding lookup (`_embedding_lookup`: `self.text_emb(text)`, through `.long()` and
    slices), and, one call up, for each name a caller of that function of the file passes
    to the parameter: ids known by how they are consumed, whatever their name (`text`,
    `seq`, `tokens`). `ctx.data.embedded_ids(ctx)` holds them once per file."""
    index = ctx.index
    found: set[tuple[int, str]] = set()
    if "emb" not in ctx.text and "Emb" not in ctx.text and "wte" not in ctx.text:
        return found  # no embedding is spelled here
    for call in index.calls:
        if not call.args or call.args[0].keyword is not None or call.args[0].star or not _embedding_lookup(ctx, call):
            continue
        arg = call.args[0].value
        while True:
            if type(arg) is cst.Subscript:
                arg = arg.value
            elif type(arg) is cst.Call and type(arg.func) is cst.Attribute and arg.func.attr.value in _IDS_PEEL:
                arg = arg.func.value
            else:
                break
        if type(arg) is not cst.Name:
            continue
        function = index.enclosing_function(call)
        found.add((id(function if function is not None else index.module), arg.value))
        if function is None or arg.value not in {p.name.value for p in parameters(function)}:
            continue
        for site in ctx.calls.callers(function):
            value = (site.arguments or {}).get(arg.value)
            if type(value) is cst.Name:
                caller = index.enclosing_function(site.call)
                found.add((id(caller if caller is not None else index.module), value.value))
    return found


@register_view("data")
def data(ctx: FileContext) -> DataView:
    """The file's data-pipeline helpers (`ctx.data`)."""
    return DataView(ctx.index, ctx.bindings)
