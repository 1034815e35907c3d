"""TL304 missing-warmup: an Adam-family optimiser trains a transformer with no LR warmup.

The optimiser, its scheduler and the model often live in different files, so the finding
is kept only if the project trains a transformer and no import-connected file sets up a
warmup (the `warmup` fact, see `tlint.views.training.warmup_sites`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlint.cst import get_arg
from tlint.rules.base import ProjectCondition, Rule
from tlint.views.training import NO_WARMUP, TrainingView, is_adam_name, name_matches

if TYPE_CHECKING:
    from tlint.context import FileContext

_NO_WARMUP_ANYWHERE = ProjectCondition(any_of=("transformer",), none_of=("warmup",), scope="imports")


class MissingWarmup(Rule):
    code = "TL304"
    name = "missing-warmup"
    kind = "practice"
    # pre-filter: Adam-family optimisers, TrainingArguments/trl configs (and the `optimizers` option)
    tokens = frozenset({"adam", "trainingarguments", "trl"})
    summary = "An Adam-family optimiser trains a transformer with no learning-rate warmup."
    probes = ("warmup-ab",)
    verify_site = "training"
    options = {
        # Extra optimiser constructors (qualified names) to treat as Adam-family.
        "optimizers": [],
        # Extra functions or classes (qualified names) that set up a warmup.
        "warmup-schedulers": [],
    }
    view_options = {"warmup-schedulers": "warmup_schedulers"}  # the `warmup` fact sees them too

    def needed_tokens(self):
        names = {str(name).rsplit(".", 1)[-1] for name in self.options["optimizers"]}
        return None if "" in names else self.tokens | names

    def check(self, ctx: FileContext) -> None:
        if ctx.is_test_file:  # unit tests of optimisers and models are not training runs
            return
        view: TrainingView = ctx.training
        reported: set[int] = set()
        for site in view.optimizers:
            if site.adam_family and not view.benchmark(site.call, ctx.path):
                reported.add(id(site.call))
                ctx.report(site.call, f"{site.name.rsplit('.', 1)[-1]} trains a transformer with no learning-rate "
                           "warmup; ramp the rate up over the first steps (e.g. "
                           "get_linear_schedule_with_warmup, or LinearLR(start_factor=0.01))",
                           when=_NO_WARMUP_ANYWHERE)
        extra = self.options["optimizers"]
        if extra:
            for call in ctx.index.calls:
                if id(call) not in reported and name_matches(ctx.index.call_name(call), extra):
                    ctx.report(call, "this optimiser trains a transformer with no learning-rate warmup",
                               when=_NO_WARMUP_ANYWHERE)
        custom_optimizer = any(get_arg(trainer, "optimizers") is not None for trainer in view.hf_trainers)
        for call in view.training_arguments:
            if custom_optimizer or not self._adam_by_default(view, call) or view.arguments_only_evaluate(call):
                continue
            state, node = view.arguments_warmup(call)
            if state == NO_WARMUP:
                ctx.report(node, "TrainingArguments without warmup_steps or warmup_ratio: AdamW starts at the "
                           "full learning rate; set warmup_ratio (e.g. 0.03-0.1) or warmup_steps",
                           when=_NO_WARMUP_ANYWHERE)

    @staticmethod
    def _adam_by_default(view: TrainingView, call) -> bool:
        """The Trainer's optimiser (`optim=`, default "adamw_torch") is Adam-family."""
        arg = get_arg(call, "optim")
        if arg is None:
            return True
        value = view.literal(arg.value)
        if not isinstance(value, str):
            value = (view.index.qualify(arg.value) or "").rsplit(".", 1)[-1]
        return is_adam_name(value) and "schedule_free" not in value.lower()
