"""Where `tlint check` spends its time, per rule, per view and per phase (run by hand).

    python bench/profile_rules.py PATH... [--select ALL] [--top N] [--json]

Runs the linter in this process with one job and wraps, for the run only, each rule's
`check` and `check_project`, each shared view (the `view` properties of the file context
and the `cached_property` members of the view classes and of FileIndex), each fact
extractor, the LibCST parse, the index traversal, the position pass and the cross-file
phase. Times are exclusive: a view built on first use inside a rule is charged to the
view, not to the rule. The wrapping itself costs a few percent.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
import time
from collections import defaultdict
from functools import cached_property
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # after PYTHONPATH, so that bench.py can time another checkout


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

        wrapper.__wrapped__ = fn
        return wrapper

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


def instrument(profile: Profile) -> None:
    import libcst

    import tlint.engine as engine
    import tlint.views
    from tlint.rules import ALL_RULES
    from tlint.rules.base import Rule
    from tlint.source import FileIndex
    from tlint.views import facts as facts_view

    profile.patch(libcst, "parse_module", "phase: LibCST parse")
    profile.patch(FileIndex, "__init__", "phase: FileIndex traversal")
    profile.patch(engine, "node_ranges", "phase: positions")
    profile.patch(engine.Linter, "_resolve_projects", "phase: cross-file (project graph, conditions)")
    for name, member in vars(engine.FileContext).items():
        if isinstance(member, engine.view):
            profile._undo.append((member, "build", member.build))
            member.build = profile.timed(f"view: ctx.{name}", member.build)
    classes = [FileIndex]
    for info in pkgutil.iter_modules(tlint.views.__path__):
        module = importlib.import_module(f"tlint.views.{info.name}")
        classes += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    for cls in classes:
        for attr, member in list(vars(cls).items()):
            if isinstance(member, cached_property):
                profile.patch_cached(cls, attr, f"view: {cls.__name__}.{attr}")
    extractors = []
    for kind, extractor in facts_view.EXTRACTORS:
        extractors.append((kind, profile.timed(f"facts: {kind}", extractor, materialise=True)))
    profile._undo.append((facts_view, "EXTRACTORS", facts_view.EXTRACTORS))
    facts_view.EXTRACTORS = tuple(extractors) if isinstance(facts_view.EXTRACTORS, tuple) else extractors
    for rule in ALL_RULES:
        profile.patch(rule, "check", f"rule: {rule.code} {rule.name}") if "check" in vars(rule) else None
        if rule.check_project is not Rule.check_project:
            profile.patch(rule, "check_project", f"rule: {rule.code} {rule.name} (cross-file)", materialise=True)


def run(paths: list[str], select: list[str]) -> tuple[Profile, float, int]:
    from tlint.config import ConfigResolver
    from tlint.engine import Linter

    profile = Profile()
    instrument(profile)
    try:
        linter = Linter(ConfigResolver(), jobs=1, select=select)
        start = time.perf_counter()
        result = linter.run([Path(p) for p in paths])
        total = time.perf_counter() - start
    finally:
        profile.undo()
    return profile, total, len(result.files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--select", default="ALL", help="comma-separated codes (default ALL)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", action="store_true", help="print {name: seconds} as JSON")
    args = parser.parse_args(argv)
    profile, total, files = run(args.paths, args.select.split(","))
    rows = sorted(profile.seconds.items(), key=lambda item: -item[1])
    if args.json:
        json.dump({"total": total, "files": files, "seconds": dict(rows)}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{files} files, {total:.2f} s in all (one job, instrumented)")
    accounted = sum(profile.seconds.values())
    for name, seconds in rows[: args.top]:
        print(f"{seconds:8.3f} s {100 * seconds / total:5.1f}%  {name}  ({profile.calls[name]} calls)")
    print(f"{total - accounted:8.3f} s {100 * (total - accounted) / total:5.1f}%  (elsewhere: reading, "
          "discovery, suppressions, reporting)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
