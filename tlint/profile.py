"""Where `tlint check` spends its time: `tlint check --profile` (and bench/profile_rules.py).

The engine offers a timing hook (`timer(name, fn, *args)`, `Profile.call`): while a run is
profiled it charges each rule's `check` and `check_project`, each registered view of the
file context, each fact extractor, the pre-filter, the syntax check, the LibCST parse, the
index traversal, the position pass and the cross-file phase to their names. Inside the
views, the `cached_property` members of the view classes and of FileIndex are timed too
(those alone are wrapped while a run is profiled: they are the views' own parts, which no
engine hook sees). Times are exclusive: a view built on first use inside a rule is charged
to the view, not to the rule. An ordinary run passes no hook and pays nothing; a profiled
one pays a few percent.

Worker processes instrument themselves (`worker_init`) and return each file's timings with
its result (`profiled_task`); the run sums them, so `--jobs N` reports seconds summed over
files and processes, not wall time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from functools import cached_property


class Profile:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[float] = []
        self._undo: list[tuple[object, str, object]] = []

    def timed(self, name: str, fn, *, materialise: bool = False):
        stack, seconds, calls = self._stack, self.seconds, self.calls

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            stack.append(0.0)
            try:
                out = fn(*args, **kwargs)
                return list(out) if materialise and out is not None else out
            finally:
                elapsed = time.perf_counter() - start
                inner = stack.pop()
                seconds[name] += elapsed - inner
                calls[name] += 1
                if stack:
                    stack[-1] += elapsed

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]  # (mypy: functions have no such attribute)
        return wrapper

    def call(self, name: str, fn, /, *args, **kwargs):
        """The timing hook the engine calls: `fn(*args, **kwargs)`, charged to `name`."""
        return self.timed(name, fn)(*args, **kwargs)

    def patch(self, owner, attr: str, name: str, *, materialise: bool = False) -> None:
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        self._undo.append((owner, attr, original))
        setattr(owner, attr, self.timed(name, original, materialise=materialise))

    def patch_cached(self, cls, attr: str, name: str) -> None:
        prop = cls.__dict__[attr]
        self._undo.append((prop, "func", prop.func))
        prop.func = self.timed(name, prop.func)

    def undo(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def drain(self) -> tuple[dict[str, float], dict[str, int]]:
        """The timings so far, and start again from zero."""
        out = dict(self.seconds), dict(self.calls)
        self.seconds.clear()
        self.calls.clear()
        return out

    def add(self, seconds: dict[str, float], calls: dict[str, int]) -> None:
        for name, value in seconds.items():
            self.seconds[name] += value
        for name, value in calls.items():
            self.calls[name] += value

    def instrument(self) -> None:
        """Time the `cached_property` members of FileIndex and of every view class."""
        import importlib
        import inspect
        import pkgutil

        import tlint.views
        from tlint.source import FileIndex

        classes: list[type] = [FileIndex]
        for info in pkgutil.iter_modules(tlint.views.__path__):
            module = importlib.import_module(f"tlint.views.{info.name}")
            classes += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
        for cls in classes:
            for attr, member in list(vars(cls).items()):
                if isinstance(member, cached_property):
                    self.patch_cached(cls, attr, f"view: {cls.__name__}.{attr}")

    def table(self, total: float | None = None, top: int | None = None) -> list[str]:
        rows = sorted(self.seconds.items(), key=lambda item: (-item[1], item[0]))
        accounted = sum(self.seconds.values())
        base = total if total else accounted or 1.0
        lines = [f"{seconds:8.3f} s {100 * seconds / base:5.1f}%  {name}  ({self.calls[name]} calls)"
                 for name, seconds in rows[:top]]
        return lines


# The profile of this process while a run is profiled (see `worker_init`).
ACTIVE: Profile | None = None


def activate() -> Profile:
    """Instrument this process (once) and return its profile, counting from zero."""
    global ACTIVE
    if ACTIVE is None:
        ACTIVE = Profile()
        ACTIVE.instrument()
    else:
        ACTIVE.drain()  # a forked worker inherits its parent's counts
    return ACTIVE


def deactivate() -> None:
    global ACTIVE
    if ACTIVE is not None:
        ACTIVE.undo()
        ACTIVE = None


def active_timer():
    """The timing hook of this process's profile (activated if need be)."""
    return (ACTIVE if ACTIVE is not None else activate()).call


def profiled_task(task):
    """`engine.analyse_task` in a profiled worker: (result, seconds, calls) of this file."""
    from tlint.engine import analyse_task

    profile = ACTIVE if ACTIVE is not None else activate()
    result = analyse_task(task)
    seconds, calls = profile.drain()
    return result, seconds, calls
