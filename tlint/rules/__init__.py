"""The rule registry: one line per rule. Adding a rule touches its module, its document in
`rules/`, its tests, and this list."""

from __future__ import annotations

from tlint.rules.base import Rule
from tlint.rules.tl000_tool import InternalError, ParseError, UnusedSuppression
from tlint.rules.tl101_missing_attention_mask import MissingAttentionMask
from tlint.rules.tl102_missing_key_padding_mask import MissingKeyPaddingMask
from tlint.rules.tl103_unused_mask_argument import UnusedMaskArgument
from tlint.rules.tl104_tokenizer_mismatch import TokenizerMismatch
from tlint.rules.tl105_padding_without_truncation import PaddingWithoutTruncation
from tlint.rules.tl106_pad_labels_not_ignored import PadLabelsNotIgnored
from tlint.rules.tl107_eos_masked_as_pad import EosMaskedAsPad
from tlint.rules.tl108_unpaired_shuffle import UnpairedShuffle
from tlint.rules.tl109_label_shift_mismatch import LabelShiftMismatch
from tlint.rules.tl110_nan_unchecked_input import NanUncheckedInput
from tlint.rules.tl111_pad_to_max_length import PadToMaxLength
from tlint.rules.tl112_nonfinite_padding_value import NonfinitePaddingValue
from tlint.rules.tl201_inconsistent_norm_placement import InconsistentNormPlacement
from tlint.rules.tl202_missing_final_norm import MissingFinalNorm
from tlint.rules.tl203_missing_residual import MissingResidual
from tlint.rules.tl204_positional_slice_wrong_axis import PositionalSliceWrongAxis
from tlint.rules.tl205_positional_encoding_unused import PositionalEncodingUnused
from tlint.rules.tl206_positional_table_too_short import PositionalTableTooShort
from tlint.rules.tl207_missing_causal_mask import MissingCausalMask
from tlint.rules.tl208_unscaled_attention_scores import UnscaledAttentionScores
from tlint.rules.tl209_softmax_wrong_dim import SoftmaxWrongDim
from tlint.rules.tl210_neg_inf_mask_fill import NegInfMaskFill
from tlint.rules.tl211_suspicious_init import SuspiciousInit
from tlint.rules.tl212_head_split_without_transpose import HeadSplitWithoutTranspose
from tlint.rules.tl301_missing_grad_clipping import MissingGradClipping
from tlint.rules.tl302_clip_misordered import ClipMisordered
from tlint.rules.tl303_clip_without_unscale import ClipWithoutUnscale
from tlint.rules.tl304_missing_warmup import MissingWarmup
from tlint.rules.tl305_scheduler_before_optimizer import SchedulerBeforeOptimizer
from tlint.rules.tl306_scheduler_stepped_per_epoch import SchedulerSteppedPerEpoch
from tlint.rules.tl307_high_learning_rate import HighLearningRate
from tlint.rules.tl308_adam_eps_underflow import AdamEpsUnderflow
from tlint.rules.tl309_missing_zero_grad import MissingZeroGrad
from tlint.rules.tl310_zero_grad_misplaced import ZeroGradMisplaced
from tlint.rules.tl311_accumulation_loss_unscaled import AccumulationLossUnscaled
from tlint.rules.tl312_missing_eval_mode import MissingEvalMode
from tlint.rules.tl313_anomaly_detection_left_on import AnomalyDetectionLeftOn
from tlint.rules.tl314_loss_on_probabilities import LossOnProbabilities
from tlint.rules.tl315_weight_decay_on_norm_and_bias import WeightDecayOnNormAndBias
from tlint.rules.tl316_grad_norm_not_monitored import GradNormNotMonitored

ALL_RULES: tuple[type[Rule], ...] = (
    ParseError,
    UnusedSuppression,
    InternalError,
    MissingAttentionMask,
    MissingKeyPaddingMask,
    UnusedMaskArgument,
    TokenizerMismatch,
    PaddingWithoutTruncation,
    PadLabelsNotIgnored,
    EosMaskedAsPad,
    UnpairedShuffle,
    LabelShiftMismatch,
    NanUncheckedInput,
    PadToMaxLength,
    NonfinitePaddingValue,
    InconsistentNormPlacement,
    MissingFinalNorm,
    MissingResidual,
    PositionalSliceWrongAxis,
    PositionalEncodingUnused,
    PositionalTableTooShort,
    MissingCausalMask,
    UnscaledAttentionScores,
    SoftmaxWrongDim,
    NegInfMaskFill,
    SuspiciousInit,
    HeadSplitWithoutTranspose,
    MissingGradClipping,
    ClipMisordered,
    ClipWithoutUnscale,
    MissingWarmup,
    SchedulerBeforeOptimizer,
    SchedulerSteppedPerEpoch,
    HighLearningRate,
    AdamEpsUnderflow,
    MissingZeroGrad,
    ZeroGradMisplaced,
    AccumulationLossUnscaled,
    MissingEvalMode,
    AnomalyDetectionLeftOn,
    LossOnProbabilities,
    WeightDecayOnNormAndBias,
    GradNormNotMonitored,
)

BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in ALL_RULES}
BY_NAME: dict[str, type[Rule]] = {rule.name: rule for rule in ALL_RULES}
# Rules the engine produces itself (no `check`).
ENGINE_CODES = frozenset({"TL001", "TL002", "TL003"})


def lookup(selector: str) -> type[Rule] | None:
    """A rule by code or by name."""
    return BY_CODE.get(selector.upper()) or BY_NAME.get(selector.lower())
