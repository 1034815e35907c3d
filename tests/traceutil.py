"""Running a script in the test's process under tlint's run-time hooks (tlint/runtime/hooks.py),
as `tlint trace`'s child does, for the trace tests. Import it after `tests.torchutil.import_torch()`."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

from tlint.runtime.hooks import Tracer, TraceStop
from tlint.runtime.invariants import Invariants, Violation


def run_traced(script: Path, *, steps: int = 0,
               prepare: Callable[[Tracer], None] | None = None) -> tuple[list[Violation], Tracer]:
    """Run the script as `__main__` with the hooks installed (stopped after `steps` optimizer
    steps, 0: none); its violations and the tracer. `prepare` sees the tracer before install."""
    found: list[Violation] = []
    tracer = Tracer(Invariants(), found.append, steps)
    if prepare is not None:
        prepare(tracer)
    tracer.install()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except TraceStop:
        pass
    finally:
        tracer.uninstall()
    return found, tracer
