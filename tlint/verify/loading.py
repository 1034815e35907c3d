"""Child-process side of loading: import the factory, build the model, find how its
forward is called (call styles and adapters) and normalise what it returns.

Every failure here is a `UserCodeError`: one paragraph naming what went wrong, with the
user's own frame (file, line, code) when their code raised."""

from __future__ import annotations

import importlib
import inspect
import math
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from tlint.verify.options import ADAPTER_NOTE, ADAPTER_NOTE_NO_MASK, CALL_STYLES, VerifyOptions

_TLINT_DIR = Path(__file__).resolve().parent.parent


class UserCodeError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def user_frame(exc: BaseException, roots: list[Path]) -> str:
    """`file:line in function: code` of the innermost frame in the user's tree (the config's
    folder and python-path), else the innermost frame outside tlint and importlib."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<") and not _inside(Path(f.filename), [_TLINT_DIR])]
    mine = [f for f in frames if _inside(Path(f.filename), roots)]
    chosen = (mine or frames or [None])[-1]  # type: ignore[list-item]  # (a frame, or None)
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: {(exc.text or '').strip()}"
    if chosen is None:
        return ""
    return f"{chosen.filename}:{chosen.lineno} in {chosen.name}: {(chosen.line or '').strip()}"


def _inside(path: Path, roots: list[Path]) -> bool:
    try:
        resolved = path.resolve()
    except OSError:
        return False
    return any(resolved == r or r in resolved.parents for r in roots)


def _describe(exc: BaseException, roots: list[Path]) -> str:
    frame = user_frame(exc, roots)
    return f"{type(exc).__name__}: {exc}" + (f" (at {frame})" if frame else "")


def import_object(spec: str, setting: str, roots: list[Path]) -> Any:
    """The object named by `package.module:attr.path`."""
    module_name, _, attr_path = spec.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name) and module_name.split(".")[0] == exc.name.split(".")[0]:
            searched = ", ".join(str(r) for r in roots)
            raise UserCodeError("import", f"cannot import `{module_name}` for `{setting} = \"{spec}\"`: no module "
                                f"named `{exc.name}` in {searched} (imports are resolved from the config's "
                                f"folder and `python-path`; check the dotted path)") from None
        raise UserCodeError("import", f"importing `{module_name}` for `{setting}` failed: "
                            f"{_describe(exc, roots)}") from None
    except BaseException as exc:  # user code at import time: anything can happen
        raise UserCodeError("import", f"importing `{module_name}` for `{setting}` failed: "
                            f"{_describe(exc, roots)}") from None
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise UserCodeError("import", f"`{setting} = \"{spec}\"`: `{module_name}` has no attribute "
                                f"`{attr_path}` (check the name after the colon)")
        obj = getattr(obj, part)
    return obj


def build_model(options: VerifyOptions, roots: list[Path]) -> nn.Module:
    factory = import_object(options.model, "model", roots)
    if not callable(factory):
        raise UserCodeError("factory", f"`model = \"{options.model}\"` is a {type(factory).__name__}, "
                            "not a callable returning a torch.nn.Module nor an nn.Module class")
    if options.instantiate:
        _check_no_arguments(factory, options.model)
    check_memory(factory, options)
    torch.manual_seed(options.seed)  # the real build draws the same numbers as without the check
    try:
        model = factory(**options.model_kwargs)
    except BaseException as exc:
        if out_of_memory(exc):
            limit = options.memory_limit or default_memory_limit(options.device)
            raise UserCodeError("memory", f"building the model with `{options.model}` ran out of memory: the "
                                f"process running it may hold {_mib(limit)} (`memory-limit`) plus 1 GiB, whatever "
                                "the factory does. Lower the sizes in `model-kwargs`, or raise `memory-limit` "
                                "(MiB)") from None
        kwargs = f" with model-kwargs {options.model_kwargs}" if options.model_kwargs else ""
        raise UserCodeError("factory", f"building the model with `{options.model}`{kwargs} raised "
                            f"{_describe(exc, roots)}. Fix the factory or its `model-kwargs`.") from None
    if not isinstance(model, nn.Module):
        raise UserCodeError("factory", f"`{options.model}` returned a {type(model).__name__}, "
                            "not a torch.nn.Module")
    return model


def out_of_memory(exc: BaseException) -> bool:
    """An allocation refused (the child's memory limit, or the machine's): Python's
    MemoryError, torch's OutOfMemoryError, or the CPU allocator's RuntimeError."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" \
        or isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)


