"""Training libraries whose engines do part of the training step themselves: the events their
entry points stand for, recorded at the user's call (README "Tracing a training run").

A library is patched when it is imported (an import hook on `sys.meta_path`), or at once when
it already is, so that the user's code may import it after the hooks were installed, as a
script does. Nothing here imports a library; a library that is never imported is never
touched.

- DeepSpeed: `DeepSpeedEngine.step()` clips the gradients itself when its configuration sets
  `gradient_clipping` (after unscaling them, in every optimizer it wraps), at the steps that
  end an accumulation. Such a call is a `clip` event (with no scale: the engine's gradients
  are never still scaled when it clips) before the optimizer step it makes, at the user's
  `engine.step()` line; a clipping call inside it is not a second event.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tlint.runtime.hooks import Tracer


def _deepspeed_engine(tracer: Tracer, module: ModuleType) -> None:
    engine = getattr(module, "DeepSpeedEngine", None)
    if engine is None:
        return

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                limit = float(self.gradient_clipping() or 0.0)
                clips = limit > 0.0 and bool(self.is_gradient_accumulation_boundary())
            except Exception:  # noqa: BLE001 - an engine that cannot say is not judged
                clips = False
            if not clips or not tracer._enter("clip"):
                if clips:
                    tracer._leave("clip")
                return original(self, *args, **kwargs)
            try:
                name = f"{type(self).__name__}.step (gradient_clipping={limit:g})"
                tracer._observe("clip", tracer.site(), function=name, scale=None)
                return original(self, *args, **kwargs)
            finally:
                tracer._leave("clip")
        return step

    tracer._patch(engine, "step", make)


PATCHES: dict[str, Callable[[Tracer, ModuleType], None]] = {
    "deepspeed.runtime.engine": _deepspeed_engine,
}


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the patch."""

    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[ModuleType], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        try:
            self.patch(module)
        except Exception:  # noqa: BLE001 - a library of another shape is left as it is
            pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        patch = PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, functools.partial(patch, self.tracer))
                return spec
        return None


def install(tracer: Tracer) -> Callable[[], None]:
    """Patches the libraries already imported and those imported later; returns the undo of
    the import hook (the patches themselves are undone with the tracer's own)."""
    for name, patch in PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            try:
                patch(tracer, module)
            except Exception:  # noqa: BLE001
                pass
    finder = _Finder(tracer)
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
    return undo
