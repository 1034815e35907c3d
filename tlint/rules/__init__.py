"""The rule registry: one entry per rule, its module's name in `RULE_MODULES`.

Each `tlint/rules/tlNNN_rule_name.py` defines exactly one `Rule` subclass (a module that
defines none or several is an error here, at import); everything else about the rule is an
attribute of that class (`tlint.rules.base.Rule`). Adding a rule touches its module, its
document in `rules/`, its tests, and this list. Rules never import one another: what several
of them share lives in `tlint/views/` (names and words in `tlint.views.vocabulary`).
"""

from __future__ import annotations

import importlib

from tlint.rules.base import KINDS, VERIFY_SITES, Rule

# In order of code: ALL_RULES keeps this order.
RULE_MODULES: tuple[str, ...] = (
    "tl001_parse_error",
    "tl002_unused_suppression",
    "tl003_internal_error",
    "tl101_missing_attention_mask",
    "tl102_missing_key_padding_mask",
    "tl103_unused_mask_argument",
    "tl104_tokenizer_mismatch",
    "tl105_padding_without_truncation",
    "tl106_pad_labels_not_ignored",
    "tl107_eos_masked_as_pad",
    "tl108_unpaired_shuffle",
    "tl109_label_shift_mismatch",
    "tl110_nan_unchecked_input",
    "tl111_pad_to_max_length",
    "tl112_nonfinite_padding_value",
    "tl113_mask_padded_with_pad_id",
    "tl114_training_loader_not_shuffled",
    "tl115_ignore_index_wrong_vocabulary",
    "tl201_inconsistent_norm_placement",
    "tl202_missing_final_norm",
    "tl203_missing_residual",
    "tl204_positional_slice_wrong_axis",
    "tl205_positional_encoding_unused",
    "tl206_positional_table_too_short",
    "tl207_missing_causal_mask",
    "tl208_unscaled_attention_scores",
    "tl209_softmax_wrong_dim",
    "tl210_neg_inf_mask_fill",
    "tl211_suspicious_init",
    "tl212_head_split_without_transpose",
    "tl213_mask_fill_not_masking",
    "tl214_dropout_on_in_eval",
    "tl215_partial_pre_norm",
    "tl216_positional_index_not_slice",
    "tl301_missing_grad_clipping",
    "tl302_clip_misordered",
    "tl303_clip_without_unscale",
    "tl304_missing_warmup",
    "tl305_scheduler_before_optimizer",
    "tl306_scheduler_stepped_per_epoch",
    "tl307_high_learning_rate",
    "tl308_adam_eps_underflow",
    "tl309_missing_zero_grad",
    "tl310_zero_grad_misplaced",
    "tl311_accumulation_loss_unscaled",
    "tl312_missing_eval_mode",
    "tl313_anomaly_detection_left_on",
    "tl314_loss_on_probabilities",
    "tl315_weight_decay_on_norm_and_bias",
    "tl316_grad_norm_not_monitored",
    "tl317_accumulation_window_broken",
    "tl318_schedule_sized_in_epochs",
)


def rules_defined_in(module) -> list[type[Rule]]:
    """The `Rule` subclasses a module defines itself (not those it imports)."""
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule
            and value.__module__ == module.__name__]


def rule_of_module(name: str) -> type[Rule]:
    """The one rule that `tlint.rules.<name>` defines (`the_rule`)."""
    return the_rule(importlib.import_module(f"{__name__}.{name}"))


def the_rule(module) -> type[Rule]:
    """The one rule a module defines; ImportError if it defines none or several, or if the
    class misses one of its facts."""
    found = rules_defined_in(module)
    if len(found) != 1:
        listed = ", ".join(rule.__name__ for rule in found) or "none"
        raise ImportError(f"{module.__name__} must define exactly one Rule subclass, found {listed}")
    rule = found[0]
    missing = [attr for attr in ("code", "name", "kind", "summary") if not hasattr(rule, attr)]
    if missing:
        raise ImportError(f"{module.__name__}.{rule.__name__} does not set {', '.join(missing)}")
    if rule.kind not in KINDS:
        raise ImportError(f"{rule.code}: kind {rule.kind!r} is not one of {', '.join(KINDS)}")
    if rule.verify_site not in VERIFY_SITES:
        raise ImportError(f"{rule.code}: verify_site {rule.verify_site!r} is not one of {', '.join(VERIFY_SITES)}")
    return rule


ALL_RULES: tuple[type[Rule], ...] = tuple(rule_of_module(name) for name in RULE_MODULES)

BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in ALL_RULES}
BY_NAME: dict[str, type[Rule]] = {rule.name: rule for rule in ALL_RULES}
if len(BY_CODE) != len(ALL_RULES) or len(BY_NAME) != len(ALL_RULES):
    raise ImportError("two registered rules share a code or a name")
# Rules the engine produces itself (no `check`).
ENGINE_CODES = frozenset(rule.code for rule in ALL_RULES if rule.produced_by_engine)


def lookup(selector: str) -> type[Rule] | None:
    """A rule by code or by name."""
    return BY_CODE.get(selector.upper()) or BY_NAME.get(selector.lower())
