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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

import libcst as cst

from tlint.cache import digest_bytes
from tlint.context import register_view
from tlint.cst import children, dotted_name, get_arg, has_star_kwargs, last_name, literal_value, snake_parts
from tlint.source import FileIndex

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

# What `TrainingView.literal` returns for a value it cannot know statically.
UNKNOWN = object()

_MAX_INLINE = 8  # helper call depth followed from a loop
_INLINE_BUDGET = 2_000  # helper bodies walked per iteration (bounds fan-out on generated code)


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

    def excludes(self, other: "Event") -> bool:
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
    helpers: frozenset = frozenset()  # functions inlined into the iteration

    @property
    def is_step_function(self) -> bool:
        return type(self.node) is cst.FunctionDef

    def of(self, *kinds: str) -> list[Event]:
        return [event for event in self.events if event.kind in kinds]

    def first(self, kind: str) -> Event | None:
        return next((event for event in self.events if event.kind == kind), None)

    def has(self, kind: str) -> bool:
        return any(event.kind == kind for event in self.events)


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
class DeepSpeedConfig:
    """A DeepSpeed config: a dict literal in the file, or a JSON file it names."""

    node: cst.CSTNode
    values: dict

    def clips(self) -> bool:
        value = self.values.get("gradient_clipping", 0)
        if value is UNKNOWN or isinstance(value, str):  # "auto": filled from max_grad_norm
            return True
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

    def warms_up(self) -> bool:
        scheduler = self.values.get("scheduler")
        if scheduler is UNKNOWN:
            return True
        if not isinstance(scheduler, dict):
            return False
        kind = scheduler.get("type", UNKNOWN)
        if kind is UNKNOWN or kind == "auto":
            return True
        if not isinstance(kind, str) or ("warmup" not in kind.lower() and kind != "OneCycle"):
            return False
        params = scheduler.get("params", {})
        steps = params.get("warmup_num_steps", UNKNOWN) if isinstance(params, dict) else UNKNOWN
        return not (isinstance(steps, (int, float)) and steps == 0)


@dataclass(frozen=True, eq=False)
class LightningModuleInfo:
    node: cst.ClassDef
    methods: dict  # name -> FunctionDef
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
_TORCH_NO_WARMUP = frozenset(
    {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
     "ReduceLROnPlateau", "PolynomialLR"}
)
_LOSS_FUNCTIONS = frozenset(
    {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "nll_loss",
     "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cosine_embedding_loss", "ctc_loss"}
)
_OPTIMIZER_WORDS = frozenset({"opt", "optim", "optimizer", "optimiser", "optimizers", "optimisers", "opts", "optims"})
_MODEL_NAMES = frozenset({"model", "net", "network", "module", "self", "engine", "student", "teacher"})
_FACTORY_VERBS = frozenset({"get", "build", "create", "make", "load", "init", "setup", "prepare", "wrap", "unwrap"})
_CLIP_OBJECTS = frozenset({"grad", "grads", "gradient", "gradients", "norm"})
# Names that say a DeepSpeed or Megatron-LM back-end is configured outside the file
# (`accelerate launch --config_file ...`): it clips by that configuration.
_EXTERNAL_BACKEND_NAMES = frozenset(
    {"DummyOptim", "DummyScheduler", "deepspeed_plugin", "MegatronLMDummyScheduler", "megatron_lm_plugin"}
)
_DEEPSPEED_KEYS = frozenset(
    {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "gradient_clipping"}
)


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


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _says_clip(name: str) -> bool:
    """A callee named like a gradient clipper (`clip_grad_norm_`, `clip_gradients`)."""
    parts = snake_parts(name)
    return "clip" in parts and any(part in _CLIP_OBJECTS for part in parts)


class _Const(NamedTuple):
    """A default that is not written as an expression (`action="store_true"`)."""

    value: object


# --- the walk over one iteration ----------------------------------------------------------


class _State(NamedTuple):
    loops: tuple = ()
    conditions: tuple = ()
    contexts: tuple = ()
    via: tuple = ()
    active: frozenset = frozenset()


