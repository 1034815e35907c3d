"""Project facts: small serialisable statements each file makes, for cross-file rules.

A fact is (kind, node, data). The engine turns the node into a range and keeps the facts
of every file of the project; a rule's `ctx.report(..., when=ProjectCondition(...))` is
decided on the facts of related files. Kinds so far:

- `pads`: the file pads sequences (tokenizer call with truthy `padding=` or
  `pad_to_max_length=True`, a padding collator, `pad_sequence`, `F.pad` on ids,
  `tokenizer.pad`, `torch.full(..., pad_id)`, `ids + [pad_id] * n`).
- `pads-unsided`: a padding site that does not provably pad on the right (see
  `facts_data.unsided_padding_sites`): a tokenizer or collator (the checkpoint's
  `padding_side`), left padding, a pre-filled buffer. A causal model fed ids padded only on
  the right never attends to a pad from a real position.
- `transformer`: the file builds or loads a transformer (imports `transformers`, uses a
  `torch.nn` transformer/attention module or `scaled_dot_product_attention`, or defines an
  attention/transformer class and computes a softmax).
- `warmup`: the file sets up a learning-rate warmup (see `views.training.warmup_sites`).
- `masks-pad-labels`: the file keeps pad positions out of the loss (a label-masking
  collator, a `-100` written into labels, a loss `ignore_index` other than -100).
- `pad-labels-by-id`: label masking keyed on the pad *id* (`DataCollatorForLanguageModeling
  (mlm=False)`, `labels == pad_token_id`, `ignore_index=tokenizer.pad_token_id`).
- `distinct-pad`: a pad token of its own is added (`add_special_tokens({"pad_token": ...})`).
- `feeds-training`: the file builds a `DataLoader` or a Hugging Face trainer.
- `static-shapes`: the file imports `torch_xla` or `diffusers` (fixed-length text wanted).
- `tokenizer`: a tokenizer built `from_pretrained`, with `checkpoint` (literal or None),
  `options` (literal construction arguments), `dynamic` (options given non-literally),
  `var`, `function`, `with_model` (the file loads a model from the same literal
  checkpoint) and `test_file`.
- `tokenizer-saved`: `save_pretrained(<literal folder>)`, with `folder`.
- `positional-table`: a positional table of a literal size (`size`, `what`, `origins`:
  the names the value was read through, `via`: the parameter/field whose default gave it);
  reported at the literal (TL206).
- `sequence-length`: a literal sequence length the data is built with (`length`, `what`,
  `origins`, `via`): tokenizer `max_length=`, `block_size=`/`seq_len=` of data classes.
- `nan-source`: data read with pandas/numpy, in a module that never handles NaN, passed to
  an imported function or class (`callee`, `position`/`keyword`, `reader`), at the read.
- `tensorizes`: a module-level function or a `Dataset` class of a module that never
  handles NaN, whose parameters become tensors (`callee`, `params`, `positions`).
- `call-args`: which parameters the calls of a name give (`callee`, `keywords`,
  `positional`, `star`): a default counts only where calls leave it out.
- `size-override`: `config.block_size = ...` set after construction (`name`).
- `norm-residual`: a residual of a model part meant to be assembled in another file (`cls`,
  `style`, `model`: its composition group); reported at (TL201).
- `module-parts`: a module class holding sub-modules of classes of other files (`cls`, `parts`).
- `block-stack`: a loop over blocks of a class of another file with no norm after it
  (`cls`, `element`, `attribute`); reported at (TL202).
- `leaves-eval`: a module-level function that switches a model to eval mode and never
  back (`function`).
- `imported-call-in-training`: a call of a function imported by name, in a training loop's
  iteration that never calls `train()` (`callee`); reported at (TL312).
- `clips-gradients`: a module-level function or a method that clips gradients with
  torch's `clip_grad_*` (`function`, `unscaled`: with no `unscale_` before the clip).
- `scaled-call`: a call of another module's function (or of a method on an instance of
  its class) after a training loop's `scaler.scale(loss)`, before any `unscale_` or step
  (`module`, `function`); reported at (TL303).
- `unscales`: the file calls `unscale_` or `unscale_gradients` (TL303: a clip before a
  `scaler.step` stands only where no import-connected file unscales).

The extractors live by family: the data pipeline's in `facts_data` (padding, label
masking, tokenizers), models' and training's in `facts_model` (transformer, warmup,
positional tables and sequence lengths), the training loop's in `facts_training`
(`leaves-eval`, `imported-call-in-training`, `clips-gradients`, `scaled-call`,
`unscales`); the facts
of a pre-filtered file, from Python's tree, in `facts_prefilter`. This module is the
registry (`EXTRACTORS`, `POSITIONED`, `TOKENS`, `extract_facts`, the `facts` view) and
re-exports their public names.

Adding a kind: write an extractor in its family's module and list it in `EXTRACTORS`.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from tlint.context import ViewError, register_view
from tlint.views.facts_data import (  # noqa: F401 - re-exported
    DATA_LOADERS,
    FULL_TENSORS,
    FUNCTIONAL_PAD,
    LABEL_MASKING_COLLATORS,
    PAD_SEQUENCE,
    PADDING_COLLATORS,
    TOKENIZER_ENCODE_METHODS,
    TOKENIZER_OPTIONS,
    LabelMasking,
    distinct_pad_sites,
    enables_padding,
    eos_like,
    feeds_training_sites,
    ids_expression,
    ids_variables,
    masks_pad_labels_sites,
    module_constant,
    nonfinite_value,
    pad_id_like,
    pad_is_eos_sites,
    pad_labels_by_id_sites,
    padding_sites,
    pads_in_call,
    pads_sites,
    static_shapes_sites,
    tokenizer_encode_calls,
    tokenizer_like,
    tokenizer_object,
    tokenizer_saved_sites,
    tokenizer_sites,
    tokenizer_variables,
    unpadded_ids,
    unsided_padding_sites,
)
from tlint.views.facts_model import (  # noqa: F401 - re-exported
    _CHUNK_WORDS,
    CALL_TABLE_KEYS,
    CONFIG_TABLE_KEYS,
    DATA_LENGTH_KEYS,
    POSITIONAL_NAME_PARTS,
    TRANSFORMER_MODULES,
    _warmup_sites,
    block_stack_sites,
    call_args_sites,
    module_parts_sites,
    norm_residual_sites,
    positional_table_sites,
    resolve_size,
    sequence_length_sites,
    size_override_sites,
    transformer_sites,
)
from tlint.views.facts_prefilter import ast_facts, ast_facts_exact  # noqa: F401 - re-exported
from tlint.views.facts_training import (
    clips_gradients_sites,
    imported_call_sites,
    leaves_eval_sites,
    scaled_call_sites,
    unscales_sites,
)
from tlint.views.nan_flow import READER_TOKENS, SINK_TOKENS, nan_source_sites, tensorizes_sites

EXTRACTORS = (
    ("pads", pads_sites), ("pads-unsided", unsided_padding_sites), ("transformer", transformer_sites),
    ("warmup", _warmup_sites),
    ("masks-pad-labels", masks_pad_labels_sites), ("pad-labels-by-id", pad_labels_by_id_sites),
    ("distinct-pad", distinct_pad_sites), ("feeds-training", feeds_training_sites),
    ("static-shapes", static_shapes_sites),
    ("tokenizer", tokenizer_sites), ("tokenizer-saved", tokenizer_saved_sites),
    ("positional-table", positional_table_sites), ("sequence-length", sequence_length_sites),
    ("call-args", call_args_sites), ("size-override", size_override_sites),
    ("nan-source", nan_source_sites), ("tensorizes", tensorizes_sites),
    ("norm-residual", norm_residual_sites), ("module-parts", module_parts_sites), ("block-stack", block_stack_sites),
    ("leaves-eval", leaves_eval_sites), ("imported-call-in-training", imported_call_sites),
    ("clips-gradients", clips_gradients_sites), ("scaled-call", scaled_call_sites), ("unscales", unscales_sites),
)
# Fact kinds that cross-file rules report at: only these get a (costly) source range.
POSITIONED: frozenset[str] = frozenset({"tokenizer", "positional-table", "sequence-length", "nan-source",
                                         "tensorizes", "norm-residual", "block-stack", "leaves-eval",
                                         "imported-call-in-training", "clips-gradients", "scaled-call"})

# The pre-filter (see `Rule.tokens` and tlint/engine.py): per kind, words one of which a
# file's text must contain (case-insensitively) for its extractor to yield anything. A
# qualified name keeps its last part in the text (an import alias spells the imported
# name) and its package in the import; a keyword argument keeps its keyword.
_MODULE_TOKENS = frozenset({"torch", "pretrainedmodel", "lightningmodule", "forward"})
TOKENS: dict[str, frozenset[str]] = {
    "pads": frozenset({"pad", "datacollator", "prepare_seq2seq_batch"}),
    "pads-unsided": frozenset({"pad", "datacollator", "prepare_seq2seq_batch"}),
    "transformer": frozenset({"transformer", "multiheadattention", "scaled_dot_product_attention", "softmax"}),
    # schedulers (torch `lr_scheduler`, HF `get_*_schedule*`, timm/DeepSpeed/unknown `*Sched*`,
    # `*Warmup*`), `warmup_*=` arguments and fields, TrainingArguments-like calls (`**kwargs`
    # may warm up), DeepSpeed configs, hand-written ramps (`param_group["lr"] = ...`)
    "warmup": frozenset({"sched", "warmup", "warm_up", "swalr", "trainingarguments", "deepspeed", "zero_optimization",
                         "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_clipping", '"lr"', "'lr'"}),
    # ... and a `-100` written however (`-1e2`, `-0x64`): `ast_facts` sends such a file to LibCST
    "masks-pad-labels": frozenset({"datacollator", "label_pad", "labelpad", "ignore"}),
    "pad-labels-by-id": frozenset({"datacollator", "pad"}),
    "distinct-pad": frozenset({"pad_token"}),
    "feeds-training": frozenset({"dataloader", "trainer"}),
    "static-shapes": frozenset({"torch_xla", "diffusers"}),
    "tokenizer": frozenset({"tokenizer"}),
    "tokenizer-saved": frozenset({"save_pretrained"}),
    # `torch` for `nn.Embedding` and the tensor factories (qualified through a torch import)
    "positional-table": frozenset({"torch", *CONFIG_TABLE_KEYS, *CALL_TABLE_KEYS}),
    "sequence-length": frozenset({"max_length", *DATA_LENGTH_KEYS, *_CHUNK_WORDS}),
    "call-args": frozenset(),  # any call: a pre-filtered file gets them from Python's tree (`ast_facts`)
    "size-override": frozenset(CONFIG_TABLE_KEYS),
    "nan-source": READER_TOKENS,
    "tensorizes": SINK_TOKENS,
    # module classes (a torch.nn/HF/Lightning base, or `forward`), as TL201/TL202's own tokens
    "norm-residual": _MODULE_TOKENS,
    "module-parts": _MODULE_TOKENS,
    "block-stack": _MODULE_TOKENS,
    # TL312's own tokens: an evaluation helper runs without autograd; a training loop backward
    "leaves-eval": frozenset({"no_grad", "inference_mode", "set_grad_enabled"}),
    "imported-call-in-training": frozenset({"backward"}),
    # TL303's: torch's clipping functions (an alias keeps the name in its import); a loop
    # that scales its loss runs backward
    "clips-gradients": frozenset({"clip_grad"}),
    "scaled-call": frozenset({"backward"}),
    "unscales": frozenset({"unscale"}),
}


def prefilter_tokens(settings) -> set[str] | None:
    """The tokens of every extractor under `settings` (None: every file is needed)."""
    from tlint.views.training import TRAINING_ARGUMENTS

    tokens: set[str] = set()
    for kind, _ in EXTRACTORS:
        needed = TOKENS.get(kind)
        if needed is None:
            return None
        tokens |= needed
    tokens |= {name.rsplit(".", 1)[-1] for name in TRAINING_ARGUMENTS}  # trl `SFTConfig(**kwargs)`
    for name in settings.view_options().warmup_schedulers:  # `warmup_sites` matches these names too
        last = str(name).rsplit(".", 1)[-1]
        if not last:
            return None
        tokens.add(last)
    return tokens


def extract_facts(ctx) -> list[tuple[str, cst.CSTNode, Any]]:
    """(kind, node, data) for every fact of the file; an extractor yields a node (data
    None), or a (node, data) pair when the fact carries values: one of the dataclasses of
    `tlint.fact_data` (e.g. a tokenizer's arguments)."""
    facts = []
    for kind, extractor in EXTRACTORS:
        for item in extractor(ctx):
            node, data = item if isinstance(item, tuple) else (item, None)
            facts.append((kind, node, data))
    return facts


@register_view("facts")
def facts(ctx) -> list[tuple[str, cst.CSTNode, Any]]:
    """(kind, node, data) of every fact of the file. When an extractor raises, the others'
    facts stand: the failed one is recorded in `ctx.failed_extractors` (TL003)."""
    timer = ctx.timer
    try:
        return extract_facts(ctx) if timer is None else _extract_timed(ctx, timer)
    except RecursionError:
        raise
    except Exception:  # find the extractor that failed; the others' facts stand
        found = []
        for kind, extractor in EXTRACTORS:
            try:
                items = list(extractor(ctx))
            except RecursionError:
                raise
            except Exception as exc:  # a failed view is reported as such
                if not isinstance(exc, ViewError):
                    ctx.failed_extractors.setdefault(kind, exc)
                continue
            for item in items:
                node, data = item if isinstance(item, tuple) else (item, None)
                found.append((kind, node, data))
        return found


def _extract_timed(ctx, timer) -> list[tuple[str, cst.CSTNode, Any]]:
    """`extract_facts`, each extractor's time charged to `facts: <kind>` (`--profile`)."""
    facts = []
    for kind, extractor in EXTRACTORS:
        for item in timer(f"facts: {kind}", lambda e=extractor: list(e(ctx))):
            node, data = item if isinstance(item, tuple) else (item, None)
            facts.append((kind, node, data))
    return facts
