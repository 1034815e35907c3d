"""A progress bar on stderr for the long probes (the training runs), drawn by the parent
from the child's `progress` events. Shown only on a terminal, and only once a probe has run
for more than a moment; it never reaches stdout (so JSON output stays clean)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress

MOMENT_S = 1.0


class ProgressBar:
    def __init__(self, stream: TextIO | None = None, force: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.enabled = force or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self.progress: Progress | None = None
        self.tasks: dict[str, Any] = {}
        self.first_seen: dict[str, float] = {}

    def update(self, event: dict[str, Any]) -> None:
        """A `{"event": "progress", "probe", "done", "total", "what"}` event."""
        if not self.enabled:
            return
        probe = event["probe"]
        now = time.monotonic()
        self.first_seen.setdefault(probe, now)
        if now - self.first_seen[probe] < MOMENT_S and event["done"] < event["total"] and probe not in self.tasks:
            return
        if self.progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=Console(file=self.stream), transient=True)
            self.progress.start()
        description = f"{probe} ({event.get('what', '')})"
        if probe not in self.tasks:
            self.tasks[probe] = self.progress.add_task(description, total=event["total"])
        self.progress.update(self.tasks[probe], completed=event["done"], total=event["total"],
                             description=description)

    def stage(self, event: dict[str, Any]) -> None:
        """Any other event of the child (`loaded`, `start`, `done`, `end`): nothing here;
        `tlint doctor`'s display (tlint/doctor/progress.py) follows the probes with it."""

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
