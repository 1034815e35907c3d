"""Model structure: per `nn.Module` subclass, its declared sub-modules and how `forward`
uses them (which sub-layer calls happen, which residual additions, which norms).

Rules ask questions here instead of walking the tree: `ModelView(index).classes`,
`ModuleClass.attributes`, `ModuleClass.residuals()`, `ModelView.groups()` (classes connected
by composition) and `ModelView.towers()` (the models residual styles are judged in), and for
hand-written attention (in `forward`, helper methods or free functions)
`ModelView.attention` (`tlint.views.attention.AttentionIndex`: softmax calls, attention
sites with their product, scaling, masks and softmax `dim`, SDPA calls, per-function data
flow). `ModuleClass.stream()` (`tlint.views.stream.BlockStream`) follows the residual stream
through `forward`: which attention/MLP sub-layers it applies, and whether each one's output
is added back to the stream or overwrites it; `ModuleClass.passthrough_params()` says which
inputs a module returns through an identity path (a residual kept inside it).

Inheritance: `ModuleClass.inherited` holds the sub-modules declared by its module-class bases
of the same file, and `ModuleClass.opaque_base` says a base's `__init__` is not visible (a
class imported from another file or library, an unknown name); `ModuleClass.declared(name)`
/ `attribute_of` then take an undeclared `self.<name>` for a sub-module of that base, known
by its name only (`SubModule.guessed`, `ctor` None), so name conventions decide its kind.

Over 800 lines: `ModuleClass` keeps the sub-module table, the residual classification
(`residuals`, `_classify`, dropout and norm wrappers) and the queries rules make of both in
one class, since each reads the others' caches; the attention and stream analyses already
live in their own modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from tlint.context import register_view
from tlint.cst import dotted_name, get_arg, literal_value, snake_parts, walk
from tlint.views.bindings import BindingsView, assignment_targets
from tlint.views.calls import parameters
from tlint.views.containers import SubModule, describe, subscript_key

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex
    from tlint.views.attention import AttentionIndex
    from tlint.views.stream import BlockStream

    _Assignment = cst.Assign | cst.AugAssign | cst.AnnAssign  # a statement of `forward` writing a name
    _Flags = dict[str, tuple[bool, bool]]  # name -> (has a norm, has a sub-layer) in its computation

NORM_CLASSES = frozenset(
    {"torch.nn.LayerNorm", "torch.nn.RMSNorm", "torch.nn.GroupNorm", "torch.nn.BatchNorm1d",
     "torch.nn.LocalResponseNorm"}
)
NORM_FUNCTIONS = frozenset(
    {"torch.nn.functional.layer_norm", "torch.nn.functional.rms_norm", "torch.nn.functional.group_norm",
     "torch.layer_norm", "torch.rms_norm"}
)
TORCH_ATTENTION = frozenset(
    {"torch.nn.MultiheadAttention", "torch.nn.TransformerEncoder", "torch.nn.TransformerEncoderLayer",
     "torch.nn.TransformerDecoder", "torch.nn.TransformerDecoderLayer", "torch.nn.Transformer"}
)
_NOT_SUBLAYERS = frozenset(
    {"torch.nn.Dropout", "torch.nn.Embedding", "torch.nn.GELU", "torch.nn.ReLU", "torch.nn.SiLU",
     "torch.nn.Tanh", "torch.nn.Identity", "torch.nn.Softmax"}
)
_MODULE_BASE_SUFFIXES = ("PreTrainedModel", "LightningModule")
_NORM_NAME_PARTS = {"ln", "norm", "layernorm", "rmsnorm", "layer_norm", "rms_norm", "lnf"}
_NON_SUBLAYER_PARTS = {"drop", "dropout", "act", "activation", "emb", "embed", "embedding",
                       "embeddings", "wte", "wpe", "pos", "pe"}
# Bases whose `__init__` declares no sub-module a subclass could use.
_VISIBLE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "object", "abc.ABC",
                            "typing.Generic", "typing.Protocol"})


@dataclass
class Residual:
    """An addition of a sub-layer's output back onto the stream, and its norm style."""

    node: cst.CSTNode  # the statement (Assign/AugAssign) that writes the stream
    style: str  # "pre", "post" or "plain"


