"""TL109 label-shift-mismatch: labels shifted by hand for a Hugging Face causal-LM head
that shifts again (double shift), or a next-token loss in a causal model that compares
logits with the unshifted input ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, walk
from tlint.rules.base import Rule
from tlint.views.model import causal_evidence, loss_calls, slice_bounds

if TYPE_CHECKING:
    from tlint.context import FileContext

_RESHAPES = ("view", "reshape", "flatten", "contiguous", "long", "to")


def _hf_causal_lm(index, call: cst.Call) -> bool:
    name = index.qualify(call.func) or ""
    if type(call.func) is cst.Attribute and call.func.attr.value == "from_pretrained":
        name = index.qualify(call.func.value) or ""
    return name.startswith(("transformers.", "peft.", "trl.")) and name.endswith(("ForCausalLM", "LMHeadModel"))


def _causal_lm_names(index) -> set[str]:
    """Variables/attributes holding a Hugging Face causal LM (`model = AutoModelForCausalLM...`)."""
    out = set()
    for node in index.assignments:
        if type(node) is cst.Assign and type(node.value) is cst.Call and _hf_causal_lm(index, node.value):
            for target in node.targets:
                name = dotted_name(target.target)
                if name:
                    out.add(name)
    return out


def _shifted_forward(expr) -> bool:
    """`x[:, 1:]` / `x[..., 1:]`: drops the first position."""
    return any(lower == 1 and upper is None for lower, upper in slice_bounds(expr))


def _base_name(expr) -> str | None:
    """`input_ids.view(-1)` -> `input_ids`; `batch["input_ids"]` -> `input_ids`."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _RESHAPES:
        expr = expr.func.value
    if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        key = expr.slice[0].slice.value
        if type(key) is cst.SimpleString:
            # (bytes for `batch[b"labels"]`: only compared, and quoted so in a message)
            return key.evaluated_value  # type: ignore[return-value]
    return dotted_name(expr)


class LabelShiftMismatch(Rule):
    code = "TL109"
    name = "label-shift-mismatch"
    kind = "defect"
    # pre-filter: a Hugging Face causal LM, or a cross-entropy/NLL loss
    tokens = frozenset({"forcausallm", "lmheadmodel", "cross_entropy", "nll_loss", "crossentropyloss", "nllloss"})
    summary = "Labels shifted twice (HF causal LM) or not at all (hand-written next-token loss)."
    verify_site = "data"
    data_check = "label-alignment"

    def check(self, ctx: FileContext) -> None:
        self._double_shift(ctx)
        self._no_shift(ctx)

    @staticmethod
    def _double_shift(ctx) -> None:
        index = ctx.index
        models = _causal_lm_names(index)
        if not models:
            return
        flows = ctx.models.attention
        for call in index.calls:
            if dotted_name(call.func) not in models and not (
                    type(call.func) is cst.Attribute and dotted_name(call.func.value) in models
                    and call.func.attr.value == "forward"):
                continue
            labels = get_arg(call, "labels")
            if labels is None:
                continue
            flow = flows.flow(call)
            traced = flow.trace(labels.value, flow.order_of(call, index))
            if any(_shifted_forward(node) for node in traced):
                ctx.report(labels, "labels shifted by hand (`[:, 1:]`) are passed to a Hugging Face causal-LM "
                                   "head that shifts them again internally: the model learns to predict the token "
                                   "two positions ahead; pass `labels=input_ids` unshifted")

    @staticmethod
    def _no_shift(ctx) -> None:
        if not causal_evidence(ctx):
            return
        index = ctx.index
        flows = ctx.models.attention
        for call, inp, target in loss_calls(index):
            target_name = _base_name(target)
            if target_name is None or _shifted_forward(target) or any(upper == -1 for _, upper in slice_bounds(inp)):
                continue
            flow = flows.flow(call)
            at = flow.order_of(call, index)
            if any(_shifted_forward(n) for n in flow.trace(target, at)):
                continue
            # the loss target is the very tensor the logits were computed from, and not
            # through a shift (seq2seq: `decoder_input_ids = shift_tokens_right(labels, ...)`)
            fed = shifted = False
            for node in flow.trace(inp, at):
                for sub in _calls(node):
                    if any(_base_name(arg.value) == target_name for arg in sub.args):
                        fed = True
                        shifted = shifted or "shift" in (last_name(sub.func) or "").lower()
            if fed and not shifted:
                ctx.report(call, f"next-token loss compares the logits with `{last_name(target) or target_name}` at "
                                 "the same positions: position t is trained to output its own input token; shift "
                                 "them (`logits[:, :-1]` against `ids[:, 1:]`)")


def _calls(node):
    return [n for n in walk(node) if type(n) is cst.Call]
