"""TL203 missing-residual: a transformer block overwrites its residual stream with a
sub-layer's output instead of adding it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import walk
from tlint.rules.base import Rule

if TYPE_CHECKING:
    from tlint.context import FileContext

_KIND_TEXT = {"attention": "attention", "mlp": "MLP"}


class MissingResidual(Rule):
    code = "TL203"
    name = "missing-residual"
    kind = "likely-defect"
    # pre-filter: module classes: a torch.nn/HF/Lightning base (through an import) or `forward`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
    summary = "A transformer block overwrites the residual stream with a sub-layer's output."
    probes = ("depth-growth", "grad-flow")

    def check(self, ctx: FileContext) -> None:
        for module_class in ctx.models.classes.values():
            if module_class.forward is not None:
                for statement, target in _doubled_outputs(module_class.forward):
                    ctx.report(statement, f"`{target} = {target} + {target}` right after `{target}` was overwritten "
                                          "with a sub-layer's output doubles that output instead of adding the "
                                          "block's input: this branch has no residual connection; keep the input "
                                          f"(`h = {target}`) and add it back (`{target} = h + {target}`)")
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
                listed = {kind: ctx.listing(found) for kind, found in names.items()}
                what = " and ".join(f"{_KIND_TEXT[kind]} {shown}" for kind, shown in listed.items())
                if write.target is None:
                    head = f"`{module_class.name}.forward` returns the output of {what} without adding its input"
                else:
                    head = (f"`{write.target}` is overwritten with the output of {what} without adding the "
                            "stream's earlier value")
                ctx.report(write.node, f"{head}: this branch of the block has no residual connection, so the "
                                       "stream (and the gradient) must pass through the sub-layer; write "
                                       f"`x = x + f(norm(x))` (pre-norm) or `x = norm(x + f(x))` (post-norm)",
                           evidence=ctx.listing(name for shown in listed.values() for name in shown.items))


def _names_bound(statement) -> set[str]:
    out: set[str] = set()
    if (type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
            and type(statement.body[0]) is cst.Assign):
        for target in statement.body[0].targets:
            for node in walk(target.target):
                if type(node) is cst.Name:
                    out.add(node.value)
    return out


def _doubled_outputs(fn: cst.FunctionDef) -> list[tuple[cst.CSTNode, str]]:
    """`x, _ = attn(x, x, x)` then `x = x + x`: the stream, just overwritten by a call that
    read it, added to itself."""
    out: list[tuple[cst.CSTNode, str]] = []
    for block in walk(fn.body):
        if type(block) is not cst.IndentedBlock:
            continue
        previous = None
        for statement in block.body:
            bound = _names_bound(statement)
            if len(bound) == 1 and previous is not None:
                (target,) = bound
                value = statement.body[0].value  # type: ignore[attr-defined]  # an Assign (`_names_bound`)
                if (type(value) is cst.BinaryOperation and type(value.operator) is cst.Add
                        and type(value.left) is cst.Name and type(value.right) is cst.Name
                        and value.left.value == value.right.value == target and target in _names_bound(previous)):
                    before = previous.body[0].value  # type: ignore[attr-defined]
                    if type(before) is cst.Call and any(type(n) is cst.Name and n.value == target
                                                        for arg in before.args for n in walk(arg.value)):
                        out.append((statement, target))
            previous = statement
    return out