@dataclass
class ModuleClass:
    node: cst.ClassDef
    view: ModelView
    attributes: dict[str, SubModule] = field(default_factory=dict)  # declared by the class itself
    # declared by its module-class bases of the same file (nearest base first), not overridden
    inherited: dict[str, SubModule] = field(default_factory=dict)
    # a base (or a base's base) whose `__init__` is not visible: a class imported from another
    # file or library, or an unknown name (torch's `nn.Module` and the file's classes are visible)
    opaque_base: bool = False

    @property
    def name(self) -> str:
        return self.node.name.value

    @cached_property
    def methods(self) -> dict[str, cst.FunctionDef]:
        out: dict[str, cst.FunctionDef] = {}
        body = self.node.body.body if type(self.node.body) is cst.IndentedBlock else ()
        for stmt in body:
            if type(stmt) is cst.FunctionDef:
                out[stmt.name.value] = stmt
        return out

    @property
    def forward(self) -> cst.FunctionDef | None:
        return self.methods.get("forward")

    @cached_property
    def buffers(self) -> dict[str, cst.Call]:
        """`self.register_buffer("pe", ...)` / `register_parameter` calls by the name they
        register (first wins)."""
        out: dict[str, cst.Call] = {}
        for fn in self.methods.values():
            for call in self.view.index.statement_calls.get(fn, ()):
                func = call.func
                if (type(func) is cst.Attribute and func.attr.value in ("register_buffer", "register_parameter")
                        and dotted_name(func.value) == "self" and call.args):
                    name = literal_value(call.args[0].value, default=None)
                    if isinstance(name, str):
                        out.setdefault(name, call)
        return out

    @cached_property
    def reads(self) -> dict[str, set[str]]:
        """Attribute name -> the methods that read `self.<name>` (assignments excluded)."""
        out: dict[str, set[str]] = {}
        for method, fn in self.methods.items():
            written: set[int] = set()
            for node in walk(fn.body):
                if type(node) is cst.Assign or type(node) is cst.AugAssign or type(node) is cst.AnnAssign:
                    targets = assignment_targets(node)
                    if type(node) is not cst.AugAssign:
                        written.update(id(t) for t in targets)
                elif (type(node) is cst.Attribute and type(node.value) is cst.Name
                        and node.value.value == "self" and id(node) not in written):
                    out.setdefault(node.attr.value, set()).add(method)
                elif type(node) is cst.Call and dotted_name(node.func) == "getattr" and len(node.args) >= 2:
                    name = literal_value(node.args[1].value, default=None)
                    if isinstance(name, str):
                        out.setdefault(name, set()).add(method)
        return out

    def submodules(self) -> list[SubModule]:
        """The class's own sub-modules and the members of their containers (see `SubModule.nested`)."""
        return [sub for top in self.attributes.values() for sub in top.nested()]

    @cached_property
    def member_reads(self) -> dict[str, set[str]]:
        """Container members read in methods: `self.transformer.wpe` or `self.transformer["wpe"]`
        -> {"transformer.wpe": {"forward"}}; a container read whole (iterated, passed on,
        `.values()`) counts as a read of every member ("transformer.*")."""
        out: dict[str, set[str]] = {}
        containers = {name for name, sub in self.attributes.items() if sub.children}
        if not containers:
            return out
        for method, fn in self.methods.items():
            written: set[int] = set()
            for node in walk(fn.body):
                if type(node) is cst.Assign or type(node) is cst.AnnAssign:
                    written.update(id(t) for t in assignment_targets(node))
                if not (type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"
                        and node.attr.value in containers) or id(node) in written:
                    continue
                path, sub = node.attr.value, self.attributes[node.attr.value]
                current: cst.CSTNode = node
                while True:
                    parent = self.view.index.parent(current)
                    key = None
                    if type(parent) is cst.Attribute and parent.value is current:
                        key = parent.attr.value
                    elif type(parent) is cst.Subscript and parent.value is current:
                        key = subscript_key(parent)
                    if parent is None or key is None or key not in sub.children:
                        break
                    sub, path, current = sub.children[key], f"{path}.{key}", parent
                out.setdefault(path if not sub.children else f"{path}.*", set()).add(method)
        return out

    def forward_params(self) -> list[cst.Param]:
        fn = self.forward
        return [] if fn is None else [p for p in parameters(fn) if p.name.value != "self"]

    def declared(self, name: str) -> SubModule | None:
        """The sub-module `self.<name>` declared by the class or inherited from a base of the
        file; for a class with an opaque base, an undeclared `self.<name>` is taken for a
        sub-module the base declares, known by its name only (`ctor` None, `guessed`)."""
        sub = self.attributes.get(name) or self.inherited.get(name)
        if sub is None and self.opaque_base and name not in self.methods:
            sub = SubModule(name, None, None, guessed=True)
        return sub

    def attribute_of(self, expr: cst.BaseExpression) -> SubModule | None:
        """The sub-module that `self.x`, `self.x[i]` or a loop variable over `self.x` names
        (see `declared`)."""
        if type(expr) is cst.Subscript:
            owner = self.attribute_of(expr.value)
            key = subscript_key(expr)
            if owner is not None and key is not None and key in owner.children:
                return owner.children[key]  # `self.transformer["wte"]`, `self.net[0]`
            return owner
        if type(expr) is cst.Attribute:
            if type(expr.value) is cst.Name and expr.value.value == "self":
                return self.declared(expr.attr.value)
            owner = self.attribute_of(expr.value) if type(expr.value) in (cst.Attribute, cst.Subscript) else None
            # `self.transformer.wte`: a member of a container (not a tensor attribute of a sub-module)
            return owner.children.get(expr.attr.value) if owner is not None else None
        if type(expr) is cst.Name:
            loop_source = self._loop_sources().get(expr.value)
            if loop_source is not None:
                return loop_source
        return None

    def _loop_sources(self) -> dict[str, SubModule]:
        """`for layer in self.layers:` -> {"layer": SubModule(layers)} inside forward."""
        cached = self.__dict__.get("_loops")
        if cached is None:
            # Stored before it is filled: resolving a loop's iterable reads the loops seen so
            # far (outer loops come first in source order), never re-enters this method.
            cached = self.__dict__["_loops"] = {}
            fn = self.forward
            if fn is not None:
                for node in walk(fn.body):
                    if type(node) is cst.For:
                        for name, iterable in _loop_bindings(node.target, node.iter):
                            sub = self.attribute_of(iterable) if type(iterable) is not cst.Name else None
                            if sub is not None:
                                cached[name] = sub
        return cached

    # --- classification of calls ----------------------------------------------------

    def is_norm_call(self, call: cst.Call) -> bool:
        known: dict[int, tuple[cst.Call, bool]] = self.__dict__.setdefault("_norm_calls", {})
        entry = known.get(id(call))
        if entry is not None and entry[0] is call:
            return entry[1]
        found = self._is_norm_call(call)
        known[id(call)] = (call, found)
        return found

    def _is_norm_call(self, call: cst.Call) -> bool:
        qualified = self.view.index.qualify(call.func)
        if qualified in NORM_FUNCTIONS or qualified in NORM_CLASSES:
            return True
        sub = self.attribute_of(call.func)
        if sub is not None:
            return self.view.is_norm_ctor(sub.ctor) or (sub.ctor is None and _norm_name(sub.name))
        func = call.func.value if type(call.func) is cst.Subscript else call.func
        name = dotted_name(func)
        return bool(name and name.startswith("self.") and _norm_name(name.rsplit(".", 1)[1]))

    def is_sublayer_call(self, call: cst.Call) -> bool:
        """A call to a learned sub-layer (attention, MLP, projection), not a norm/dropout."""
        if self.is_norm_call(call):
            return False
        sub = self.attribute_of(call.func)
        if sub is None:
            return False
        if sub.ctor in _NOT_SUBLAYERS or (sub.ctor or "").startswith("torch.nn.functional"):
            return False
        parts = set(snake_parts(sub.name))
        if parts & _NON_SUBLAYER_PARTS and sub.ctor not in TORCH_ATTENTION:
            return False
        return True

    def calls_of(self, fn: cst.FunctionDef | None) -> list[cst.Call]:
        return [] if fn is None else self.view.index.statement_calls.get(fn, [])

    # --- the residual stream (tlint.views.stream) -------------------------------------

    def stream(self) -> BlockStream:
        """`BlockStream`: the sub-layers `forward` applies (attention / MLP / block / other),
        whether it applies a norm, and the statements writing the residual stream, each
        saying whether it keeps the stream's earlier value or overwrites it."""
        cached = self.__dict__.get("_stream")
        if cached is None:
            from tlint.views.stream import BlockStream, analyse_block

            self.__dict__["_stream"] = BlockStream(self)  # re-entry (a class holding itself) sees no block
            cached = self.__dict__["_stream"] = analyse_block(self)
        return cached

    def passthrough_params(self) -> frozenset[str]:
        """Parameters of `forward` whose value reaches its return through an identity path
        (a residual kept inside the module: `BertSelfOutput`'s `LayerNorm(h + input_tensor)`,
        a `Residual` wrapper's `fn(x) + x`)."""
        cached = self.__dict__.get("_passthrough")
        if cached is None:
            from tlint.views.stream import passthrough_params

            self.__dict__["_passthrough"] = frozenset()
            cached = self.__dict__["_passthrough"] = passthrough_params(self)
        return cached

    # --- residual structure ---------------------------------------------------------

    def residuals(self) -> list[Residual]:
        """Residual writes in forward, each classified pre-norm / post-norm / plain."""
        cached: list[Residual] | None = self.__dict__.get("_residuals")
        if cached is not None:
            return cached
        self.__dict__["_residuals"] = []  # a class reached again while classifying (a block holding itself) has none
        out: list[Residual] = []
        fn = self.forward
        if fn is not None:
            flags: dict[str, tuple[bool, bool]] = {}
            # names holding what a block of a stack returned (`for layer in self.layers: h, t =
            # layer(h)`): the blocks keep their own residuals; a sum with `t` is not one of this class
            block_outputs: set[str] = set()
            # (narrowed by the filter, which mypy does not follow through `type(n) in`)
            statements: list[_Assignment] = [n for n in walk(fn.body, into_functions=False)  # type: ignore[misc]
                                             if type(n) in (cst.Assign, cst.AugAssign, cst.AnnAssign)]
            last_plain: dict[str, Residual] = {}
            copied: set[str] = set()  # names copied to another (`residual = x`)
            for stmt in statements:
                target = _single_target(stmt)
                value = stmt.value
                if value is None:
                    continue
                from_block = self._is_block_call(value)
                if target is None:  # `a, _ = self.attn(...)`: every unpacked name carries the flags
                    value_flags = self._flags(value, flags)
                    for name in _unpacked_names(stmt):
                        flags[name] = value_flags
                        (block_outputs.add if from_block else block_outputs.discard)(name)
                    continue
                if type(stmt) is not cst.AugAssign:
                    (block_outputs.add if from_block else block_outputs.discard)(target)
                residual = self._classify(stmt, target, value, flags, block_outputs)
                if residual is not None:
                    out.append(residual)
                    if residual.style == "plain":
                        last_plain[target] = residual
                    else:
                        last_plain.pop(target, None)
                    flags[target] = (False, False)
                    continue
                # `x = norm(x)` right after a plain residual write to x: post-norm, two lines; with
                # no copy of x kept (`residual = x`: pre-norm) the normalised stream is still the stream
                if (type(value) is cst.Call and self.is_norm_call(value) and value.args
                        and type(value.args[0].value) is cst.Name and value.args[0].value.value == target
                        and (target in last_plain or (target not in copied and not any(flags.get(target, ()))))):
                    if target in last_plain:
                        last_plain.pop(target).style = "post"
                    flags[target] = (False, False)
                    continue
                if type(value) is cst.Name:
                    copied.add(value.value)
                last_plain.pop(target, None)
                flags[target] = self._flags(value, flags)
        self.__dict__["_residuals"] = out
        return out

    def _is_block_call(self, value: cst.BaseExpression) -> bool:
        """`layer(h, ...)` for a loop variable over a list of the file's blocks that keep
        their own residuals (a stack), possibly indexed (`layer(h)[0]`)."""
        while type(value) is cst.Subscript:
            value = value.value
        if type(value) is not cst.Call or type(value.func) is not cst.Name:
            return False
        sub = self._loop_sources().get(value.func.value)
        if sub is None or not sub.is_list:
            return False
        member = self.view.classes.get(sub.ctor or "")
        return member is not None and member is not self and bool(member.residuals())

    def _flags(self, expr: cst.CSTNode, flags: _Flags) -> tuple[bool, bool]:
        """(has a norm, has a sub-layer) in the computation of `expr`."""
        has_norm = has_sub = False
        for node in walk(expr):
            if type(node) is cst.Call:
                if self.is_norm_call(node):
                    has_norm = True
                elif self.is_sublayer_call(node):
                    has_sub = True
            elif type(node) is cst.Name and node.value in flags:
                n, s = flags[node.value]
                has_norm, has_sub = has_norm or n, has_sub or s
        return has_norm, has_sub

    def _classify(self, stmt: _Assignment, target: str, value: cst.BaseExpression, flags: _Flags,
                  block_outputs: set[str]) -> Residual | None:
        if type(stmt) is cst.AugAssign:
            if type(stmt.operator) is not cst.AddAssign:
                return None
            if type(value) is cst.Name and value.value in block_outputs:
                return None  # `trend += layer_trend`: a second output of the stack's blocks, summed
            has_norm, has_sub = self._flags(value, flags)
            if not has_sub:  # `h += residual`: the saved stream added back onto the branch `h`
                has_norm, has_sub = flags.get(target, (False, False))
                if not (has_sub and _is_stream(value, flags)):
                    return None
            return Residual(stmt, "pre" if has_norm else "plain")
        if self._is_dropout_call(value):  # `x = self.drop(x + self.attn(self.ln(x)))`: the sum inside decides
            value = value.args[0].value  # type: ignore[attr-defined]  # a Call with one argument
        if type(value) is cst.Call and self.is_norm_call(value) and value.args:
            inner = value.args[0].value
            operands = _sum_operands(inner)
            if operands and self._is_residual_sum(operands, flags):
                return Residual(stmt, "post")
            return None
        operands = _sum_operands(value)
        if not operands or not self._is_residual_sum(operands, flags, target):
            return None
        branches = [op for op in operands if not _is_stream(op, flags)]
        if all(type(op) is cst.Name and op.value in block_outputs for op in branches):
            return None  # `trend = trend + layer_trend`: a second output of the stack's blocks, summed
        has_norm = any(self._flags(op, flags)[0] for op in branches)
        return Residual(stmt, "pre" if has_norm else "plain")

    def _is_dropout_call(self, value: cst.BaseExpression) -> bool:
        """`self.drop(y)` / `F.dropout(y, ...)`: a call of dropout, which keeps the identity path."""
        if type(value) is not cst.Call or not value.args or value.args[0].keyword is not None:
            return False
        sub = self.attribute_of(value.func)
        if sub is not None:
            return sub.ctor in ("torch.nn.Dropout", "torch.nn.Dropout1d") or (
                sub.ctor is None and bool({"drop", "dropout"} & set(snake_parts(sub.name))))
        return self.view.index.qualify(value.func) == "torch.nn.functional.dropout"

    def _is_residual_sum(self, operands: list[cst.BaseExpression], flags: _Flags, target: str | None = None) -> bool:
        streams = [op for op in operands if _is_stream(op, flags)]
        branches = [op for op in operands if not _is_stream(op, flags)]
        return bool(streams) and any(self._flags(op, flags)[1] for op in branches)


