"""Shared vocabulary of the training view (`tlint.views.training`): event kinds,
scheduler warmup states, `UNKNOWN`, the public records the view returns (`Event`,
`TrainingLoop`, `OptimizerSite`, ...), the qualified names of training constructions and
how a qualified name is classified (`is_optimizer_name`, `is_adam_name`, `name_matches`),
and small helpers the view's parts share. Its public names are re-exported from
`tlint.views.training`; it imports nothing from the other `training_*` modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from tlint.cst import children, snake_parts
from tlint.views.bindings import UNKNOWN as _BINDINGS_UNKNOWN

# Event kinds, in the order they usually happen in one iteration.
FORWARD = "forward"
LOSS = "loss"
BACKWARD = "backward"
SCALE = "scale"  # `scaler.scale(loss)`: AMP loss scaling
UNSCALE = "unscale"
CLIP = "clip"
OPTIMIZER_STEP = "optimizer_step"
SCHEDULER_STEP = "scheduler_step"
ZERO_GRAD = "zero_grad"
EVAL = "eval"
TRAIN = "train"
CALL = "call"  # any call at all (`TrainingView.calls_in`)

# Scheduler classification.
WARMUP = "warmup"
NO_WARMUP = "none"
UNKNOWN_WARMUP = "unknown"

# What `TrainingView.literal` returns for a value it cannot know statically (the bindings
# view's own marker: one object for every resolver).
UNKNOWN = _BINDINGS_UNKNOWN


# --- public records ---------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Condition:
    """An `if` test an event sits under; `negated` for its `else`/`elif` branch."""

    test: cst.BaseExpression
    negated: bool = False


@dataclass(frozen=True, eq=False)
class Event:
    """One thing that happens in an iteration of a training loop.

    `node` is the call (or the `p.grad = None` statement) in this file, inside a helper
    when the event is reached through one; `via` the helper calls leading to it from the
    loop, outermost first; `loops` the loops between the training loop and the event
    (accumulation micro-steps, loops inside helpers), outermost first; `conditions` the
    `if` tests and `contexts` the `with` items around it, inside the loop (helpers
    included).
    """

    kind: str
    node: cst.CSTNode
    loops: tuple[cst.For | cst.While, ...] = ()
    conditions: tuple[Condition, ...] = ()
    contexts: tuple[cst.BaseExpression, ...] = ()
    via: tuple[cst.Call, ...] = ()

    @property
    def loop_depth(self) -> int:
        return len(self.loops)

    @property
    def site(self) -> cst.CSTNode:
        """Where the event happens in the loop's own body: the outermost helper call."""
        return self.via[0] if self.via else self.node

    def excludes(self, other: Event) -> bool:
        """The two events sit on different branches of one `if` (never both in one pass)."""
        return any(mine.test is theirs.test and mine.negated != theirs.negated
                   for mine in self.conditions for theirs in other.conditions)


@dataclass(eq=False)
class TrainingLoop:
    """A training loop, or a step function (`node` is a FunctionDef) whose loop is elsewhere.

    `events` are those of one iteration, in evaluation order. `outer` are the loops
    around it in its function, innermost first; `epoch_loop` is the loop that repeats it
    (`outer[0]`, or a loop in this file that calls the function holding it), if any.
    """

    node: cst.For | cst.While | cst.FunctionDef
    function: cst.FunctionDef | None
    events: tuple[Event, ...]
    outer: tuple[cst.For | cst.While, ...] = ()
    epoch_loop: cst.For | cst.While | None = None
    helpers: frozenset[cst.FunctionDef] = frozenset()  # functions inlined into the iteration

    @property
    def is_step_function(self) -> bool:
        return type(self.node) is cst.FunctionDef

    def of(self, *kinds: str) -> list[Event]:
        return [event for event in self.events if event.kind in kinds]

    def first(self, kind: str) -> Event | None:
        return next((event for event in self.events if event.kind == kind), None)

    def has(self, kind: str) -> bool:
        return any(event.kind == kind for event in self.events)

    @property
    def enclosing(self) -> list[cst.For | cst.While | cst.FunctionDef]:
        """The loop, the loops around it (innermost first), then the loop that repeats it
        when that is not one of them."""
        chain: list[cst.For | cst.While | cst.FunctionDef] = [self.node, *self.outer]
        if self.epoch_loop is not None and self.epoch_loop not in chain:
            chain.append(self.epoch_loop)
        return chain


@dataclass(frozen=True, eq=False)
class OptimizerSite:
    call: cst.Call
    name: str  # qualified constructor, e.g. "torch.optim.AdamW"
    adam_family: bool
    target: str | None  # the name it is assigned to, if any
    function: cst.FunctionDef | None  # the factory it is built in (configure_optimizers, ...)


@dataclass(frozen=True, eq=False)
class SchedulerSite:
    call: cst.Call
    name: str
    warmup: str  # WARMUP | NO_WARMUP | UNKNOWN_WARMUP
    target: str | None


@dataclass(frozen=True, eq=False)
class LightningModuleInfo:
    node: cst.ClassDef
    methods: dict[str, cst.FunctionDef]
    manual_optimization: bool  # `self.automatic_optimization = False`


# --- qualified names --------------------------------------------------------------------


