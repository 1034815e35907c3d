"""The training view's names, roles and calls: what a receiver holds (`role`, `origin`),
which training event a call is (`event_kind`), which function of the file a call runs
(`callee`, `local_function`), and whether autograd is off (`grad_disabled`). A mixin of
`tlint.views.training.TrainingView`.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import dotted_name, get_arg, last_name, literal_value, snake_parts
from tlint.views.bindings import ASSIGN, assignment_targets
from tlint.views.training_common import (
    BACKWARD,
    CLIP,
    CLIP_FUNCTIONS,
    DEEPSPEED_INITIALIZE,
    EVAL,
    FORWARD,
    LOSS,
    OPTIMIZER_STEP,
    SCALE,
    SCHEDULER_STEP,
    TRAIN,
    UNKNOWN,
    UNSCALE,
    ZERO_GRAD,
    Event,
)

if TYPE_CHECKING:
    from tlint.source import FileIndex
    from tlint.views.bindings import BindingsView
    from tlint.views.calls import CallsView

_LOSS_FUNCTIONS = frozenset(
    {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "nll_loss",
     "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cosine_embedding_loss", "ctc_loss"}
)
_OPTIMIZER_WORDS = frozenset({"opt", "optim", "optimizer", "optimiser", "optimizers", "optimisers", "opts", "optims"})
_MODEL_NAMES = frozenset({"model", "net", "network", "module", "self", "engine", "student", "teacher"})
_FACTORY_VERBS = frozenset({"get", "build", "create", "make", "load", "init", "setup", "prepare", "wrap", "unwrap"})
_CLIP_OBJECTS = frozenset({"grad", "grads", "gradient", "gradients", "norm"})
_STEP = "step"  # `optimizer.step()`, `scheduler.step()`, `scaler.step(optimizer)`, `engine.step()`
_XLA_STEP = "xla_model.optimizer_step"  # `xm.optimizer_step(optimizer)`
_GRAD_CLAMPS = ("clamp_", "clip_")  # `p.grad.clamp_(-c, c)`
# The callee names a call of each kind can have (`_event_kind` decides by the same tables;
# a callee imported under another name, and one named like a clipper, pass `may_be` too).
_KIND_NAMES: dict[str, frozenset[str]] = {
    CLIP: frozenset({name.rsplit(".", 1)[1] for name in CLIP_FUNCTIONS} | set(_GRAD_CLAMPS)),
    OPTIMIZER_STEP: frozenset({_STEP, _XLA_STEP.rsplit(".", 1)[1]}),
    SCHEDULER_STEP: frozenset({_STEP}),
}

# kinds asked of `may_be` -> (the names they can have, None when a kind has no table; CLIP among them;
# OPTIMIZER_STEP among them: a wrapper's `step_*` method)
_GATES: dict[tuple[str, ...], tuple[frozenset[str] | None, bool, bool]] = {}


def _says_clip(name: str) -> bool:
    """A callee named like a gradient clipper (`clip_grad_norm_`, `clip_gradients`)."""
    parts = snake_parts(name)
    return "clip" in parts and any(part in _CLIP_OBJECTS for part in parts)


class TrainingEvents:
    """`TrainingView`'s names, roles and calls."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts
        index: FileIndex
        _kinds: dict[cst.Call, str | None]
        calls: CallsView
        bindings: BindingsView
        named_like_events: set[cst.Call]

        @property
        def _families(self) -> dict[cst.Call, tuple[str, str]]: ...
        def _resolve_name(self, name: cst.Name) -> cst.BaseExpression | None: ...
        def literal(self, expr: cst.BaseExpression | None, default: Any = ...) -> Any: ...

    # --- names, roles and calls -------------------------------------------------------

    def _arg_value(self, call: cst.Call, keyword: str, position: int | None) -> cst.BaseExpression | None:
        arg = get_arg(call, keyword, position)
        return arg.value if arg is not None else None

    @cached_property
    def _roles(self) -> dict[str, str]:
        """Variable (last name) -> what it holds, by origin: optimizer, scheduler, scaler,
        engine (DeepSpeed), loss, model, trainer, accelerator, fabric."""
        roles: dict[str, str] = {}
        aliases = []
        for node in self.index.assignments:
            if type(node) is cst.Assign:
                targets = [t.target for t in node.targets]
            elif type(node) is cst.AnnAssign and node.value is not None:
                targets = [node.target]
            else:
                continue
            value = node.value
            if type(value) is cst.Call:
                for target in targets:
                    self._assign_roles(roles, target, value)
            elif type(value) in (cst.Name, cst.Attribute):
                aliases.append((targets, value))
        for targets, value in aliases:
            role = roles.get(last_name(value) or "")
            for target in targets:
                name = last_name(target)
                if role and name:
                    roles.setdefault(name, role)
        return roles

    def _assign_roles(self, roles: dict[str, str], target: cst.BaseExpression, value: cst.Call) -> None:
        if type(target) is cst.Tuple or type(target) is cst.List:
            names = [last_name(e.value) for e in target.elements]
            func_name = last_name(value.func)
            if self.index.qualify(value.func) in DEEPSPEED_INITIALIZE:
                parts = ["engine", "optimizer", None, "scheduler"]
            elif func_name in ("prepare", "setup", "setup_optimizers"):
                parts = [self.role(a.value, roles) for a in value.args if not a.star]
            elif func_name in ("optimizers", "lr_schedulers"):
                parts = ["optimizer" if func_name == "optimizers" else "scheduler"] * len(names)
            else:
                return
            for name, role in zip(names, parts):
                if name and role:
                    roles[name] = role
            return
        name = last_name(target)
        role = self._call_role(value, roles)
        if name and role:
            roles[name] = role

    def _bound_role(self, expr: cst.BaseExpression, depth: int) -> str | None:
        """The role of what `expr` holds by its bindings (`ctx.bindings`), when the name
        table does not know it: a parameter by what every call site passes (`train(m, o)`
        called as `train(model, AdamW(...))`), `self.<attr>` by what its class assigns."""
        if depth > 3:
            return None
        bindings = self.bindings
        if type(expr) is cst.Name:
            param = bindings.parameter(expr)
            if param is None:
                return None
            function = bindings.index.enclosing_function(param)
            sites = self.calls.callers(function) if function is not None else []
            values = [site.arguments.get(param.name.value) if site.arguments is not None else None for site in sites]
        elif type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            values = [b.value if b.kind == ASSIGN else None for b in bindings.attribute(expr)]
        else:
            return None
        found = set()
        for value in values:
            if value is None:
                return None
            if type(value) is cst.Call:
                role = self._call_role(value)
            else:
                role = self._roles.get(last_name(value) or "") or self._bound_role(value, depth + 1)
            if role is None:
                return None
            found.add(role)
        return found.pop() if len(found) == 1 else None

    def _call_role(self, call: cst.Call, roles: dict[str, str] | None = None) -> str | None:
        found = self._families.get(call)
        if found is not None:
            family = found[0]
            if family in ("hf_trainer", "lightning_trainer"):
                return "trainer"
            if family in ("optimizer", "scheduler", "scaler", "loss", "model", "accelerator", "fabric"):
                return family
            return None
        name = last_name(call.func)
        if name == "optimizers":
            return "optimizer"
        if name == "lr_schedulers":
            return "scheduler"
        if name in ("prepare", "setup", "setup_optimizers") and len(call.args) == 1:
            return self.role(call.args[0].value, roles)
        return None

    def role(self, expr: cst.BaseExpression | None, roles: dict[str, str] | None = None) -> str | None:
        """What a receiver holds: by where it was assigned from, else by its name.
        (`roles` is the origin table while it is being built.)"""
        if type(expr) is cst.Subscript:
            expr = expr.value
        if type(expr) is cst.Call:
            return self._call_role(expr, roles)
        name = last_name(expr)
        if name is None:
            return None
        role = (self._roles if roles is None else roles).get(name)
        if role is not None:
            return role
        if roles is None and expr is not None:
            role = self._bound_role(expr, 0)
            if role is not None:
                return role
        parts = snake_parts(name)
        if any(part.startswith("sched") for part in parts):
            return "scheduler"
        if any(part.endswith("scaler") for part in parts):
            return "scaler"
        if any(part in _OPTIMIZER_WORDS or part.startswith("optimi") for part in parts):
            return "optimizer"
        if "engine" in parts and self.index.imports.imports_module("deepspeed"):
            return "engine"
        return None

    @cached_property
    def _origins(self) -> dict[str, set[str]]:
        """Variable (last name) -> qualified names of the calls assigned to it."""
        out: dict[str, set[str]] = {}
        for node in self.index.assignments:
            if type(node) not in (cst.Assign, cst.AnnAssign) or type(node.value) is not cst.Call:
                continue
            name = self.index.call_name(node.value)
            targets = assignment_targets(node)
            for target in targets:
                target_name = last_name(target)
                if target_name and name:
                    out.setdefault(target_name, set()).add(name)
        return out

    def origin(self, expr: cst.BaseExpression | None) -> str | None:
        """The qualified name (else dotted text) of the call that built what `expr` holds:
        `criterion` after `criterion = nn.CrossEntropyLoss()` -> "torch.nn.CrossEntropyLoss";
        None when unknown or assigned from several calls."""
        if type(expr) is cst.Call:
            return self.index.call_name(expr)
        names = self._origins.get(last_name(expr) or "") if expr is not None else None
        return next(iter(names)) if names and len(names) == 1 else None

    def resolve(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression a name is bound to, seen from its use (None when bound several
        times, by a loop, or to something unknown)."""
        return self._resolve_name(name)

    def grad_disabled(self, node: cst.CSTNode) -> bool:
        """`node` runs without autograd: under `with torch.no_grad()`/`inference_mode()`/
        `set_grad_enabled(False)`, or in a function decorated with one of them."""
        for ancestor in self.index.ancestors(node):
            if type(ancestor) is cst.With and any(self._disables_grad(i.item) for i in ancestor.items):
                return True
            if type(ancestor) is cst.FunctionDef and any(
                self._disables_grad(d.decorator) for d in ancestor.decorators
            ):
                return True
        return False

    def _disables_grad(self, expr: cst.BaseExpression) -> bool:
        call = expr if type(expr) is cst.Call else None
        name = self.index.qualify(call.func if call is not None else expr) or ""
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode"):
            return True
        if name.startswith("torch.") and name.endswith("set_grad_enabled") and call is not None and call.args:
            return self.literal(call.args[0].value) is False
        return False

    @staticmethod
    def receiver(call: cst.CSTNode) -> cst.BaseExpression | None:
        """`x` of a method call `x.m(...)`."""
        if type(call) is cst.Call and type(call.func) is cst.Attribute:
            return call.func.value
        return None

    def optimizer_of(self, event: Event) -> cst.BaseExpression | None:
        """The optimiser an optimiser step or `zero_grad` acts on: `opt` of `opt.step()`,
        `scaler.step(opt)`, `xm.optimizer_step(opt)`; the model of `model.zero_grad()`."""
        call = event.node
        if type(call) is not cst.Call:
            return None
        receiver = self.receiver(call)
        if event.kind == OPTIMIZER_STEP and (receiver is None or self.role(receiver) == "scaler"):
            arg = get_arg(call, "optimizer", 0)
            return arg.value if arg is not None else None
        return receiver

    def event_kind(self, call: cst.Call) -> str | None:
        """The training event a call is (see the kinds at the top of this module), or None."""
        if call in self._kinds:
            return self._kinds[call]
        kind = self._event_kind(call)
        self._kinds[call] = kind
        return kind

    def may_be(self, call: cst.Call, kinds: tuple[str, ...]) -> bool:
        """Whether `call` can be an event of one of `kinds` at all, by its callee's name
        alone (a cheap gate before `event_kind`; always true for a kind without a table)."""
        gate = _GATES.get(kinds)
        if gate is None:
            names = None if any(kind not in _KIND_NAMES for kind in kinds) else frozenset().union(
                *(_KIND_NAMES[kind] for kind in kinds))
            gate = _GATES[kinds] = (names, CLIP in kinds, OPTIMIZER_STEP in kinds)
        names, clip, step = gate
        if names is None:
            return True
        func = call.func
        name = last_name(func)
        if name is None:
            return False  # (`_event_kind` finds none of these kinds without a name)
        if name in names or (clip and "clip" in name.lower() and _says_clip(name)) or (
                step and name.startswith("step_")):
            return True
        # `from torch.nn.utils import clip_grad_norm_ as clip`: decided by its qualified name
        return type(func) is cst.Name and name in self.index.imports.aliases

    def _event_kind(self, call: cst.Call) -> str | None:
        func = call.func
        qualified = self.index.qualify(func)
        name = last_name(func)
        if qualified in CLIP_FUNCTIONS or (name and _says_clip(name)):
            return CLIP
        attr = func.attr.value if type(func) is cst.Attribute else None
        receiver = func.value if type(func) is cst.Attribute else None
        if attr in _GRAD_CLAMPS and "grad" in snake_parts((dotted_name(receiver) or "").replace(".", "_")):
            return CLIP
        if attr in ("backward", "manual_backward"):
            return BACKWARD
        if attr in ("unscale_", "unscale_gradients"):
            return UNSCALE
        if attr == "scale" and self.role(receiver) == "scaler":
            return SCALE
        if attr == "zero_grad" or (qualified or "").endswith("._foreach_zero_"):
            return ZERO_GRAD
        if attr == "zero_" and "grad" in snake_parts((dotted_name(receiver) or "").replace(".", "_")):
            return ZERO_GRAD  # `p.grad.zero_()`, `p.grad.data.zero_()`
        if qualified and qualified.endswith(_XLA_STEP):
            return OPTIMIZER_STEP
        if attr == _STEP:
            role = self.role(receiver)
            if role == "scheduler":
                return SCHEDULER_STEP
            if role in ("optimizer", "scaler", "engine"):
                return OPTIMIZER_STEP
            return None
        if attr is not None and attr.startswith("step_") and "optim" in (dotted_name(receiver) or "").lower() \
                and self.role(receiver) in ("optimizer", "scheduler"):
            return OPTIMIZER_STEP  # a scheduled-optimiser wrapper: `optimizer.step_and_update_lr()`
        if attr in ("train", "eval") and not self._is_trainer(receiver):
            if attr == "eval":
                return EVAL if not call.args else None
            mode = literal_value(call.args[0].value, UNKNOWN) if call.args else True
            return EVAL if mode is False else TRAIN
        if qualified and qualified.startswith("torch.nn.functional."):
            last = qualified.rsplit(".", 1)[1]
            return LOSS if last in _LOSS_FUNCTIONS or last.endswith("_loss") else None
        if name is None:
            return None
        if self.role(func) == "loss" or any(p in ("loss", "criterion") for p in snake_parts(name)):
            self.named_like_events.add(call)
            return LOSS
        if attr == "forward":
            return FORWARD
        if self._is_model_call(name):
            self.named_like_events.add(call)
            return FORWARD
        return None

    def _is_trainer(self, receiver: cst.BaseExpression | None) -> bool:
        name = last_name(receiver) if receiver is not None else None
        return bool(name and ("trainer" in name.lower() or self._roles.get(name) == "trainer"))

    def _is_model_call(self, name: str) -> bool:
        """`model(...)`, `self.model(...)`, `self(...)`, `model_engine(...)` (not `build_model(...)`)."""
        if self._roles.get(name) == "model":
            return True
        parts = snake_parts(name)
        if not parts or parts[0] in _FACTORY_VERBS:
            return False
        return name in _MODEL_NAMES or parts[-1] == "model" or parts[0] == "model"

    def local_function(self, name: cst.Name) -> cst.FunctionDef | None:
        """The plain (non-method) function of this file a name refers to, seen from its use
        (`CallsView.local_function`)."""
        return self.calls.local_function(name)

    def callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function or method of this file a call runs, when it can be told
        (`CallsView.callee`: methods of local classes' instances included)."""
        return self.calls.callee(call)