class _Iteration:
    """Walks the statements of one loop iteration (or function body) in evaluation order:
    arguments before the call they feed, helper bodies inlined at their call site."""

    def __init__(self, view: "TrainingView", every_call: bool = False) -> None:
        self.view = view
        self.every_call = every_call
        self.events: list[Event] = []
        self.kinds: set[str] = set()
        self.loops_seen: list[cst.For | cst.While] = []
        self.inlined: set[cst.FunctionDef] = set()
        self.budget = _INLINE_BUDGET

    def run(self, root: cst.For | cst.While | cst.FunctionDef) -> "_Iteration":
        function = root if type(root) is cst.FunctionDef else self.view.index.enclosing_function(root)
        state = _State(active=frozenset([function]) if function is not None else frozenset())
        if type(root) is cst.While:
            self.expression(root.test, state)
        self.suite(root.body, state)
        return self

    def suite(self, suite: cst.BaseSuite, state: _State) -> None:
        if type(suite) is cst.IndentedBlock:
            for statement in suite.body:
                self.statement(statement, state)
        else:
            for small in suite.body:
                self.small(small, state)

    def statement(self, node: cst.CSTNode, state: _State) -> None:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                self.small(small, state)
        elif kind is cst.If:
            self.branch(node, state)
        elif kind is cst.For or kind is cst.While:
            inner = state._replace(loops=state.loops + (node,))
            self.loops_seen.append(node)
            if kind is cst.For:
                self.expression(node.iter, state)
            else:
                self.expression(node.test, inner)
            self.suite(node.body, inner)
            if node.orelse is not None:
                self.suite(node.orelse.body, state)
        elif kind is cst.With:
            for item in node.items:
                self.expression(item.item, state)
            self.suite(node.body, state._replace(contexts=state.contexts + tuple(i.item for i in node.items)))
        elif kind is cst.Try or kind is cst.TryStar:
            self.suite(node.body, state)
            for handler in node.handlers:
                self.suite(handler.body, state)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.suite(extra.body, state)
        elif kind is cst.Match:
            self.expression(node.subject, state)
            for case in node.cases:
                self.suite(case.body, state)
        # Nested function and class definitions run only when called (see `call`).

    def branch(self, node: cst.If, state: _State) -> None:
        """An if/elif/else chain, iteratively: the branches of a long `elif` chain sit
        under the negated tests of the branches before them."""
        while True:
            self.expression(node.test, state)
            self.suite(node.body, state._replace(conditions=state.conditions + (Condition(node.test),)))
            state = state._replace(conditions=state.conditions + (Condition(node.test, True),))
            if type(node.orelse) is cst.If:
                node = node.orelse
                continue
            if type(node.orelse) is cst.Else:
                self.suite(node.orelse.body, state)
            return

    def small(self, node: cst.BaseSmallStatement, state: _State) -> None:
        self.expression(node, state)
        if type(node) is cst.Assign and literal_value(node.value, UNKNOWN) is None and any(
            type(t.target) is cst.Attribute and t.target.attr.value == "grad" for t in node.targets
        ):
            self.emit(ZERO_GRAD, node, state)

    def expression(self, node: cst.CSTNode, state: _State) -> None:
        """Post-order over the calls under `node`, iteratively (expressions nest deeply)."""
        stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
        while stack:
            current, done = stack.pop()
            if done:
                self.call(current, state)
                continue
            kind = type(current)
            if kind is cst.Lambda or kind is cst.FunctionDef or kind is cst.ClassDef:
                continue
            if kind is cst.Call:
                stack.append((current, True))
            kids = list(children(current))
            kids.reverse()
            stack.extend((kid, False) for kid in kids)

    def call(self, call: cst.Call, state: _State) -> None:
        view = self.view
        if self.every_call:
            self.emit(CALL, call, state)
        kind = view.event_kind(call)
        if kind is not None and call in view.named_like_events:
            function = view.callee(call)
            if function is not None:  # `compute_loss(...)`, `train_model(...)` of this file: look inside
                self.inline(call, function, state)
                return
        if kind is not None:
            if kind == OPTIMIZER_STEP:
                closure = get_arg(call, "closure", 0)
                if closure is not None and type(closure.value) is cst.Name:
                    self.inline(call, view.local_function(closure.value), state)
            if not self.every_call:
                self.emit(kind, call, state)
            self.kinds.add(kind)
            return
        self.inline(call, view.callee(call), state)

    def inline(self, call: cst.Call, function: cst.FunctionDef | None, state: _State) -> None:
        if function is None or function in state.active or len(state.via) >= _MAX_INLINE or self.budget <= 0:
            return
        self.budget -= 1
        self.inlined.add(function)
        self.suite(function.body, state._replace(via=state.via + (call,), active=state.active | {function}))

    def emit(self, kind: str, node: cst.CSTNode, state: _State) -> None:
        self.events.append(Event(kind, node, state.loops, state.conditions, state.contexts, state.via))
        self.kinds.add(kind)

    def trains(self) -> bool:
        return BACKWARD in self.kinds and OPTIMIZER_STEP in self.kinds


# --- the view -----------------------------------------------------------------------------


