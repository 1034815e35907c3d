"""The child processes of `tlint verify`, `tlint scan-data` and `tlint trace`: start one (`python -m
tlint.verify.worker` for the probes, `python -m tlint.verify.data` for the data scan), follow
what it reports, stop it at its limits, and leave nothing of it running (README "tlint
verify", "Limits and hostile code"). No torch here.

Parent side (`Child`): the child runs in its own session and process group, with a fresh empty
working folder (removed after), the environment of this process minus `TLINT_*` (plus
`PYTHONDONTWRITEBYTECODE=1` and tlint first on `PYTHONPATH`), stdin from /dev/null. It
reports through an inherited pipe (JSON lines), not through a file: user code cannot reach
the channel by a path, and what comes through it is validated here before it is used. Its
stdout and stderr come through a second pipe, of which the last `OUTPUT_TAIL_BYTES` are kept
(the rest counted, or streamed to stderr with --verbose). When the child ends, for any
reason, its process group is killed, and on Linux every process it started that is still
there: this process is a child subreaper for the run (orphans are re-parented to it, so a
grandchild that left the group with setsid() is found too) and the process table
(/proc) is swept until nothing of the run is left. SIGTERM and SIGHUP to this process are
turned into the same clean-up, then re-raised.

Child side (`start_child`, `Reporter`): before any user code, the child caps its own data
segment (RLIMIT_DATA, soft and hard, so user code cannot raise it), asks to be killed when
its parent dies, and keeps the report pipe out of the processes it starts (close-on-exec).

The callers (`command.run_worker`, `data.scan`) decide what a result means and word the
errors; `run_probes` and `run_scan` collect and check what a child said."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlint.verify.progress import ProgressBar

if TYPE_CHECKING:
    from tlint.verify.data import DataOptions
    from tlint.verify.options import VerifyOptions

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
WORKER_MODULE = "tlint.verify.worker"
SCAN_MODULE = "tlint.verify.data"
POLL_S = 0.05
EXIT_GRACE_S = 5.0
OUTPUT_TAIL_BYTES = 64 * 1024            # of the child's stdout and stderr, the end kept for errors
REPORT_LIMIT_BYTES = 256 * 2**20         # a report larger than this is not one tlint's child writes
HEADROOM_MIB = 1024                      # the child's limit above `memory-limit`: Python, torch, activations
_SWEEP_ROUNDS = 100


class ReportError(Exception):
    """The child's report is not what tlint's child writes (user code wrote to the channel)."""


def child_env() -> dict[str, str]:
    """The child's environment: this process's minus `TLINT_*`, bytecode writing off, tlint
    importable first."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TLINT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return env


