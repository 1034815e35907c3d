"""`tlint doctor`'s progress display on stderr: one line per step (spinner, what it does, a
bar over the probes as the verifier's child reports them, the elapsed time). Drawn only on
a terminal and never with `--format json`; it stands in for the verifier's own progress
bar (one rich live display at a time), so it follows the probes' `start`/`done` events and
the training probes' `progress` events."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from tlint.verify.progress import ProgressBar


class Display(ProgressBar):
    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        super().__init__(stream or sys.stderr, force=enabled)
        self.enabled = enabled
        self.current: Any = None
        self.label = ""

    def _start(self) -> None:
        if self.progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(SpinnerColumn(finished_text="[green]✓"), TextColumn("{task.description}"),
                                     BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                     console=Console(file=self.stream), transient=False)
            self.progress.start()

    def begin(self, label: str, total: int | None = None) -> None:
        """A step starts."""
        if not self.enabled:
            return
        self._start()
        assert self.progress is not None
        self.end("")
        self.label = label
        self.current = self.progress.add_task(label, total=total)

    def end(self, outcome: str) -> None:
        """The running step ends (`outcome`: a few words, e.g. "46 findings")."""
        if not self.enabled or self.progress is None or self.current is None:
            return
        task = next((t for t in self.progress.tasks if t.id == self.current), None)
        total = task.total if task is not None and task.total is not None else 1
        self.progress.update(self.current, completed=total, total=total,
                             description=f"{self.label}: {outcome}" if outcome else self.label)
        self.current = None

    def stage(self, event: dict[str, Any]) -> None:
        if not self.enabled or self.progress is None or self.current is None:
            return
        if event.get("event") == "start":
            self.progress.update(self.current, description=f"{self.label}: {event.get('probe')}")
        elif event.get("event") == "done":
            self.progress.advance(self.current)

    def update(self, event: dict[str, Any]) -> None:
        """A training probe's `progress` event: its step count on the step's line."""
        if not self.enabled or self.progress is None or self.current is None:
            return
        self.progress.update(self.current, description=f"{self.label}: {event['probe']} "
                             f"({event.get('what', '')} {event['done']}/{event['total']})")

    def close(self) -> None:
        """Called by the verifier after each child process: the display goes on."""

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
