"""The training view's gradient clips and AMP loss scaling: whether a clipping call clips
the raw gradients (`clips_raw_gradients`: torch's `clip_grad_*`, FSDP's
`model.clip_grad_norm_`; not `accelerator.clip_grad_norm_`, `fabric.clip_gradients` or
Lightning's `self.clip_gradients`, which unscale first), the clip a helper function makes
on gradients it never unscales (`unscaled_clip`), a clip before a `scaler.step(...)` in a
function handed the scaler whose scaled backward runs elsewhere (`clips_before_scaler_step`),
and which function of another module a call runs (`imported_callee`). TL303 and its project facts (`clips-gradients`,
`scaled-call`) read them. A mixin of `tlint.views.training.TrainingView`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from tlint.cst import last_name, snake_parts
from tlint.views.training_common import CLIP, CLIP_FUNCTIONS, OPTIMIZER_STEP, SCALE, UNSCALE, Condition, _names_under

if TYPE_CHECKING:
    from tlint.source import FileIndex
    from tlint.views.training_common import Event

_SELF_UNSCALING = frozenset({"accelerator", "fabric"})
# Words of an `if` test on the scaler or an AMP switch (`if scaler is None`, `if not args.fp16`).
_AMP_WORDS = frozenset({"scaler", "amp", "fp16", "float16", "half", "mixed", "autocast"})
_MAX_HELPERS = 4  # clipping helpers of the file followed from one function


class TrainingClips:
    """`TrainingView`'s gradient clips under AMP loss scaling."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts
        index: FileIndex

        def role(self, expr: cst.BaseExpression | None, roles: dict[str, str] | None = None) -> str | None: ...
        def receiver(self, call: cst.CSTNode) -> cst.BaseExpression | None: ...
        def iteration(self, root: cst.For | cst.While | cst.FunctionDef) -> list[Event]: ...
        def callee(self, call: cst.Call) -> cst.FunctionDef | None: ...
        def origin(self, expr: cst.BaseExpression | None) -> str | None: ...

    def clips_raw_gradients(self, call: cst.CSTNode) -> bool:
        """`call` clips the gradients as they are (`torch.nn.utils.clip_grad_norm_`, FSDP's
        `model.clip_grad_norm_`), not through a wrapper that unscales them first."""
        if type(call) is not cst.Call:
            return False
        if self.index.qualify(call.func) in CLIP_FUNCTIONS:
            return True
        receiver = self.receiver(call)
        if receiver is None or last_name(call.func) not in ("clip_grad_norm_", "clip_grad_value_"):
            return False
        if self.index.qualify(receiver) is not None:
            return False
        name = (last_name(receiver) or "").lower()
        return self.role(receiver) not in _SELF_UNSCALING and name not in ("self", *_SELF_UNSCALING)

    @staticmethod
    def amp_condition(condition: Condition) -> bool:
        """An `if` test on the scaler or an AMP switch (`if scaler is None:`,
        `if not self.use_amp:`, `if args.fp16:`), either branch."""
        for name in _names_under(condition.test):
            for part in snake_parts(name.value):
                if part in _AMP_WORDS or part.endswith("scaler"):
                    return True
        return False

    def unscaled_clip(self, function: cst.FunctionDef) -> cst.Call | None:
        """The first clip of raw gradients that a call of `function` makes (its body, the
        file's helpers inlined, the file's clipping helpers looked into) with no `unscale_`
        before it in the same pass, outside any test on the scaler or an AMP switch (a
        helper that clips only without a scaler); None when there is none, or when
        `function` scales a loss itself (its own loop is judged where it is)."""
        memo: dict[cst.FunctionDef, cst.Call | None] = self.__dict__.setdefault("_unscaled_clips", {})
        if function not in memo:
            memo[function] = self._unscaled_clip(function, frozenset({function}))
        return memo[function]

    def _unscaled_clip(self, function: cst.FunctionDef, active: frozenset[cst.FunctionDef]) -> cst.Call | None:
        events = self.iteration(function)
        if any(event.kind == SCALE for event in events):
            return None
        unscales: list[Event] = []
        for event in events:
            if event.kind == UNSCALE:
                unscales.append(event)
                continue
            if event.kind != CLIP or type(event.node) is not cst.Call:
                continue
            if any(not event.excludes(unscale) for unscale in unscales):
                continue
            if any(self.amp_condition(condition) for condition in event.conditions):
                continue
            if self.clips_raw_gradients(event.node):
                return event.node
            helper = self.callee(event.node)  # `clip_gradients(model)` of this file: look inside
            if helper is not None and helper not in active and len(active) < _MAX_HELPERS \
                    and self._unscaled_clip(helper, active | {helper}) is not None:
                return event.node
        return None

    def clips_before_unscale(self) -> list[tuple[cst.CSTNode, cst.FunctionDef]]:
        """(clip, function) for each clip a function of the file makes (its body, the file's
        helpers inlined: reported where the function calls the helper) with no `unscale_`
        before it and a `scaler.unscale_(...)` after it in the same pass (an AMP optimiser
        wrapper's `clip_grad_norm` method that unscales too late), wherever the loss is
        scaled. Clips that unscale themselves (`accelerator`, `fabric`, Lightning's
        `self.clip_gradients`) are left out: a second `unscale_` would raise, another mistake."""
        index = self.index
        if "unscale_" not in index.identifiers and "unscale_gradients" not in index.identifiers:
            return []
        out: list[tuple[cst.CSTNode, cst.FunctionDef]] = []
        for function in self._functions_calling(
                lambda func, call: func.attr.value in ("unscale_", "unscale_gradients")):
            events = self.iteration(function)
            for at, event in enumerate(events):
                if event.kind != CLIP or type(event.node) is not cst.Call or self._unscales_itself(event.node):
                    continue
                if any(e.kind == UNSCALE and not event.excludes(e) for e in events[:at]):
                    continue
                if any(e.kind == UNSCALE and not event.excludes(e) for e in events[at + 1:]):
                    out.append((event.site, function))
        return out

    def clips_before_scaler_step(self) -> list[tuple[cst.CSTNode, cst.FunctionDef]]:
        """(clip, function) for each clip of raw gradients a function of the file makes
        (its body, the file's helpers inlined) before it steps the optimiser through a
        `GradScaler` (`scaler.step(optimizer)`), with no `unscale_` anywhere in the pass and
        no `scaler.scale(...)` of its own (a loop that scales is judged as a loop): an
        updater or trainer method handed the scaler (a parameter, an attribute) whose
        scaled backward runs elsewhere. `scaler.step` unscales only after the clip. Clips
        under a test on the scaler or an AMP switch, on the other branch of the step, or
        that unscale themselves are left out; so is a function with no such step."""
        index = self.index
        if "step" not in index.identifiers or not index.identifiers & {"clip_grad_norm_", "clip_grad_value_"}:
            return []
        out: list[tuple[cst.CSTNode, cst.FunctionDef]] = []
        for function in self._functions_calling(
                lambda func, call: func.attr.value == "step" and bool(call.args) and self.role(func.value) == "scaler"):
            events = self.iteration(function)
            if any(event.kind in (SCALE, UNSCALE) for event in events):
                continue
            for at, event in enumerate(events):
                if event.kind != CLIP or type(event.node) is not cst.Call or self._unscales_itself(event.node) \
                        or not self.clips_raw_gradients(event.node) \
                        or any(self.amp_condition(condition) for condition in event.conditions):
                    continue
                if any(later.kind == OPTIMIZER_STEP and not event.excludes(later) and self._scaler_step(later.node)
                       for later in events[at + 1:]):
                    out.append((event.site, function))
        return out

    def _functions_calling(self, wanted: Callable[[cst.Attribute, cst.Call], bool]) -> list[cst.FunctionDef]:
        """The functions of the file that make a method call `wanted(func, call)` accepts
        (each once, in the order of their first such call)."""
        functions: dict[int, cst.FunctionDef] = {}
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and wanted(func, call):
                function = self.index.enclosing_function(call)
                if function is not None:
                    functions.setdefault(id(function), function)
        return list(functions.values())

    def _scaler_step(self, node: cst.CSTNode) -> bool:
        """`scaler.step(optimizer)`: an optimiser step through a `GradScaler`."""
        return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "step" \
            and self.role(node.func.value) == "scaler"

    def _unscales_itself(self, call: cst.Call) -> bool:
        """`accelerator.clip_grad_norm_(...)`, `fabric.clip_gradients(...)`,
        `self.clip_gradients(...)` (Lightning): clips that unscale first."""
        receiver = self.receiver(call)
        if receiver is None:
            return False
        name = (last_name(receiver) or "").lower()
        if name == "self":
            return last_name(call.func) == "clip_gradients"
        return name in _SELF_UNSCALING or self.role(receiver) in _SELF_UNSCALING

    def imported_callee(self, call: cst.Call) -> tuple[str, str] | None:
        """(module, function) a call runs from another module, as the module names it:
        `clip_gradients(...)` after `from utils import clip_gradients` -> ("utils",
        "clip_gradients"); `utils.clip_gradients(...)`; `clipper.clip(...)` on an instance
        built by an imported class -> ("utils", "GradClipper.clip"). torch's own are not."""
        func = self.index.qualify(call.func)
        if func is not None:
            module, _, name = func.rpartition(".")
            if not module.strip(".") or module.split(".", 1)[0] == "torch":
                return None
            return module, name
        receiver = self.receiver(call)
        if receiver is None or type(call.func) is not cst.Attribute:
            return None
        built = self.origin(receiver)
        if built is None or "." not in built.strip("."):
            return None
        module, _, cls = built.rpartition(".")
        head = module.lstrip(".").split(".", 1)[0]
        aliases = self.index.imports.aliases
        if head == "torch" or not any(target == module or target.startswith(module + ".")
                                      for target in aliases.values()):
            return None
        return module, f"{cls}.{call.func.attr.value}"
