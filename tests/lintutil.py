"""Shared helpers for tests: write a small project to a folder and lint it in-process."""

from __future__ import annotations

from pathlib import Path

from tlint.config import ConfigResolver
from tlint.engine import Linter


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def lint_paths(paths, select=None, jobs=1, config=None, **kwargs):
    resolver = ConfigResolver(forced=config)
    return Linter(resolver, jobs=jobs, select=select, **kwargs).run([Path(p) for p in paths])


def lint_tree(root: Path, files: dict[str, str], select=None, jobs=1):
    """Lint `files` written under `root`; returns the unsuppressed diagnostics."""
    write_tree(root, files)
    result = lint_paths([root], select=select, jobs=jobs)
    return [d for d in result.diagnostics if not d.suppressed]


def found(diagnostics, root: Path | None = None) -> set[tuple[str, int, str]]:
    """{(file name relative to root, line, code)}."""
    out = set()
    for d in diagnostics:
        path = Path(d.path)
        if root is not None:
            try:
                path = path.resolve().relative_to(root.resolve())
            except ValueError:
                pass
        out.add((path.as_posix(), d.range.start.line, d.code))
    return out
