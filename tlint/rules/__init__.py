"""The rule registry: one line per rule. Adding a rule touches its module, its document in
`rules/`, its tests, and this list."""

from __future__ import annotations

from tlint.rules.base import Rule
from tlint.rules.tl000_tool import InternalError, ParseError, UnusedSuppression
from tlint.rules.tl101_missing_attention_mask import MissingAttentionMask
from tlint.rules.tl102_missing_key_padding_mask import MissingKeyPaddingMask
from tlint.rules.tl103_unused_mask_argument import UnusedMaskArgument
from tlint.rules.tl201_inconsistent_norm_placement import InconsistentNormPlacement
from tlint.rules.tl301_missing_grad_clipping import MissingGradClipping
from tlint.rules.tl304_missing_warmup import MissingWarmup

ALL_RULES: tuple[type[Rule], ...] = (
    ParseError,
    UnusedSuppression,
    InternalError,
    MissingAttentionMask,
    MissingKeyPaddingMask,
    UnusedMaskArgument,
    InconsistentNormPlacement,
    MissingGradClipping,
    MissingWarmup,
)

BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in ALL_RULES}
BY_NAME: dict[str, type[Rule]] = {rule.name: rule for rule in ALL_RULES}
# Rules the engine produces itself (no `check`).
ENGINE_CODES = frozenset({"TL001", "TL002", "TL003"})


def lookup(selector: str) -> type[Rule] | None:
    """A rule by code or by name."""
    return BY_CODE.get(selector.upper()) or BY_NAME.get(selector.lower())
