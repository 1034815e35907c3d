"""The training view: how one file trains a model.

It answers the TL3xx questions from the file index, without a second traversal of the
whole tree:

- **training loops** (`TrainingView.loops`): the innermost loop whose iteration runs a
  `backward()` and an optimiser step, directly or through helpers defined in the same file
  (`train_step(...)`, `self.training_step(...)`, transitively), or a step function whose
  loop lives elsewhere (another file, or Lightning's own loop under manual optimisation);
  each with the ordered events of one iteration (`Event`), helper calls inlined where
  they are called, and the `if` tests and `with` items each event sits under;
- **constructions**: optimisers (`OptimizerSite`), LR schedulers classified by whether
  they warm up (`SchedulerSite`), Hugging Face `TrainingArguments`/`Trainer`, Lightning
  `Trainer`/`LightningModule`/`Fabric`, `accelerate.Accelerator`, DeepSpeed
  (`deepspeed.initialize`, config dicts and JSON files: `DeepSpeedConfig`);
- **literals as they run by default** (`TrainingView.literal`): module constants,
  parameter defaults, `argparse`/`click` option defaults and dataclass field defaults;
- `warmup_sites(ctx)`: where the file sets up an LR warmup (the `warmup` project fact).

The view is one class, `TrainingView`, assembled from cohesive parts, each in a module of
its own: the walk over loop iterations (`training_loops`), names, roles and calls
(`training_events`), gradient clips under AMP loss scaling (`training_clips`), warmup
and `warmup_sites` (`training_warmup`), DeepSpeed configs (`training_deepspeed`) and
literals (`training_literals`); the constructions it finds
(families of calls, optimisers, Lightning modules) are here. Event kinds, records and
qualified names are in `training_common`. Every public name is importable from here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from tlint.context import register_view
from tlint.cst import last_name, literal_value
from tlint.source import FileIndex
from tlint.views.bindings import BindingsView
from tlint.views.training_clips import TrainingClips
from tlint.views.training_common import (  # noqa: F401 - re-exported
    ACCELERATOR,
    BACKWARD,
    CALL,
    CLIP,
    CLIP_FUNCTIONS,
    DEEPSPEED_INITIALIZE,
    DEEPSPEED_PLUGIN,
    EVAL,
    FABRIC,
    FORWARD,
    LIGHTNING_MODULE,
    LIGHTNING_TRAINER,
    LOSS,
    NO_WARMUP,
    OPTIMIZER_STEP,
    SCALE,
    SCHEDULER_STEP,
    TRAIN,
    TRAINING_ARGUMENTS,
    UNKNOWN,
    UNKNOWN_WARMUP,
    UNSCALE,
    WARMUP,
    ZERO_GRAD,
    Condition,
    Event,
    LightningModuleInfo,
    OptimizerSite,
    SchedulerSite,
    TrainingLoop,
    _family_of_qualified,
    construction_family,
    is_adam_name,
    is_optimizer_name,
    name_matches,
)
from tlint.views.training_deepspeed import DeepSpeedConfig, TrainingDeepSpeed  # noqa: F401 - re-exported
from tlint.views.training_events import TrainingEvents
from tlint.views.training_literals import TrainingLiterals, covers  # noqa: F401 - re-exported
from tlint.views.training_loops import TrainingLoops
from tlint.views.training_usage import TrainingUsage
from tlint.views.training_warmup import TrainingWarmup, warmup_sites  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.views.training_loops import _Iteration

# --- the view -----------------------------------------------------------------------------


class TrainingView(TrainingLoops, TrainingEvents, TrainingWarmup, TrainingDeepSpeed, TrainingLiterals, TrainingUsage,
                   TrainingClips):
    """Training loops and training set-up of one file, computed lazily from its index."""

    def __init__(self, index: FileIndex, read_input: Callable[[Path], bytes | None] | None = None,
                 bindings: BindingsView | None = None) -> None:
        """`read_input`: how the view reads a file it depends on (a DeepSpeed JSON config):
        `FileContext.read_input`, which records it for the cache; None reads nothing.
        `bindings`: the file's bindings view (`ctx.bindings`; one of its own when None)."""
        self.index = index
        self.bindings = bindings if bindings is not None else BindingsView(index)
        self.calls = self.bindings.calls
        self._read_input = read_input
        self._kinds: dict[cst.Call, str | None] = {}
        self._walks: dict[cst.CSTNode, _Iteration] = {}  # root -> its walk (`TrainingLoops._walk`)
        # Calls classified as loss/forward only by their callee's name (`criterion(...)`).
        self.named_like_events: set[cst.Call] = set()
        self._deepspeed_cache: dict[Path | None, tuple[list[DeepSpeedConfig], int]] = {}

    # --- constructions ----------------------------------------------------------------

    @cached_property
    def _families(self) -> dict[cst.Call, tuple[str, str]]:
        """call -> (family, name) for every construction this view knows."""
        out: dict[cst.Call, tuple[str, str]] = {}
        for call in self.index.calls:
            found = self._family(call)
            if found is not None:
                out[call] = found
        return out

    def _family(self, call: cst.Call) -> tuple[str, str] | None:
        qualified = self.index.qualify(call.func)
        if qualified is None:
            named = self._optimizer_by_string(call.func) if self._optimizer_getattrs else None
            if named is not None:
                return ("optimizer", named)
            name = call.func.value if type(call.func) is cst.Name else None
            family = self._local_families.get(name) if name else None
            if family is None and name and "opt" in name.lower() and name in self._optimizer_classes:
                bound = self._bound_optimizer(call.func)  # type: ignore[arg-type]  # a Name here
                if bound is not None:
                    return ("optimizer", bound)
            return (family, name) if family and name else None  # (a family implies a name)
        if qualified == "functools.partial" and call.args:
            inner = self.index.qualify(call.args[0].value)
            if inner and is_optimizer_name(inner):
                return ("optimizer", inner)
            return None
        family = _family_of_qualified(qualified)
        return (family, qualified) if family else None

    @cached_property
    def _optimizer_classes(self) -> frozenset[str]:
        """Names the file assigns an optimiser class to (`optimizer_cls = AdamW`, on one
        branch of a choice by a config string): calling them builds an optimiser. (Asked
        only for called names that say `opt`.)"""
        index = self.index
        out = set()
        for node in index.assignments:
            if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name \
                    and type(node.value) in (cst.Name, cst.Attribute):
                qualified = index.qualify(node.value)
                if qualified is not None and is_optimizer_name(qualified):
                    out.add(node.targets[0].target.value)
        return frozenset(out)

    def _bound_optimizer(self, func: cst.Name) -> str | None:
        """The optimiser class a called name holds: every assignment reaching the call binds
        a class (a name or an attribute, not a call) and one of them is a known optimiser;
        the first Adam-family one (the run may take any branch), else the first."""
        found = []
        for binding in self.bindings.reaching(func):
            if binding.value is None or type(binding.value) not in (cst.Name, cst.Attribute):
                return None
            qualified = self.index.qualify(binding.value)
            if qualified is not None and is_optimizer_name(qualified):
                found.append(qualified)
        return next((name for name in found if is_adam_name(name)), found[0] if found else None)

    @cached_property
    def _optimizer_getattrs(self) -> bool:
        """The file calls `getattr(torch.optim, ...)` somewhere (what `_optimizer_by_string`
        needs, directly or through a name): else no call of the file is looked up."""
        if "getattr" not in self.index.identifiers:
            return False
        return any(type(call.func) is cst.Name and call.func.value == "getattr" and len(call.args) >= 2
                   and self.index.qualify(call.args[0].value) == "torch.optim" for call in self.index.calls)

    def _optimizer_by_string(self, func: cst.BaseExpression) -> str | None:
        """`getattr(torch.optim, args.optimizer)(...)`, directly or through the name it is
        bound to, with the name's default-run string (`--optimizer` defaulting to "AdamW"):
        the qualified name of that optimiser."""
        if type(func) is cst.Name and func.value not in self.index.imports.aliases:
            bound = self.bindings.expression(func)
            func = bound if type(bound) is cst.Call else func
        if type(func) is not cst.Call or type(func.func) is not cst.Name or func.func.value != "getattr" \
                or len(func.args) < 2 or self.index.qualify(func.args[0].value) != "torch.optim":
            return None
        value = self.literal(func.args[1].value)
        return f"torch.optim.{value}" if isinstance(value, str) and value.isidentifier() else None

    @cached_property
    def _local_families(self) -> dict[str, str]:
        """Classes of this file that subclass a known family (`class MyArgs(TrainingArguments)`)."""
        out: dict[str, str] = {}
        classes = self.index.classes_by_name
        for _ in range(3):  # local subclasses of local subclasses
            for name, cls in classes.items():
                if name in out:
                    continue
                for base in cls.bases:
                    qualified = self.index.qualify(base.value)
                    family = _family_of_qualified(qualified) if qualified else out.get(last_name(base.value) or "")
                    if family in ("training_arguments", "hf_trainer", "lightning_module", "scheduler", "optimizer"):
                        out[name] = family
                        break
        return out

    def calls_of(self, family: str) -> list[cst.Call]:
        return [call for call, (fam, _) in self._families.items() if fam == family]

    @cached_property
    def training_arguments(self) -> list[cst.Call]:
        """`TrainingArguments`, `Seq2SeqTrainingArguments`, `trl` `*Config` calls (and local subclasses)."""
        return self.calls_of("training_arguments")

    @cached_property
    def hf_trainers(self) -> list[cst.Call]:
        return self.calls_of("hf_trainer")

    @cached_property
    def lightning_trainers(self) -> list[cst.Call]:
        return self.calls_of("lightning_trainer")

    @cached_property
    def fabrics(self) -> list[cst.Call]:
        return self.calls_of("fabric")

    @cached_property
    def accelerators(self) -> list[cst.Call]:
        return self.calls_of("accelerator")

    @cached_property
    def deepspeed_initializations(self) -> list[cst.Call]:
        return self.calls_of("deepspeed_initialize")

    @cached_property
    def optimizers(self) -> list[OptimizerSite]:
        out = []
        for call, (family, name) in self._families.items():
            if family != "optimizer":
                continue
            out.append(OptimizerSite(call, name, self._adam(call, name), self._target(call),
                                     self.index.enclosing_function(call)))
        return out

    def _adam(self, call: cst.Call, name: str) -> bool:
        if name.startswith("timm.optim.create_optimizer"):
            opt = self.literal(self._arg_value(call, "opt", 1))
            return isinstance(opt, str) and is_adam_name(opt)
        if name.endswith("ZeroRedundancyOptimizer"):
            inner = self.index.qualify(self._arg_value(call, "optimizer_class", 1))
            return bool(inner and is_adam_name(inner))
        if name in self._local_families:
            cls = self.index.classes_by_name[name]
            return any(is_adam_name(self.index.qualify(base.value) or "") for base in cls.bases)
        return is_adam_name(name)

    def _target(self, call: cst.Call) -> str | None:
        parent = self.index.parent(call)
        if type(parent) is cst.Assign and len(parent.targets) == 1:
            return last_name(parent.targets[0].target)
        if type(parent) is cst.AnnAssign:
            return last_name(parent.target)
        return None

    @cached_property
    def lightning_modules(self) -> list[LightningModuleInfo]:
        out = []
        for name, family in self._local_families.items():
            if family != "lightning_module":
                continue
            cls = self.index.classes_by_name[name]
            methods = {s.name.value: s for s in cls.body.body if type(s) is cst.FunctionDef}
            manual = any(
                self.index.is_inside(node, cls)
                and type(node) is cst.Assign
                and any(last_name(t.target) == "automatic_optimization" for t in node.targets)
                and literal_value(node.value, UNKNOWN) is False
                for node in self.index.assignments
            )
            out.append(LightningModuleInfo(cls, methods, manual))
        return out


@register_view("training")
def training(ctx: FileContext) -> TrainingView:
    """The file's training loops and set-up (`ctx.training`)."""
    return TrainingView(ctx.index, ctx.read_input, ctx.bindings)