def machine_memory_mib() -> float:
    """MiB of memory of this machine; 8 GiB when unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):
        return 8192.0


def process_limit_mib(memory_limit: float | None, device: str = "cpu") -> int:
    """The child's data-segment limit: `memory-limit` (default half of the machine's memory)
    plus HEADROOM_MIB; 0 (none) for a CUDA device, whose driver maps memory of its own."""
    if not device.startswith("cpu"):
        return 0
    return math.ceil((memory_limit or machine_memory_mib() / 2) + HEADROOM_MIB)


# --- parent side: one child process ------------------------------------------------------------

class Child:
    """One child process, `python -m MODULE REQUEST REPORT_FD PARENT_PID LIMIT_MIB`, used as a
    context manager: on exit it is killed with everything it started, and its folder removed.
    `cwd`: its working folder instead of the fresh empty one (`tlint trace` runs the user's
    script where the user stands)."""

    def __init__(self, module: str, request: str, *, prefix: str, limit_mib: int = 0, verbose: bool = False,
                 cwd: Path | None = None) -> None:
        self.module, self.request, self.prefix = module, request, prefix
        self.limit_mib, self.verbose = limit_mib, verbose
        self.cwd = cwd  # the child's working folder; default a fresh empty one (tlint trace: the user's)
        self.proc: subprocess.Popen | None = None
        self.tail = bytearray()      # the end of the child's output
        self.output_bytes = 0        # all of it
        self._lines = ReportLines()
        self._report_fd = self._output_fd = -1
        self._open: set[int] = set()  # the pipes not at their end yet
        self._stack = contextlib.ExitStack()
        self._signalled: int | None = None

    # -- start and stop --

    def __enter__(self) -> Child:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix=self.prefix,
                                                                         ignore_cleanup_errors=True)))
        work = tmp / "work"
        work.mkdir()
        request = tmp / "request.json"
        request.write_text(self.request, encoding="utf-8")
        self._stack.callback(self._restore_signals, self._catch_signals())
        self._stack.callback(_set_subreaper, _set_subreaper(True))
        report_r, report_w = os.pipe()
        self._report_fd = report_r
        self._stack.callback(os.close, report_r)
        self.before = _children(os.getpid())
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, str(request), str(report_w), str(os.getpid()),
                 str(self.limit_mib)],
                cwd=self.cwd or work, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, pass_fds=(report_w,), start_new_session=os.name == "posix")
        finally:
            os.close(report_w)
        assert self.proc.stdout is not None
        self._output_fd = self.proc.stdout.fileno()
        self._stack.callback(self.proc.stdout.close)
        self._stack.callback(self._clean_up)  # (first: the pipes are still open)
        self.started = _start_time(self.proc.pid)
        for fd in (self._report_fd, self._output_fd):
            os.set_blocking(fd, False)
        self._open = {self._report_fd, self._output_fd}

    def __exit__(self, *exc_info) -> None:
        self._stack.close()
        if self._signalled is not None:  # SIGTERM/SIGHUP: cleaned up; now end as the signal says
            signal.signal(self._signalled, signal.SIG_DFL)
            os.kill(os.getpid(), self._signalled)

    def _catch_signals(self) -> dict[int, Any]:
        """SIGTERM and SIGHUP raise KeyboardInterrupt here (as SIGINT does) so that the clean-up
        runs; the signal is re-raised after it."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}

        def handler(signum, frame):
            self._signalled = signum
            raise KeyboardInterrupt

        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, handler)
        return previous

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _clean_up(self) -> None:
        """Kill the child's group and every process of the run that is left; reap the child."""
        blocked = {signal.SIGINT, signal.SIGTERM} if hasattr(signal, "pthread_sigmask") else set()
        if blocked and threading.current_thread() is threading.main_thread():
            signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            assert self.proc is not None
            self._drain_quietly()
            kill_tree(self.proc.pid, self.before, self.started)
            self.proc.wait()
            self._drain_quietly()
        finally:
            if blocked and threading.current_thread() is threading.main_thread():
                signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)

    def _drain_quietly(self) -> None:
        """`drain` for the clean-up: what the report says then is not used (a report that is
        not valid was, or is now, the run's error)."""
        try:
            self.drain()
        except ReportError:
            pass

    def kill(self) -> None:
        """Stop the child now (its group; the rest of the run at the exit)."""
        assert self.proc is not None
        _killpg(self.proc.pid)

    # -- state --

    @property
    def exited(self) -> bool:
        """Whether the child has ended (without reaping it: its group id stays its own)."""
        assert self.proc is not None
        if self.proc.returncode is not None:
            return True
        if not hasattr(os, "waitid"):  # (macOS: reaping it frees its group id; rare to be taken again)
            return self.proc.poll() is not None
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None and info.si_pid != 0

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the child to end, reading its output; True when it did."""
        end = time.monotonic() + timeout
        while not self.exited:
            if time.monotonic() >= end:
                return False
            self.read(POLL_S)
        return True

    @property
    def how(self) -> str:
        assert self.proc is not None
        code = self.proc.returncode
        if code is None:
            return "is still running"
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"

    @property
    def last_words(self) -> str:
        """The last lines of its output (after the clean-up: all of it that was kept)."""
        text = self.tail.decode("utf-8", errors="replace")
        lines = text.strip().splitlines()[-6:]
        dropped = self.output_bytes - len(self.tail)
        if dropped > 0 and lines:
            lines.insert(0, f"[{dropped:,} earlier bytes of output not kept]")
        return "\n".join(lines)

    # -- reading --

    def read(self, wait: float) -> list[dict[str, Any]]:
        """The events the child reported (JSON objects with a string `event`), waiting up to
        `wait` s for something to read. ReportError when the report is not JSON lines."""
        if not self._open:  # (both pipes closed by the child: nothing to wait for but its end)
            time.sleep(wait)
            return []
        try:
            ready, _, _ = select.select(list(self._open), [], [], wait)
        except InterruptedError:
            ready = []
        if self._output_fd in ready:
            self._read_output()
        if self._report_fd in ready:
            return self._read_report()
        return []

    def drain(self) -> list[dict[str, Any]]:
        """Whatever is in the pipes now (no waiting for more)."""
        events: list[dict[str, Any]] = []
        end = time.monotonic() + 1.0  # (a grandchild may keep writing: not forever)
        while self._open and time.monotonic() < end:
            ready, _, _ = select.select(list(self._open), [], [], 0)
            if not ready:
                break
            if self._output_fd in ready:
                self._read_output()
            if self._report_fd in ready:
                events += self._read_report()
        return events

    def _read_output(self) -> int:
        try:
            data = os.read(self._output_fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return 0
        if not data:
            self._open.discard(self._output_fd)
        else:
            self.output_bytes += len(data)
            if self.verbose:
                sys.stderr.write(data.decode("utf-8", errors="replace"))
            self.tail += data
            if len(self.tail) > OUTPUT_TAIL_BYTES:
                del self.tail[: len(self.tail) - OUTPUT_TAIL_BYTES]
        return len(data)

    def _read_report(self) -> list[dict[str, Any]]:
        try:
            data = os.read(self._report_fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        if not data:
            self._open.discard(self._report_fd)
        return self._lines.feed(data)

    @property
    def report_overflow(self) -> bool:
        """More than REPORT_LIMIT_BYTES came: the rest is read and dropped."""
        return self._lines.overflow


class ReportLines:
    """A report's bytes, as they come, into events (JSON objects with a string `event`, one a
    line); ReportError for anything else, or past `limit` bytes (then the rest is dropped)."""

    def __init__(self, limit: int = REPORT_LIMIT_BYTES) -> None:
        self.limit = limit
        self.bytes = 0
        self.overflow = False
        self._partial = bytearray()  # an incomplete line

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        if self.overflow:  # already an error: read (so the writer is never blocked on it) and drop
            return []
        self.bytes += len(data)
        if self.bytes > self.limit:
            self.overflow = True
            self._partial = bytearray()
            raise ReportError(f"more than {self.limit // 2**20} MiB")
        newline = data.rfind(b"\n")  # only the new bytes are searched: a long line costs linear time
        self._partial += data
        if newline < 0:
            return []
        end = len(self._partial) - len(data) + newline + 1
        lines, self._partial[:end] = bytes(self._partial[:end]), b""
        events = []
        for line in lines.splitlines():
            try:
                event = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                raise ReportError(f"a line that is not JSON: {_clip(line)}") from None
            if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                raise ReportError(f"a line that is not an event: {_clip(line)}")
            events.append(event)
        return events


def _clip(line: bytes) -> str:
    text = line.decode("utf-8", errors="replace")
    return repr(text if len(text) <= 80 else text[:77] + "...")


# --- parent side: the process table -------------------------------------------------------------

def _killpg(pgid: int) -> None:
    if os.name != "posix":
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (Linux): orphans of the run are re-parented to it.
    Returns the previous setting (False where there is none)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        previous = ctypes.c_int(0)
        libc.prctl(37, ctypes.byref(previous), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
        libc.prctl(36, int(on), 0, 0, 0)                 # PR_SET_CHILD_SUBREAPER
        return bool(previous.value)
    except (OSError, AttributeError):
        return False


@dataclass
class _Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    start: int


def process_table() -> dict[int, _Proc]:
    """Every process /proc shows (empty where there is no /proc)."""
    table: dict[int, _Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            proc = _stat(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            text = stream.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # (the name may hold spaces and parentheses)
    try:
        return _Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    except (IndexError, ValueError):
        return None


def _start_time(pid: int) -> int:
    proc = _stat(pid)
    return proc.start if proc is not None else 0


def _children(pid: int) -> set[int]:
    return {p.pid for p in process_table().values() if p.ppid == pid}


def descendants(table: dict[int, _Proc], roots: set[int]) -> set[int]:
    """`roots` and every process below them."""
    below: dict[int, list[int]] = {}
    for proc in table.values():
        below.setdefault(proc.ppid, []).append(proc.pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(below.get(pid, ()))
    return out


def kill_tree(pid: int, before: set[int], started: int) -> None:
    """Kill the child `pid` (not reaped: the caller waits for it), its process group and,
    where /proc exists, every process below it and every orphan re-parented to this process
    since it started (a child of this process that was not there before `pid` started, and
    started after it); repeat until none is left, reaping the orphans."""
    _killpg(pid)
    me = os.getpid()
    for _ in range(_SWEEP_ROUNDS):
        table = process_table()
        if not table:
            return
        orphans = {p.pid for p in table.values() if p.ppid == me and p.pid != pid and p.pid not in before
                   and p.start >= started}
        group = {p.pid for p in table.values() if p.pgid == pid}
        victims = descendants(table, {pid, *orphans, *group}) - {me}
        alive = {v for v in victims if table[v].state not in ("Z", "X") and v != pid}
        for victim in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(victim, signal.SIGKILL)
        for orphan in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(orphan, os.WNOHANG)
        if not alive and not orphans:
            return
        time.sleep(0.01)


# --- child side --------------------------------------------------------------------------------

class Reporter:
    """The child's end of the report pipe: one JSON line per event."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def emit(self, event: dict[str, Any]) -> None:
        data = (json.dumps(event) + "\n").encode("utf-8")
        while data:
            written = os.write(self.fd, data)
            data = data[written:]


