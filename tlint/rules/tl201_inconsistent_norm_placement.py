"""TL201 inconsistent-norm-placement: one model mixes pre-norm and post-norm residuals,
or builds torch.nn transformer layers with different `norm_first`."""

from __future__ import annotations

from tlint.rules.base import Rule
from tlint.views.model import norm_first_value

_LAYERS_WITH_NORM_FIRST = frozenset(
    {"torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer"}
)
_STYLE_TEXT = {"pre": "pre-norm (`x = x + f(norm(x))`)", "post": "post-norm (`x = norm(x + f(x))`)"}


def _minority(items: list[tuple[object, str]]) -> tuple[str, list[object]] | None:
    """(majority style, nodes of the other style); ties go to the style seen first."""
    styles = [style for _, style in items]
    if len(set(styles)) < 2:
        return None
    first = styles[0]
    other = next(s for s in styles if s != first)
    majority = other if styles.count(other) > styles.count(first) else first
    return majority, [node for node, style in items if style != majority]


class InconsistentNormPlacement(Rule):
    code = "TL201"
    name = "inconsistent-norm-placement"
    severity = "warning"
    summary = "Residual blocks of one model mix pre-norm and post-norm."

    def check(self, ctx) -> None:
        view = ctx.models
        for group in view.groups():
            items = [
                (residual.node, residual.style)
                for module_class in group
                for residual in module_class.residuals()
                if residual.style in ("pre", "post")
            ]
            verdict = _minority(items)
            if verdict is None:
                continue
            majority, nodes = verdict
            for node in nodes:
                style = "post" if majority == "pre" else "pre"
                ctx.report(node, f"{_STYLE_TEXT[style]} residual in a model whose other residuals are "
                                 f"{_STYLE_TEXT[majority]}: mixed norm placement changes how the residual "
                                 "stream grows with depth; pick one style")
        layers = []
        for call in ctx.index.calls:
            if ctx.index.qualify(call.func) in _LAYERS_WITH_NORM_FIRST:
                value = norm_first_value(call)
                if value is not None:
                    layers.append((call, "pre" if value else "post"))
        verdict = _minority(layers)
        if verdict is not None:
            majority, nodes = verdict
            for node in nodes:
                ctx.report(node, f"layer built with norm_first={majority != 'pre'} while the other layers of "
                                 f"this file use norm_first={majority == 'pre'}: one model mixes pre-norm and "
                                 "post-norm layers")
