"""TL211 suspicious-init: matmul weights or embeddings initialised to zero or a constant,
or drawn with std >= 1 for a Linear/projection weight."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import dotted_name, get_arg, literal_value, snake_parts, walk
from tlint.rules.base import Rule
from tlint.views.init import (
    ATTENTION_INPUT_WEIGHTS,
    INIT_CALL_NAMES,
    InitCall,
    InitTarget,
    find_init_calls,
    is_attention_input_name,
    is_matmul_operand,
    is_scaled_use,
    kind_of_ctor,
    narrowed_classes,
    output_only,
    strip_data,
    under_option,
)

if TYPE_CHECKING:
    from tlint.context import FileContext

# The last layer of a residual branch or the model (zero-init there is a known scheme:
# Fixup, ReZero-style output projections, GPT-2/muP readouts, timm's zero head).
_OUTPUT_PARTS = frozenset({"out", "output", "o", "down", "head", "classifier", "readout", "logits", "wo",
                           "unembed", "final", "end", "last"})
_SECOND_LAYER = re.compile(r"^(fc|w|ff|ffn|linear|lin|dense|mlp|layer|conv)_?2$")
# Gates, adaptive-norm modulations, and the second factor of a low-rank update: zero (or
# a constant) at init makes the branch start as the identity, on purpose.
_GATE_PARTS = frozenset({"gate", "gates", "gating", "alpha", "beta", "gamma", "scale", "scales", "modulation",
                         "modulate", "zero", "film", "adaln", "ada", "skip"})
_LOW_RANK_SECOND = frozenset({"b", "up"})
# Raw parameters that act as tables (embeddings, learned tokens or queries, memories):
# N(0, 1) is their usual init and zero a usual start for an additive table.
_TABLE_PARTS = frozenset({"emb", "embed", "embeds", "embedding", "embeddings", "pos", "pe", "token", "tokens",
                          "query", "queries", "latent", "latents", "mem", "memory", "memories", "null", "register",
                          "bank", "codebook", "prototype", "prototypes", "centroid", "centroids", "cls", "dictionary"})
_RANDN = frozenset({"torch.randn"})
_CONSTANT_TENSORS = frozenset({"torch.zeros", "torch.ones", "torch.full"})


def _parts(name: str) -> set[str]:
    return set(snake_parts(name))


def is_output_projection(name: str) -> bool:
    parts = _parts(name)
    return (bool(parts & _OUTPUT_PARTS) or name in ("c_proj", "proj") or name.endswith("_to_h")
            or any(_SECOND_LAYER.match(part) for part in parts) or bool(_SECOND_LAYER.match(name.lower())))


def is_intended_constant(name: str, value: float | None) -> bool:
    """A name whose zero/constant init is a known scheme (gates, modulations, residual
    outputs and low-rank B factors at zero)."""
    parts = _parts(name)
    if parts & _GATE_PARTS or "gate" in name.lower():
        return True
    if value not in (0.0, None):
        return False
    return is_output_projection(name) or (len(parts) > 1 and snake_parts(name)[-1] in _LOW_RANK_SECOND)


def _resolve_module(ctx, node: cst.CSTNode, owner: cst.BaseExpression) -> InitTarget:
    """The module kind and name of `owner` in `owner.weight`."""
    view = ctx.models
    if type(owner) is cst.Subscript:
        owner = owner.value
    if type(owner) is cst.Attribute:
        name = owner.attr.value
        on_self = dotted_name(owner.value) == "self"
        module_class = view.class_of(node)
        sub = module_class.declared(name) if module_class is not None and on_self else None
        if sub is not None and sub.guessed:
            sub = None
        if sub is None:  # a deeper path (`self.blocks[0].attn.q`): the attribute of that name in the file
            sub = next((cls.attributes[name] for cls in view.classes.values() if name in cls.attributes), None)
        if sub is None:
            if on_self and _inherits_from_elsewhere(ctx, node) and is_attention_input_name(name):
                # declared by a base class of another file (or library): known by its name only
                return InitTarget("attention-input", name)
            return InitTarget(None, name)
        return InitTarget(kind_of_ctor(sub.ctor), name, None if sub.is_list else sub.call)
    if type(owner) is cst.Name:
        variable = owner.value
        classes = narrowed_classes(ctx.index, node, variable)
        if classes is not None:
            kinds = {kind_of_ctor(cls) for cls in classes}
            for kind in ("linear", "attention", "embedding", "conv"):
                if kind in kinds:
                    return InitTarget(kind, None)
            return InitTarget(None, None)
        call = _local_module(ctx, owner)
        return InitTarget(kind_of_ctor(ctx.models.ctor_name(call)) if call is not None else None, variable, call)
    return InitTarget(None, None)


def _inherits_from_elsewhere(ctx, node: cst.CSTNode) -> bool:
    """`node` is in a class whose base's `__init__` is not in the file (see
    `ModelView.has_opaque_base`)."""
    cls = ctx.index.enclosing_class(node)
    return cls is not None and ctx.models.has_opaque_base(cls)


def _local_module(ctx, name: cst.Name) -> cst.Call | None:
    """The `nn.Linear(...)` of `lin = nn.Linear(...)` that `name` holds where it is used
    (`ctx.bindings`: the one assignment that reaches it)."""
    reaching = ctx.bindings.reaching(name)
    if len(reaching) == 1 and type(reaching[0].value) is cst.Call and type(reaching[0].node) is cst.Assign \
            and len(reaching[0].node.targets) == 1:
        return reaching[0].value
    return None


def _resolve(ctx, init: InitCall) -> InitTarget:
    target = init.target
    if type(target) is not cst.Attribute:
        return InitTarget(None, None)
    attr = target.attr.value
    if dotted_name(target.value) == "self":  # a raw parameter of this module (`self.weight` included)
        module_class = ctx.models.class_of(init.call)
        sub = module_class.attributes.get(attr) if module_class is not None else None
        if sub is not None and sub.ctor == "torch.nn.Parameter" and sub.call is not None:
            return InitTarget("parameter", attr, sub.call)
        return InitTarget(None, None)
    if attr in ATTENTION_INPUT_WEIGHTS:
        return InitTarget("attention-input", attr)
    if attr == "weight":
        resolved = _resolve_module(ctx, init.call, target.value)
        # `nn.MultiheadAttention` has no `.weight`: its projections are reached by name
        return InitTarget(None, None) if resolved.kind == "attention" else resolved
    return InitTarget(None, None)


def _target_key(ctx, expr: cst.BaseExpression) -> str:
    return ctx.module.code_for_node(strip_data(expr))


class SuspiciousInit(Rule):
    code = "TL211"
    name = "suspicious-init"
    kind = "practice"
    # pre-filter: init calls: `torch.nn.init`, in-place tensor methods, init-named functions
    tokens = frozenset({"torch", *INIT_CALL_NAMES})
    summary = "A Linear/attention/embedding weight is initialised to a constant, or a matmul weight with std >= 1."
    probes = ("init-stats",)

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:
            return
        inits = find_init_calls(ctx.index)
        for init in inits:
            if init.scheme == "constant":
                self._check_constant(ctx, init, inits)
            elif init.scheme == "normal" and init.value is not None and init.value >= 1.0:
                self._check_wide(ctx, init)
        self._check_parameters(ctx, inits)

    # --- init calls -----------------------------------------------------------------

    def _check_constant(self, ctx, init: InitCall, inits) -> None:
        if under_option(ctx.index, init.call):
            return
        target = _resolve(ctx, init)
        if target.kind is None or (target.name is not None and is_intended_constant(target.name, init.value)):
            return
        if target.kind == "parameter" and not _used_as_matmul_weight(ctx, target.name):
            return
        if _single_unit(target) or _reinitialised(ctx, init, inits) or _designed_init(ctx, init, inits):
            return
        if init.value == 0.0 and target.kind in ("linear", "conv") and target.name is not None and output_only(
                ctx.index, _declaring_classes(ctx, init, target.name), target.name):
            return  # the last layer of its path (a readout, a residual branch's output, a modulation)
        what = "zero" if init.value == 0.0 else "a constant"
        ctx.report(init.call, f"{_describe(target)} is initialised to {what}: every unit computes the same "
                              "function and gets the same gradient (and a zero matmul weight passes no gradient "
                              "to what comes before it); draw it from a small normal/uniform "
                              "(e.g. `normal_(std=0.02)`), or zero only a residual branch's output projection")

    def _check_wide(self, ctx, init: InitCall) -> None:
        if under_option(ctx.index, init.call):
            return
        target = _resolve(ctx, init)
        if target.kind not in ("linear", "attention-input", "parameter"):
            return  # embeddings keep PyTorch's N(0, 1) default; conv kernels are not checked here
        if target.kind == "parameter" and not _used_as_matmul_weight(ctx, target.name):
            return
        ctx.report(init.call, f"{_describe(target)} is drawn with std {init.value:g}: a d-wide matmul then "
                              "multiplies the activation scale by about sqrt(d), so logits and attention scores "
                              "explode at init; use std ~ 1/sqrt(fan_in) or 0.02")

    # --- raw parameters ---------------------------------------------------------------

    def _check_parameters(self, ctx, inits) -> None:
        index = ctx.index
        initialised = {_target_key(ctx, init.target) for init in inits}
        for module_class in ctx.models.classes.values():
            for name, sub in module_class.attributes.items():
                if sub.ctor != "torch.nn.Parameter" or sub.call is None or not sub.call.args:
                    continue
                created = sub.call.args[0].value
                if type(created) is not cst.Call or under_option(index, sub.call):
                    continue
                factory = index.qualify(created.func)
                if factory not in _RANDN and factory not in _CONSTANT_TENSORS:
                    continue
                if _dims(created) != 2 or f"self.{name}" in initialised or _rescaled_in_place(module_class, name):
                    continue
                if not _used_as_matmul_weight(ctx, name, module_class):
                    continue
                if factory in _RANDN:
                    if _parts(name) & _TABLE_PARTS or _low_rank(created):
                        continue
                    ctx.report(created, f"`self.{name}` is a matmul weight drawn from N(0, 1) and never rescaled: "
                                        "it multiplies the activation scale by about sqrt(d) at init; scale it "
                                        "(`torch.randn(d, d) / math.sqrt(d)`) or use `nn.init.normal_(std=0.02)`")
                else:
                    value = 0.0 if factory == "torch.zeros" else (1.0 if factory == "torch.ones" else None)
                    if _parts(name) & _TABLE_PARTS or is_intended_constant(name, value):
                        continue
                    ctx.report(created, f"`self.{name}` is a matmul weight created as a constant tensor and never "
                                        "re-initialised: every unit computes the same function; draw it from a small "
                                        "normal/uniform before use")


def _describe(target: InitTarget) -> str:
    kind = {"linear": "the Linear weight", "embedding": "the embedding table", "conv": "the convolution kernel",
            "attention-input": "the attention's q/k/v projection", "parameter": "the matmul weight"}[
        target.kind  # type: ignore[index]  # a known kind: the callers return on None
    ]
    if target.name is None:
        return f"every {kind.removeprefix('the ')} (through `isinstance`)"
    return f"{kind} `{target.name}`"


def _reinitialised(ctx, init: InitCall, inits) -> bool:
    """Another, non-constant initialisation of the same tensor in the same class (or
    function), later in the same function or in another method: the constant was only a
    placeholder."""
    index = ctx.index
    key = _target_key(ctx, init.target)
    function = index.enclosing_function(init.call)
    scope = index.enclosing_class(init.call) or function
    after = False
    for other in inits:
        if other is init:
            after = True
            continue
        if other.scheme == "constant" or _target_key(ctx, other.target) != key:
            continue
        if scope is not None and not index.is_inside(other.call, scope):
            continue
        if after or index.enclosing_function(other.call) is not function:
            return True
    return _initialiser_runs_after(ctx, init.call, function)


# `self.apply(self._init_weights)`, `self.post_init()`: a whole-model initialiser that draws
# the weights afresh.
_MODEL_INITIALISERS = frozenset({"apply", "post_init", "init_weights", "_init_weights", "reset_parameters",
                                 "_reset_parameters", "initialize_weights", "_initialize_weights"})


def _initialiser_runs_after(ctx, call: cst.Call, function) -> bool:
    """A whole-model initialiser called on `self` later in the same method."""
    if function is None:
        return False
    later = False
    for other in ctx.index.statement_calls.get(function, ()):
        if other is call:
            later = True
        elif (later and type(other.func) is cst.Attribute and other.func.attr.value in _MODEL_INITIALISERS
              and dotted_name(other.func.value) == "self"):
            return True
    return False


def _single_unit(target: InitTarget) -> bool:
    """`nn.Linear(d, 1)` / `nn.Embedding(n, 1)`: one output unit, no symmetry to break
    (a scalar readout or offset that starts at zero)."""
    call = target.ctor_call
    if call is None or target.kind not in ("linear", "embedding"):
        return False
    size = get_arg(call, "out_features" if target.kind == "linear" else "embedding_dim", 1)
    return size is not None and literal_value(size.value, default=None) == 1


_STRUCTURED_INITS = frozenset({"torch.nn.init.eye_", "torch.nn.init.dirac_"})


def _designed_init(ctx, init: InitCall, inits) -> bool:
    """A hand-built function at init, in the same function as the constant: an identity
    (`eye_`, `dirac_`) or values copied into a weight, entries written into the tensor
    (`w[i, i] = 1`), or the same layer's bias set to a non-zero value (a zero weight with a
    chosen bias routes attention or outputs a constant on purpose)."""
    index = ctx.index
    function = index.enclosing_function(init.call)
    if function is None:
        return False
    target = init.target
    owner = target.value if type(target) is cst.Attribute else None
    bias_key = ctx.module.code_for_node(owner) + ".bias" if owner is not None else None
    key = _target_key(ctx, target)
    for other in inits:
        if other is init or index.enclosing_function(other.call) is not function:
            continue
        if index.qualify(other.call.func) in _STRUCTURED_INITS:
            return True
        if (type(other.call.func) is cst.Attribute and other.call.func.attr.value == "copy_"
                and type(other.target) is cst.Attribute and other.target.attr.value == "weight"):
            return True
        if _target_key(ctx, other.target) == bias_key and (other.scheme != "constant" or other.value != 0.0):
            return True
    for node in walk(function.body):
        if type(node) is cst.Assign:
            for assigned in node.targets:
                written = assigned.target
                if type(written) is cst.Subscript and _target_key(ctx, written.value) == key:
                    return True
    return False


def _declaring_classes(ctx, init: InitCall, name: str) -> list:
    """The module classes whose `self.<name>` the init reaches: the class of the sub-module
    it goes through (`self.final_layer.linear.weight`: the class of `final_layer`), else every
    class of the file declaring `name`."""
    view = ctx.models
    owner = init.target.value if type(init.target) is cst.Attribute else None  # `self.final_layer.linear`
    holder = owner.value if type(owner) is cst.Attribute else None  # `self.final_layer`
    if type(holder) is cst.Attribute and dotted_name(holder.value) == "self":
        module_class = view.class_of(init.call)
        sub = module_class.declared(holder.attr.value) if module_class is not None else None
        held = view.classes.get(sub.ctor or "") if sub is not None else None
        if held is not None and name in held.attributes:
            return [held]
    return [cls for cls in view.classes.values() if name in cls.attributes]


def _references(module_class, name: str):
    for node in walk(module_class.node):
        if type(node) is cst.Attribute and node.attr.value == name and dotted_name(node.value) == "self":
            yield node


def _used_as_matmul_weight(ctx, name: str | None, module_class=None) -> bool:
    """`self.<name>` is the weight operand of a matrix product somewhere in its class, and
    never scaled where it is used."""
    if name is None:
        return False
    classes = [module_class] if module_class is not None else list(ctx.models.classes.values())
    refs = [ref for cls in classes for ref in _references(cls, name)]
    used = [ref for ref in refs if is_matmul_operand(ctx.index, ref)]
    return bool(used) and not any(is_scaled_use(ctx.index, ref) for ref in refs)


def _rescaled_in_place(module_class, name: str) -> bool:
    """`self.w *= s`, `self.w.data /= s` anywhere in the class."""
    for node in walk(module_class.node):
        if type(node) is cst.AugAssign and type(node.operator) in (cst.MultiplyAssign, cst.DivideAssign):
            target = strip_data(node.target)
            if type(target) is cst.Attribute and target.attr.value == name and dotted_name(target.value) == "self":
                return True
    return False


def _dims(created: cst.Call) -> int | None:
    """Number of dimensions of `torch.randn(a, b)` / `torch.zeros((a, b))`."""
    positional = [arg for arg in created.args if arg.keyword is None]
    if any(arg.star for arg in positional):
        return None
    shape = [arg.value for arg in positional]
    if (dotted_name(created.func) or "").endswith("full"):
        shape = shape[:1]
    if len(shape) == 1 and (type(shape[0]) is cst.Tuple or type(shape[0]) is cst.List):
        return len(shape[0].elements)
    return len(shape)


def _low_rank(created: cst.Call) -> bool:
    """A dimension named like a rank (`r`, `rank`, `low_rank_dim`): a low-rank factor."""
    for arg in created.args:
        for node in walk(arg.value):
            if type(node) in (cst.Name, cst.Attribute):
                # (an Attribute after `else`: mypy narrows no `type(x) is` negatively)
                name = node.value if type(node) is cst.Name else node.attr.value  # type: ignore[attr-defined]
                if name == "r" or "rank" in name.lower():
                    return True
    return False