def start_child(argv: list[str]) -> tuple[Path, Reporter]:
    """`REQUEST REPORT_FD PARENT_PID LIMIT_MIB`: set the limits, before any user code runs;
    returns the request's path and the reporter."""
    request, fd, parent, limit_mib = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    os.set_inheritable(fd, False)  # not passed on to the processes user code starts
    if limit_mib > 0:
        import resource

        limit = limit_mib * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that
        os._exit(3)
    sys.dont_write_bytecode = True
    return request, Reporter(fd)


# --- the probes (tlint verify) -------------------------------------------------------------------

@dataclass
class ChildRun:
    """What one child process running the probes reported, and how it ended."""

    loaded: dict[str, Any] | None = None     # the "loaded" event: model info and classes
    done: list[dict[str, Any]] = field(default_factory=list)
    running: str | None = None               # the probe started and not finished
    template: dict[str, Any] | None = None   # its skip entry (tolerance, unit)
    ended: bool = False
    error: tuple[str, str] | None = None
    stopped: str | None = None               # "timeout" | "probe-timeout" when this process killed the child
    how: str = ""                            # how the child ended, when it crashed
    last_words: str = ""
    elapsed: float = 0.0                     # seconds since the last event


def report_error(what: str, problem: str) -> tuple[str, str]:
    return "report", (f"the process running {what} sent a report tlint's child does not write ({problem}), so "
                      "nothing it reported is used: user code wrote to tlint's report channel, or printed "
                      "to it by accident. Run with --verbose to see the process's output")