def _is_stream(expr: cst.BaseExpression, flags: _Flags) -> bool:
    """A plain name that is not itself a sub-layer output (the residual stream)."""
    return type(expr) is cst.Name and not any(flags.get(expr.value, (False, False)))


def _paired_targets(targets: list[cst.BaseExpression],
                    value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) pairs of an assignment, unpacking `self.a, self.b = A(), B()`."""
    out: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
    for target in targets:
        if ((type(target) is cst.Tuple or type(target) is cst.List)
                and (type(value) is cst.Tuple or type(value) is cst.List)
                and len(target.elements) == len(value.elements)
                and not any(type(el) in (cst.StarredElement,) for el in (*target.elements, *value.elements))):
            out += [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
        else:
            out.append((target, value))
    return out


def _loop_bindings(target: cst.BaseAssignTargetExpression,
                   iterable: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """Loop variables and the container each one walks: `for layer in self.layers`,
    `for i, layer in enumerate(self.layers)`, `for layer, norm in zip(self.layers, self.norms)`."""
    if type(target) is cst.Name:
        if type(iterable) is cst.Call and dotted_name(iterable.func) in ("enumerate", "zip"):
            return []
        return [(target.value, iterable)]
    if not (type(target) is cst.Tuple or type(target) is cst.List) or type(iterable) is not cst.Call:
        return []
    func = dotted_name(iterable.func)
    names = [el.value for el in target.elements]
    args = [arg.value for arg in iterable.args if arg.keyword is None and not arg.star]
    if func == "enumerate" and len(names) == 2 and args:
        names, args = names[1:], args[:1]
    elif func != "zip":
        return []
    return [(name.value, arg) for name, arg in zip(names, args) if type(name) is cst.Name]


def _sum_operands(expr: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Add:
        return _sum_operands(expr.left) + _sum_operands(expr.right)
    if type(expr) is cst.Call and dotted_name(expr.func) in ("torch.add",) and len(expr.args) >= 2:
        return [expr.args[0].value, expr.args[1].value]
    return [expr] if expr is not None else []


def _single_target(stmt: _Assignment) -> str | None:
    if type(stmt) is cst.Assign:
        if len(stmt.targets) == 1 and type(stmt.targets[0].target) is cst.Name:
            return stmt.targets[0].target.value
        return None
    target = stmt.target  # type: ignore[union-attr]  # an AugAssign or AnnAssign (not narrowed by mypy)
    return target.value if type(target) is cst.Name else None


def _unpacked_names(stmt: _Assignment) -> list[str]:
    if type(stmt) is not cst.Assign:
        return []
    out: list[str] = []
    for target in stmt.targets:
        if type(target.target) is cst.Tuple or type(target.target) is cst.List:
            out += [el.value.value for el in target.target.elements if type(el.value) is cst.Name]
    return out


def norm_like_name(name: str) -> bool:
    """Public form of the norm-name test: `ln_f`, `norm`, `final_layernorm`."""
    return _norm_name(name)


def _norm_name(name: str) -> bool:
    """`ln_1`, `ln1`, `norm`, `norm1` (timm/PyTorch), `attn_layer_norm`, `LayerNorm`, `lnf`."""
    parts = [p.rstrip("0123456789") for p in snake_parts(name)]
    return any(p in _NORM_NAME_PARTS or p.endswith("norm") for p in parts)


class ModelView:
    """All module classes of a file and how they compose."""

    def __init__(self, index: FileIndex, bindings: BindingsView | None = None) -> None:
        """`bindings`: the file's bindings view (`ctx.bindings`; one of its own when None)."""
        self.index = index
        self.bindings = bindings if bindings is not None else BindingsView(index)
        self.classes: dict[str, ModuleClass] = {}
        local = index.classes_by_name
        pending = list(index.classes)
        # a class is a module if a base resolves to torch.nn.Module (or a torch.nn/HF/Lightning
        # module class), to a local module class, or if it defines `forward`.
        changed = True
        while changed:
            changed = False
            for cls in list(pending):
                if self._is_module_class(cls, local):
                    self.classes[cls.name.value] = ModuleClass(cls, self)
                    pending.remove(cls)
                    changed = True
        for module_class in self.classes.values():
            self._collect_attributes(module_class)
        for module_class in self.classes.values():
            self._inherit(module_class, set())

    def _is_module_class(self, cls: cst.ClassDef, local: dict[str, cst.ClassDef]) -> bool:
        for base in cls.bases:
            qualified = self.index.qualify(base.value)
            if qualified and (qualified.startswith("torch.nn.") or qualified.endswith(_MODULE_BASE_SUFFIXES)):
                return True
            name = dotted_name(base.value)
            if name in self.classes:
                return True
        body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
        return any(type(s) is cst.FunctionDef and s.name.value == "forward" for s in body)

    def _inherit(self, module_class: ModuleClass, active: set[str]) -> None:
        """Fill `inherited` and `opaque_base` from the class's bases (bases first)."""
        if module_class.__dict__.get("_inherited_done") or module_class.name in active:
            return
        active.add(module_class.name)
        for base in module_class.node.bases:
            if base.keyword is not None:  # `metaclass=...`
                continue
            value = base.value.value if type(base.value) is cst.Subscript else base.value  # `Generic[T]`
            name = dotted_name(value)
            local = self.classes.get(name) if name else None
            if local is not None and local is not module_class:
                self._inherit(local, active)
                for attr, sub in (*local.attributes.items(), *local.inherited.items()):
                    if attr not in module_class.attributes:
                        module_class.inherited.setdefault(attr, sub)
                module_class.opaque_base = module_class.opaque_base or local.opaque_base
            elif name is None or name not in self.index.classes_by_name:
                qualified = self.index.qualify(value) or name
                if qualified not in _VISIBLE_BASES:
                    module_class.opaque_base = True
        module_class.__dict__["_inherited_done"] = True

    def has_opaque_base(self, cls: cst.ClassDef) -> bool:
        """`ModuleClass.opaque_base` for any class of the file (one that is not taken for a
        module, as a subclass of an imported model class that only overrides `__init__`)."""
        known = self.classes.get(cls.name.value)
        if known is not None and known.node is cls:
            return known.opaque_base
        probe = ModuleClass(cls, self)
        self._inherit(probe, set())
        return probe.opaque_base

    def _collect_attributes(self, module_class: ModuleClass) -> None:
        for fn in module_class.methods.values():
            for node in walk(fn.body, into_functions=False):
                if not (type(node) is cst.Assign or type(node) is cst.AnnAssign) or node.value is None:
                    continue
                targets = assignment_targets(node)
                for target, value in _paired_targets(targets, node.value):
                    if (type(target) is cst.Attribute and type(target.value) is cst.Name
                            and target.value.value == "self"):
                        name = target.attr.value
                        if name not in module_class.attributes or module_class.attributes[name].placeholder:
                            module_class.attributes[name] = self._describe(name, value)

    def _describe(self, name: str, value: cst.BaseExpression) -> SubModule:
        """What `self.<name> = value` declares (`tlint.views.containers.describe`)."""
        return describe(self, name, value)

    def ctor_name(self, call: cst.Call) -> str | None:
        qualified = self.index.qualify(call.func)
        if qualified:
            return qualified
        name = dotted_name(call.func)
        if name in self.index.classes_by_name:
            return name
        if type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and call.func.value.value == "self":
            # a class held in an attribute (`self.embedding_module = torch.nn.Embedding`, or
            # a bitsandbytes embedding on one path): the first class it is bound to
            for binding in self.bindings.attribute(call.func):
                value = binding.value
                if type(value) in (cst.Name, cst.Attribute):
                    held = self.index.qualify(value) or dotted_name(value)
                    if held and (held in self.index.classes_by_name or "." in held) and held[:1].isalpha() \
                            and held.rsplit(".", 1)[-1][:1].isupper():
                        return held
        return None

    def is_norm_ctor(self, ctor: str | None) -> bool:
        if ctor is None:
            return False
        if ctor in NORM_CLASSES:
            return True
        last = ctor.rsplit(".", 1)[-1]
        return last.endswith(("LayerNorm", "RMSNorm", "Norm"))

    def sublayer_kind(self, module_class: ModuleClass, sub: SubModule) -> str:
        """"attention" (a leaf attention), "mlp", "block" (keeps its own residual) or
        "other", for a sub-module of `module_class` (see `tlint.views.stream`)."""
        from tlint.views.stream import sublayer_kind

        cache: dict[tuple[str, str], str] = self.__dict__.setdefault("_kinds", {})
        key = (module_class.name, sub.name)
        if key not in cache:
            cache[key] = "other"  # re-entry guard
            cache[key] = sublayer_kind(module_class, sub)
        return cache[key]

    @cached_property
    def attention_classes(self) -> frozenset[str]:
        """Module classes whose own methods compute attention: a softmax, a hand-written
        attention site or `F.scaled_dot_product_attention`."""
        out: set[str] = set()
        nodes = [site.softmax for site in self.attention.sites] + list(self.attention.sdpa)
        nodes += [call for call, _, _ in self.attention.softmaxes
                  if (fn := self.index.enclosing_function(call)) is not None and fn.name.value == "forward"]
        for node in nodes:
            owner = self.index.enclosing_class(node)
            if owner is not None and owner.name.value in self.classes:
                out.add(owner.name.value)
        return frozenset(out)

    def does_attention(self, module_class: ModuleClass, depth: int = 0) -> bool:
        """Does the class compute attention itself or through a sub-module (an
        `nn.MultiheadAttention`, or a class of the file that does)?"""
        if module_class.name in self.attention_classes:
            return True
        if depth > 3:
            return False
        for sub in module_class.submodules():
            if sub.ctor == "torch.nn.MultiheadAttention":
                return True
            inner = self.classes.get(sub.ctor or "")
            if inner is not None and inner is not module_class and self.does_attention(inner, depth + 1):
                return True
        return False

    def is_mlp_class(self, module_class: ModuleClass) -> bool:
        """A feed-forward class: two or more `Linear`/`Conv1d` layers and no attention."""
        linear = sum(1 for sub in module_class.attributes.values()
                     if sub.ctor in ("torch.nn.Linear", "torch.nn.Conv1d") and not sub.is_list)
        return linear >= 2 and not self.does_attention(module_class)

    @cached_property
    def attention(self) -> AttentionIndex:
        """Hand-written attention sites, softmax calls and SDPA calls of the file."""
        from tlint.views.attention import AttentionIndex

        return AttentionIndex(self.index, self._softmax_module_ctor, self.bindings)

    def _softmax_module_ctor(self, call: cst.Call) -> cst.Call | None:
        """The constructor call of `self.softmax` when `call` calls it: `nn.Softmax(...)`, or
        a softmax module of the project (a class named `*Softmax` outside torch, such as a
        fused scale-mask-softmax kernel)."""
        owner = self.index.enclosing_class(call)
        module_class = self.classes.get(owner.name.value) if owner is not None else None
        if module_class is None:
            return None
        sub = module_class.attribute_of(call.func)
        if sub is not None and sub.call is not None and (sub.ctor == "torch.nn.Softmax" or (
                sub.ctor is not None and sub.ctor.endswith("Softmax") and not sub.ctor.startswith("torch."))):
            return sub.call
        return None

    def class_of(self, node: cst.CSTNode) -> ModuleClass | None:
        """The module class whose body holds `node`."""
        owner = self.index.enclosing_class(node)
        return self.classes.get(owner.name.value) if owner is not None else None

    def causal_evidence(self, causal_names: Sequence[str] = (), file_stem: str = "") -> dict[str, CausalEvidence]:
        """Module class name -> why its model is causal (decoder-only): a next-token loss
        in the file, a `generate` method, or a causal name (`causal_names`, class or file
        names) with a per-position loss over the vocabulary. Never a name alone; masked-LM,
        encoder and classifier names are not causal."""
        cached: dict[tuple[tuple[str, ...], str], dict[str, CausalEvidence]] = self.__dict__.setdefault("_causal", {})
        key = (tuple(causal_names), file_stem)
        if key not in cached:
            cached[key] = _causal_evidence(self, causal_names, file_stem)
        return cached[key]

    def class_causal_evidence(self, name: str, causal_names: Sequence[str] = ()) -> CausalEvidence | None:
        """Why the class `name` itself is causal, from its own body only (never from another
        class of the file, a sibling or a holder): a next-token loss in its methods, a
        `generate` method that loops, a causal name with a per-position loss in its methods,
        or an attention class its own name declares causal. None without such evidence."""
        module_class = self.classes.get(name)
        if module_class is None:
            return None
        node = module_class.node
        own = [(call, inp, target) for call, inp, target in loss_calls(self.index)
               if self.index.enclosing_class(call) is node]
        for call, inp, target in own:
            if is_next_token_loss(inp, target):
                return CausalEvidence(f"`{name}` computes a next-token loss (shifted logits/labels)", call)
        generate = module_class.methods.get("generate")
        if generate is not None and any(type(n) in (cst.For, cst.While) for n in walk(generate.body)):
            return CausalEvidence(f"`{name}.generate()` samples tokens", generate)
        if any(word in name for word in causal_names) and not any(word in name for word in _NOT_CAUSAL_WORDS):
            for call, inp, _ in own:
                if is_per_position_loss(inp):
                    return CausalEvidence(f"the causal name `{name}` with a per-position loss over the vocabulary",
                                          call)
        parts = snake_parts(name)
        if "causal" in parts and set(parts) & {"attention", "attn"} \
                and not set(parts[:parts.index("causal")]) & {"non", "not", "bi", "un", "no"}:
            return CausalEvidence(f"the class name `{name}`", node)
        return None

    def uses_causal_evidence(self, names: Sequence[str]) -> CausalEvidence | None:
        """A use of a model named by one of `names` (its class or its factory) as a causal
        one: a function (or the module's top level) that refers to the name and calls
        `.generate(...)` or computes a next-token loss (shifted logits/labels)."""
        wanted = set(names)

        def refers(scope: cst.CSTNode) -> bool:
            return any(type(n) is cst.Name and n.value in wanted for n in walk(scope)) or any(
                type(n) is cst.Attribute and n.attr.value in wanted for n in walk(scope))

        sites: list[tuple[cst.CSTNode, str]] = [
            (call, "a next-token loss (shifted logits/labels)")
            for call, inp, target in loss_calls(self.index) if is_next_token_loss(inp, target)]
        sites += [(call, "`.generate(...)`") for call in self.index.calls
                  if type(call.func) is cst.Attribute and call.func.attr.value == "generate"]
        for site, what in sites:
            if self.index.enclosing_class(site) is not None:
                continue  # inside a class: that class's own evidence, not a use
            scope = self.index.enclosing_function(site) or self.index.module
            if refers(scope):
                return CausalEvidence(f"used with {what}", site)
        return None

    def groups(self) -> list[list[ModuleClass]]:
        """Module classes grouped into models: connected by composition (a class declaring
        another local class as a sub-module), in source order."""
        parent = {name: name for name in self.classes}

        def find(name: str) -> str:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        for module_class in self.classes.values():
            for sub in module_class.submodules():
                if sub.ctor in self.classes:
                    parent[find(sub.ctor)] = find(module_class.name)
        grouped: dict[str, list[ModuleClass]] = {}
        for name, module_class in self.classes.items():
            grouped.setdefault(find(name), []).append(module_class)
        return list(grouped.values())


    def towers(self) -> list[list[ModuleClass]]:
        """The models of the file as their residual styles are judged: each class that no
        other class holds, with every class it holds (through any depth), where a held class
        that is a whole model of its own (deriving from a pretrained-model base:
        `PreTrainedModel`, or a class of the file deriving from one) starts its own tower.
        CLIP-style composites hold text, vision or audio towers with designs of their own
        (CLAP's Swin audio tower is pre-norm, its RoBERTa text tower post-norm; CLIPSeg's
        decoder is post-norm over a pre-norm CLIP). Towers may share classes (an attention
        class both towers use); in source order of their roots."""
        whole: dict[str, bool] = {}

        def is_whole(module_class: ModuleClass) -> bool:
            name = module_class.name
            if name not in whole:
                whole[name] = False  # a cycle of bases proves nothing
                for base in module_class.node.bases:
                    if base.keyword is not None:
                        continue
                    local = self.classes.get(dotted_name(base.value) or "")
                    qualified = self.index.qualify(base.value) or dotted_name(base.value) or ""
                    if (local is not None and local is not module_class and is_whole(local)) or (
                            local is None and qualified.endswith(("PreTrainedModel", "PretrainedModel"))):
                        whole[name] = True
                        break
            return whole[name]

        holds: dict[str, list[str]] = {}
        held: set[str] = set()
        for module_class in self.classes.values():
            for sub in module_class.submodules():
                part = self.classes.get(sub.ctor or "")
                if part is not None and part is not module_class:
                    holds.setdefault(module_class.name, []).append(part.name)
                    if not is_whole(part):
                        held.add(part.name)

        def tower(root: str) -> set[str]:
            members, seen = [root], {root}
            for name in members:
                for part in holds.get(name, ()):
                    if part not in seen and not is_whole(self.classes[part]):
                        seen.add(part)
                        members.append(part)
            return seen

        towers: list[list[ModuleClass]] = []
        reached: set[str] = set()
        roots = [name for name in self.classes if name not in held]
        for name in [*roots, *self.classes]:  # then classes only a cycle of holders reaches
            if name in reached:  # a root is never part of another tower
                continue
            seen = tower(name)
            reached |= seen
            towers.append([module_class for module_class in self.classes.values() if module_class.name in seen])
        return towers


