"""The child processes of `tlint verify` and `tlint scan-data`, parent side: start one
(`python -m tlint.verify.worker` for the probes, `python -m tlint.verify.data` for the data
scan), follow what it reports, stop it at its limits, and leave nothing of it running.

The callers (`command.run_worker`, `data.scan`) decide what a result means and word the
errors; this module only runs processes and collects what they said. No torch here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlint.verify.progress import ProgressBar

if TYPE_CHECKING:
    from tlint.verify.data import DataOptions
    from tlint.verify.options import VerifyOptions

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
POLL_S = 0.05
EXIT_GRACE_S = 5.0


def child_env() -> dict[str, str]:
    """The child's environment: this process's, bytecode writing off, tlint importable first."""
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return env


def _spawn(module: str, args: list[str], cwd: str, sink) -> subprocess.Popen:
    command = [sys.executable, "-m", module, *args]
    return subprocess.Popen(command, cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL, stdout=sink,
                            stderr=subprocess.STDOUT, start_new_session=os.name == "posix")


def kill(proc: subprocess.Popen) -> None:
    """Kill the child and whatever it started (its own session on POSIX)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _how(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def _output(path: Path, verbose: bool) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if verbose and text:
        sys.stderr.write(text)
    return "\n".join(text.strip().splitlines()[-6:])


# --- the probes (tlint verify) -------------------------------------------------------------

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


def run_probes(options: VerifyOptions, deadline: float, verbose: bool) -> ChildRun:
    """Run `options.probes` in one child process (working directory: a temporary folder)
    until it ends, crashes or runs past `deadline` / `probe-timeout` since its last event."""
    run = ChildRun()
    with tempfile.TemporaryDirectory(prefix="tlint-verify-") as tmp:
        request, progress, output = Path(tmp) / "request.json", Path(tmp) / "progress.jsonl", Path(tmp) / "output.txt"
        request.write_text(options.to_json(), encoding="utf-8")
        progress.touch()
        with open(output, "wb") as sink:
            proc = _spawn("tlint.verify.worker", [str(request), str(progress)], tmp, sink)
        bar = ProgressBar()
        try:
            watch(proc, progress, run, options, deadline, bar)
        finally:
            bar.close()
            if proc.poll() is None:
                kill(proc)
        run.last_words = _output(output, verbose)
        run.how = _how(proc.returncode)
    return run


def watch(proc: subprocess.Popen, progress: Path, run: ChildRun, options: VerifyOptions, deadline: float,
          bar: ProgressBar | None = None) -> None:
    """Follow the child's events until it ends, crashes or runs past a limit (then kill it)."""
    offset, last_event, ready = 0, time.monotonic(), False
    bar = bar or ProgressBar()
    while True:
        exited = proc.poll() is not None
        with open(progress, "rb") as stream:
            stream.seek(offset)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]
        offset += len(complete)
        for line in complete.decode("utf-8").splitlines():
            event = json.loads(line)
            if event["event"] == "progress":  # a long probe's steps: a bar, not a new stage
                bar.update(event)
                continue
            apply(event, run)
            last_event, ready = time.monotonic(), True
        now = time.monotonic()
        run.elapsed = now - last_event
        if run.ended or run.error is not None:
            try:
                proc.wait(timeout=EXIT_GRACE_S)  # e.g. a user thread that keeps the child alive
            except subprocess.TimeoutExpired:
                kill(proc)
            return
        if exited:
            return
        if now >= deadline:
            run.stopped = "timeout"
        elif ready and now - last_event >= options.probe_timeout:  # torch's own import is not the user's
            run.stopped = "probe-timeout"
        if run.stopped:
            kill(proc)
            return
        time.sleep(POLL_S)


def apply(event: dict[str, Any], run: ChildRun) -> None:
    kind = event["event"]
    if kind == "loaded":
        run.loaded = {"model": event["model"], "classes": event["classes"]}
    elif kind == "start":
        run.running, run.template = event["probe"], event["template"]
    elif kind == "done":
        run.done.append(event["entry"])
        run.running = run.template = None
    elif kind == "end":
        run.ended = True
    elif kind == "error":
        run.error = (event["kind"], event["message"])


# --- the data scan (tlint scan-data, verify --data) ----------------------------------------

@dataclass
class ScanRun:
    """What the child process of the data scan returned, and how it ended."""

    result: dict[str, Any] | None = None     # its JSON result; None when it wrote none
    timed_out: bool = False                  # stopped by this process at `timeout`
    how: str = ""
    last_words: str = ""


def run_scan(options: DataOptions, verbose: bool) -> ScanRun:
    """Scan the loaders in one child process (working directory: a temporary folder), killed
    at `options.timeout`."""
    run = ScanRun()
    with tempfile.TemporaryDirectory(prefix="tlint-scan-") as tmp:
        request, result_path, output = Path(tmp) / "request.json", Path(tmp) / "result.json", Path(tmp) / "output.txt"
        request.write_text(options.to_json(), encoding="utf-8")
        deadline = time.monotonic() + options.timeout
        with open(output, "wb") as sink:
            proc = _spawn("tlint.verify.data", [str(request), str(result_path)], tmp, sink)
        try:
            while proc.poll() is None:
                if time.monotonic() >= deadline:
                    run.timed_out = True
                    break
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:
                kill(proc)
        run.last_words = _output(output, verbose)
        run.how = _how(proc.returncode)
        if not run.timed_out and result_path.is_file():
            run.result = json.loads(result_path.read_text(encoding="utf-8"))
    return run