def run_probes(options: VerifyOptions, deadline: float, verbose: bool, bar: ProgressBar | None = None) -> ChildRun:
    """Run `options.probes` in one child process until it ends, crashes or runs past
    `deadline` / `probe-timeout` since its last event (`bar`: the display that follows it,
    default a ProgressBar on stderr)."""
    run = ChildRun()
    limit = process_limit_mib(options.memory_limit, options.device)
    with Child(WORKER_MODULE, options.to_json(), prefix="tlint-verify-", limit_mib=limit, verbose=verbose) as proc:
        bar = bar or ProgressBar()
        try:
            watch(proc, run, options, deadline, bar)
        except ReportError as exc:
            run.error = report_error("the model", str(exc))
        finally:
            bar.close()
    run.last_words, run.how = proc.last_words, proc.how
    return run


def watch(proc: Child, run: ChildRun, options: VerifyOptions, deadline: float, bar: ProgressBar | None = None) -> None:
    """Follow the child's events until it ends, crashes or runs past a limit (then kill it)."""
    last_event, ready = time.monotonic(), False
    bar = bar or ProgressBar()
    while True:
        exited = proc.exited
        events = proc.drain() if exited else proc.read(POLL_S)
        for event in events:
            if event["event"] == "progress":  # a long probe's steps: a bar, not a new stage
                check_progress(event, options)
                bar.update(event)
                continue
            apply(event, run, options)
            bar.stage(event)
            last_event, ready = time.monotonic(), True
            if run.ended or run.error is not None:
                break
        now = time.monotonic()
        run.elapsed = now - last_event
        if run.ended or run.error is not None:
            if not proc.wait(EXIT_GRACE_S):  # e.g. a user thread that keeps the child alive
                proc.kill()
            return
        if exited:
            return
        if now >= deadline:
            run.stopped = "timeout"
        elif ready and now - last_event >= options.probe_timeout:  # torch's own import is not the user's
            run.stopped = "probe-timeout"
        if run.stopped:
            proc.kill()
            return


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise ReportError(what)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_progress(event: dict[str, Any], options: VerifyOptions) -> None:
    _expect(event.get("probe") in options.probes and isinstance(event.get("done"), int)
            and isinstance(event.get("total"), int) and isinstance(event.get("what", ""), str),
            "a progress event without its probe, step and total")