def _check_no_arguments(cls: Any, spec: str) -> None:
    """A flagged class built directly (no model configured): an nn.Module class whose
    constructor needs no argument."""
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise UserCodeError("factory", f"`{spec}` is not a torch.nn.Module class")
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return
    needed = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        raise UserCodeError("arguments", f"{cls.__qualname__}({', '.join(needed)}) needs arguments, so the verifier "
                            "cannot build it alone: set `model` in [tool.tlint.verify] to a factory that builds the "
                            "model (and `model-kwargs`)")


# Weights, their gradients, and the deeper copy depth-growth builds: what the probes hold at once.
MEMORY_FACTOR = 3


def default_memory_limit(device: str) -> float:
    """MiB: half of the machine's memory (of the GPU's for a CUDA device); 4 GiB when unknown."""
    try:
        if device.startswith("cuda") and torch.cuda.is_available():
            return torch.cuda.get_device_properties(torch.device(device)).total_memory / 2**20 / 2
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 / 2
    except (ValueError, OSError, AttributeError, RuntimeError, AssertionError):
        return 4096.0


def check_memory(factory: Any, options: VerifyOptions) -> None:
    """Build the model on the `meta` device first (no memory allocated) and refuse it when its
    parameters and buffers, times MEMORY_FACTOR, exceed the memory limit. A factory that
    cannot build on `meta` (it loads weights, calls .item(), ...) is built for real unchecked."""
    try:
        with torch.device("meta"), _SkipInitialisers():
            shadow = factory(**options.model_kwargs)
    except BaseException:  # noqa: BLE001  (the real build reports the user's error, if any)
        return
    if not isinstance(shadow, nn.Module):
        return
    tensors = [*shadow.parameters(), *shadow.buffers()]
    size = sum(t.numel() * t.element_size() for t in tensors)
    count = sum(p.numel() for p in shadow.parameters())
    del shadow, tensors
    limit = options.memory_limit or default_memory_limit(options.device)
    needed = size * MEMORY_FACTOR / 2**20
    if needed > limit:
        raise UserCodeError("memory", f"the model `{options.model}` is too large to verify here: {count:,} parameters "
                            f"({_mib(size / 2**20)} of weights and buffers, about {_mib(needed)} with gradients and "
                            f"a deeper copy) exceed the memory limit of {_mib(limit)}. Nothing was allocated. Lower "
                            "the sizes in `model-kwargs` (layers, width, vocabulary): the probes need only a small "
                            "model, or raise `memory-limit` (MiB) in [tool.tlint.verify] / --memory-limit")


class _SkipInitialisers(TorchFunctionMode):
    """On the meta device an initialiser (`nn.init.normal_`, `Tensor.uniform_`, ...) has no
    numbers to fill, but running it goes through torch's reference implementations, which
    import `torch._dynamo` (about 1.5 s). Only the shapes count here: every in-place call on
    a meta tensor returns that tensor untouched."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.endswith("__"):
            target = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


def _mib(value: float) -> str:
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def infer_vocab_size(model: nn.Module) -> int | None:
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            return module.num_embeddings
    return None


# --- calling forward -------------------------------------------------------------------


def first_tensor(output: Any) -> torch.Tensor | None:
    """The model's main output: a tensor, the first tensor of a tuple/list, `logits` then
    `last_hidden_state` of a dict or an object."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict):
        for key in ("logits", "last_hidden_state"):
            if isinstance(output.get(key), torch.Tensor):
                return output[key]
        return None
    for key in ("logits", "last_hidden_state"):
        if isinstance(getattr(output, key, None), torch.Tensor):
            return getattr(output, key)
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, torch.Tensor):
                return item
    return None


# Names whose mask means "True / 1 = pad (ignore)" contain one of these; other mask names
# (`attention_mask`, `mask`, `input_mask`) mean "1 = keep".
_PAD_WORDS = ("pad", "ignore")
# Mask parameters that are not the padding mask (causal or per-head masks, whatever their dtype).
_NOT_PADDING = ("causal", "head", "attn_mask", "src_mask", "tgt_mask", "memory_mask", "token_type", "labels",
                "position", "decoder_")


