"""The torch side of the run-time invariants: torch's global hooks and a few wrapped functions
that turn what a training step does into events for `tlint.runtime.invariants` (README
"Tracing a training run"). `tlint trace` installs them in its child process before the
user's code starts; `tlint.watch` installs them while a `Watch` is open (one installation per
process, shared: `acquire`/`release`). Every wrapper calls the original with the same
arguments and returns its result, so the numbers do not change.

Events carry the innermost frame of the user's code (`user_site`), chosen by file path:
frames of installed packages (site-packages, dist-packages), the standard library, tlint
itself and frozen or generated code (`<...>`) are skipped, whatever their module names."""

from __future__ import annotations

import functools
import os
import site as site_module
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tlint.runtime import batches
from tlint.runtime.invariants import Invariants, Site, Violation

TLINT_ROOT = str(Path(__file__).resolve().parent.parent)
DATA_STEPS, DATA_EVERY = 16, 64  # the steps whose batches and losses are read (Tracer._data_due)
LOSS_FUNCTIONS = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits")
DROPOUT_FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


class TraceStop(BaseException):  # noqa: N818 - not an error: the run is stopped on purpose
    """Raised from the optimizer's post-step hook after the steps asked for (a BaseException,
    so that `except Exception` in the user's code lets it through)."""


def _excluded_roots() -> tuple[str, ...]:
    roots = {TLINT_ROOT}
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            roots.add(os.path.realpath(paths[key]))
    for getter in (site_module.getsitepackages, lambda: [site_module.getusersitepackages()]):
        try:
            roots.update(os.path.realpath(p) for p in getter())
        except (AttributeError, TypeError, OSError):
            pass
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))