_STATUSES = ("pass", "fail", "skip")


def apply(event: dict[str, Any], run: ChildRun, options: VerifyOptions) -> None:
    """Take one event of the child's report, checked against what the child may say next."""
    kind = event["event"]
    if kind == "ready":
        return
    if kind == "loaded":
        model, classes = event.get("model"), event.get("classes")
        _expect(run.loaded is None and isinstance(model, dict) and isinstance(model.get("factory"), str)
                and isinstance(model.get("class"), str) and _number(model.get("parameters"))
                and isinstance(model.get("call"), str) and isinstance(classes, list)
                and all(_class_entry(c) for c in classes), "a `loaded` event out of place or malformed")
        run.loaded = {"model": model, "classes": classes}
    elif kind == "start":
        name = event.get("probe")
        _expect(run.loaded is not None and run.running is None and name in options.probes
                and name not in {e["probe"] for e in run.done} and _entry(event.get("template"), name),
                f"a `start` event out of place or malformed (probe {name!r})")
        run.running, run.template = name, event["template"]
    elif kind == "done":
        entry = event.get("entry")
        _expect(run.running is not None and event.get("probe") == run.running and _entry(entry, run.running),
                f"a `done` event out of place or malformed (probe {event.get('probe')!r})")
        assert isinstance(entry, dict)
        _expect(isinstance(entry.get("extra", {}), dict) and _number(entry.get("seconds", 0)),
                f"a `done` event with a malformed `extra` or `seconds` (probe {run.running!r})")
        run.done.append(entry)
        run.running = run.template = None
    elif kind == "end":
        missing = [n for n in options.probes if n not in {e["probe"] for e in run.done}]
        _expect(run.loaded is not None and run.running is None and not missing,
                "`end` before the model was loaded or before every probe reported"
                + (f" (missing: {', '.join(missing)})" if missing else ""))
        run.ended = True
    elif kind == "error":
        _expect(isinstance(event.get("kind"), str) and isinstance(event.get("message"), str),
                "an `error` event without its kind and message")
        run.error = (event["kind"], event["message"])
    else:
        raise ReportError(f"an unknown event {kind[:40]!r}")


