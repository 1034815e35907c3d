"""TL201 inconsistent-norm-placement: one model mixes pre-norm and post-norm residuals,
or builds torch.nn transformer layers with different `norm_first`; also across files, for
parts (sub-layers keeping their own residual) that a block of another file assembles."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.rules.base import Rule, listing
from tlint.views.model import norm_first_value

if TYPE_CHECKING:
    from tlint.context import FileContext

_LAYERS_WITH_NORM_FIRST = frozenset(
    {"torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer"}
)
_STYLE_TEXT = {"pre": "pre-norm (`x = x + f(norm(x))`)", "post": "post-norm (`x = norm(x + f(x))`)"}


_EMPTY = cst.Module([])


def _branches(index, node: cst.CSTNode) -> dict[str, bool]:
    """The `if`/`else` (and `a if c else b`) branches `node` sits in: the condition's code
    -> True for the body, False for the `else`/`elif` side. Keyed by the condition's text,
    so `if self.pre_norm:` tested again in another block of the model is the same choice."""
    out: dict[str, bool] = {}
    child = node
    for anc in index.ancestors(node):
        if type(anc) in (cst.If, cst.IfExp) and (child is anc.body or child is anc.orelse):
            test, side = anc.test, child is anc.body
            while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, side = test.expression, not side  # `if not self.pre_norm:`
            out.setdefault(_EMPTY.code_for_node(test).strip(), side)
        child = anc
    return out


def _exclusive(a: dict[str, bool], b: dict[str, bool]) -> bool:
    """Do two nodes sit on different branches of one conditional (never both run)?"""
    return any(key in b and b[key] != side for key, side in a.items())


def _minority(index, items: list[tuple[cst.CSTNode, str]]) -> tuple[str, list[cst.CSTNode]] | None:
    """(majority style, nodes of the other style); ties go to the style seen first. A node
    is kept only if some node of the majority style can run together with it: the two
    branches of `if self.pre_norm: ... else: ...` are a configurable choice, not a mix."""
    styles = [style for _, style in items]
    if len(set(styles)) < 2:
        return None
    first = styles[0]
    other = next(s for s in styles if s != first)
    majority = other if styles.count(other) > styles.count(first) else first
    branches = {id(node): _branches(index, node) for node, _ in items}
    majority_nodes = [node for node, style in items if style == majority]
    minority = [
        node for node, style in items
        if style != majority and any(not _exclusive(branches[id(node)], branches[id(m)]) for m in majority_nodes)
    ]
    return majority, minority


def _root(parent: dict, key):
    while parent[key] != key:
        parent[key] = parent[parent[key]]
        key = parent[key]
    return key


class InconsistentNormPlacement(Rule):
    code = "TL201"
    name = "inconsistent-norm-placement"
    kind = "practice"
    # pre-filter: module classes (a torch.nn/HF/Lightning base, or `forward`), `norm_first=`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward", "norm_first"})
    summary = "Residual blocks of one model mix pre-norm and post-norm."
    probes = ("depth-growth",)
    # parts of one model in different files: the files some entry point loads together
    project_scope = "program"
    project_kinds = ("norm-residual",)
    project_facts = ("norm-residual", "module-parts")

    def check_project(self, path, related):
        """Models of different files (each consistent with itself) joined by a class of
        another file that holds parts of both: `EncoderLayer` holding `MultiHeadAttention`
        and `PositionwiseFeedForward`, each keeping its own residual and norm."""
        residuals: dict[tuple, list] = {}  # (file, model) -> [(file, fact)]
        models_of: dict[str, set[tuple]] = {}  # class name -> the models it belongs to
        for other, facts in related.items():
            for fact in facts:
                if fact.kind == "norm-residual" and fact.range is not None:
                    key = (other, tuple(fact.data.model))
                    residuals.setdefault(key, []).append((other, fact))
                    for name in fact.data.model:
                        models_of.setdefault(name, set()).add(key)
        parent = {key: key for key in residuals}
        holders: dict[tuple, str] = {}
        for facts in related.values():
            for fact in facts:
                if fact.kind != "module-parts":
                    continue
                keys = sorted({key for part in fact.data.parts for key in models_of.get(part, ())}, key=str)
                for key in keys[1:]:
                    parent[_root(parent, key)] = _root(parent, keys[0])
                if len(keys) > 1:
                    holders.setdefault(_root(parent, keys[0]), fact.data.cls)
        joined: dict[tuple, list] = {}
        for key in residuals:
            joined.setdefault(_root(parent, key), []).append(key)
        for keys in joined.values():
            if len(keys) < 2 or not any(key[0] == path for key in keys):
                continue
            items = sorted((item for key in keys for item in residuals[key]),
                           key=lambda item: (str(item[0]), item[1].range.start.line, item[1].range.start.column))
            styles = [fact.data.style for _, fact in items]
            first = styles[0]
            other_style = next((style for style in styles if style != first), None)
            if other_style is None:
                continue
            majority = other_style if styles.count(other_style) > styles.count(first) else first
            examples = listing(f"`{cls}`" for cls in sorted({fact.data.cls for _, fact in items
                                                             if fact.data.style == majority}))
            holder = next((holders[_root(parent, key)] for key in keys if _root(parent, key) in holders), None)
            for other, fact in items:
                if other == path and fact.data.style != majority:
                    yield fact.range, (
                        f"{_STYLE_TEXT[fact.data.style]} residual in `{fact.data.cls}`, while "
                        f"{examples}, assembled with it"
                        + (f" by `{holder}`" if holder else "")
                        + f" in another file, {'is' if len(examples) == 1 else 'are'} {_STYLE_TEXT[majority]}: "
                        "mixed norm placement changes how the residual stream grows with depth; pick one style"
                    ), examples

    def check(self, ctx: FileContext) -> None:
        view = ctx.models
        index = ctx.index
        for group in view.towers():
            items = [
                (residual.node, residual.style)
                for module_class in group
                for residual in module_class.residuals()
                if residual.style in ("pre", "post")
            ]
            verdict = _minority(index, items)
            if verdict is None:
                continue
            majority, nodes = verdict
            for node in nodes:
                style = "post" if majority == "pre" else "pre"
                ctx.report(node, f"{_STYLE_TEXT[style]} residual in a model whose other residuals are "
                                 f"{_STYLE_TEXT[majority]}: mixed norm placement changes how the residual "
                                 "stream grows with depth; pick one style")
        self._check_layers(ctx)

    @staticmethod
    def _check_layers(ctx) -> None:
        """torch.nn layers built with different `norm_first` in one model: the layers built
        inside the module classes of one composition group, or, outside module classes, in
        one function (or at module level)."""
        index = ctx.index
        view = ctx.models
        group_of = {module_class.name: number
                    for number, group in enumerate(view.towers()) for module_class in group}
        layers: dict[object, list[tuple[cst.CSTNode, str]]] = {}
        for call in index.calls:
            if index.qualify(call.func) not in _LAYERS_WITH_NORM_FIRST:
                continue
            value = norm_first_value(call)
            if value is None:
                continue
            owner = index.enclosing_class(call)
            if owner is not None and owner.name.value in group_of:
                key: object = ("model", group_of[owner.name.value])
            else:
                key = ("scope", id(index.enclosing_function(call) or index.module))
            layers.setdefault(key, []).append((call, "pre" if value else "post"))
        for items in layers.values():
            verdict = _minority(index, items)
            if verdict is None:
                continue
            majority, nodes = verdict
            for node in nodes:
                ctx.report(node, f"layer built with norm_first={majority != 'pre'} while the other layers of "
                                 f"this model use norm_first={majority == 'pre'}: one model mixes pre-norm and "
                                 "post-norm layers")
