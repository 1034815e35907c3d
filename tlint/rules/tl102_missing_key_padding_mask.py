"""TL102 missing-key-padding-mask: a torch.nn attention/transformer module called without
its padding-mask argument inside a forward that has a padding mask (or a padded project)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import get_arg, has_star_kwargs, snake_parts, walk
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.vocabulary import is_padding_mask_name

if TYPE_CHECKING:
    from tlint.context import FileContext

# ctor -> (padding-mask keywords, positional index of the first of them)
PADDING_MASK_ARGS = {
    "torch.nn.MultiheadAttention": (("key_padding_mask",), 3),
    "torch.nn.TransformerEncoder": (("src_key_padding_mask",), 2),
    "torch.nn.TransformerEncoderLayer": (("src_key_padding_mask",), 2),
    "torch.nn.TransformerDecoder": (("tgt_key_padding_mask", "memory_key_padding_mask"), 4),
    "torch.nn.TransformerDecoderLayer": (("tgt_key_padding_mask", "memory_key_padding_mask"), 4),
    "torch.nn.Transformer": (("src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask"), 5),
}


_OTHER_MASK_KEYWORDS = frozenset({"attn_mask", "mask", "src_mask", "tgt_mask", "memory_mask"})


_VISION_PARTS = frozenset({"vision", "image", "pixel", "patch", "vit"})


def _vision_module(module_class) -> bool:
    """A module of a vision tower: its class name or a type annotation of its `__init__`
    parameters (`config: SiglipVisionConfig`) names vision, images, pixels or patches."""
    names = [module_class.name]
    init = module_class.methods.get("__init__")
    if init is not None:
        for param in (*init.params.posonly_params, *init.params.params, *init.params.kwonly_params):
            if param.annotation is not None:
                names += [n.value for n in walk(param.annotation.annotation) if type(n) is cst.Name]
    return any(set(snake_parts(name)) & _VISION_PARTS for name in names)


def _padding_in_attn_mask(call: cst.Call, padding_params: list[str]) -> bool:
    """The padding mask folded into the other mask argument (`attn_mask=attention_mask`,
    as Hugging Face's SigLIP2 pooling head does with its expanded additive mask)."""
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value not in _OTHER_MASK_KEYWORDS:
            continue
        if any(type(node) is cst.Name and node.value in padding_params for node in walk(arg.value)):
            return True
    return False


class MissingKeyPaddingMask(Rule):
    code = "TL102"
    name = "missing-key-padding-mask"
    kind = "defect"
    # pre-filter: torch.nn attention/transformer sub-modules; the project's own modules show a `*padding_mask`
    tokens = frozenset({"multiheadattention", "transformer", "padding_mask"})
    summary = "A torch.nn attention/transformer module is called without its padding mask."
    probes = ("mask-leak", "padding-equivalence")

    def check(self, ctx: FileContext) -> None:
        # the project's own modules that take a padding mask (`_padding_slots`), when needed: only a file
        # that spells a `*padding_mask` can show one
        slots: dict | None = None if "padding_mask" in ctx.text else {}
        for module_class in ctx.models.classes.values():
            forward = module_class.forward
            if forward is None:
                continue
            params = [p.name.value for p in module_class.forward_params()]
            padding_params = [p for p in params if is_padding_mask_name(p)]
            mask_params = [p for p in params if "mask" in p.lower()]
            if not padding_params and mask_params:
                continue  # only a causal/attention mask: not this rule's business
            if not padding_params and _vision_module(module_class):
                continue  # the project pads token sequences; the patches of an image are not padded
            when = None if padding_params else ProjectCondition(any_of=("pads",))
            held = None  # padding masks the forward holds: its parameters, its own locals (`_padding_locals`)
            for call in module_class.calls_of(forward):
                sub = module_class.attribute_of(call.func)
                if sub is None:
                    continue
                if sub.ctor not in PADDING_MASK_ARGS:
                    slots = _padding_slots(ctx) if slots is None else slots
                    if slots:
                        held = held if held is not None else padding_params + _padding_locals(forward)
                        if held:
                            _check_inferred(ctx, call, sub, held, slots)
                    continue
                keywords, position = PADDING_MASK_ARGS[sub.ctor]
                # a mask passed as None (by keyword or position, or a local bound to None) is no mask
                given = [arg for arg in (*(get_arg(call, kw) for kw in keywords), get_arg(call, None, position))
                         if arg is not None]
                if has_star_kwargs(call) or any(not ctx.bindings.empty(arg.value) for arg in given):
                    continue
                if _padding_in_attn_mask(call, padding_params):
                    continue
                short = sub.ctor.rsplit(".", 1)[1]
                without = "with an empty (None)" if given else "without"
                if padding_params:
                    message = (f"`self.{sub.name}` ({short}) is called {without} `{keywords[0]}=` although "
                               f"forward receives the padding mask `{padding_params[0]}`: padded positions "
                               "are attended to as if they were real tokens")
                else:
                    message = (f"`self.{sub.name}` ({short}) is called {without} `{keywords[0]}=` in a project "
                               "that pads its sequences: padded positions are attended to")
                ctx.report(call, message, when=when)



def _check_inferred(ctx: FileContext, call: cst.Call, sub, padding_params: list[str], slots: dict) -> None:
    """A module of the project (not torch's) that takes a padding mask (`_padding_slots`),
    called without one in a forward that holds one."""
    slot = slots.get(("ctor", sub.ctor)) if sub.ctor is not None else slots.get(("name", sub.name))
    if slot is None and sub.ctor is None and _attention_call(call):
        slot = slots.get(("qkv", ""))  # `self.self_attn(query=..., key=..., value=...)` built by a base elsewhere
    if slot is None or any(arg.star for arg in call.args):
        return
    keyword, position, why = slot
    if position is not None and get_arg(call, None, position) is not None:
        return  # given by position
    for arg in call.args:
        if arg.keyword is not None and _padding_keyword(arg.keyword.value) and not ctx.bindings.empty(arg.value):
            return
        if any(type(node) is cst.Name and node.value in padding_params for node in walk(arg.value)):
            return  # the forward's padding mask reaches the call (by position, folded into another mask)
    without = "with an empty (None)" if get_arg(call, keyword) is not None else "without"
    ctx.report(call, f"`self.{sub.name}` takes a padding mask ({why}) but is called {without} `{keyword}=` "
                     f"although forward holds the padding mask `{padding_params[0]}`: padded positions "
                     "are attended to as if they were real tokens")


def _attention_call(call: cst.Call) -> bool:
    """Called as an attention module is: `query=`, `key=` and `value=` keywords."""
    return {"query", "key", "value"} <= {arg.keyword.value for arg in call.args if arg.keyword is not None}


def _padding_locals(forward: cst.FunctionDef) -> list[str]:
    """Names the forward itself binds to a padding mask: by name (`padding_mask = lengths_range
    >= lengths[:, None]`), or a `*mask*` name bound to the positions where the input equals a
    constant (`mask = obs.eq(MASK_VALUE).all(2).float()`, `mask = ids == 0`): the filler."""
    return [target.target.value for node in walk(forward.body) if type(node) is cst.Assign
            for target in node.targets if type(target.target) is cst.Name
            and (is_padding_mask_name(target.target.value)
                 or ("mask" in target.target.value.lower() and _equals_a_constant(node.value)))]


_REDUCES = frozenset({"all", "any", "float", "bool", "long", "int", "to", "unsqueeze", "squeeze", "view", "reshape"})


def _constant(expr: cst.BaseExpression) -> bool:
    """A number, or a module constant (`MASK_VALUE`, `PAD`, `self.pad_idx`)."""
    if type(expr) in (cst.Integer, cst.Float):
        return True
    if type(expr) is cst.UnaryOperation:
        return type(expr.expression) in (cst.Integer, cst.Float)
    name = expr.value if type(expr) is cst.Name else expr.attr.value if type(expr) is cst.Attribute else ""
    return bool(name) and (name.isupper() or bool({"pad", "padding"} & set(snake_parts(name))))


def _equals_a_constant(expr: cst.BaseExpression) -> bool:
    """`x.eq(C)`, `x == C` (`!=`, `.ne` too), then reduced or cast (`.all(2).float()`)."""
    for _ in range(6):
        if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
            return type(expr.comparisons[0].operator) in (cst.Equal, cst.NotEqual) \
                and _constant(expr.comparisons[0].comparator)
        if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute:
            return False
        if expr.func.attr.value in ("eq", "ne"):
            return bool(expr.args) and _constant(expr.args[0].value)
        if expr.func.attr.value not in _REDUCES:
            return False
        expr = expr.func.value
    return False


def _padding_keyword(name: str) -> bool:
    """`key_padding_mask`, `src_key_padding_mask`, `encoder_padding_mask`, `padding_mask`."""
    return name.lower().endswith("padding_mask")


def _padding_slots(ctx: FileContext) -> dict[tuple[str, str], tuple[str, int | None, str]]:
    """The project's own modules that take a padding mask, as this file shows them:
    ("ctor", constructor) or ("name", attribute) -> (keyword, position or None, why). A
    module class of this file whose forward has a `*padding_mask` parameter (its
    signature); a constructor one of whose calls in this file (or, the constructor unknown,
    an attribute one of whose calls) passes a non-empty `*padding_mask=` keyword; ("qkv", "")
    when such a call is an attention call (`query=`, `key=`, `value=`), for the attention
    modules of a base class of another file (known by their name only) called the same way."""
    slots: dict[tuple[str, str], tuple[str, int | None, str]] = {}
    classes = ctx.models.classes
    for name, module_class in classes.items():
        params = [p.name.value for p in module_class.forward_params()]
        param = next((p for p in params if _padding_keyword(p)), None)
        if param is not None:
            slots[("ctor", name)] = (param, params.index(param), f"`{name}.forward` takes `{param}`")
    for module_class in classes.values():
        for call in module_class.calls_of(module_class.forward):
            sub = module_class.attribute_of(call.func)
            if sub is None:
                continue
            arg = next((a for a in call.args if a.keyword is not None and _padding_keyword(a.keyword.value)
                        and not ctx.bindings.empty(a.value)), None)
            if arg is None or arg.keyword is None:
                continue
            keyword = arg.keyword.value
            if _attention_call(call):
                slots.setdefault(("qkv", ""), (keyword, None, f"the attention calls of this file given `query=`, "
                                                             f"`key=`, `value=` take `{keyword}=`"))
            if sub.ctor in PADDING_MASK_ARGS:
                continue
            if sub.ctor is not None:
                why = f"another `{sub.ctor.rsplit('.', 1)[-1]}` of this file is given `{keyword}=`"
                slots.setdefault(("ctor", sub.ctor), (keyword, None, why))
            else:
                why = f"`self.{sub.name}` is given `{keyword}=` elsewhere"
                slots.setdefault(("name", sub.name), (keyword, None, why))
    return slots
