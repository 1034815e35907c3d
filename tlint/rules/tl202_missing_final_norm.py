"""TL202 missing-final-norm: a pre-norm stack whose output reaches the head without a
final norm."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, last_name, walk
from tlint.rules.base import Rule
from tlint.views.model import norm_first_value, norm_like_name

if TYPE_CHECKING:
    from tlint.context import FileContext

_STACKS = {"torch.nn.TransformerEncoder": "torch.nn.TransformerEncoderLayer",
           "torch.nn.TransformerDecoder": "torch.nn.TransformerDecoderLayer"}
_LAYERS = frozenset(_STACKS.values())


def _is_pre_norm_layer(view, call: cst.Call) -> bool:
    return view.index.qualify(call.func) in _LAYERS and norm_first_value(call) is True


def _layer_call(view, expr) -> cst.Call | None:
    """The layer constructor an argument names: inline, or a local variable's value."""
    if type(expr) is cst.Call:
        return expr
    if type(expr) is cst.Name:
        flow = view.attention.flow(expr)
        value = flow.definition(expr.value, flow.order_of(expr, view.index))
        return value if type(value) is cst.Call else None
    return None


def _pre_norm_element(view, sub) -> bool:
    """A list attribute of pre-norm blocks: `norm_first=True` layers, or a local block class
    whose residuals are all pre-norm."""
    if sub.call is None:
        return False
    if _is_pre_norm_layer(view, sub.call):
        return True
    block = view.classes.get(sub.ctor or "")
    if block is None:
        return False
    styles = {r.style for r in block.residuals()}
    return styles == {"pre"}


class MissingFinalNorm(Rule):
    code = "TL202"
    name = "missing-final-norm"
    kind = "likely-defect"
    # pre-filter: module classes; `nn.TransformerEncoder`/`Decoder`
    tokens = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward", "transformer"})
    summary = "A pre-norm stack has no final norm before the output head."
    probes = ("depth-growth",)
    # blocks defined in another file: the files some entry point loads together
    project_scope = "program"
    project_kinds = ("block-stack",)
    project_facts = ("block-stack", "norm-residual", "module-parts")

    def check_project(self, path, related):
        """A stack of blocks of a class of another file (`block-stack`), no norm after it,
        whose blocks are pre-norm there: every residual of the block's model, or of the parts
        it holds from further files (`module-parts`), is pre-norm."""
        styles: dict[str, set[str]] = {}
        parts: dict[str, set[str]] = {}
        for facts in related.values():
            for fact in facts:
                if fact.kind == "norm-residual":
                    for name in fact.data.model:
                        styles.setdefault(name, set()).add(fact.data.style)
                elif fact.kind == "module-parts":
                    parts.setdefault(fact.data.cls, set()).update(fact.data.parts)

        def block_styles(name: str, depth: int) -> set[str]:
            found = set(styles.get(name, ()))
            if depth < 3:
                for part in parts.get(name, ()):
                    found |= block_styles(part, depth + 1)
            return found

        for fact in related.get(path, []):
            if fact.kind == "block-stack" and fact.range is not None \
                    and block_styles(fact.data.element, 0) == {"pre"}:
                yield fact.range, (f"pre-norm blocks `self.{fact.data.attribute}` (`{fact.data.element}`, pre-norm in "
                                   "another file) feed the output without a final norm: in a pre-norm stack the "
                                   "residual stream grows with depth and is never normalised; apply a final "
                                   "`LayerNorm` after the loop (GPT-2's `ln_f`)")

    def check(self, ctx: FileContext) -> None:
        view = ctx.models
        index = ctx.index
        for call in index.calls:
            qualified = index.qualify(call.func)
            if qualified not in _STACKS:
                continue
            layer_arg = get_arg(call, "encoder_layer" if qualified.endswith("Encoder") else "decoder_layer", 0)
            norm = get_arg(call, "norm", 2)
            if layer_arg is None or (norm is not None and not _is_none(norm.value)):
                continue
            layer = _layer_call(view, layer_arg.value)
            if layer is not None and _is_pre_norm_layer(view, layer):
                ctx.report(call, f"`{qualified.rsplit('.', 1)[1]}` of `norm_first=True` layers without `norm=`: the "
                                 "residual stream leaves the stack un-normalised; pass `norm=nn.LayerNorm(d_model)`")
        for group in view.groups():
            for module_class in group:
                self._check_hand_written(ctx, group, module_class)

    @staticmethod
    def _check_hand_written(ctx, group, module_class) -> None:
        view = ctx.models
        forward = module_class.forward
        if forward is None:
            return
        for loop in walk(forward.body, into_functions=False):
            if type(loop) is not cst.For:
                continue
            sub = module_class.attribute_of(loop.iter) if type(loop.iter) is not cst.Call else None
            if sub is None and type(loop.iter) is cst.Call and loop.iter.args:
                sub = module_class.attribute_of(loop.iter.args[0].value)  # enumerate(self.blocks)
            if sub is None or not sub.is_list or not _pre_norm_element(view, sub):
                continue
            flow = view.attention.flow(loop)
            after = flow.order_of(loop, view.index)
            if any(module_class.is_norm_call(call) and flow.order_of(call, view.index) > after
                   and not index_inside(view.index, call, loop)
                   for call in module_class.calls_of(forward)):
                continue
            if _residual_branch(view, forward, flow, loop) or _collects_features(view.index, forward, loop):
                continue
            # the stream goes on into a sub-module that normalises its input first (a patch
            # merger or projector with its own `LayerNorm`): that is the final norm
            if any(flow.order_of(call, view.index) > after and not index_inside(view.index, call, loop)
                   and _normalises_input(view, module_class.attribute_of(call.func))
                   for call in module_class.calls_of(forward)):
                continue
            # the class that builds this stack (as an attribute or in a list of stages) may
            # normalise its output
            owners = [view.class_of(call) for call in view.index.calls
                      if view.index.call_name(call) == module_class.name]
            if any(owner is not None and owner is not module_class and module_class_norm(owner) for owner in owners):
                continue
            ctx.report(loop, f"pre-norm blocks `self.{sub.name}` feed the output without a final norm: in a "
                             "pre-norm stack the residual stream grows with depth and is never normalised; apply "
                             "a final `LayerNorm` after the loop (GPT-2's `ln_f`)")