TRAINING_ARGUMENTS = frozenset(
    {"transformers.TrainingArguments", "transformers.Seq2SeqTrainingArguments"}
    | {
        f"trl.{name}Config"
        for name in ("SFT", "DPO", "GRPO", "Reward", "ORPO", "KTO", "CPO", "PPO", "RLOO", "BCO", "GKD",
                     "OnlineDPO", "PRM", "XPO", "NashMD")
    }
)
LIGHTNING_TRAINER = frozenset({"lightning.pytorch.Trainer"})
LIGHTNING_MODULE = frozenset({"lightning.pytorch.LightningModule"})
FABRIC = frozenset({"lightning.fabric.Fabric", "lightning.pytorch.Fabric"})
ACCELERATOR = frozenset({"accelerate.Accelerator"})
DEEPSPEED_INITIALIZE = frozenset({"deepspeed.initialize"})
DEEPSPEED_PLUGIN = frozenset({"accelerate.DeepSpeedPlugin"})
CLIP_FUNCTIONS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grad_value", "torch.nn.utils.clip_grads_with_norm_",
    }
)
_OPTIMIZER_PACKAGES = (
    "torch.optim.", "torch.distributed.optim.", "bitsandbytes.optim.", "apex.optimizers.",
    "deepspeed.ops.adam.", "deepspeed.ops.lamb.", "deepspeed.ops.lion.", "deepspeed.ops.adagrad.",
    "timm.optim.", "torch_optimizer.", "schedulefree.", "lion_pytorch.",
)
_NOT_OPTIMIZERS = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
_TORCH_SCHEDULERS = "torch.optim.lr_scheduler."


def construction_family(name: str) -> str | None:
    """The family of a qualified constructor name ("optimizer", "scheduler",
    "training_arguments", ...), or None."""
    return _family_of_qualified(name)


def _family_of_qualified(name: str) -> str | None:
    if name in TRAINING_ARGUMENTS:
        return "training_arguments"
    if name in ("transformers.Trainer", "transformers.Seq2SeqTrainer") or (
        name.startswith("trl.") and name.endswith("Trainer")
    ):
        return "hf_trainer"
    if name in LIGHTNING_TRAINER:
        return "lightning_trainer"
    if name in LIGHTNING_MODULE:
        return "lightning_module"
    if name in FABRIC:
        return "fabric"
    if name in ACCELERATOR:
        return "accelerator"
    if name in DEEPSPEED_INITIALIZE:
        return "deepspeed_initialize"
    if name in DEEPSPEED_PLUGIN:
        return "deepspeed_plugin"
    if name.endswith("DeepSpeedStrategy") and name.startswith("lightning."):
        return "deepspeed_strategy"
    if name.startswith("torch.") and name.endswith("GradScaler"):
        return "scaler"
    if name.startswith("torch.nn.") and name.endswith("Loss"):
        return "loss"
    if is_optimizer_name(name):
        return "optimizer"
    if _scheduler_package(name) is not None:
        return "scheduler"
    if name.endswith(".from_pretrained") and not any(
        word in name for word in ("Tokenizer", "Processor", "Config", "FeatureExtractor")
    ):
        return "model"
    return None


def is_optimizer_name(name: str) -> bool:
    """A qualified optimiser constructor (`torch.optim.AdamW`, `bitsandbytes.optim.AdamW8bit`)."""
    if name.startswith(_NOT_OPTIMIZERS):
        return False
    last = name.rsplit(".", 1)[-1]
    if name.startswith("transformers."):
        return last in ("AdamW", "Adafactor")
    if name.startswith("timm.optim.") and last.startswith("create_optimizer"):
        return True
    return name.startswith(_OPTIMIZER_PACKAGES) and last[:1].isupper() and last != "Optimizer" and (
        "Manager" not in last and "Scheduler" not in last
    )


def is_adam_name(name: str) -> bool:
    """Adam-family for warmup purposes. RAdam is not: it rectifies the early variance of
    the adaptive step, which is what warmup works around (Liu et al. 2020)."""
    last = name.rsplit(".", 1)[-1].lower()
    return "adam" in last and not last.startswith("radam")


def _scheduler_package(name: str) -> str | None:
    """Which scheduler table a qualified name belongs to, or None."""
    last = name.rsplit(".", 1)[-1]
    if name.startswith(_TORCH_SCHEDULERS):
        return "torch" if last[:1].isupper() else None
    if name == "torch.optim.swa_utils.SWALR":
        return "swa"
    if name.startswith(("transformers.", "diffusers.")):
        if last == "get_scheduler" or (last.startswith("get_") and "schedule" in last):
            return "hf"
        return "hf" if last == "AdafactorSchedule" else None
    if name.startswith("timm.scheduler."):
        return "timm" if last.endswith("Scheduler") or last.startswith("create_scheduler") else None
    if name.startswith("deepspeed.runtime.lr_schedules."):
        return "deepspeed" if last[:1].isupper() else None
    if name.startswith("pytorch_warmup."):
        return "warmup"
    if name.startswith((".", "torch.", "transformers.", "diffusers.", "timm.", "deepspeed.")):
        return None
    parts = snake_parts(last)
    scheduler_words = any(part.startswith("sched") for part in parts)
    if "warmup" in last.lower() and (last[:1].isupper() or scheduler_words or "lr" in parts):
        return "warmup"  # GradualWarmupScheduler, get_warmup_lr; not `warmup(model)`
    return "unknown" if scheduler_words else None


def name_matches(qualified: str | None, names: Iterable[str]) -> bool:
    """Does a call's name (qualified through imports, or its dotted text) match one of the
    names a user configured? `pkg.mod.fn`, `mod.fn` and `fn` all match `pkg.mod.fn`."""
    if not qualified:
        return False
    own = qualified.lstrip(".")
    for name in names:
        name = name.lstrip(".")
        if own == name or own.endswith("." + name) or name.endswith("." + own):
            return True
    return False


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- small helpers ------------------------------------------------------------------------


def _nodes_under(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _names_under(node: cst.CSTNode) -> Iterator[cst.Name]:
    return (n for n in _nodes_under(node) if type(n) is cst.Name)