def mask_is_padding_flag(name: str) -> bool:
    """The mask's polarity from its parameter name: True when it is a bool, True = pad."""
    return any(word in name.lower() for word in _PAD_WORDS)


def _mask_parameter(names: list[str], taken: set[str]) -> str | None:
    """The padding mask among forward's named parameters (by name), or None."""
    for name in names[1:]:
        low = name.lower()
        if name in taken or not ("mask" in low or "pad" in low) or any(word in low for word in _NOT_PADDING):
            continue
        return name
    return None


@dataclass
class Caller:
    """How to call forward: `style` is a built-in call style, an `ids,NAME` style that passes
    the padding mask by its parameter name (its polarity and dtype from the name), or an
    adapter's dotted path. `seq_first`: the model takes (seq, batch) ids (and returns (seq,
    batch, ...)); the probes still see (batch, seq)."""

    style: str
    adapter: Callable | None = None
    adapter_mask: bool = True       # an adapter's signature: (model, ids, mask) or (model, ids)
    seq_first: bool = False
    vocab_size: int = 2             # encoder-decoder styles: the fixed source's token range
    pad_token_id: int = 0

    @property
    def has_mask(self) -> bool:
        return self.style != "ids" and (self.adapter is None or self.adapter_mask)

    @property
    def mask_name(self) -> str | None:
        """The keyword of an `ids,NAME` style."""
        head, _, name = self.style.partition(",")
        return name if head == "ids" and name and name != "mask" else None

    @property
    def convention(self) -> str:
        if self.adapter is not None:
            return ADAPTER_NOTE if self.adapter_mask else ADAPTER_NOTE_NO_MASK
        name = self.mask_name
        if name is not None:
            how = "bool True = pad (ignore)" if mask_is_padding_flag(name) else "long 1 = keep, 0 = pad"
            text = f"model(ids, {name}=mask), mask {how} (bound by its parameter name)"
        else:
            text = CALL_STYLES.get(self.style, "")
        return text + ("; sequence-first: ids fed as (seq, batch)" if self.seq_first else "")

    def source(self, keep: torch.Tensor) -> torch.Tensor:
        """The encoder-decoder's fixed source sentence: real tokens where `keep` is True,
        counted from each sample's first real token (so they do not depend on the batch or
        the padding side), the pad id elsewhere."""
        rank = (keep.long().cumsum(dim=1) - 1).clamp_min(0)
        tokens = (rank * 37 + 11) % max(self.vocab_size - 1, 1)
        tokens = tokens + (tokens >= self.pad_token_id).long()
        return torch.where(keep.bool(), tokens, torch.full_like(tokens, self.pad_token_id))

    def raw(self, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor | None) -> Any:
        """Call the model; `keep` is a bool (batch, seq) tensor, True at real tokens."""
        if self.seq_first:
            ids = ids.transpose(0, 1)  # (padding masks stay (batch, seq), as torch's modules take them)
        if self.adapter is not None:
            if not self.adapter_mask:
                return self.adapter(model, ids)
            full = keep if keep is not None else torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
            return self.adapter(model, ids, full.long())
        if self.style == "input_ids,decoder_input_ids":
            return self._encoder_decoder(model, ids, keep, ("input_ids", "decoder_input_ids"),
                                         ("attention_mask", "decoder_attention_mask"))
        if self.style == "src,tgt":
            return self._encoder_decoder(model, ids, keep, ("src", "tgt"),
                                         ("src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask"))
        if self.style == "ids" or keep is None:
            return model(ids)
        if self.style == "ids,mask":
            return model(ids, keep.long())
        if self.style == "input_ids,attention_mask":
            return model(input_ids=ids, attention_mask=keep.long())
        name = self.mask_name
        if name is not None:
            return model(ids, **{name: ~keep if mask_is_padding_flag(name) else keep.long()})
        if _takes(model, "src_key_padding_mask"):
            return model(ids, src_key_padding_mask=~keep)
        return model(ids, ~keep)

    def _encoder_decoder(self, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor | None,
                         inputs: tuple[str, str], masks: tuple[str, ...]) -> Any:
        full = keep if keep is not None else torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
        source = self.source(full.transpose(0, 1) if self.seq_first else full)
        kwargs: dict[str, Any] = {inputs[0]: source.transpose(0, 1) if self.seq_first else source, inputs[1]: ids}
        if keep is not None:
            names = _named_parameters(model) or []
            for name in masks:
                if name in names:
                    kwargs[name] = ~keep if mask_is_padding_flag(name) else keep.long()
        return model(**kwargs)

    def output(self, raw: Any) -> torch.Tensor | None:
        tensor = first_tensor(raw)
        if tensor is not None and self.seq_first and tensor.dim() >= 2:
            tensor = tensor.transpose(0, 1)
        return tensor

    def __call__(self, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        tensor = self.output(self.raw(model, ids, keep))
        if tensor is None:
            raise UserCodeError("output", f"forward (call style \"{self.style}\") returned no tensor: expected a "
                                "tensor, a tuple/list holding one, or a dict/object with `logits` or "
                                "`last_hidden_state`; configure an adapter `call = \"pkg.mod:call\"`")
        return tensor


def _signature(callable_: Any) -> dict[str, inspect.Parameter] | None:
    try:
        return dict(inspect.signature(callable_).parameters)
    except (TypeError, ValueError):
        return None


def _named_parameters(model: nn.Module) -> list[str] | None:
    """forward's parameters that have a name (whatever *args/**kwargs it also takes), or
    None when it has no signature."""
    params = _signature(model.forward)
    if params is None:
        return None
    return [name for name, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _parameters(model: nn.Module) -> dict[str, inspect.Parameter] | None:
    """forward's named parameters, or None when it takes *args/**kwargs or has no signature."""
    params = _signature(model.forward)
    if params is None or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
        return None
    return params


def _takes(model: nn.Module, name: str) -> bool:
    return name in (_named_parameters(model) or [])


def candidate_styles(model: nn.Module) -> list[str]:
    """The styles worth trying, bound by forward's parameter names whenever it names them
    (whatever *args/**kwargs it also takes); every built-in style when it names none."""
    names = _named_parameters(model)
    if not names:
        return [s for s in CALL_STYLES if s not in ("input_ids,decoder_input_ids", "src,tgt")]
    styles = []
    if "input_ids" in names and "decoder_input_ids" in names:
        styles.append("input_ids,decoder_input_ids")
    if "src" in names and "tgt" in names:
        styles.append("src,tgt")
    if "input_ids" in names and "attention_mask" in names:
        styles.append("input_ids,attention_mask")
    if "src_key_padding_mask" in names:
        styles.append("src,src_key_padding_mask")
    mask = _mask_parameter(names, {"attention_mask", "src_key_padding_mask"})
    if mask is not None:
        positional_second = names.index(mask) == 1 and mask == "mask"
        styles.append("ids,mask" if positional_second else f"ids,{mask}")
    styles.append("ids")
    return list(dict.fromkeys(styles))


def adapter_takes_mask(adapter: Callable) -> bool:
    """An adapter declares whether it passes a mask by its signature: (model, ids, mask) or
    (model, ids); a `takes_mask` attribute, when set, wins."""
    declared = getattr(adapter, "takes_mask", None)
    if isinstance(declared, bool):
        return declared
    params = _signature(adapter)
    if params is None:
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params.values()):
        return True
    positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3


_SEQ_FIRST_MODULES = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.Transformer)