def _residual_branch(view, forward: cst.FunctionDef, flow, loop: cst.For) -> bool:
    """The stack is a residual branch of the module: `forward` returns a sum of what the
    loop computed and the module's input (`x_in = x` ... `return self.proj_out(h) + x_in`,
    Stable Diffusion's spatial transformer): the stream it joins is normalised elsewhere."""
    if len(forward.params.params) < 2:
        return False
    params = {forward.params.params[1].name.value}  # the module's input (after `self`)
    at = flow.order_of(loop, view.index)
    for node in walk(forward.body, into_functions=False):
        if type(node) is not cst.Return or node.value is None or flow.order_of(node, view.index) <= at:
            continue
        value = node.value
        if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
            continue
        for operand in (value.left, value.right):
            if type(operand) is not cst.Name:
                continue
            if operand.value in params and flow.definition(operand.value, at) is None:
                return True  # the input itself, never rebound before the stack
            saved = flow.definition(operand.value, at)
            if type(saved) is cst.Name and saved.value in params and flow.definition(saved.value, flow.order_of(
                    saved, view.index)) is None:
                return True  # `x_in = x` before the stack
    return False


def _collects_features(index, forward: cst.FunctionDef, loop: cst.For) -> bool:
    """The loop appends the stream of every block (or of chosen ones) to a list that
    `forward` returns: a feature extractor's per-depth outputs, not one output for a head."""
    blocks = {n.value for n in walk(loop.target) if type(n) is cst.Name}  # `block`, `idx, block`
    stream: set[str] = set()  # `x = block(x)`, `x, attn = block(x)`: the names the blocks' outputs go to
    for node in walk(loop.body):
        if (type(node) is cst.Assign and type(node.value) is cst.Call and type(node.value.func) is cst.Name
                and node.value.func.value in blocks):
            for assigned in node.targets:
                target = assigned.target
                first = target.elements[0].value if type(target) is cst.Tuple and target.elements else target
                if type(first) is cst.Name:
                    stream.add(first.value)
    collected: set[str] = set()
    for node in walk(loop.body):
        if (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "append"
                and type(node.func.value) is cst.Name and node.args
                and any(type(n) is cst.Name and n.value in stream for n in walk(node.args[0].value))):
            collected.add(node.func.value.value)
    if not collected:
        return False
    returns = [node.value for node in walk(forward.body, into_functions=False)
               if type(node) is cst.Return and node.value is not None]
    names = [{n.value for n in walk(value) if type(n) is cst.Name} for value in returns]
    # every return hands back the collected features and not the last stream itself
    return bool(returns) and all(found & collected and not found & stream for found in names)


def _normalises_input(view, sub) -> bool:
    """Is `sub` a module of the file whose `forward` normalises its input before any learned
    sub-layer reads it (`x = self.norm(x)`, `self.ln_q(x.view(-1, d))`; a DiT final layer
    that first maps the condition, `self.adaLN_modulation(c)`, then `self.norm_final(x)`)?"""
    held = view.classes.get(sub.ctor or "") if sub is not None and not sub.is_list else None
    if held is None:
        return False
    forward = held.forward
    if forward is None or len(forward.params.params) < 2:
        return False
    first = forward.params.params[1].name.value  # after `self`
    calls = held.calls_of(forward)
    if not calls:
        return False
    flow = view.attention.flow(calls[0])
    # statements in order; within one, nested calls first (`self.fc(self.norm(x))` normalises first)
    order = sorted(range(len(calls)), key=lambda i: (flow.order_of(calls[i], view.index), -i))
    def reads_input(expr) -> bool:
        return any(type(node) is cst.Name and node.value == first for node in walk(expr))

    for call in (calls[i] for i in order):
        if held.is_norm_call(call):
            if call.args and reads_input(call.args[0].value):
                return True
        elif held.is_sublayer_call(call) and any(reads_input(arg.value) for arg in call.args):
            return False  # a learned layer reads the input first (DiT's `adaLN_modulation(c)` reads the condition)
    return False


def index_inside(index, node, container) -> bool:
    return index.is_inside(node, container)


def module_class_norm(module_class) -> bool:
    """Does any method but `__init__` apply a norm (`forward`, `forward_features`, ...)?"""
    return any(module_class.is_norm_call(call) or norm_like_name(last_name(call.func) or "")
               for name, fn in module_class.methods.items() if name != "__init__"
               for call in module_class.calls_of(fn))


def _is_none(expr) -> bool:
    return type(expr) is cst.Name and expr.value == "None"
