"""The training view's warmup: LR schedulers classified by whether they warm up
(`TrainingView.schedulers`), warmup in `TrainingArguments` (`arguments_warmup`,
`warmup_fields`), hand-written warmups (`manual_warmups`), and `warmup_sites(ctx)`: where
the file sets up an LR warmup (the `warmup` project fact). A mixin of
`tlint.views.training.TrainingView`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import libcst as cst

from tlint.cst import dotted_name, get_arg, has_star_kwargs, last_name, literal_value, snake_parts, walk
from tlint.views.bindings import assignment_targets, class_defaults, field_default
from tlint.views.training_common import (
    NO_WARMUP,
    UNKNOWN,
    UNKNOWN_WARMUP,
    WARMUP,
    SchedulerSite,
    _nodes_under,
    _number,
    _scheduler_package,
    name_matches,
)

if TYPE_CHECKING:
    from tlint.context import FileContext
    from tlint.source import FileIndex
    from tlint.views.training import TrainingView

_TORCH_NO_WARMUP = frozenset(
    {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
     "ReduceLROnPlateau", "PolynomialLR"}
)


class TrainingWarmup:
    """`TrainingView`'s schedulers and warmups."""

    if TYPE_CHECKING:  # set by TrainingView, or defined by its other parts
        index: FileIndex

        @property
        def _families(self) -> dict[cst.Call, tuple[str, str]]: ...
        @property
        def _local_families(self) -> dict[str, str]: ...
        def _target(self, call: cst.Call) -> str | None: ...
        def _arg_value(self, call: cst.Call, keyword: str, position: int | None) -> cst.BaseExpression | None: ...
        def literal(self, expr: cst.BaseExpression | None, default: Any = ...) -> Any: ...
        def nonzero(self, expr: cst.BaseExpression) -> bool: ...
        def role(self, expr: cst.BaseExpression | None, roles: dict[str, str] | None = None) -> str | None: ...
        def local_function(self, name: cst.Name) -> cst.FunctionDef | None: ...

    # --- schedulers and warmup arguments -----------------------------------------------

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
        if package == "unknown":  # a scheduler of the project or another library: its warmup length, if given
            return self._warmup_keywords(call)
        return UNKNOWN_WARMUP

    def _warmup_keywords(self, call: cst.Call) -> str:
        """A scheduler of unknown shape given a warmup length by keyword (`num_warmup_steps=`,
        `warmup_iters=`, `lr_warmup_epochs=`, `warmup_ratio=`; not a start value such as
        `warmup_lr_init=`): it warms up unless every such length is 0; unknown without one."""
        lengths = [arg.value for arg in call.args if arg.keyword is not None and _warmup_length(arg.keyword.value)]
        if lengths:
            return WARMUP if any(self.nonzero(value) for value in lengths) else NO_WARMUP
        if self._takes_no_optimizer(call):
            return NO_WARMUP  # `cosine_schedule(t)` of a masking schedule: no learning rate to ramp
        return UNKNOWN_WARMUP

    def _takes_no_optimizer(self, call: cst.Call) -> bool:
        """None of the call's arguments can be an optimiser: no `*args`/`**kwargs`, no
        argument named or held as one (`opt`, `optimizer=`, `self.optimizer`). (The call is
        of a function of another module: `_scheduler_package` judges qualified names.)"""
        for arg in call.args:
            if arg.star:
                return False
            words = [arg.keyword.value] if arg.keyword is not None else []
            words += [node.value for node in _nodes_under(arg.value) if type(node) is cst.Name]
            if any("opt" in word.lower() for word in words):
                return False
            if self.role(arg.value) == "optimizer":
                return False
        return True

    def _torch_scheduler_warmup(self, call: cst.Call, last: str) -> str:
        if last in _TORCH_NO_WARMUP:
            return NO_WARMUP
        if last == "LinearLR":
            start_arg, end_arg = self._arg_value(call, "start_factor", 1), self._arg_value(call, "end_factor", 2)
            start = 1 / 3 if start_arg is None else self.literal(start_arg)
            end = 1.0 if end_arg is None else self.literal(end_arg)
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
        if type(expr) is cst.Name:  # `LambdaLR(optimizer, lr_lambda)` of a function of this file
            function = self.local_function(expr)
            if function is not None and self._zero_warmup(function.body) is True:
                return NO_WARMUP  # its ramp `if step < warmup_steps:` never runs
            return WARMUP
        if type(expr) is not cst.Lambda:
            return WARMUP
        if self._zero_warmup(expr.body) is True:
            return NO_WARMUP
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
        if not (type(listed) is cst.List or type(listed) is cst.Tuple):
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
        for default in class_defaults(cls).get(field_name, ()):
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
        out: list[cst.CSTNode] = []
        for name, family in self._local_families.items():
            if family != "training_arguments":
                continue
            for statement in self.index.classes_by_name[name].body.body:
                small = statement.body[0] if type(statement) is cst.SimpleStatementLine else None
                if (type(small) is cst.AnnAssign or type(small) is cst.Assign) and small.value is not None:
                    # (an Assign after `else`: mypy narrows no `type(x) is` negatively)
                    target = small.target if type(small) is cst.AnnAssign else small.targets[0].target  # type: ignore[union-attr]
                    if last_name(target) in ("warmup_steps", "warmup_ratio"):
                        value = field_default(small.value)
                        if value is not None and self.nonzero(value):
                            out.append(small)
        return out

    # --- hand-written warmup ------------------------------------------------------------

    @cached_property
    def lr_assignments(self) -> list[cst.CSTNode]:
        """Stores to a parameter group's learning rate (`param_group["lr"] = lr`)."""
        out: list[cst.CSTNode] = []
        for node in self.index.assignments:
            targets = assignment_targets(node)
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
        return list(self.lr_assignments) if (words and not self._warmup_zero()) or self._has_ramp() else []

    def _warmup_zero(self) -> bool:
        """Every warmup-named value the file reads is known to be 0 (`warmup_iters = 0`,
        `--warmup_steps` defaulting to 0): the ramp is written but never runs."""
        return self._zero_warmup(self.index.module) is True

    def _zero_warmup(self, root: cst.CSTNode) -> bool | None:
        """Whether every warmup-named value read under `root` is known to be 0 as the
        program runs by default (`warmup_iters = 0`, `self.hparams.warmup_steps` of an
        `__init__` defaulting to 0); None when none is read there."""
        seen = False
        for node in walk(root):
            if type(node) is not cst.Name and type(node) is not cst.Attribute:
                continue
            name = (last_name(node) or "").lower()
            if "warmup" not in name and "warm_up" not in name:
                continue
            parent = self.index.parent(node)
            if type(parent) is cst.Attribute and parent.attr is node:
                continue  # the `.warmup_iters` of an attribute: judged as the attribute
            value = self.literal(node)
            if not (_number(value) and value == 0):
                return False
            seen = True
        return True if seen else None

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


_LENGTH_PARTS = frozenset({"steps", "step", "iters", "iter", "iterations", "epochs", "epoch", "ratio", "proportion",
                           "t", "updates", "period", "length", "len"})


def _warmup_length(keyword: str) -> bool:
    """`num_warmup_steps`, `warmup_iters`, `lr_warmup_epochs`, `warmup_t`: a keyword that
    gives a warmup its length."""
    parts = snake_parts(keyword)
    warm = "warmup" in parts or any(a == "warm" and b == "up" for a, b in zip(parts, parts[1:]))
    return warm and any(part in _LENGTH_PARTS for part in parts)


def _is_lr_subscript(target: cst.BaseExpression) -> bool:
    if type(target) is not cst.Subscript or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    return type(index) is cst.Index and literal_value(index.value, UNKNOWN) == "lr"


def warmup_sites(ctx: FileContext) -> Iterator[cst.CSTNode]:
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
    for optimizer in view.optimizers:
        for arg in optimizer.call.args:
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
