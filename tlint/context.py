"""What a rule sees of one file: `FileContext`, the one door to shared analysis.

A rule's `check(self, ctx: FileContext)` may use, and only use:

- `ctx.index` (`tlint.source.FileIndex`): the parsed module, every node by kind, parents,
  scopes, imports and the qualified names of calls — computed once per file;
- the shared **views**, built on first use and cached for the file: `ctx.bindings`
  (`tlint.views.bindings.BindingsView`: what a name or `self.<attr>` is bound to at a
  point, and its value as the program runs by default), `ctx.calls`
  (`tlint.views.calls.CallsView`: what a call runs, who calls a function and with what),
  `ctx.models` (`tlint.views.model.ModelView`: module classes, attention, norms,
  residuals), `ctx.training` (`tlint.views.training.TrainingView`: loops, optimisers,
  schedulers), `ctx.data` (`tlint.views.data.DataView`: tokenizers, ids, label masking),
  `ctx.facts` (the project facts this file contributes). A view that raises is reported
  once as TL003 and the rules that need it are skipped (`ViewError`);
- `ctx.path`, `ctx.text`, `ctx.module`, `ctx.is_test_file`;
- `ctx.view_options` (`ViewOptions`): the settings that change shared analysis
  (`causal-names`, warmup scheduler names), built once from the project's settings;
- `ctx.read_input(path)`: the bytes of another file the analysis depends on (a DeepSpeed
  JSON config), recorded for the cache and the run memo;
- `ctx.report(node, message, fix=..., when=..., evidence=...)`: the one way to report;
  `ctx.listing(items)` bounds a list a message names ("a, b, c and 4 more"), and passed as
  `evidence` it keeps the whole list for the JSON output.

Its own options arrive in the rule as `self.options`. Views register themselves with
`register_view` (the engine does not list them); `tlint/views/__init__.py` imports every
view module, so registering one means writing it and importing it there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import libcst as cst

from tlint.diagnostics import Fix
from tlint.results import ProjectCondition

if TYPE_CHECKING:
    from tlint.config import Settings
    from tlint.fixes import PendingFix
    from tlint.rules.base import Finding, Listing, Rule
    from tlint.source import FileIndex
    from tlint.views.bindings import BindingsView
    from tlint.views.calls import CallsView
    from tlint.views.data import DataView
    from tlint.views.model import ModelView
    from tlint.views.training import TrainingView

T = TypeVar("T")


class ViewError(Exception):
    """A shared view (or another view it needs) raised while being built: the rules that
    ask for it are skipped, and the failure is reported once per file as TL003."""

    def __init__(self, view: str, error: BaseException) -> None:
        super().__init__(f"view `{view}` failed: {type(error).__name__}: {error}")
        self.view = view
        self.error = error


class view:
    """Like `functools.cached_property`, for a FileContext view: built on first use, once
    per file; when building raises, every later use raises `ViewError` without retrying."""

    def __init__(self, build: Callable[[FileContext], Any], name: str | None = None) -> None:
        self.build = build
        self.name = name or build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, ctx: FileContext | None, owner: type | None = None) -> Any:
        if ctx is None:
            return self
        failed = ctx.failed_views.get(self.name)
        if failed is not None:
            raise ViewError(self.name, failed)
        timer = ctx.timer
        try:
            value = self.build(ctx) if timer is None else timer(f"view: ctx.{self.name}", self.build, ctx)
        except ViewError:
            raise
        except RecursionError:
            raise
        except Exception as exc:
            ctx.failed_views[self.name] = exc
            raise ViewError(self.name, exc) from exc
        ctx.__dict__[self.name] = value  # later lookups find the instance attribute
        return value


_VIEWS: dict[str, view] = {}


def register_view(name: str) -> Callable[[Callable[[FileContext], T]], Callable[[FileContext], T]]:
    """Make `build(ctx)` the view `ctx.<name>` (built once per file, failures isolated)."""

    def register(build: Callable[[FileContext], T]) -> Callable[[FileContext], T]:
        if name in _VIEWS or name in vars(FileContext):
            raise ValueError(f"a view or attribute `{name}` exists already")
        descriptor = view(build, name)
        _VIEWS[name] = descriptor
        setattr(FileContext, name, descriptor)
        return build

    return register


def registered_views() -> dict[str, view]:
    """Every registered view by name (the views package imported first)."""
    import tlint.views  # noqa: F401 - registers them

    return dict(_VIEWS)


@dataclass(frozen=True)
class ViewOptions:
    """The settings that change shared analysis, not one rule's findings: they flow down
    to the views as values, once per project (`Settings.view_options()`)."""

    causal_names: tuple[str, ...] = ()  # `causal-names`: words that mark a causal model
    warmup_schedulers: tuple[str, ...] = ()  # missing-warmup's `warmup-schedulers`


# A timing hook (`tlint --profile`): `timer(name, fn, *args)` calls `fn(*args)` and
# charges its time to `name`; None when the run is not profiled.
Timer = Callable[..., Any]


class FileContext:
    """What a rule sees of one file: its index, its views, its options, and `report`."""

    if TYPE_CHECKING:  # the registered views (see `register_view`)
        bindings: BindingsView
        calls: CallsView
        data: DataView
        models: ModelView
        training: TrainingView
        facts: list[tuple[str, cst.CSTNode, Any]]

    def __init__(self, path: Path, text: str, index: FileIndex, settings: Settings, *,
                 timer: Timer | None = None) -> None:
        self.path = path
        self.text = text
        self.index = index
        self.module: cst.Module = index.module
        self.settings = settings
        self.view_options: ViewOptions = settings.view_options()
        self.timer = timer
        self._rule: Rule | None = None
        self.reports: list[tuple[Rule, Finding]] = []
        self.failed_views: dict[str, BaseException] = {}
        self.failed_extractors: dict[str, BaseException] = {}
        # other files the analysis read, with the digest of the bytes used (None: absent)
        self.inputs: dict[Path, str | None] = {}

    def release(self) -> None:
        """Forget the views and the index (the engine calls this when the file is done).
        Views refer back to the context, so without it the file's whole tree would live on
        in a reference cycle until the cycle collector finds it; views refer to each other
        too, so theirs are emptied as well."""
        for name, value in self.__dict__.items():
            if name in _VIEWS and hasattr(value, "__dict__"):
                value.__dict__.clear()
        self.__dict__.clear()

    def __getattr__(self, name: str) -> Any:
        # only reached for a missing attribute: a view whose module is not imported yet
        if not name.startswith("_") and name not in _VIEWS:
            import tlint.views  # noqa: F401 - registers every view

            if name in _VIEWS:
                return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} has no attribute or view {name!r}")

    def report(self, node: cst.CSTNode, message: str, *, fix: Fix | PendingFix | None = None,
               when: ProjectCondition | None = None, evidence: Listing | None = None) -> None:
        """Report a finding at `node`. With `when`, it is kept only if the project facts
        of related files satisfy the condition (decided after all files are read). With
        `evidence` (`ctx.listing(items)`, named boundedly in the message), the finding
        carries the whole list (`--format json`: `evidence`)."""
        from tlint.rules.base import Finding

        assert self._rule is not None, "report() called outside a rule's check()"
        self.reports.append((self._rule, Finding(node, message, fix, when, evidence.items if evidence else ())))

    @staticmethod
    def listing(items: Iterable[str], *, limit: int = 3, sep: str = ", ", width: int = 100) -> Listing:
        """A list of evidence for a message, bounded: its text names the first items (at
        most `limit`, in at most `width` characters) and ends with "and N more"; pass it
        to `report(..., evidence=)` too, so the JSON keeps the whole list
        (`tlint.rules.base.listing`)."""
        from tlint.rules.base import listing

        return listing(items, limit=limit, sep=sep, width=width)

    def read_input(self, path: Path) -> bytes | None:
        """The bytes of another file the analysis depends on (a regular file under 2 MB;
        None when it is absent, not regular or larger), recorded so that a cached result
        of this file holds only while that file is unchanged."""
        from tlint.cache import input_digest, note_input, read_input

        data = read_input(path)
        self.inputs[path] = input_digest(path, data)
        note_input(path)
        return data

    @cached_property
    def is_test_file(self) -> bool:
        """`test_*.py`, `*_test.py`, `conftest.py`, or a file under a `tests`/`test` folder:
        code that exercises training code rather than training (rules may skip it)."""
        name = self.path.name
        parts = {p.lower() for p in self.path.parts[:-1]}
        return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
                or bool(parts & {"tests", "test", "testing"}))