def norm_first_value(call: cst.Call) -> bool | None:
    """`norm_first=` of a TransformerEncoderLayer/DecoderLayer/Transformer call: True/False,
    False by default, None when not a literal."""
    arg = get_arg(call, "norm_first")
    if arg is None:
        return False
    value = literal_value(arg.value, default=None)
    return value if isinstance(value, bool) else None


# --- causal (decoder-only) models ---------------------------------------------------------

_NOT_CAUSAL_WORDS = ("MaskedLM", "MLM", "MAE", "Masked", "Bert", "Encoder", "Classif", "NonAutoregressive")
_LOSS_FUNCTIONS = frozenset({"torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"})
_LOSS_MODULES = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss"})


@dataclass
class CausalEvidence:
    """Why a model is taken for a causal (decoder-only) one, and where that shows."""

    reason: str
    node: cst.CSTNode


def slice_bounds(expr: cst.CSTNode) -> list[tuple[object, object]]:
    """(lower, upper) literal bounds of the slices of a subscript chain (`x[..., :-1, :]`)."""
    out: list[tuple[object, object]] = []
    for node in walk(expr):
        if type(node) is cst.Subscript:
            for element in node.slice:
                part = element.slice
                if type(part) is cst.Slice:
                    out.append((literal_value(part.lower, None) if part.lower else None,
                                literal_value(part.upper, None) if part.upper else None))
    return out