def sequence_first_modules(model: nn.Module) -> list[str]:
    """The model's torch attention modules built with batch_first=False."""
    return [name or "(model)" for name, m in model.named_modules()
            if isinstance(m, _SEQ_FIRST_MODULES) and not getattr(m, "batch_first", True)]


def _couples_batch(caller: Caller, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor) -> float:
    """How much sample 1's output moves when only sample 0's tokens change (relative)."""
    changed = ids.clone()
    changed[0] = torch.roll(ids[0], 1)
    if torch.equal(changed[0], ids[0]):
        changed[0] = (ids[0] + 1) % max(int(ids.max()) + 1, 2)
    with torch.no_grad():
        a, b = caller(model, ids, keep).float(), caller(model, changed, keep).float()
    if a.shape != b.shape or a.dim() == 0 or a.shape[0] != ids.shape[0]:
        return math.inf
    scale = a[1:].pow(2).mean().sqrt().clamp_min(1e-6)
    return float(((a[1:] - b[1:]).abs().max() / scale).nan_to_num(nan=math.inf))


def detect_sequence_first(caller: Caller, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor) -> bool:
    """The model is fed (seq, batch) when that orientation keeps the samples of a batch
    independent and (batch, seq) does not: a probe call with distinct batch and sequence
    sizes, changing one sample's tokens. Models whose torch attention modules are
    `batch_first=False` are tested whatever their output; the others only when the batch-
    first call couples the samples (so a model that keeps them apart costs one call pair)."""
    if ids.shape[0] < 2 or ids.shape[0] == ids.shape[1]:
        return False
    as_is = _couples_batch(caller, model, ids, keep)
    if as_is <= 1e-4:
        return False
    try:
        flipped = _couples_batch(replace(caller, seq_first=True), model, ids, keep)
    except Exception:
        return False
    return flipped <= 1e-4


