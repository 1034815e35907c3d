"""Child-process side of loading: import the factory, build the model, find how its
forward is called (call styles and adapters) and normalise what it returns.

Every failure here is a `UserCodeError`: one paragraph naming what went wrong, with the
user's own frame (file, line, code) when their code raised."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tlint.verify.options import ADAPTER_NOTE, CALL_STYLES, VerifyOptions

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
        kwargs = f" with model-kwargs {options.model_kwargs}" if options.model_kwargs else ""
        raise UserCodeError("factory", f"building the model with `{options.model}`{kwargs} raised "
                            f"{_describe(exc, roots)}. Fix the factory or its `model-kwargs`.") from None
    if not isinstance(model, nn.Module):
        raise UserCodeError("factory", f"`{options.model}` returned a {type(model).__name__}, "
                            "not a torch.nn.Module")
    return model


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
        with torch.device("meta"):
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


@dataclass
class Caller:
    """How to call forward: `style` is a built-in call style or an adapter's dotted path."""

    style: str
    adapter: Callable | None = None

    @property
    def has_mask(self) -> bool:
        return self.style != "ids"

    @property
    def convention(self) -> str:
        return CALL_STYLES.get(self.style, ADAPTER_NOTE)

    def raw(self, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor | None) -> Any:
        """Call the model; `keep` is a bool (batch, seq) tensor, True at real tokens."""
        if self.adapter is not None:
            return self.adapter(model, ids, keep.long())  # type: ignore[union-attr]  # (an adapter has_mask)
        if self.style == "ids" or keep is None:
            return model(ids)
        if self.style == "ids,mask":
            return model(ids, keep.long())
        if self.style == "input_ids,attention_mask":
            return model(input_ids=ids, attention_mask=keep.long())
        if _takes(model, "src_key_padding_mask"):
            return model(ids, src_key_padding_mask=~keep)
        return model(ids, ~keep)

    def __call__(self, model: nn.Module, ids: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        tensor = first_tensor(self.raw(model, ids, keep))
        if tensor is None:
            raise UserCodeError("output", f"forward (call style \"{self.style}\") returned no tensor: expected a "
                                "tensor, a tuple/list holding one, or a dict/object with `logits` or "
                                "`last_hidden_state`; configure an adapter `call = \"pkg.mod:call\"`")
        return tensor


def _parameters(model: nn.Module) -> dict[str, inspect.Parameter] | None:
    """forward's named parameters, or None when it takes *args/**kwargs or has no signature."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
        return None
    return dict(params)


def _takes(model: nn.Module, name: str) -> bool:
    params = _parameters(model)
    return params is not None and name in params


def candidate_styles(model: nn.Module) -> list[str]:
    """The built-in styles worth trying, the one forward's signature suggests first."""
    params = _parameters(model)
    if params is None:
        return list(CALL_STYLES)
    names = list(params)
    styles = []
    if "input_ids" in names and "attention_mask" in names:
        styles.append("input_ids,attention_mask")
    if "src_key_padding_mask" in names:
        styles.append("src,src_key_padding_mask")
    if len(names) >= 2 and any(part in names[1].lower() for part in ("mask", "pad")):
        styles.append("ids,mask")
    styles.append("ids")
    return styles


def choose_caller(model: nn.Module, options: VerifyOptions, roots: list[Path], ids: torch.Tensor,
                  keep: torch.Tensor) -> Caller:
    """The configured call style (or adapter), else the first style forward accepts."""
    if options.call and options.call not in CALL_STYLES:
        adapter = import_object(options.call, "call", roots)
        caller = Caller(options.call, adapter)
        _try(caller, model, ids, keep, roots, tried=None)
        return caller
    styles = [options.call] if options.call else candidate_styles(model)
    failures: list[str] = []
    for style in styles:
        caller = Caller(style)
        try:
            _try(caller, model, ids, keep, roots, tried=failures)
            return caller
        except _StyleFailed:
            continue
    tried = "; ".join(failures)
    raise UserCodeError("call", f"forward rejected every call style tried with (batch {ids.shape[0]}, seq "
                        f"{ids.shape[1]}) token ids: {tried}. If the error is about sizes, lower `seq-len`; "
                        "else set `call` in "
                        "[tool.tlint.verify] (or --call) to one of " + ", ".join(f'"{s}"' for s in CALL_STYLES)
                        + ", or to an adapter \"pkg.mod:call\", a callable(model, ids, mask) returning the "
                        "output tensor (mask: long, 1 = keep)")


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
