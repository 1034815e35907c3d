"""The verifier's settings: `[tool.tlint.verify]` merged with command-line flags (flags win),
checked here, before any user code runs. Standard library only (no torch)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The probes built so far, in the order they run and are reported (README "tlint verify").
PROBES = {
    "mask-leak": "do padded positions leak into real positions?",
    "causal-leak": "does position t see tokens after t?",
    "nan-trace": "where do NaN/Inf first appear (one sequence fully padded)?",
    "position-blind": "does the model know token order?",
    "batch-coupling": "is each sample independent of the others and of the batch size?",
    "grad-flow": "does every trainable parameter get a gradient?",
    "init-stats": "are parameters initialised sensibly (std bands, constants, duplicates, loss at init)?",
    "attention-entropy": "are attention rows saturated at init (or not normalised over the keys)?",
    "depth-growth": "is the residual stream (and its gradient) stable with depth?",
    "norm-scale": "does each block normalise what it reads (its branch or output indifferent to the stream's scale)?",
    "padding-equivalence": "does a sequence give the same outputs padded (right, left) and unpadded?",
    "activation-ranges": "what range does each sub-layer's output have (min, max, std, saturated, constant)?",
    "attention-maps": "where does attention go: share on pad positions per layer (PNG maps with --artifacts)?",
    "eval-determinism": "does the model in eval mode give the same outputs twice for one batch (dropout off)?",
}
# The training probes (tlint/verify/training_probes.py): short seeded training runs, so they
# run only when asked for (`--probe NAME`, or `--probe training` for the three), except
# optimizer-coverage (one step), which runs by default when `optimizer` is configured.
TRAINING_PROBES = {
    "optimizer-coverage": "does the configured optimiser hold every trainable parameter and change it in one step?",
    "overfit-batch": "can the model memorise one small batch (and not its constant-input control)?",
    "warmup-ab": "does the configured learning rate need warmup or clipping (K steps, A/B)?",
    "data-ab": "does the model train clearly better on the loader's batches cleaned (A/B, needs `dataloader`)?",
}
# `--probe training`: the three model-only training probes (data-ab needs a loader and is named on its own)
PROBE_GROUPS = {"training": ("optimizer-coverage", "overfit-batch", "warmup-ab")}
# Built-in `call` styles: how forward is called, and the mask convention each one uses.
CALL_STYLES = {
    "ids,mask": "model(ids, mask), mask long 1 = keep, 0 = pad",
    "input_ids,attention_mask": "model(input_ids=ids, attention_mask=mask), mask long 1 = keep, 0 = pad",
    "src,src_key_padding_mask": "model(src, src_key_padding_mask=mask), mask bool True = pad (ignore)",
    "ids": "model(ids), no mask",
    # encoder-decoders: a fixed source sentence (padded where the ids are), the ids as the decoder's input
    "input_ids,decoder_input_ids": "model(input_ids=source, attention_mask=mask, decoder_input_ids=ids, "
                                   "decoder_attention_mask=mask), a fixed source; masks long 1 = keep, 0 = pad",
    "src,tgt": "model(src=source, tgt=ids, *_key_padding_mask=mask), a fixed source; masks bool True = pad",
}
ADAPTER_NOTE = "adapter(model, ids, mask), mask long 1 = keep, 0 = pad"
ADAPTER_NOTE_NO_MASK = "adapter(model, ids): the adapter takes no mask (padding is not checkable)"
FORMATS = ("text", "json", "sarif", "lsp")
_DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


NO_MODEL = "no model to verify"
PADDING_SIDES = ("right", "left")
MIN_SEQ_LEN = 4


class OptionsError(Exception):
    """A wrong setting (config or flag): one paragraph, exit 2."""

    def __init__(self, message: str, kind: str = "config") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class VerifyOptions:
    """Everything the child process needs; sent to it as JSON."""

    model: str
    root: str                      # the config's folder (or the working directory): import root
    python_path: list[str] = field(default_factory=list)   # absolute extra import roots
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    vocab_size: int | None = None
    pad_token_id: int = 0
    seq_len: int = 16
    batch_size: int = 4
    causal: bool | None = None     # None: the linter's causal evidence on the model's source (TL207's)
    causal_names: list[str] = field(default_factory=list)
    call: str | None = None        # None: chosen from forward's signature, trying each style
    padding_side: str = "right"
    device: str = "cpu"
    seed: int = 0
    timeout: float = 600.0         # the whole run
    probe_timeout: float = 120.0   # loading the model, and each probe
    memory_limit: float | None = None   # MiB the model may take (None: half the machine's memory)
    instantiate: bool = False      # `model` is a flagged class built without arguments (no model configured)
    probes: list[str] = field(default_factory=lambda: list(PROBES))
    artifacts: str | None = None   # absolute folder for PNG maps; None: write no files
    optimizer: str | None = None   # "pkg.mod:make_optimizer", callable(model) -> optimiser (training probes)
    lr: float | None = None        # the learning rate of warmup-ab and data-ab (overrides the optimiser's)
    max_seconds: float = 30.0      # each training probe's time budget (it stops its runs early)
    data: dict[str, Any] | None = None  # data-ab: the data scan's settings (`data.DataOptions` as a dict)
    data_ab_model: str | None = None    # data-ab trains this model instead of `model` ("pkg.mod:factory")
    data_ab_model_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> VerifyOptions:
        return cls(**json.loads(text))


# (config key, attribute, type check, what it must be, its JSON Schema: tlint/config_schema.py)
_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer", {"type": "integer"})
_POS_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer",
            {"type": "integer", "minimum": 1})
_NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, "a positive number",
           {"type": "number", "exclusiveMinimum": 0})
_BOOL = (lambda v: isinstance(v, bool), "true or false", {"type": "boolean"})
_STR = (lambda v: isinstance(v, str) and v != "", "a non-empty string", {"type": "string", "minLength": 1})
_TABLE = (lambda v: isinstance(v, dict), "a table of keyword arguments", {"type": "object"})
_STR_LIST = (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings",
             {"type": "array", "items": {"type": "string"}})
KEY_CHECKS: dict[str, tuple[str, tuple[Callable[[Any], bool], str, dict[str, Any]]]] = {
    "model": ("model", _STR), "model-kwargs": ("model_kwargs", _TABLE), "vocab-size": ("vocab_size", _POS_INT),
    "pad-token-id": ("pad_token_id", _INT), "seq-len": ("seq_len", _POS_INT), "batch-size": ("batch_size", _POS_INT),
    "causal": ("causal", _BOOL), "call": ("call", _STR), "padding-side": ("padding_side", _STR),
    "device": ("device", _STR), "seed": ("seed", _INT), "timeout": ("timeout", _NUMBER),
    "python-path": ("python_path", _STR_LIST), "probe-timeout": ("probe_timeout", _NUMBER),
    "memory-limit": ("memory_limit", _NUMBER), "artifacts": ("artifacts", _STR),
    "optimizer": ("optimizer", _STR), "lr": ("lr", _NUMBER), "max-seconds": ("max_seconds", _NUMBER),
    "data-ab-model": ("data_ab_model", _STR), "data-ab-model-kwargs": ("data_ab_model_kwargs", _TABLE),
}


def resolve(config: dict[str, Any], config_path: Path | None, root: Path, flags: dict[str, Any],
            causal_names: tuple[str, ...] = (), require_model: bool = True) -> VerifyOptions:
    """Merge `[tool.tlint.verify]` (`config`, read from `config_path`) with the flags that
    were given (`flags`: config key -> value, None for absent), check every value. Without
    `require_model`, a missing model gives `model = ""` (the flagged classes are built instead)."""
    where = f"{config_path}: " if config_path else ""
    values: dict[str, Any] = {}
    for key, value in config.items():
        if key in KEY_CHECKS:
            attr, (ok, what, _) = KEY_CHECKS[key]
            if not ok(value):
                raise OptionsError(f"{where}`{key}` in [tool.tlint.verify] must be {what}, got {value!r}")
            values[attr] = value
    for key, value in flags.items():
        if value is None:
            continue
        attr, (ok, what, _) = KEY_CHECKS[key]
        if not ok(value):
            raise OptionsError(f"--{key} must be {what}, got {value!r}", kind="usage")
        values[attr] = value
    if "model" not in values and not require_model:
        values["model"] = ""
    if "model" not in values:
        raise OptionsError(
            NO_MODEL + ": give `--model pkg.module:factory` or set `model = \"pkg.module:factory\"` in "
            "[tool.tlint.verify] (a callable returning a torch.nn.Module, or an nn.Module class; "
            "`model-kwargs` are passed to it)", kind="usage")
    for attr in ("model", "call", "optimizer", "data_ab_model"):
        spec = values.get(attr)
        if attr == "call" and (spec is None or spec in CALL_STYLES) or attr == "model" and spec == "" \
                or attr in ("optimizer", "data_ab_model") and spec is None:
            continue
        assert spec is not None  # (the model is required above; the others are skipped when absent)
        if not _DOTTED.match(spec):
            styles = ", ".join(f'"{s}"' for s in CALL_STYLES)
            extra = f" or one of the built-in styles {styles}" if attr == "call" else ""
            raise OptionsError(f"`{attr.replace('_', '-')}` must be a dotted path `package.module:name`{extra}; "
                               f"got {spec!r}", kind="usage")
    if values.get("padding_side", "right") not in PADDING_SIDES:
        raise OptionsError(f"`padding-side` must be \"right\" or \"left\", got {values['padding_side']!r}",
                           kind="usage")
    if values.get("seq_len", 16) < MIN_SEQ_LEN:
        raise OptionsError("`seq-len` must be at least 4 (the probes pad and permute within a sequence)",
                           kind="usage")
    values["python_path"] = [str((root / p).resolve()) for p in values.get("python_path", [])]
    if values.get("artifacts"):  # the config's is relative to its folder; the flag's arrives absolute
        values["artifacts"] = str((root / values["artifacts"]).resolve())
        if flags.get("artifacts") is None and config_path is not None:
            _inside_config_folder("artifacts", values["artifacts"], config["artifacts"], config_path, root)
    return VerifyOptions(root=str(root.resolve()), causal_names=list(causal_names), **values)


def _inside_config_folder(key: str, resolved: str, given: str, config_path: Path, root: Path) -> None:
    """An output path set in a config must resolve, after symlinks, inside the config's folder
    (a config cloned with a repository must not make tlint write elsewhere)."""
    folder = root.resolve()
    path = Path(resolved)
    if path == folder or folder in path.parents:
        return
    from tlint.config import _where

    try:
        from tlint import bounded

        text = bounded.read_text(config_path, bounded.CONFIG_BYTES)
    except (OSError, UnicodeDecodeError):
        text = ""
    raise OptionsError(f"{_where(config_path, text, key)}: `{key} = {given!r}` in [tool.tlint.verify] resolves "
                       f"to {path}, outside the config's folder {folder} (after symlinks): an output path set in a "
                       f"config must stay inside its folder; give a folder elsewhere with --{key} instead")


def select_probes(names: list[str] | None, optimizer: bool = False) -> list[str]:
    """The probes to run: the named ones (a group name such as `training` stands for its
    probes), else the default set, plus optimizer-coverage when an optimiser is configured."""
    if not names:
        return list(PROBES) + (["optimizer-coverage"] if optimizer else [])
    every = {**PROBES, **TRAINING_PROBES}
    names = [m for n in names for m in PROBE_GROUPS.get(n, (n,))]
    unknown = [n for n in names if n not in every]
    if unknown:
        raise OptionsError(f"unknown probe `{unknown[0]}` (tlint verify --list-probes lists them: "
                           f"{', '.join([*every, *PROBE_GROUPS])})", kind="usage")
    return [n for n in every if n in names]


def load_config(args):
    """The settings of `--config`, else of the nearest config above the working directory
    (defaults when there is none), and the config's path (None without one)."""
    from tlint.config import ConfigError, default_settings, find_config, load_settings

    try:
        if args.config is not None:
            if not args.config.is_file():
                raise OptionsError(f"{args.config}: config file not found")
            config_path = args.config
        else:
            config_path, _ = find_config(Path.cwd().resolve())
        settings = (load_settings(config_path, Path.cwd()) if config_path
                    else default_settings(Path.cwd().resolve()))
    except ConfigError as exc:
        raise OptionsError(str(exc)) from None
    return settings, config_path


def config_root(config_path) -> Path:
    """The folder user code is imported from: the config's, else the working directory."""
    return config_path.parent.resolve() if config_path else Path.cwd().resolve()