def _entry(entry: Any, probe: str) -> bool:
    """A probe's entry (or its skip template) with the fields the reports read."""
    return (isinstance(entry, dict) and entry.get("probe") == probe and entry.get("status") in _STATUSES
            and (entry.get("figure") is None or _number(entry.get("figure"))) and _number(entry.get("tolerance"))
            and isinstance(entry.get("unit"), str) and isinstance(entry.get("detail"), str)
            and (entry.get("module") is None or isinstance(entry.get("module"), str)))


def _class_entry(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("file"), str)
            and isinstance(entry.get("start"), int) and isinstance(entry.get("end"), int)
            and isinstance(entry.get("paths"), list) and all(isinstance(p, str) for p in entry["paths"]))


# --- the data scan (tlint scan-data, verify --data) ----------------------------------------------

@dataclass
class ScanRun:
    """What the child process of the data scan returned, and how it ended."""

    result: dict[str, Any] | None = None     # its result; None when it reported none
    timed_out: bool = False                  # stopped by this process at `timeout`
    error: tuple[str, str] | None = None     # its report was not valid
    how: str = ""
    last_words: str = ""


def run_scan(options: DataOptions, verbose: bool) -> ScanRun:
    """Scan the loaders in one child process, killed at `options.timeout`."""
    run = ScanRun()
    deadline = time.monotonic() + options.timeout
    limit = process_limit_mib(options.memory_limit)
    with Child(SCAN_MODULE, options.to_json(), prefix="tlint-scan-", limit_mib=limit, verbose=verbose) as proc:
        try:
            for event in _scan_events(proc, deadline, run):
                _expect(run.result is None and event["event"] == "result", f"an unknown event {event['event'][:40]!r}")
                run.result = check_scan_result(event.get("result"), options)
        except ReportError as exc:
            run.error = report_error("the data loader", str(exc))
            run.result = None
    run.last_words, run.how = proc.last_words, proc.how
    return run


def _scan_events(proc: Child, deadline: float, run: ScanRun) -> Iterator[dict[str, Any]]:
    while True:
        exited = proc.exited
        yield from proc.drain() if exited else proc.read(POLL_S)
        if exited:
            return
        if run.result is not None:
            if not proc.wait(EXIT_GRACE_S):
                proc.kill()
            return
        if time.monotonic() >= deadline:
            run.timed_out = True
            proc.kill()
            return


def check_scan_result(result: Any, options: DataOptions) -> dict[str, Any]:
    """The data scan's result, checked: `{"error": {"kind", "message"}}` or `{"scan", "checks",
    "files"}` with the checks the renderers read and only files under the import roots."""
    from tlint.verify.data import CHECKS

    _expect(isinstance(result, dict), "a result that is not an object")
    if "error" in result:
        error = result["error"]
        _expect(isinstance(error, dict) and isinstance(error.get("kind"), str)
                and isinstance(error.get("message"), str), "an error without its kind and message")
        return {"error": {"kind": error["kind"], "message": error["message"]}}
    scan, checks, files = result.get("scan"), result.get("checks"), result.get("files")
    _expect(isinstance(scan, dict) and isinstance(scan.get("loader"), str) and isinstance(scan.get("batches"), int)
            and isinstance(scan.get("samples"), int), "a result without its scan summary")
    _expect(isinstance(checks, list) and all(
        isinstance(c, dict) and c.get("check") in CHECKS and isinstance(c.get("loader"), str)
        and c.get("status") in _STATUSES and isinstance(c.get("rules"), list)
        and all(isinstance(r, str) for r in c["rules"]) and (c.get("figure") is None or _number(c.get("figure")))
        and isinstance(c.get("unit"), str) and isinstance(c.get("detail"), str)
        and (c.get("field") is None or isinstance(c.get("field"), str))
        and isinstance(c.get("extra", {}), dict) for c in checks), "a malformed check")
    roots = [Path(options.root), *(Path(p) for p in options.python_path)]
    _expect(isinstance(files, list) and all(isinstance(f, str) and Path(f).is_absolute()
                                            and any(Path(f) == r or r in Path(f).parents for r in roots)
                                            for f in files), "a file list naming files outside the project")
    return result