def loss_calls(index: FileIndex) -> list[tuple[cst.Call, cst.BaseExpression, cst.BaseExpression]]:
    """(call, input, target) of cross-entropy/NLL losses: functional calls, and calls of
    `nn.CrossEntropyLoss()` objects held in a variable or attribute (`criterion(out, y)`)."""
    loss_objects: set[str] = set()
    for node in index.assignments:
        if type(node) is cst.Assign and type(node.value) is cst.Call \
                and index.qualify(node.value.func) in _LOSS_MODULES:
            for target in node.targets:
                name = dotted_name(target.target)
                if name:
                    loss_objects.add(name)
    out: list[tuple[cst.Call, cst.BaseExpression, cst.BaseExpression]] = []
    for call in index.calls:
        qualified = index.qualify(call.func)
        if qualified in _LOSS_FUNCTIONS or dotted_name(call.func) in loss_objects:
            first, second = get_arg(call, "input", 0), get_arg(call, "target", 1)
            if first is not None and second is not None:
                out.append((call, first.value, second.value))
    return out


def is_next_token_loss(input_expr: cst.CSTNode, target_expr: cst.CSTNode) -> bool:
    """`logits[..., :-1, :]` against `labels[..., 1:]` (the shift may sit in either)."""
    return (any(upper == -1 for _, upper in slice_bounds(input_expr))
            and any(lower == 1 and upper is None for lower, upper in slice_bounds(target_expr)))