class SiteFinder:
    """The innermost frame of the user's code, by file path (cached per file)."""

    def __init__(self) -> None:
        self.roots = _excluded_roots()
        self._user: dict[str, str | None] = {}

    def user_path(self, filename: str) -> str | None:
        """The file's real path when it is the user's, else None."""
        if filename in self._user:
            return self._user[filename]
        path: str | None = None
        if filename and not filename.startswith("<"):
            real = os.path.realpath(filename)
            parts = real.split(os.sep)
            if ("site-packages" not in parts and "dist-packages" not in parts
                    and not any(real.startswith(root) for root in self.roots)):
                path = real
        self._user[filename] = path
        return path

    def stack(self, limit: int = 8) -> list[Site]:
        """The frames of the user's code on the stack, innermost first (at most `limit`)."""
        out: list[Site] = []
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and len(out) < limit:
            path = self.user_path(frame.f_code.co_filename)
            if path is not None:
                out.append(Site(path, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        return out

    def __call__(self) -> Site | None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            path = self.user_path(frame.f_code.co_filename)
            if path is not None:
                return Site(path, frame.f_lineno, frame.f_code.co_name)
            frame = frame.f_back
        return None


class Tracer:
    """Installs the hooks and feeds `invariants`. `emit(violation)` is called for each new
    violation; after `steps` optimizer steps (0: never) `on_limit()` is called and TraceStop
    raised (and at a later step, when the user's code caught it, `on_stop_ignored()` first:
    the child ends the process there)."""

    active: Tracer | None = None  # the one installed in this process (acquire/release share it)

    def __init__(self, invariants: Invariants, emit: Callable[[Violation], None], steps: int = 0,
                 on_limit: Callable[[], None] | None = None, on_stop_ignored: Callable[[], None] | None = None) -> None:
        self.inv, self.limit, self.on_limit = invariants, steps, on_limit
        self.listeners: list[Callable[[Violation], None]] = [emit]
        self.on_stop_ignored = on_stop_ignored
        self.site = SiteFinder()
        self.pid = os.getpid()
        self.counts: dict[str, int] = {}
        self.lrs: list[list[float]] = []             # the rates per group at each step (the first 100)
        self.scales: list[float] = []                # GradScaler scales after each update (the first 100)
        self.stopping = False
        self._local = threading.local()
        self._stack: list[nn.Module] = []            # the modules whose forward is running
        self._top: nn.Module | None = None           # the outermost of them, when it has parameters
        self._last: weakref.ref | None = None        # the last such model to run forward
        self._forwarded: dict[int, weakref.ref] = {}  # models that ran forward in eval mode since a step
        self._eval_sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> Site
        self._eval_callers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> [Site]
        self._has_params: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._scaler: weakref.ref | None = None
        self._optimizers: weakref.WeakSet = weakref.WeakSet()  # every optimizer built or seen (module zero_grad)
        self._undo: list[Callable[[], None]] = []
        self._batch: batches.Batch | None = None     # the last training batch of a top-level model
        self._read = False                           # a training forward's inputs were read, its end not yet seen
        self._causal = False                         # an SDPA call with is_causal=True ran since that read
        self._iterators: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # iterator -> (loader, site)
        self._last_iterator: weakref.ref | None = None  # the DataLoader iterator that gave the last batch
        self._loaders_judged: weakref.WeakSet = weakref.WeakSet()

    # -- plumbing --

    def _observe(self, kind: str, site: Site | None, **data: Any) -> None:
        if os.getpid() != self.pid:  # a forked process (DataLoader workers): not the run's own events
            return
        self.counts[kind] = self.counts.get(kind, 0) + 1
        try:
            for violation in self.inv.observe(kind, site, **data):
                for listener in list(self.listeners):
                    listener(violation)
        except Exception:  # noqa: BLE001 - tlint's own failure never breaks the user's run; it is counted
            self.counts["internal_errors"] = self.counts.get("internal_errors", 0) + 1

    def _enter(self, name: str) -> bool:
        """True for the outermost call of `name` on this thread (nested ones are not events)."""
        depth = getattr(self._local, name, 0)
        setattr(self._local, name, depth + 1)
        return depth == 0

    def _leave(self, name: str) -> None:
        setattr(self._local, name, getattr(self._local, name, 1) - 1)

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        wrapper = make(original)
        try:
            functools.update_wrapper(wrapper, original)
        except (AttributeError, TypeError):
            pass
        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def _outer(self, name: str, original: Callable[..., Any], after: Callable[..., None]) -> Callable[..., Any]:
        """A wrapper that calls `original`, then `after(result, *args, **kwargs)` for the
        outermost call only."""
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            outer = self._enter(name)
            try:
                result = original(*args, **kwargs)
            finally:
                self._leave(name)
            if outer:
                after(result, *args, **kwargs)
            return result
        return wrapper

    # -- install --

    def install(self) -> None:
        if Tracer.active is not None:
            raise RuntimeError("tlint: the run-time hooks are already installed in this process")
        Tracer.active = self
        from torch.nn.modules import module as module_mod
        from torch.optim import lr_scheduler
        from torch.optim import optimizer as optimizer_mod

        handles = [
            optimizer_mod.register_optimizer_step_pre_hook(self._step_pre),
            optimizer_mod.register_optimizer_step_post_hook(self._step_post),
            module_mod.register_module_forward_pre_hook(self._forward_pre),
            module_mod.register_module_forward_hook(self._forward_post, always_call=True),
        ]
        self._undo += [h.remove for h in handles]
        self._patch(torch.optim.Optimizer, "zero_grad", self._wrap_zero_grad)
        self._patch(torch.optim.Optimizer, "__init__", self._wrap_optimizer_init)
        self._patch(nn.Module, "zero_grad", self._wrap_module_zero_grad)
        self._patch(torch.Tensor, "backward", lambda f: self._outer("backward", f, self._after_backward))
        self._patch(torch.autograd, "backward", lambda f: self._outer("backward", f, self._after_backward))
        self._patch(nn.Module, "train", self._wrap_train)
        self._patch(lr_scheduler.LRScheduler, "step", self._wrap_scheduler)
        self._patch(lr_scheduler.ReduceLROnPlateau, "step",
                    lambda f: self._outer("scheduler", f, self._after_plateau))
        for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
            for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grads_with_norm_"):
                self._patch(owner, name, self._clip_wrapper(name))
        from torch.amp import grad_scaler

        scaler = grad_scaler.GradScaler
        self._patch(scaler, "scale", lambda f: self._outer("scale", f, self._after_scale))
        self._patch(scaler, "unscale_", lambda f: self._outer("unscale", f, self._after_unscale))
        self._patch(scaler, "step", lambda f: self._outer("scaler_step", f, self._after_scaler_step))
        self._patch(scaler, "update", lambda f: self._outer("scaler_update", f, self._after_scaler_update))
        for name in DROPOUT_FUNCTIONS:
            self._patch(F, name, self._wrap_dropout)
        self._patch(F, "scaled_dot_product_attention", self._wrap_sdpa)
        for name in LOSS_FUNCTIONS:
            self._patch(F, name, self._wrap_loss)
        from torch.utils.data import dataloader

        self._patch(dataloader.DataLoader, "__iter__", self._wrap_loader_iter)
        self._patch(dataloader._BaseDataLoaderIter, "__next__", self._wrap_loader_next)
        from tlint.runtime import libraries

        self._undo.append(libraries.install(self))

    def know(self, optimizer: Any) -> None:
        """Adds an optimizer built before the hooks were installed (a module's `zero_grad()`
        resets the optimizers holding its parameters)."""
        if isinstance(optimizer, torch.optim.Optimizer):
            self._optimizers.add(optimizer)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()
        if Tracer.active is self:
            Tracer.active = None

    # -- modules --

    def _model_has_params(self, module: nn.Module) -> bool:
        try:
            return self._has_params[module]
        except KeyError:
            pass
        except TypeError:
            return False
        value = next(module.parameters(), None) is not None
        try:
            self._has_params[module] = value
        except TypeError:
            pass
        return value

    def _forward_pre(self, module: nn.Module, args: Any) -> None:
        if not self._stack:
            self._top = _wrapped(module) if self._model_has_params(module) else None
        if not self._stack and self._top is not None:
            model = self._top
            self._last = weakref.ref(model)
            training = bool(model.training)
            eval_site = None if training else self._eval_sites.get(model)
            self._observe("forward", self.site(), model=id(model), name=type(model).__name__,
                          training=training, eval_site=eval_site.to_json() if eval_site else None)
            if training:
                self._forwarded.pop(id(model), None)
            elif torch.is_grad_enabled():  # (evaluation under no_grad trains nothing)
                self._forwarded[id(model)] = weakref.ref(model)
        if module is self._top and module.training and torch.is_grad_enabled():  # (a nested call of it too:
            # Lightning calls the module with its step's arguments, and the step calls it with the batch)
            self._read_inputs(module)
        self._stack.append(module)

    # -- the batches a model is fed --

    def _read_inputs(self, model: nn.Module) -> None:
        """The arguments of the model's call (the outermost one, or the call of the model inside
        a wrapper: a LightningModule's network, a DDP module), read from torch's calling frame:
        global pre-hooks get the positional ones only, and a module hook would stay on the
        user's model."""
        with _suppress():
            frame = sys._getframe(2).f_locals
            args, kwargs = frame.get("args"), frame.get("kwargs")
            self._inputs(model, args if isinstance(args, tuple) else (), kwargs if isinstance(kwargs, dict) else {})

    def _data_due(self) -> bool:
        """Whether this step's batch and loss are read: every step of the first DATA_STEPS, then
        one step in DATA_EVERY (a data bug repeats in every batch; reading one costs about
        0.5 ms, a few per cent of a small model's step)."""
        steps = self.inv.steps
        return steps < DATA_STEPS or steps % DATA_EVERY == 0

    def _inputs(self, module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        if not self._data_due():
            self._batch = None
            self._judge_loader(None)
            return
        try:
            facts, batch = batches.model_input(module, tuple(args), dict(kwargs))
        except Exception:  # noqa: BLE001 - as in _observe
            self.counts["internal_errors"] = self.counts.get("internal_errors", 0) + 1
            return
        self._batch = batch
        self._read, self._causal = True, False
        site = self.site()
        self._observe("model_input", site, **facts)
        self._judge_loader(batch)
        if facts.get("padded_rows"):
            self._observe("padded_input", site)

    def _wrap_loader_iter(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def __iter__(loader: Any) -> Any:
            iterator = original(loader)
            with _suppress():  # (a subclass whose __iter__ is a generator calls this one when advanced)
                self._iterators[iterator] = (weakref.ref(loader), self.site())
            return iterator
        return __iter__

    def _wrap_loader_next(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def __next__(iterator: Any) -> Any:
            result = original(iterator)
            with _suppress():
                self._last_iterator = weakref.ref(iterator)
            return result
        return __next__

    def _judge_loader(self, batch: batches.Batch | None) -> None:
        """The order of the loader that gave the batch of a training forward, once per loader."""
        iterator = self._last_iterator() if self._last_iterator is not None else None
        if iterator is None or os.getpid() != self.pid:
            return
        self._last_iterator = None
        entry = self._iterators.get(iterator)
        loader = entry[0]() if entry else None
        if loader is None or loader in self._loaders_judged:
            return
        self._loaders_judged.add(loader)
        try:
            facts = batches.loader_order(loader, batch.pad if batch else None, batch.eos if batch else frozenset())
        except Exception:  # noqa: BLE001 - as in _observe
            self.counts["internal_errors"] = self.counts.get("internal_errors", 0) + 1
            return
        if facts is not None:
            self._observe("loader_order", entry[1] if entry else None, **facts)

    def _wrap_loss(self, original: Callable[..., Any]) -> Callable[..., Any]:
        name = original.__name__
        indexed = name in ("cross_entropy", "nll_loss")  # (ignore_index is their fifth parameter)

        def loss(input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            outer = self._enter("loss")
            try:
                if outer and torch.is_grad_enabled() and self._data_due():
                    ignore = kwargs.get("ignore_index", args[2] if len(args) > 2 else -100) if indexed else -100
                    try:
                        facts = batches.loss_input(name, input, target, int(ignore), self._batch)
                    except Exception:  # noqa: BLE001 - as in _observe
                        self.counts["internal_errors"] = self.counts.get("internal_errors", 0) + 1
                    else:
                        site = self.site()
                        self._observe("loss_input", site, **facts)
                        if facts.get("form") is not None:
                            self._observe("loss_form", site)
                        if facts.get("offset") is not None:
                            self._observe("loss_measured", site)
                return original(input, target, *args, **kwargs)
            finally:
                self._leave("loss")
        return loss

    def _forward_post(self, module: nn.Module, args: Any, output: Any) -> None:
        stack = self._stack
        if stack and stack[-1] is module:
            stack.pop()
        elif module in stack:  # (an exception unwound a nested forward without its hook)
            del stack[stack.index(module):]
        if not stack:
            if self._top is not None and self._read:
                self._read = False
                self._observe("forward_end", None, causal=self._causal)
            self._top = None


    def _wrap_train(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def train(self: nn.Module, mode: bool = True) -> Any:
            outer = tracer._enter("train")
            try:
                return original(self, mode)
            finally:
                tracer._leave("train")
                if outer and isinstance(mode, bool):
                    sites = tracer.site.stack()
                    site = sites[0] if sites else None
                    with _suppress():  # (kept for each submodule: the model that runs may be one of them)
                        if mode:
                            if tracer._eval_sites:
                                for module in self.modules():
                                    tracer._eval_sites.pop(module, None)
                                    tracer._eval_callers.pop(module, None)
                        elif site is not None:
                            for module in self.modules():
                                tracer._eval_sites[module] = site
                                tracer._eval_callers[module] = sites[1:]
                    tracer._observe("mode", site, training=mode)
                    for caller in sites[1:]:  # (the lines that called it: an `evaluate(model)` helper's call)
                        tracer._observe("mode_call", caller, training=mode)
        return train

    def _eval_state(self) -> tuple[nn.Module, Site | None] | None:
        """The top-level model when it is in eval mode (and where it was switched), else None."""
        model = self._top
        if model is None or model.training:
            return None
        return model, self._eval_sites.get(model)

    def _wrap_dropout(self, original: Callable[..., Any]) -> Callable[..., Any]:
        name = original.__name__
        counts = self.counts

        def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
            counts["dropout_calls"] = counts.get("dropout_calls", 0) + 1
            state = self._eval_state() if self._top is not None else None
            if state is not None:
                where = self.site()
                self._observe("dropout_eval", where, on=bool(training) and _positive(p))
                if training and _positive(p):
                    model, switched = state
                    self._observe("dropout", where, function=f"F.{name}", p=float(p),
                                  model=type(model).__name__, eval_site=switched.to_json() if switched else None)
            return original(input, p, training, inplace)
        return dropout

    def _wrap_sdpa(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def scaled_dot_product_attention(*args: Any, **kwargs: Any) -> Any:
            self.counts["sdpa_calls"] = self.counts.get("sdpa_calls", 0) + 1
            p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
            if kwargs.get("is_causal", args[5] if len(args) > 5 else False) is True:
                self._causal = True
            state = self._eval_state() if self._top is not None else None
            if state is not None:
                where = self.site()
                self._observe("sdpa_eval", where, on=_positive(p))
                if _positive(p):
                    model, switched = state
                    self._observe("sdpa", where, p=float(p), model=type(model).__name__,
                                  eval_site=switched.to_json() if switched else None)
            return original(*args, **kwargs)
        return scaled_dot_product_attention

    # -- backward, optimizer, scheduler --

    def _after_backward(self, result: Any, tensor: Any = None, *args: Any, **kwargs: Any) -> None:
        if isinstance(tensor, (list, tuple)):
            tensor = tensor[0] if tensor else None
        grad_fn = getattr(tensor, "grad_fn", None)
        model = self._last_model()
        self._observe("backward", self.site(), loss=type(grad_fn).__name__ if grad_fn is not None else "",
                      model=type(model).__name__ if model is not None else None,
                      training=bool(model.training) if model is not None else None)
        if model is not None and not model.training:
            self.counts["backward_in_eval"] = self.counts.get("backward_in_eval", 0) + 1

    def _last_model(self) -> nn.Module | None:
        return self._last() if self._last is not None else None

    def _reset(self, original: Callable[..., Any], observe: Callable[[Any, bool], None]) -> Callable[..., Any]:
        """A `zero_grad` wrapper: `observe(owner, set_to_none)` before the outermost call's reset
        (its failure is never the user's), then the original."""
        tracer = self

        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            if tracer._enter("zero_grad"):
                try:
                    observe(self, bool(kwargs.get("set_to_none", args[0] if args else True)))
                except Exception:  # noqa: BLE001 - a traced event is never worth the user's run
                    pass
            try:
                return original(self, *args, **kwargs)
            finally:
                tracer._leave("zero_grad")
        return zero_grad

    def _wrap_zero_grad(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def observe(optimizer: torch.optim.Optimizer, set_to_none: bool) -> None:
            optimizer = _unwrap(optimizer)  # (a wrapper's reset is its optimizer's: Lightning's, accelerate's)
            self._optimizers.add(optimizer)
            had = any(p.grad is not None for g in optimizer.param_groups for p in g["params"])
            self._observe("zero_grad", self.site(), optimizer=id(optimizer), set_to_none=set_to_none, had_grads=had)
        return self._reset(original, observe)

    def _wrap_optimizer_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def __init__(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            with _suppress():
                tracer._optimizers.add(self)
        return __init__

    def _wrap_module_zero_grad(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """`model.zero_grad()`: a reset of each known optimizer holding some of its parameters
        (the optimizers are known from their construction, or from a step or a reset seen)."""
        def observe(module: nn.Module, set_to_none: bool) -> None:
            params = {id(p): p for p in module.parameters()}
            site = self.site()
            for optimizer in list(self._optimizers):
                mine = [params[id(p)] for g in optimizer.param_groups for p in g["params"] if id(p) in params]
                if mine:
                    self._observe("zero_grad", site, optimizer=id(optimizer), set_to_none=set_to_none,
                                  had_grads=any(p.grad is not None for p in mine))
        return self._reset(original, observe)

    def _eval_models(self, optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
        """The models that ran forward in eval mode since the last step and have parameters
        with gradients in `optimizer`."""
        if not self._forwarded:
            return []
        params = {id(p) for g in optimizer.param_groups for p in g["params"]}
        out = []
        for ident, ref in list(self._forwarded.items()):
            model = ref()
            if model is None:
                del self._forwarded[ident]
                continue
            if any(p.requires_grad and p.grad is not None and id(p) in params for p in model.parameters()):
                switched = self._eval_sites.get(model)
                out.append({"name": type(model).__name__, "eval_site": switched.to_json() if switched else None,
                            "callers": [c.to_json() for c in self._eval_callers.get(model, [])]})
                del self._forwarded[ident]
        return out

    def _step_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        try:
            self._step_event(optimizer)
        except Exception:  # noqa: BLE001 - as in _observe
            self.counts["internal_errors"] = self.counts.get("internal_errors", 0) + 1

    def _step_event(self, optimizer: torch.optim.Optimizer) -> None:
        with _suppress():
            self._optimizers.add(optimizer)
        groups = optimizer.param_groups
        lrs = [float(g["lr"]) if isinstance(g.get("lr"), (int, float)) else float("nan") for g in groups]
        if len(self.lrs) < 100:
            self.lrs.append(lrs)
        empty = not any(p.grad is not None for g in groups for p in g["params"])
        self._observe("step", self.site(), optimizer=id(optimizer), empty=empty,
                      eval_models=self._eval_models(optimizer), lrs=lrs)

    def _step_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._observe("stepped", self.site(), optimizer=id(optimizer))
        if self.limit and self.inv.steps >= self.limit:
            if not self.stopping:
                self.stopping = True
                if self.on_limit is not None:
                    self.on_limit()
            elif self.on_stop_ignored is not None:  # the user's code swallowed the TraceStop and stepped again
                self.on_stop_ignored()
            raise TraceStop

    def _wrap_scheduler(self, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            initial = getattr(self, "_step_count", 0) == 0  # the constructor's own first step
            outer = tracer._enter("scheduler")
            try:
                return original(self, *args, **kwargs)
            finally:
                tracer._leave("scheduler")
                if outer and not initial and not args and not kwargs:
                    optimizer = _unwrap(getattr(self, "optimizer", None))
                    tracer._observe("scheduler", tracer.site(), optimizer=id(optimizer), name=type(self).__name__)
        return step

    def _after_plateau(self, result: Any, scheduler: Any = None, *args: Any, **kwargs: Any) -> None:
        """ReduceLROnPlateau.step(metric): a step on a measured value (its own `step`)."""
        optimizer = _unwrap(getattr(scheduler, "optimizer", None))
        self._observe("scheduler", self.site(), optimizer=id(optimizer), name=type(scheduler).__name__, metric=True)

    # -- clipping and GradScaler --

    def _clip_wrapper(self, name: str) -> Callable[[Any], Any]:
        return lambda original: self._outer("clip", original, self._clip_event(name))

    def _clip_event(self, name: str) -> Callable[..., None]:
        def after(result: Any, *args: Any, **kwargs: Any) -> None:
            self._observe("clip", self.site(), function=name, scale=self._scale() if self.inv.wants_scale() else None)
        return after

    def _scale(self) -> float | None:
        scaler = self._scaler() if self._scaler is not None else None
        if scaler is None:
            return None
        try:
            return float(scaler.get_scale())
        except Exception:  # noqa: BLE001
            return None

    def _after_scale(self, result: Any, scaler: Any = None, *args: Any, **kwargs: Any) -> None:
        if scaler is not None and scaler.is_enabled():
            self._scaler = weakref.ref(scaler)
            self._observe("scale", self.site())

    def _after_unscale(self, result: Any, scaler: Any = None, optimizer: Any = None, *args: Any, **kwargs: Any) -> None:
        self._observe("unscale", self.site(), optimizer=id(_unwrap(optimizer)))

    def _after_scaler_step(self, result: Any, scaler: Any = None, optimizer: Any = None, *args: Any,
                           **kwargs: Any) -> None:
        self._observe("scaler_step", self.site(), optimizer=id(_unwrap(optimizer)))

    def _after_scaler_update(self, result: Any, scaler: Any = None, *args: Any, **kwargs: Any) -> None:
        scale = None
        if scaler is not None and scaler.is_enabled():
            self._scaler = weakref.ref(scaler)
            scale = self._scale()
            if scale is not None and len(self.scales) < 100:
                self.scales.append(scale)
        self._observe("scaler_update", self.site(), scale=scale)


_owned: Tracer | None = None  # the tracer `acquire` installed (not one `tlint trace` installed)


def acquire(listener: Callable[[Violation], None]) -> Tracer:
    """Adds `listener` to the process's tracer, installing one (with no step limit) when none
    is: a `Watch` inside a `tlint trace` run shares the trace's hooks and invariants."""
    global _owned
    tracer = Tracer.active
    if tracer is None:
        tracer = _owned = Tracer(Invariants(), listener)
        tracer.install()
    elif listener not in tracer.listeners:
        tracer.listeners.append(listener)
    return tracer


def release(listener: Callable[[Violation], None]) -> None:
    """Removes `listener`; the tracer `acquire` installed is uninstalled with its last listener."""
    global _owned
    tracer = Tracer.active
    if tracer is None:
        return
    if listener in tracer.listeners:
        tracer.listeners.remove(listener)
    if tracer is _owned and not tracer.listeners:
        tracer.uninstall()
        _owned = None


def _unwrap(optimizer: Any) -> Any:
    """The torch optimizer inside a wrapper (accelerate's AcceleratedOptimizer, which is an
    Optimizer whose own step is not hooked): the one whose steps the hooks see."""
    for _ in range(8):
        inner = getattr(optimizer, "optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer):
            break
        optimizer = inner
    return optimizer


def _wrapped(module: nn.Module) -> nn.Module:
    """The model inside wrappers that hold nothing of their own but one module (DDP,
    `torch.compile`'s module, a LightningModule around its network): its train/eval flag is the
    one the user sets and the layers follow, where a wrapper's may not."""
    for _ in range(8):
        children = module._modules
        if len(children) != 1 or module._parameters or module._buffers:
            break
        child = next(iter(children.values()))
        if child is None:
            break
        module = child
    return module


def _positive(p: Any) -> bool:
    try:
        return float(p) > 0.0
    except (TypeError, ValueError):
        return False


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)
