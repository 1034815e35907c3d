"""The ImportError `tlint.watch` raises for a dependency that is not installed: it names the
dependency and the command that installs it (tlint's `watch` extra)."""

from __future__ import annotations

from tlint.cli import DISTRIBUTION

WATCH_EXTRA = f"pip install '{DISTRIBUTION}[watch]'"


def absent(exc: ImportError, *packages: str) -> bool:
    """`exc` says that one of `packages` is not installed (a broken install says otherwise)."""
    name = exc.name if isinstance(exc, ModuleNotFoundError) else None
    return name is not None and name.split(".")[0] in packages


def needs(what: str, package: str, install: str) -> ImportError:
    """The ImportError that says `what` needs `package` and how to install it."""
    return ImportError(f"{what} needs {package}, which is not installed: {install}", name=package)
