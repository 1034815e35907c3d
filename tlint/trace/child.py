"""The child process of `tlint trace`: `python -m tlint.trace.child REQUEST REPORT_FD
PARENT_PID LIMIT_MIB` (started by `tlint.verify.child.Child`). It sets its limits, installs
the hooks (`tlint.runtime.hooks`) and then runs the user's script, unmodified, as `__main__`
(`runpy`, with the script's `sys.argv` and `sys.path[0]`, as `python SCRIPT ARGS` or
`python -m MODULE ARGS` would), reporting on the pipe:

- `ready`; `finding` `{finding}` for each new violation, as it is seen;
- `end` `{steps, stopped, findings, observed, counts, lrs, scales}` once the steps asked for
  are done (`stopped`: the run was cut there) or the script ended;
- `error` `{kind, message}` (`no-torch`, `script`: the script raised or exited non-zero,
  `start`: it could not be found or read), after an `end` with what was seen until then.

A launcher (`torchrun`, `accelerate launch`) runs here without the hooks, and each Python
script it starts runs in a child of this module of its own (`tlint.trace.launch`), whose
events are forwarded tagged with their process and rank."""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from tlint.runtime.invariants import Invariants, Violation
from tlint.verify.child import Reporter, start_child


class Run:
    def __init__(self, reporter: Reporter, request: dict[str, Any]) -> None:
        self.reporter, self.request = reporter, request
        self.invariants = Invariants()
        self.tracer: Any = None
        self.finished = False

    def emit_violation(self, violation: Violation) -> None:
        self.reporter.emit({"event": "finding", "finding": violation.to_json()})

    def finish(self, stopped: bool) -> None:
        if self.finished:
            return
        self.finished = True
        inv, tracer = self.invariants, self.tracer
        observed = {kind: [{**site.to_json(), "count": n, "first_step": first, "last_step": last}
                           for site, (n, first, last) in sites.items()]
                    for kind, sites in inv.observed.items()}
        _flush()
        self.reporter.emit({"event": "end", "steps": inv.steps, "stopped": stopped,
                            "findings": [v.to_json() for v in inv.violations], "observed": observed,
                            "counts": dict(tracer.counts) if tracer else {},
                            "lrs": tracer.lrs if tracer else [], "scales": tracer.scales if tracer else []})

    def error(self, kind: str, message: str) -> None:
        self.reporter.emit({"event": "error", "kind": kind, "message": message})


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _exit_now() -> None:
    _flush()
    os._exit(0)


def _user_traceback(exc: BaseException, finder: Any) -> Any:
    """The traceback from the user's first frame on (tlint's and runpy's frames dropped)."""
    tb = exc.__traceback__
    while tb is not None and finder.user_path(tb.tb_frame.f_code.co_filename) is None:
        tb = tb.tb_next
    return tb


def _relative(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _where(exc: BaseException, finder: Any) -> str:
    """`path:line` of the innermost frame of the user's code in the exception's traceback."""
    last = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        path = finder.user_path(frame.f_code.co_filename) if finder else None
        if path is not None:
            last = f"{_relative(path)}:{line}"
    return f" (at {last})" if last else ""


def main(argv: list[str]) -> int:
    request_path, reporter = start_child(argv)
    request = json.loads(request_path.read_text(encoding="utf-8"))
    run = Run(reporter, request)
    reporter.emit({"event": "ready"})
    for stream in (sys.stdout, sys.stderr):  # the user's output reaches the terminal as it is written
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    if request.get("launcher"):  # torchrun, accelerate launch: the processes it starts are traced
        from tlint.trace.launch import run_launcher

        run_launcher(reporter, request, request_path.parent)
        _flush()
        return 0
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        run.error("no-torch", f"tlint trace needs PyTorch in the script's Python, which cannot import it: {exc}")
        return 0
    from tlint.runtime.hooks import Tracer, TraceStop

    run.tracer = Tracer(run.invariants, run.emit_violation, int(request.get("steps", 0)),
                        on_limit=lambda: run.finish(stopped=True), on_stop_ignored=_exit_now)
    target, args, is_module = request["target"], list(request["args"]), bool(request["module"])
    if is_module:
        sys.argv = [target, *args]  # (run_module puts the module's file in sys.argv[0])
        sys.path[0] = os.getcwd()
    else:
        script = Path(target).resolve()
        sys.argv = [target, *args]
        sys.path[0] = str(script.parent)
    run.tracer.install()
    try:
        if is_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(str(script), run_name="__main__")
    except TraceStop:
        run.finish(stopped=True)
        _exit_now()  # the run is cut here: nothing of it is waited for
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            run.finish(stopped=False)
            run.error("script", f"the script exited with {'code ' if isinstance(code, int) else ''}{code}"
                      f"{_where(exc, run.tracer.site)}")
            return 0
    except BaseException as exc:  # noqa: BLE001 - the user's error, told as theirs
        if run.tracer.stopping:  # (TraceStop caught by the user's code and turned into another error)
            run.finish(stopped=True)
            _exit_now()
        traceback.print_exception(type(exc), exc, _user_traceback(exc, run.tracer.site))
        _flush()
        run.finish(stopped=False)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        run.error("script", f"the script raised {type(exc).__name__}{': ' + message[:300] if message else ''}"
                  f"{_where(exc, run.tracer.site)}")
        return 0
    run.finish(stopped=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
