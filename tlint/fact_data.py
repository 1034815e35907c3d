"""The schema of the project facts that carry values: one small dataclass per fact kind.

A file's facts (`tlint.views.facts`) are `(kind, node, data)`; `data` is one of the
classes below for the kinds that carry values, None for the kinds that say only "this
file does X" (`pads`, `transformer`, `warmup`, ...). They are stored in the signed cache
(`tlint/signed.py` allows exactly these) and read by cross-file rules (`check_project`)
by attribute, so a field's name and type live here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Via:
    """Which parameter's (or config field's) default supplied a value: `callee` the
    function or class name (None when it cannot be told: a lambda, a nested method),
    `param` its name, `index` its position among the positional parameters after
    `self` (None for keyword-only)."""

    callee: str | None
    param: str
    index: int | None


@dataclass(frozen=True)
class TokenizerFact:
    """`tokenizer`: a tokenizer built `from_pretrained`. `checkpoint` (a literal, or None),
    `options` its literal construction arguments, `dynamic` those given non-literally
    (`"**"` for a `**kwargs` spread), `var` the name it is stored under (else its
    function), `with_model` the file loads a model from the same checkpoint, `decode_only`
    it is used only to decode, `arms` the alternatives it is built in (position of an
    `if`/`match`/`try` of its file, and which arm)."""

    checkpoint: str | None
    options: dict[str, Any] = field(default_factory=dict)
    dynamic: list[str] = field(default_factory=list)
    var: str | None = None
    function: str | None = None
    with_model: bool = False
    test_file: bool = False
    decode_only: bool = False
    arms: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class TokenizerSavedFact:
    """`tokenizer-saved`: `save_pretrained(<folder>)` (None when the folder is not a literal)."""

    folder: str | None


@dataclass(frozen=True)
class PositionalTableFact:
    """`positional-table`: a positional table of `size` positions (`what` says which),
    read through the names `origins`, its size from `via`'s default if any."""

    size: int
    what: str
    origins: list[str] = field(default_factory=list)
    via: Via | None = None


@dataclass(frozen=True)
class SequenceLengthFact:
    """`sequence-length`: a sequence length of `length` the data is built with."""

    length: int
    what: str
    origins: list[str] = field(default_factory=list)
    via: Via | None = None


@dataclass(frozen=True)
class CallArgsFact:
    """`call-args`: a call of `callee` (a plain name or a class) giving these keyword
    arguments, `positional` positional ones, and `star` a `*args`/`**kwargs` spread."""

    callee: str
    keywords: list[str] = field(default_factory=list)
    positional: int = 0
    star: bool = False


@dataclass(frozen=True)
class SizeOverrideFact:
    """`size-override`: `config.<name> = ...` set after construction."""

    name: str


@dataclass(frozen=True)
class NanSourceFact:
    """`nan-source`: data read by `reader` (pandas/numpy, in a module that never handles
    NaN) passed, without becoming a tensor here, to the imported `callee` as its
    `position`-th positional argument or its `keyword` argument."""

    callee: str
    position: int | None
    keyword: str | None
    reader: str


@dataclass(frozen=True)
class TensorizesFact:
    """`tensorizes`: the function or `Dataset` class `callee` (of a module that never
    handles NaN) turns these parameters into tensors: `params` by name, `positions` their
    places among the positional parameters (after `self`)."""

    callee: str
    params: tuple[str, ...] = ()
    positions: tuple[int, ...] = ()


@dataclass(frozen=True)
class NormResidualFact:
    """`norm-residual`: a residual of module class `cls` with norm placement `style` ("pre"
    or "post"), in a model of the file whose residuals all have that style; `model` names
    every module class of that model (its composition group in the file)."""

    cls: str
    style: str
    model: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModulePartsFact:
    """`module-parts`: module class `cls` holds sub-modules of the classes `parts`, defined
    in other files (imported names)."""

    cls: str
    parts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BlockStackFact:
    """`block-stack`: a loop over a list of blocks of class `element` (defined in another
    file) whose output leaves `forward` with no norm after it, in module class `cls`."""

    cls: str
    element: str
    attribute: str


@dataclass(frozen=True)
class LeavesEvalFact:
    """`leaves-eval`: a module-level function that switches a model to eval mode and never
    back to `train()` (`def eval_net(net, loader): net.eval(); ...`)."""

    function: str


@dataclass(frozen=True)
class ImportedCallFact:
    """`imported-call-in-training`: a call, in a training loop's iteration that never calls
    `train()`, of `callee`, a function imported by name from another module."""

    callee: str


@dataclass(frozen=True)
class ClipsGradientsFact:
    """`clips-gradients`: `function` (a module-level function, or `Class.method` of a
    module-level class) clips gradients with torch's `clip_grad_*`; `unscaled`: a call of
    it clips with no `scaler.unscale_(optimizer)` before, outside any test on the scaler or
    an AMP switch."""

    function: str
    unscaled: bool


@dataclass(frozen=True)
class ScaledCallFact:
    """`scaled-call`: a call, in a training loop's iteration after the loss was scaled by
    a `GradScaler` and before any `unscale_` or optimiser step, of `function` (a function,
    or `Class.method` on an instance of the class) of `module`, another module."""

    module: str
    function: str


FACT_TYPES: tuple[type, ...] = (Via, TokenizerFact, TokenizerSavedFact, PositionalTableFact, SequenceLengthFact,
                                CallArgsFact, SizeOverrideFact, NanSourceFact, TensorizesFact, NormResidualFact,
                                ModulePartsFact, BlockStackFact, LeavesEvalFact, ImportedCallFact, ClipsGradientsFact,
                                ScaledCallFact)