def is_per_position_loss(input_expr: cst.CSTNode) -> bool:
    """A loss over the vocabulary at every position: `logits.view(-1, V)`,
    `logits.reshape(-1, logits.size(-1))`, `logits.flatten(0, 1)`, `logits.transpose(1, 2)`."""
    for node in walk(input_expr):
        if type(node) is cst.Call and type(node.func) is cst.Attribute:
            attr = node.func.attr.value
            args = [a.value for a in node.args if a.keyword is None]
            if attr in ("view", "reshape") and len(args) == 2 and literal_value(args[0], None) == -1:
                return True
            if attr == "flatten" and args and literal_value(args[0], None) == 0:
                return True
            if attr in ("transpose", "permute") and len(args) >= 2:
                return True
    return False


def causal_evidence(ctx: FileContext) -> dict[str, CausalEvidence]:
    """Module class name -> why its model (its composition group) is causal, honouring
    the shared `causal-names` option. Shared by TL207, TL109 and `tlint verify`."""
    return ctx.models.causal_evidence(ctx.view_options.causal_names, ctx.path.stem)


def _causal_evidence(self: ModelView, causal_names: Sequence[str] = (),
                     file_stem: str = "") -> dict[str, CausalEvidence]:
    """See `ModelView.causal_evidence`."""
    index = self.index
    losses = loss_calls(index)
    file_level = [CausalEvidence("a next-token loss (shifted logits/labels)", call)
                  for call, inp, target in losses if is_next_token_loss(inp, target)]
    out: dict[str, CausalEvidence] = {}
    for group in self.groups():
        names = [c.name for c in group]
        if any(word in name for name in names for word in _NOT_CAUSAL_WORDS) and not any(
                word in name for name in names for word in causal_names):
            continue
        evidence = file_level[0] if file_level else None
        if evidence is None:
            for module_class in group:
                generate = module_class.methods.get("generate")
                # an autoregressive loop: it runs the model again on what it produced
                if generate is not None and any(type(n) in (cst.For, cst.While) for n in walk(generate.body)):
                    evidence = CausalEvidence(f"`{module_class.name}.generate()` samples tokens", generate)
                    break
        if evidence is None:
            named = [name for name in names if any(word in name for word in causal_names)]
            if not named and any(word.lower() in file_stem.lower() for word in causal_names):
                named = [file_stem]
            if named:
                group_nodes = {id(c.node) for c in group}
                for call, inp, _ in losses:
                    owner = index.enclosing_class(call)
                    if (owner is None or id(owner) in group_nodes) and is_per_position_loss(inp):
                        evidence = CausalEvidence(f"the causal name `{named[0]}` with a per-position loss over the "
                                                  "vocabulary", call)
                        break
        if evidence is not None:
            for name in names:
                out[name] = evidence
    for name, module_class in self.classes.items():
        # an attention class that its own name declares causal (`CausalSelfAttention`,
        # `SparseConvCausalAttention`): for that class alone, not the model around it
        parts = snake_parts(name)
        if name not in out and "causal" in parts and set(parts) & {"attention", "attn"} \
                and not set(parts[:parts.index("causal")]) & {"non", "not", "bi", "un", "no"}:
            out[name] = CausalEvidence(f"the class name `{name}`", module_class.node)
    return out


@register_view("models")
def models(ctx: FileContext) -> ModelView:
    """The file's model structure (`ctx.models`)."""
    return ModelView(ctx.index, ctx.bindings)