class TrainingView:
    """Training loops and training set-up of one file, computed lazily from its index."""

    def __init__(self, index: FileIndex, read_input: Callable[[Path], bytes | None] | None = None) -> None:
        """`read_input`: how the view reads a file it depends on (a DeepSpeed JSON config):
        `FileContext.read_input`, which records it for the cache; None reads nothing."""
        self.index = index
        self._read_input = read_input
        self._kinds: dict[cst.Call, str | None] = {}
        self._callees: dict[cst.Call, cst.FunctionDef | None] = {}
        # Calls classified as loss/forward only by their callee's name (`criterion(...)`).
        self.named_like_events: set[cst.Call] = set()
        self._deepspeed_cache: dict[Path | None, tuple[list[DeepSpeedConfig], int]] = {}

    # --- constructions ----------------------------------------------------------------

    @cached_property
    def _families(self) -> dict[cst.Call, tuple[str, str]]:
        """call -> (family, name) for every construction this view knows."""
        out = {}
        for call in self.index.calls:
            found = self._family(call)
            if found is not None:
                out[call] = found
        return out

    def _family(self, call: cst.Call) -> tuple[str, str] | None:
        qualified = self.index.qualify(call.func)
        if qualified is None:
            name = call.func.value if type(call.func) is cst.Name else None
            family = self._local_families.get(name) if name else None
            return (family, name) if family else None
        if qualified == "functools.partial" and call.args:
            inner = self.index.qualify(call.args[0].value)
            if inner and is_optimizer_name(inner):
                return ("optimizer", inner)
            return None
        family = _family_of_qualified(qualified)
        return (family, qualified) if family else None

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
            return bool(inner) and is_adam_name(inner)
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
    def schedulers(self) -> list[SchedulerSite]:
        calls = [(call, name) for call, (family, name) in self._families.items() if family == "scheduler"]
        composite = ("SequentialLR", "ChainedScheduler")
        out = [SchedulerSite(c, n, self._scheduler_warmup(c, n), self._target(c))
               for c, n in calls if not n.endswith(composite)]
        by_target = {site.target: site for site in out if site.target}
        out += [SchedulerSite(c, n, self._composite_warmup(c, n, by_target), self._target(c))
                for c, n in calls if n.endswith(composite)]
        order = {id(call): i for i, (call, _) in enumerate(calls)}
        return sorted(out, key=lambda site: order[id(site.call)])

    def _scheduler_warmup(self, call: cst.Call, name: str) -> str:
        if name in self._local_families:
            return WARMUP if "warm" in name.lower() else UNKNOWN_WARMUP
        package = _scheduler_package(name)
        last = name.rsplit(".", 1)[-1]
        if package == "torch":
            return self._torch_scheduler_warmup(call, last)
        if package == "swa":
            return NO_WARMUP
        if package == "hf":
            return self._hf_scheduler_warmup(call, last)
        if package == "timm":
            if last == "create_scheduler":
                return UNKNOWN_WARMUP
            keyword = "warmup_epochs" if last.startswith("create_scheduler") else "warmup_t"
            return self._warmup_argument(call, keyword, None, absent=NO_WARMUP)
        if package == "deepspeed":
            if last == "LRRangeTest":
                return NO_WARMUP
            if last == "OneCycle":
                return WARMUP
            return self._warmup_argument(call, "warmup_num_steps", None, absent=WARMUP)
        if package == "warmup":
            return WARMUP
        return UNKNOWN_WARMUP

    def _torch_scheduler_warmup(self, call: cst.Call, last: str) -> str:
        if last in _TORCH_NO_WARMUP:
            return NO_WARMUP
        if last == "LinearLR":
            start, end = self._arg_value(call, "start_factor", 1), self._arg_value(call, "end_factor", 2)
            start = 1 / 3 if start is None else self.literal(start)
            end = 1.0 if end is None else self.literal(end)
            if _number(start) and _number(end):
                return WARMUP if start < end else NO_WARMUP
            return WARMUP
        if last == "ConstantLR":
            factor = self._arg_value(call, "factor", 1)
            value = 1 / 3 if factor is None else self.literal(factor)
            return NO_WARMUP if _number(value) and value >= 1 else WARMUP
        if last == "OneCycleLR":
            return self._warmup_argument(call, "pct_start", 5, absent=WARMUP)
        if last == "CyclicLR":
            return WARMUP
        if last in ("LambdaLR", "MultiplicativeLR"):
            return self._lambda_warmup(self._arg_value(call, "lr_lambda", 1), last == "MultiplicativeLR")
        return UNKNOWN_WARMUP

    def _lambda_warmup(self, expr: cst.BaseExpression | None, multiplicative: bool) -> str:
        """A LambdaLR ramps up unless its lambda is plainly a decay (`0.95 ** epoch`) or a
        constant; the lambda is not evaluated, so anything else counts as a warmup."""
        if type(expr) is not cst.Lambda:
            return WARMUP
        body = expr.body
        constant = self.literal(body)
        if _number(constant):
            return WARMUP if multiplicative and constant > 1 else NO_WARMUP
        if multiplicative:
            return UNKNOWN_WARMUP
        if type(body) is cst.BinaryOperation and type(body.operator) is cst.Power:
            base = self.literal(body.left)
            if _number(base) and 0 < base < 1:
                return NO_WARMUP
        return WARMUP

    def _hf_scheduler_warmup(self, call: cst.Call, last: str) -> str:
        if last == "get_scheduler":
            kind = self._arg_value(call, "name", 0)
            value = self.literal(kind)
            if value in ("constant", "reduce_lr_on_plateau") or last_name(kind) in ("CONSTANT", "REDUCE_ON_PLATEAU"):
                return NO_WARMUP
            return self._warmup_argument(call, "num_warmup_steps", 2, absent=NO_WARMUP)
        if last.endswith("_with_warmup") or last in ("get_inverse_sqrt_schedule", "get_wsd_schedule"):
            absent = NO_WARMUP if last == "get_inverse_sqrt_schedule" else UNKNOWN_WARMUP
            return self._warmup_argument(call, "num_warmup_steps", 1, absent=absent)
        return NO_WARMUP

    def _warmup_argument(self, call: cst.Call, keyword: str, position: int | None, *, absent: str) -> str:
        expr = self._arg_value(call, keyword, position)
        if expr is None:
            return UNKNOWN_WARMUP if has_star_kwargs(call) else absent
        return WARMUP if self.nonzero(expr) else NO_WARMUP

    def _composite_warmup(self, call: cst.Call, name: str, by_target: dict[str, SchedulerSite]) -> str:
        position = 0 if name.endswith("ChainedScheduler") else 1
        listed = self._arg_value(call, "schedulers", position)
        if type(listed) not in (cst.List, cst.Tuple):
            return UNKNOWN_WARMUP
        states = []
        for element in listed.elements:
            value = element.value
            if type(value) is cst.Call and value in self._families:
                states.append(self._scheduler_warmup(value, self._families[value][1]))
            elif type(value) is cst.Name and value.value in by_target:
                states.append(by_target[value.value].warmup)
            else:
                states.append(UNKNOWN_WARMUP)
        if WARMUP in states:
            return WARMUP
        return NO_WARMUP if states and all(s == NO_WARMUP for s in states) else UNKNOWN_WARMUP

    def arguments_warmup(self, call: cst.Call) -> tuple[str, cst.CSTNode]:
        """Does a `TrainingArguments`-family call warm up? (state, node to point at)."""
        if has_star_kwargs(call):
            return UNKNOWN_WARMUP, call
        zero = None
        for keyword in ("warmup_steps", "warmup_ratio"):
            arg = get_arg(call, keyword)
            if arg is not None:
                if self.nonzero(arg.value):
                    return WARMUP, arg
                zero = zero or arg
        if zero is None:
            name = call.func.value if type(call.func) is cst.Name else None
            for keyword in ("warmup_steps", "warmup_ratio"):
                default = self._class_field(name, keyword) if name else None
                if default is not None and self.nonzero(default):
                    return WARMUP, call
        return NO_WARMUP, zero or call

    def _class_field(self, class_name: str, field_name: str, depth: int = 0) -> cst.BaseExpression | None:
        cls = self.index.classes_by_name.get(class_name)
        if cls is None or depth > 3:
            return None
        for default in self._class_defaults(cls).get(field_name, ()):
            if isinstance(default, cst.BaseExpression):
                return default
        for base in cls.bases:
            found = self._class_field(last_name(base.value) or "", field_name, depth + 1)
            if found is not None:
                return found
        return None

    @cached_property
    def warmup_fields(self) -> list[cst.CSTNode]:
        """Warmup defaults of local `TrainingArguments` subclasses (`warmup_ratio: float = 0.03`)."""
        out = []
        for name, family in self._local_families.items():
            if family != "training_arguments":
                continue
            for statement in self.index.classes_by_name[name].body.body:
                small = statement.body[0] if type(statement) is cst.SimpleStatementLine else None
                if type(small) in (cst.AnnAssign, cst.Assign) and small.value is not None:
                    target = small.target if type(small) is cst.AnnAssign else small.targets[0].target
                    if last_name(target) in ("warmup_steps", "warmup_ratio"):
                        value = self._field_default(small.value)
                        if value is not None and self.nonzero(value):
                            out.append(small)
        return out

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

    # --- DeepSpeed ----------------------------------------------------------------------

    def deepspeed_configs(self, folder: Path | None) -> tuple[list[DeepSpeedConfig], int]:
        """The DeepSpeed configs this file shows (dict literals, JSON files next to it), and
        how many DeepSpeed set-ups take a config that cannot be read statically."""
        cached = self._deepspeed_cache.get(folder)
        if cached is not None:
            return cached
        configs: list[DeepSpeedConfig] = []
        seen: set[int] = set()
        unresolved = 0
        for node in self.index.assignments:
            value = node.value if type(node) in (cst.Assign, cst.AnnAssign) else None
            if value is not None and _DEEPSPEED_KEYS & _dict_keys(value):
                configs.append(DeepSpeedConfig(value, self._dict_values(value)))
                seen.add(id(value))
        sources = [
            ("deepspeed_initialize", ("config", "config_params")),
            ("deepspeed_plugin", ("hf_ds_config",)),
            ("deepspeed_strategy", ("config",)),
            ("training_arguments", ("deepspeed",)),
        ]
        for family, keywords in sources:
            for call in self.calls_of(family):
                arg = next((get_arg(call, k) for k in keywords if get_arg(call, k) is not None), None)
                if family == "deepspeed_plugin" and arg is None:
                    clip = get_arg(call, "gradient_clipping")
                    if clip is None:
                        unresolved += 1
                    else:
                        configs.append(DeepSpeedConfig(clip, {"gradient_clipping": self.literal(clip.value)}))
                    continue
                if arg is None:
                    unresolved += family == "deepspeed_initialize"
                    continue
                config = self._deepspeed_config(arg.value, folder)
                if config is None:
                    unresolved += 1
                elif id(config.node) not in seen:
                    configs.append(config)
                    seen.add(id(config.node))
        if self.index.identifiers & _EXTERNAL_BACKEND_NAMES:
            unresolved += 1  # accelerate's DeepSpeed/Megatron-LM plugin, configured at launch
        self._deepspeed_cache[folder] = configs, unresolved
        return configs, unresolved

    def is_engine_step(self, event: Event) -> bool:
        """An optimiser step taken by a DeepSpeed engine (`model_engine.step()`), which clips
        by its config."""
        func = event.node.func if type(event.node) is cst.Call else None
        return type(func) is cst.Attribute and self.role(func.value) == "engine"

    def _deepspeed_config(self, expr: cst.BaseExpression, folder: Path | None) -> DeepSpeedConfig | None:
        values = self._dict_values(expr)
        if values is not None:
            return DeepSpeedConfig(expr, values)
        if type(expr) in (cst.Name, cst.Attribute):
            # `config=ds_config`, `config=self.ds_config`: the one dict literal assigned to that name
            assigned = [v for v in self._dict_assignments.get(last_name(expr) or "", ()) if v is not None]
            if len(assigned) == 1 and len(self._dict_assignments[last_name(expr)]) == 1:
                return DeepSpeedConfig(assigned[0], self._dict_values(assigned[0]))
        path = self.literal(expr)
        if isinstance(path, str) and path.endswith(".json") and folder is not None and self._read_input is not None:
            loaded = _read_json(folder, path, self._read_input)
            if loaded is not None:
                return DeepSpeedConfig(expr, loaded)
        return None

    @cached_property
    def _dict_assignments(self) -> dict[str, list]:
        """Last name of an assignment target -> its values: the dict literal, or None."""
        out: dict[str, list] = {}
        for node in self.index.assignments:
            if type(node) is cst.Assign:
                targets = [t.target for t in node.targets]
            elif type(node) is cst.AnnAssign and node.value is not None:
                targets = [node.target]
            else:
                continue
            value = node.value if _dict_keys(node.value) or type(node.value) is cst.Dict else None
            for target in targets:
                if last_name(target):
                    out.setdefault(last_name(target), []).append(value)
        return out

    def _dict_values(self, expr: cst.BaseExpression | None, depth: int = 0):
        """A dict literal (or `dict(k=v)`) as a Python dict, UNKNOWN for non-literal leaves."""
        if depth > 6:
            return None
        if type(expr) is cst.Dict:
            out = {}
            for element in expr.elements:
                if type(element) is not cst.DictElement:
                    continue
                key = literal_value(element.key, UNKNOWN)
                if isinstance(key, str):
                    out[key] = self._leaf(element.value, depth)
            return out
        if type(expr) is cst.Call and dotted_name(expr.func) == "dict" and all(a.keyword for a in expr.args):
            return {a.keyword.value: self._leaf(a.value, depth) for a in expr.args}
        return None

    def _leaf(self, expr: cst.BaseExpression, depth: int):
        nested = self._dict_values(expr, depth + 1)
        return nested if nested is not None else self.literal(expr)

    # --- literals as they run by default ------------------------------------------------

    def literal(self, expr: cst.BaseExpression | None, default=UNKNOWN):
        """The value `expr` has when the program runs with its defaults: literals, simple
        arithmetic on them, module constants, parameter defaults, argparse/click option
        defaults and dataclass field defaults. `default` when it cannot be known."""
        value = self._literal(expr, 0)
        return default if value is UNKNOWN else value

    def nonzero(self, expr: cst.BaseExpression) -> bool:
        """True unless `expr` is known to be 0/None/False (unknown values count as set)."""
        value = self.literal(expr)
        return value is UNKNOWN or not (value is None or value is False or (_number(value) and value == 0))

    def _literal(self, expr, depth: int):
        if expr is None or depth > 8:
            return UNKNOWN
        value = literal_value(expr, UNKNOWN)
        if value is not UNKNOWN:
            return value
        if type(expr) is cst.Name:
            return self._name_value(expr, depth)
        if type(expr) is cst.Attribute:
            qualified = self.index.qualify(expr)
            if qualified is not None:
                return math.inf if qualified in ("math.inf", "numpy.inf", "torch.inf") else UNKNOWN
            return self._option_value(expr.attr.value, depth)
        if type(expr) is cst.BinaryOperation:
            return _fold(expr.operator, self._literal(expr.left, depth + 1), self._literal(expr.right, depth + 1))
        if type(expr) is cst.Call:
            return self._fold_call(expr, depth)
        return UNKNOWN

    def _fold_call(self, call: cst.Call, depth: int):
        name = self.index.qualify(call.func) or dotted_name(call.func)
        functions = {"int": int, "float": float, "round": round, "abs": abs, "max": max, "min": min}
        function = functions.get(name or "") or {"math.ceil": math.ceil, "math.floor": math.floor}.get(name or "")
        if function is None or not call.args or any(a.keyword or a.star for a in call.args):
            return UNKNOWN
        values = [self._literal(a.value, depth + 1) for a in call.args]
        if function is float and len(values) == 1 and isinstance(values[0], str):
            try:
                return float(values[0])  # float("inf"), float("1e-4")
            except ValueError:
                return UNKNOWN
        if any(not _number(v) for v in values):
            return UNKNOWN
        try:
            return function(*values)
        except (TypeError, ValueError, OverflowError):
            return UNKNOWN

    @cached_property
    def _bindings(self) -> dict[tuple[cst.CSTNode, str], list]:
        """(scope, name) -> values bound to it (None when not a plain value)."""
        out: dict[tuple[cst.CSTNode, str], list] = {}
        index = self.index

        def bind(scope, target, value):
            if type(target) is cst.Name:
                out.setdefault((scope, target.value), []).append(value)
            elif type(target) in (cst.Tuple, cst.List):
                values = value.elements if type(value) in (cst.Tuple, cst.List) else None
                if values is not None and len(values) != len(target.elements):
                    values = None
                for i, element in enumerate(target.elements):
                    bind(scope, element.value, values[i].value if values else None)

        for node in index.assignments:
            scope = index.enclosing_scope(node)
            if type(node) is cst.Assign:
                for target in node.targets:
                    bind(scope, target.target, node.value)
            elif type(node) is cst.AnnAssign:
                if node.value is not None:
                    bind(scope, node.target, node.value)
            else:
                bind(scope, node.target, None)
        for loop in index.loops:
            if type(loop) is cst.For:
                bind(index.enclosing_scope(loop), loop.target, None)
        return out

    def _resolve_name(self, name: cst.Name):
        """The one expression a name is bound to, seen from its use (a parameter: its
        default); None when it is bound several times, or to something unknown."""
        index = self.index
        scope = index.enclosing_scope(name)
        while True:
            while type(scope) is cst.ClassDef:  # class bodies are not visible from methods
                scope = index.enclosing_scope(scope)
            bound = self._bindings.get((scope, name.value))
            if type(scope) in (cst.FunctionDef, cst.Lambda):
                param = _find_param(scope.params, name.value)
                if param is not None:
                    return param.default if not bound and param.default is not None else None
            if bound:
                return bound[0] if len(bound) == 1 else None
            if scope is index.module or scope is None:
                return None
            scope = index.enclosing_scope(scope)

    def binding(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one expression `name` is bound to, seen from its use: an assignment's value,
        or a parameter's default (then its parent is the `cst.Param`); None when the name
        is imported, bound several times, or to something unknown."""
        if name.value in self.index.imports.aliases:
            return None
        return self._resolve_name(name)

    def _name_value(self, name: cst.Name, depth: int):
        if name.value in self.index.imports.aliases:
            return UNKNOWN
        value = self._resolve_name(name)
        if value is None:
            return self._option_value(name.value, depth) if self._click_parameter(name) else UNKNOWN
        return self._literal(value, depth + 1)

    def _click_parameter(self, name: cst.Name) -> bool:
        """A parameter of a function whose `@click.option`s supply it."""
        function = self.index.enclosing_function(name)
        if function is None or _find_param(function.params, name.value) is None:
            return False
        return any(
            type(d.decorator) is cst.Call and self.index.qualify(d.decorator.func) in ("click.option", "click.argument")
            for d in function.decorators
        )

    @cached_property
    def _option_defaults(self) -> dict[str, list]:
        """Attribute name -> default expressions (or _Const) of argparse/click options,
        dataclass/config class fields and `__init__` parameters (Lightning hparams)."""
        out: dict[str, list] = {}
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "add_argument":
                self._argparse_option(call, out)
            elif self.index.qualify(func) in ("click.option", "click.argument"):
                self._click_option(call, out)
        for cls in self.index.classes:
            for name, values in self._class_defaults(cls).items():
                out.setdefault(name, []).extend(values)
            init = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"), None)
            if init is not None:
                for param in _all_params(init.params):
                    if param.default is not None:
                        out.setdefault(param.name.value, []).append(param.default)
        # `args.num_warmup_steps = int(ratio * total)` after parsing: the default is not what runs.
        for node in self.index.assignments:
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            for target in targets:
                if type(target) is cst.Attribute and target.attr.value in out:
                    value = node.value if type(node) is cst.Assign else None
                    if not (type(value) is cst.Name and value.value == target.attr.value):
                        out[target.attr.value].append(_Const(UNKNOWN))
        return out

    def _class_defaults(self, cls: cst.ClassDef) -> dict[str, list]:
        out: dict[str, list] = {}
        if type(cls.body) is not cst.IndentedBlock:
            return out
        for statement in cls.body.body:
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is cst.AnnAssign and small.value is not None:
                    name, value = last_name(small.target), small.value
                elif type(small) is cst.Assign and len(small.targets) == 1:
                    name, value = last_name(small.targets[0].target), small.value
                else:
                    continue
                default = self._field_default(value)
                if name:
                    out.setdefault(name, []).append(default if default is not None else _Const(UNKNOWN))
        return out

    def _field_default(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        if type(value) is cst.Call and (last_name(value.func) == "field"):
            arg = get_arg(value, "default")
            return arg.value if arg is not None else None
        return value

    def _argparse_option(self, call: cst.Call, out: dict[str, list]) -> None:
        flags = [literal_value(a.value, UNKNOWN) for a in call.args if a.keyword is None and not a.star]
        flags = [f for f in flags if isinstance(f, str)]
        if not flags:
            return
        long = [f for f in flags if f.startswith("--")]
        dest = (long[0] if long else flags[0]).lstrip("-").replace("-", "_")
        dest_arg = get_arg(call, "dest")
        if dest_arg is not None and isinstance(literal_value(dest_arg.value, UNKNOWN), str):
            dest = literal_value(dest_arg.value)
        default = get_arg(call, "default")
        action = literal_value(get_arg(call, "action").value, UNKNOWN) if get_arg(call, "action") else None
        if default is not None:
            out.setdefault(dest, []).append(default.value)
        elif action in ("store_true", "store_false"):
            out.setdefault(dest, []).append(_Const(action == "store_false"))
        else:
            out.setdefault(dest, []).append(_Const(UNKNOWN))

    def _click_option(self, call: cst.Call, out: dict[str, list]) -> None:
        names = [literal_value(a.value, UNKNOWN) for a in call.args if a.keyword is None and not a.star]
        names = [n for n in names if isinstance(n, str)]
        plain = [n for n in names if not n.startswith("-")]
        long = [n for n in names if n.startswith("--")]
        if not plain and not long:
            return
        dest = plain[0] if plain else long[0].lstrip("-").split("/")[0].replace("-", "_")
        default = get_arg(call, "default")
        if default is not None:
            out.setdefault(dest, []).append(default.value)
        elif get_arg(call, "is_flag") is not None:
            out.setdefault(dest, []).append(_Const(False))
        else:
            out.setdefault(dest, []).append(_Const(UNKNOWN))

    def _option_value(self, name: str, depth: int):
        candidates = self._option_defaults.get(name)
        if not candidates:
            return UNKNOWN
        values = [c.value if isinstance(c, _Const) else self._literal(c, depth + 1) for c in candidates]
        first = values[0]
        if first is UNKNOWN or any(v is UNKNOWN or v != first or type(v) is not type(first) for v in values[1:]):
            return UNKNOWN
        return first

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
        if type(target) in (cst.Tuple, cst.List):
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

    def role(self, expr: cst.BaseExpression, roles: dict[str, str] | None = None) -> str | None:
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
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            for target in targets:
                if last_name(target) and name:
                    out.setdefault(last_name(target), set()).add(name)
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

    def _event_kind(self, call: cst.Call) -> str | None:
        func = call.func
        qualified = self.index.qualify(func)
        name = last_name(func)
        if qualified in CLIP_FUNCTIONS or (name and _says_clip(name)):
            return CLIP
        attr = func.attr.value if type(func) is cst.Attribute else None
        receiver = func.value if type(func) is cst.Attribute else None
        if attr in ("clamp_", "clip_") and "grad" in snake_parts((dotted_name(receiver) or "").replace(".", "_")):
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
        if qualified and qualified.endswith("xla_model.optimizer_step"):
            return OPTIMIZER_STEP
        if attr == "step":
            role = self.role(receiver)
            if role == "scheduler":
                return SCHEDULER_STEP
            if role in ("optimizer", "scaler", "engine"):
                return OPTIMIZER_STEP
            return None
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
        return bool(name) and ("trainer" in name.lower() or self._roles.get(name) == "trainer")

    def _is_model_call(self, name: str) -> bool:
        """`model(...)`, `self.model(...)`, `self(...)`, `model_engine(...)` (not `build_model(...)`)."""
        if self._roles.get(name) == "model":
            return True
        parts = snake_parts(name)
        if not parts or parts[0] in _FACTORY_VERBS:
            return False
        return name in _MODEL_NAMES or parts[-1] == "model" or parts[0] == "model"

    def _is_method(self, function: cst.FunctionDef) -> bool:
        return type(self.index.parent(self.index.parent(function))) is cst.ClassDef

    @cached_property
    def _methods_by_name(self) -> dict[str, list[cst.FunctionDef]]:
        out: dict[str, list[cst.FunctionDef]] = {}
        for function in self.index.functions:
            if self._is_method(function):
                out.setdefault(function.name.value, []).append(function)
        return out

    def local_function(self, name: cst.Name) -> cst.FunctionDef | None:
        """The plain (non-method) function of this file a name refers to, seen from its use."""
        if name.value in self.index.imports.aliases:
            return None
        candidates = [f for f in self.index.functions_by_name.get(name.value, ()) if not self._is_method(f)]
        if not candidates:
            return None
        scopes = [a for a in self.index.ancestors(name) if type(a) in (cst.FunctionDef, cst.Module)]
        for scope in scopes:  # innermost scope that defines it
            for function in candidates:
                if self.index.enclosing_scope(function) is scope:
                    return function
        return None

    def callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function or method of this file a call runs, when it can be told."""
        if call in self._callees:
            return self._callees[call]
        found = self._callee(call)
        self._callees[call] = found
        return found

    def _callee(self, call: cst.Call) -> cst.FunctionDef | None:
        func = call.func
        if type(func) is cst.Name:
            return self.local_function(func)
        if type(func) is not cst.Attribute or func.attr.value.startswith("__"):
            return None
        method, receiver = func.attr.value, func.value
        is_super = type(receiver) is cst.Call and dotted_name(receiver.func) == "super"
        if is_super or (type(receiver) is cst.Name and receiver.value in ("self", "cls")):
            cls = self.index.enclosing_class(call)
            return self._method(cls, method, skip_own=is_super) if cls is not None else None
        if self.index.qualify(receiver) is not None:
            return None
        owners = self._methods_by_name.get(method, ())
        return owners[0] if len(owners) == 1 else None

    def _method(self, cls: cst.ClassDef, name: str, *, skip_own: bool = False, depth: int = 0):
        if depth > 5:
            return None
        if not skip_own and type(cls.body) is cst.IndentedBlock:
            for statement in cls.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == name:
                    return statement
        for base in cls.bases:
            parent = self.index.classes_by_name.get(last_name(base.value) or "")
            if parent is not None and parent is not cls:
                found = self._method(parent, name, depth=depth + 1)
                if found is not None:
                    return found
        return None

    # --- training loops -----------------------------------------------------------------

    def iteration(self, root: cst.For | cst.While | cst.FunctionDef) -> list[Event]:
        """The events of one pass through a loop body (or a function body), helpers inlined."""
        return _Iteration(self).run(root).events

    def calls_in(self, loop: TrainingLoop) -> list[Event]:
        """Every call of one iteration of `loop` (kind CALL), helpers inlined."""
        return _Iteration(self, every_call=True).run(loop.node).events

    @cached_property
    def clip_calls(self) -> list[cst.Call]:
        """Every gradient-clipping call of the file, wherever it is."""
        return [call for call in self.index.calls if self.event_kind(call) == CLIP]

    @cached_property
    def clips_by_hook(self) -> bool:
        """Gradients clamped by a tensor hook (`p.register_hook(lambda g: g.clamp(-c, c))`)."""
        for call in self.index.calls:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "register_hook" and call.args:
                hook = call.args[0].value
                if type(hook) is cst.Lambda and any(
                    type(n) is cst.Name and n.value in ("clamp", "clamp_", "clip", "clip_")
                    for n in _names_under(hook.body)
                ):
                    return True
        return False

    @cached_property
    def loops(self) -> list[TrainingLoop]:
        """Training loops (innermost loops running backward and an optimiser step) and step
        functions (functions running both whose loop is not in this file), source order."""
        index = self.index
        if not index.identifiers & {"backward", "manual_backward"}:
            return []
        walks = {loop: _Iteration(self).run(loop) for loop in index.loops}
        training = {loop for loop, walk in walks.items() if walk.trains()}
        innermost = [loop for loop in index.loops
                     if loop in training and not any(sub in training for sub in walks[loop].loops_seen)]
        out = [self._training_loop(loop, walks[loop]) for loop in innermost]
        covered = set().union(*(walks[loop].inlined for loop in training)) if training else set()
        steps = []
        for function in index.functions:
            if function in covered:
                continue
            walk = _Iteration(self).run(function)
            if walk.trains() and not any(sub in training for sub in walk.loops_seen):
                steps.append((function, walk))
        nested = set().union(*(walk.inlined for _, walk in steps)) if steps else set()
        out += [TrainingLoop(function, function, tuple(walk.events), helpers=frozenset(walk.inlined))
                for function, walk in steps if function not in nested]
        return out

    def _training_loop(self, loop: cst.For | cst.While, walk: _Iteration) -> TrainingLoop:
        outer = tuple(self.index.enclosing_loops(loop))
        function = self.index.enclosing_function(loop)
        epoch = outer[0] if outer else None
        if epoch is None and function is not None:
            for caller in self._callers.get(function, ()):
                around = self.index.enclosing_loops(caller)
                if around:
                    epoch = around[0]
                    break
        return TrainingLoop(loop, function, tuple(walk.events), outer, epoch, frozenset(walk.inlined))

    def callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of this file that run `function` (as far as `callee` can tell)."""
        return list(self._callers.get(function, ()))

    @cached_property
    def _callers(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        out: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.index.calls:
            function = self.callee(call)
            if function is not None:
                out.setdefault(function, []).append(call)
        return out

    # --- hand-written warmup ------------------------------------------------------------

    @cached_property
    def lr_assignments(self) -> list[cst.CSTNode]:
        """Stores to a parameter group's learning rate (`param_group["lr"] = lr`)."""
        out = []
        for node in self.index.assignments:
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if any(_is_lr_subscript(target) for target in targets):
                out.append(node)
        return out

    @cached_property
    def manual_warmups(self) -> list[cst.CSTNode]:
        """LR stores in a file that ramps the rate up by hand: an identifier naming a warmup
        (`warmup_iters`) or a `min(1, step / n)` ramp."""
        if not self.lr_assignments:
            return []
        words = any("warmup" in name.lower() or "warm_up" in name.lower() for name in self.index.identifiers)
        return list(self.lr_assignments) if words or self._has_ramp() else []

    def _has_ramp(self) -> bool:
        for call in self.index.calls:
            if dotted_name(call.func) == "min" and len(call.args) == 2:
                values = [literal_value(a.value, UNKNOWN) for a in call.args]
                if any(v == 1 for v in values if _number(v)) and any(
                    type(n) is cst.BinaryOperation and type(n.operator) is cst.Divide
                    for a in call.args for n in _nodes_under(a.value)
                ):
                    return True
        return False


# --- small helpers ------------------------------------------------------------------------


def _fold(operator: cst.BaseBinaryOp, left, right):
    if _number(left) and left == 0 and type(operator) is cst.Multiply or (
        _number(right) and right == 0 and type(operator) is cst.Multiply
    ):
        return 0
    if not (_number(left) and _number(right)):
        return UNKNOWN
    try:
        if type(operator) is cst.Add:
            return left + right
        if type(operator) is cst.Subtract:
            return left - right
        if type(operator) is cst.Multiply:
            return left * right
        if type(operator) is cst.Divide:
            return left / right
        if type(operator) is cst.FloorDivide:
            return left // right
        if type(operator) is cst.Modulo:
            return left % right
        if type(operator) is cst.Power and abs(right) <= 64 and abs(left) < 1e6:
            return left ** right
    except (ZeroDivisionError, OverflowError):
        return UNKNOWN
    return UNKNOWN


def _dict_keys(expr: cst.BaseExpression) -> set[str]:
    """The literal string keys of a dict literal or `dict(k=v)` call (empty otherwise)."""
    if type(expr) is cst.Dict:
        return {key for e in expr.elements if type(e) is cst.DictElement
                for key in (literal_value(e.key, UNKNOWN),) if isinstance(key, str)}
    if type(expr) is cst.Call and dotted_name(expr.func) == "dict":
        return {a.keyword.value for a in expr.args if a.keyword is not None}
    return set()


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    return out


def _find_param(params: cst.Parameters, name: str) -> cst.Param | None:
    for param in _all_params(params):
        if param.name.value == name:
            return param
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param and star.name.value == name:
            return star  # bound, with no default
    return None


def _nodes_under(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _names_under(node: cst.CSTNode) -> Iterator[cst.Name]:
    return (n for n in _nodes_under(node) if type(n) is cst.Name)


def _is_lr_subscript(target: cst.BaseExpression) -> bool:
    if type(target) is not cst.Subscript or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    return type(index) is cst.Index and literal_value(index.value, UNKNOWN) == "lr"


# Parsed once per content: keyed by the bytes' digest, so a long-lived process (a language
# server, the tests) sees an edited config, and the cache records what was used.
_JSON_CACHE: dict[str, dict | None] = {}


def _read_json(folder: Path, name: str, read_input: Callable[[Path], bytes | None]) -> dict | None:
    """A JSON config named by a literal path, relative to the script's folder (a regular
    file under 2 MB; anything else is no config), read through the context."""
    path = Path(name)
    if not path.is_absolute():
        path = folder / path
    data = read_input(path)
    if data is None:
        return None
    digest = digest_bytes(data)
    if digest in _JSON_CACHE:
        return _JSON_CACHE[digest]
    try:
        parsed = json.loads(data.decode("utf-8"))
        loaded = parsed if isinstance(parsed, dict) else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        loaded = None
    if len(_JSON_CACHE) > 256:
        _JSON_CACHE.clear()
    _JSON_CACHE[digest] = loaded
    return loaded


def warmup_sites(ctx) -> Iterator[cst.CSTNode]:
    """Nodes where the file sets up a learning-rate warmup (the `warmup` project fact).

    Schedulers that ramp up or whose shape cannot be told (a scheduler of unknown shape
    may warm up, and TL304 must not guess), warmup in `TrainingArguments`, DeepSpeed
    warmup schedulers, optimisers with a built-in warmup (`warmup_steps=` of schedule-free
    AdamW), names configured in `[tool.tlint.rules.missing-warmup] warmup-schedulers`,
    and hand-written warmups that set `param_group["lr"]`.
    """
    view: TrainingView = ctx.training
    for site in view.schedulers:
        if site.warmup != NO_WARMUP:
            yield site.call
    for call in view.training_arguments:
        state, node = view.arguments_warmup(call)
        if state != NO_WARMUP:
            yield node
    yield from view.warmup_fields
    for site in view.optimizers:
        for arg in site.call.args:
            if arg.keyword is not None and "warmup" in arg.keyword.value and view.nonzero(arg.value):
                yield arg
    folder = Path(ctx.path).parent if getattr(ctx, "path", None) is not None else None
    configs, _ = view.deepspeed_configs(folder)
    for config in configs:
        if config.warms_up():
            yield config.node
    yield from view.manual_warmups
    extra = ctx.view_options.warmup_schedulers
    if extra:
        for call in ctx.index.calls:
            if name_matches(ctx.index.call_name(call), extra):
                yield call


@register_view("training")
def training(ctx) -> TrainingView:
    """The file's training loops and set-up (`ctx.training`)."""
    return TrainingView(ctx.index, ctx.read_input)