def choose_caller(model: nn.Module, options: VerifyOptions, roots: list[Path], ids: torch.Tensor,
                  keep: torch.Tensor, vocab_size: int = 2) -> Caller:
    """The configured call style (or adapter), else the first style forward accepts; a
    model with batch_first=False attention is fed sequence-first when that is the layout
    that keeps samples apart."""
    base = {"vocab_size": vocab_size, "pad_token_id": options.pad_token_id}
    if options.call and options.call not in CALL_STYLES:
        adapter = import_object(options.call, "call", roots)
        caller = Caller(options.call, adapter, adapter_takes_mask(adapter), **base)  # type: ignore[arg-type]
        _try(caller, model, ids, keep, roots, tried=None)
        return caller
    styles = [options.call] if options.call else candidate_styles(model)
    failures: list[str] = []
    seq_first = bool(sequence_first_modules(model))
    for style in styles:
        caller = Caller(style, **base)  # type: ignore[arg-type]
        try:
            _try(caller, model, ids, keep, roots, tried=failures)
        except _StyleFailed:
            if not seq_first:
                continue
            try:  # a (seq, batch) model may reject (batch, seq) ids with a (batch, seq) mask outright
                caller = replace(caller, seq_first=True)
                _try(caller, model, ids, keep, roots, tried=[])
            except _StyleFailed:
                continue
            return caller
        if not style.startswith("input_ids"):
            try:  # (the Hugging Face convention, `input_ids`, is (batch, seq) by definition)
                if detect_sequence_first(caller, model, ids, keep):
                    caller = replace(caller, seq_first=True)
            except Exception:  # noqa: BLE001  (the probes report what the model cannot run)
                pass
        return caller
    tried = "; ".join(failures)
    raise UserCodeError("call", f"forward rejected every call style tried with (batch {ids.shape[0]}, seq "
                        f"{ids.shape[1]}) token ids: {tried}. If the error is about sizes, lower `seq-len`; "
                        "else set `call` in "
                        "[tool.tlint.verify] (or --call) to one of " + ", ".join(f'"{s}"' for s in CALL_STYLES)
                        + ", or to an adapter \"pkg.mod:call\", a callable(model, ids, mask) returning the "
                        "output tensor (mask: long, 1 = keep), or callable(model, ids) when it passes no mask")


class _StyleFailed(Exception):
    pass


def _try(caller: Caller, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor, roots: list[Path],
         tried: list[str] | None) -> None:
    try:
        with torch.no_grad():
            out = caller(model, ids, keep)
    except UserCodeError as exc:
        if tried is None:
            raise
        tried.append(f"\"{caller.style}\" ({exc})")
        raise _StyleFailed() from None
    except Exception as exc:
        if tried is None:
            raise UserCodeError("call", f"the adapter `{caller.style}` raised {_describe(exc, roots)}") from None
        tried.append(f"\"{caller.style}\" ({_describe(exc, roots)})")
        raise _StyleFailed() from None
    if out.dim() == 0 or out.shape[0] != ids.shape[0]:
        message = (f"output of shape {tuple(out.shape)} has no batch axis of size {ids.shape[0]} first "
                   "(the verifier feeds batch-first (batch, seq) token ids)")
        if tried is None:
            raise UserCodeError("call", f"the adapter `{caller.style}`: {message}")
        tried.append(f"\"{caller.style}\" ({message})")
        raise _StyleFailed()


def import_roots(options: VerifyOptions) -> list[Path]:
    return [Path(options.root), *(Path(p) for p in options.python_path)]


def prepare_sys_path(options: VerifyOptions) -> None:
    """The config's folder and python-path first on sys.path, bytecode writing off."""
    sys.dont_write_bytecode = True
    for entry in reversed([str(p) for p in import_roots(options)]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
