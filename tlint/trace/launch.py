"""`tlint trace -- torchrun ...` / `-- accelerate launch ...` (README "Tracing a training run",
"Launchers"): the child of `tlint trace` runs the launcher itself, in its own process, with
no hooks (the launcher trains nothing), and every process the launcher starts to run a Python
script or module runs it as a child of `tlint trace` instead (`python [OPTIONS] -m
tlint.trace.child ...`, the same runner as a plain `tlint trace`: its limits, the hooks
installed before the user's code, the script as `__main__` with its own `sys.argv`), with its
own report pipe, passed by descriptor (close-on-exec there, so the processes the script starts
do not get it) and read here.

What each launched process reports is forwarded on this process's own report pipe, each event
tagged with `proc` (the order in which the launcher started it) and `rank` (its `RANK`, else
`proc`); the parent checks every event as it checks a plain run's and merges the ranks'
findings (`tlint.trace.command.merge`). A line of a launched process's report that is not an
event is forwarded as `bad`, and the parent drops the whole report. No torch here.

Only `subprocess.Popen` is followed (torchrun's workers, accelerate's single process; psutil's
Popen is built on it): a launcher that starts its workers otherwise (multiprocessing's spawn)
is not traced, which the `end` event tells (`launched` 0)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tlint.verify.child import EXIT_GRACE_S, POLL_S, Reporter, ReportError, ReportLines

CHILD_MODULE = "tlint.trace.child"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_FLAGS = {"-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-q", "-b", "-bb", "-d", "-v"}  # no value
_VALUED = {"-W", "-X"}                                                                        # one value


def is_python(word: str) -> bool:
    return bool(_PYTHON.match(Path(word).name)) or os.path.realpath(word) == os.path.realpath(sys.executable)


def script_command(args: Any, cwd: str | None) -> tuple[list[str], str, list[str], bool] | None:
    """`[python, OPTIONS..., SCRIPT | -m MODULE, ARGS...]` as (python and its options, target,
    args, module); None for any other command (`-c`, a shell string, a program)."""
    if not isinstance(args, (list, tuple)) or not args or not all(isinstance(a, (str, os.PathLike)) for a in args):
        return None
    words = [os.fspath(a) for a in args]
    if not is_python(words[0]):
        return None
    i = 1
    while i < len(words) and words[i] in _FLAGS | _VALUED:
        i += 2 if words[i] in _VALUED else 1
    if i >= len(words):
        return None
    if words[i] == "-m":
        if i + 1 >= len(words) or not words[i + 1] or words[i + 1].startswith("-"):
            return None
        return words[:i], words[i + 1], words[i + 2:], True
    if words[i].startswith("-"):
        return None
    script = Path(cwd or os.getcwd()) / words[i]
    if not script.is_file():
        return None
    return words[:i], str(script), words[i + 1:], False


class _Launched:
    def __init__(self, proc: int, rank: int, fd: int) -> None:
        self.proc, self.rank, self.fd = proc, rank, fd
        self.lines = ReportLines()
        self.bad = False


class Host:
    """Follows what the launcher starts: rewrites each Python script or module it starts into a
    traced one, and forwards their reports."""

    def __init__(self, reporter: Reporter, folder: Path, steps: int) -> None:
        self.reporter, self.folder, self.steps = reporter, folder, steps
        self.launched: list[_Launched] = []
        self._open: dict[int, _Launched] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._forward, name="tlint-trace-ranks", daemon=True)
        self._original: Any = None

    # -- the launcher's Popen --

    def install(self) -> None:
        original = self._original = subprocess.Popen.__init__
        host = self

        def __init__(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
            traced = host._rewrite(args, rest, kwargs)
            if traced is None:
                original(self, args, *rest, **kwargs)
                return
            args, launched, write = traced
            try:
                original(self, args, *rest, **kwargs)
            except BaseException:
                host._forget(launched)
                raise
            finally:
                os.close(write)

        subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]
        self._thread.start()

    def uninstall(self) -> None:
        if self._original is not None:
            subprocess.Popen.__init__ = self._original  # type: ignore[method-assign]
            self._original = None

    def _rewrite(self, args: Any, rest: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> tuple[list[str], _Launched, int] | None:
        if rest or kwargs.get("shell") or kwargs.get("executable"):
            return None  # (positional options, a shell, another program: not a launched script)
        command = script_command(args, kwargs.get("cwd"))
        if command is None:
            return None
        python, target, script_args, module = command
        env = kwargs.get("env")
        env = os.environ if env is None else env
        with self._lock:
            proc = len(self.launched)
            rank = _int(env.get("RANK"), proc)
            read, write = os.pipe()
            launched = _Launched(proc, rank, read)
            self.launched.append(launched)
            self._open[read] = launched
        request = self.folder / f"rank-{proc}.json"
        request.write_text(json.dumps({"target": target, "args": script_args, "module": module, "steps": self.steps,
                                       "rank": rank}), encoding="utf-8")
        kwargs["pass_fds"] = (*tuple(kwargs.get("pass_fds", ())), write)
        return [*python, "-m", CHILD_MODULE, str(request), str(write), str(os.getpid()), "0"], launched, write

    def _forget(self, launched: _Launched) -> None:
        with self._lock:
            if self._open.pop(launched.fd, None) is not None:
                os.close(launched.fd)
            if launched in self.launched:
                self.launched.remove(launched)

    # -- their reports --

    def _forward(self) -> None:
        grace: float | None = None
        while True:
            with self._lock:
                fds = list(self._open)
            if self._done.is_set():
                grace = grace or time.monotonic() + EXIT_GRACE_S
                if not fds or time.monotonic() >= grace:  # (a process of a rank's that kept its pipe open)
                    return
            if not fds:
                time.sleep(POLL_S)
                continue
            try:
                ready, _, _ = select.select(fds, [], [], POLL_S)
            except (InterruptedError, OSError, ValueError):
                continue
            for fd in ready:
                self._read(self._open[fd])

    def _read(self, launched: _Launched) -> None:
        try:
            data = os.read(launched.fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            with self._lock:
                self._open.pop(launched.fd, None)
            os.close(launched.fd)
            return
        tag = {"proc": launched.proc, "rank": launched.rank}
        try:
            events = launched.lines.feed(data)
        except ReportError as exc:
            if not launched.bad:
                launched.bad = True
                self.reporter.emit({"event": "bad", **tag, "problem": str(exc)})
            return
        if launched.bad:
            return
        for event in events:
            self.reporter.emit({**event, **tag})

    def finish(self) -> None:
        """Waits for the launched processes' reports to end (EXIT_GRACE_S at most)."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()


