"""TL203 missing-residual: a transformer block overwrites its residual stream with a
sub-layer's output instead of adding it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.rules.base import Rule

if TYPE_CHECKING:
    from tlint.context import FileContext

_KIND_TEXT = {"attention": "attention", "mlp": "MLP"}


class MissingResidual(Rule):
    code = "TL203"
    name = "missing-residual"
    severity = "warning"
    # pre-filter: module classes: a torch.nn/HF/Lightning base (through an import) or `forward`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
    summary = "A transformer block overwrites the residual stream with a sub-layer's output."
    probes = ("depth-growth", "grad-flow")

    def check(self, ctx: FileContext) -> None:
        for module_class in ctx.models.classes.values():
            stream = module_class.stream()
            if not stream.is_transformer_block():
                continue
            last = {}
            for write in stream.overwrites():  # `r = x = self.mlp(...)`: one finding, for the last name
                last[id(write.node)] = write
            for write in last.values():
                names: dict[str, list[str]] = {}
                for use in write.uses:
                    names.setdefault(use.kind, [])
                    if f"`self.{use.name}`" not in names[use.kind]:
                        names[use.kind].append(f"`self.{use.name}`")
                what = " and ".join(f"{_KIND_TEXT[kind]} {', '.join(found)}" for kind, found in names.items())
                if write.target is None:
                    head = f"`{module_class.name}.forward` returns the output of {what} without adding its input"
                else:
                    head = (f"`{write.target}` is overwritten with the output of {what} without adding the "
                            "stream's earlier value")
                ctx.report(write.node, f"{head}: this branch of the block has no residual connection, so the "
                                       "stream (and the gradient) must pass through the sub-layer; write "
                                       f"`x = x + f(norm(x))` (pre-norm) or `x = norm(x + f(x))` (post-norm)")