def _int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if 0 <= number < 1 << 16 else default


def run_launcher(reporter: Reporter, request: dict[str, Any], folder: Path) -> None:
    """Runs the launcher (a module, as `__main__`, with `sys.argv` as its command would set it)
    with `Host` following it; ends with `end` (`launched`: how many processes it started,
    `exit`: the launcher's own exit status) or, when the launcher failed, `error` after it."""
    import runpy

    host = Host(reporter, folder, int(request.get("steps", 0)))
    sys.argv = [str(request.get("program") or request["target"]), *request["args"]]
    sys.path[0] = os.getcwd()
    code: Any = 0
    host.install()
    try:
        runpy.run_module(request["target"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # noqa: BLE001 - the launcher's own failure (its arguments, its start)
        code = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    finally:
        host.uninstall()
        host.finish()
    status = 0 if code in (None, 0) else code
    reporter.emit({"event": "end", "steps": 0, "stopped": False, "findings": [], "launched": len(host.launched),
                   "launcher_exit": status if isinstance(status, int) else 1})
    if status != 0:
        what = f"code {status}" if isinstance(status, int) else str(status)[:300]
        reporter.emit({"event": "error", "kind": "launcher", "message": f"the launcher exited with {what}"})
    elif not host.launched:
        reporter.emit({"event": "error", "kind": "launcher",
                       "message": "the launcher started no Python script or module: nothing was traced"})
