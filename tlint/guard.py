"""The parse guard: one file's analysis in a child process under a time limit.

LibCST's native parser can crash the process (a stack overflow on deep nesting it was not
refused for) or take minutes (nested `match` patterns, huge files). `reading.parse_source`
names the files at risk (`NeedsGuard`); the engine analyses each of them here, in a child
process, so that a crash or a parse over the limit is TL001 for that file and the run, or
the language server, goes on. Every other file is analysed in-process as before: the guard
costs one fork per file at risk and nothing otherwise.

The child is forked where the platform can (it inherits the loaded modules: a few
milliseconds), else spawned; it sends back the `FileResult` through a pipe as data only
(`tlint.signed`'s JSON codec, under a key made for that one call: nothing the child sends
can make the parent run code), an exception as its builtin type and message. A child that
dies without answering is a crash; one that has not answered within the limit is killed.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any


class GuardFailed(Exception):
    """The guarded call did not answer: `crashed` (the child died) or timed out."""

    def __init__(self, crashed: bool, detail: str) -> None:
        super().__init__(detail)
        self.crashed = crashed
        self.detail = detail


def run_guarded(fn: Callable[..., Any], args: tuple, time_limit: float) -> Any:
    """`fn(*args)` in a child process: its result, or `GuardFailed` raised when the child
    crashed or ran past `time_limit` seconds (then it is killed). An exception `fn` raised
    in the child is raised here."""
    if not hasattr(os, "fork"):
        return _run_spawned(fn, args, time_limit)
    return _run_forked(fn, args, time_limit)


def _run_forked(fn: Callable[..., Any], args: tuple, time_limit: float) -> Any:
    # A bare fork, not multiprocessing's: its child closes `sys.stdin` first, which blocks
    # forever when another thread of the parent was reading it (the language server).
    import select
    import time

    key = os.urandom(32)
    receiver, sender = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's cleanup
        try:
            os.close(receiver)
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
            except (ValueError, OSError):
                pass
            import faulthandler

            faulthandler.disable()  # a crash is reported by the parent, not as a traceback
            view = memoryview(_answer(fn, args, key))
            while view:
                view = view[os.write(sender, view):]
        finally:
            os._exit(0)
    os.close(sender)
    chunks: list[bytes] = []
    deadline = time.monotonic() + time_limit
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([receiver], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise GuardFailed(False, f"took longer than {time_limit:g} s")
            chunk = os.read(receiver, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(receiver)
        _, status = _wait(pid)
    if not chunks:
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        raise GuardFailed(True, _how_it_died(code))
    return _result(b"".join(chunks), key)


def _answer(fn: Callable[..., Any], args: tuple, key: bytes) -> bytes:
    """The child's answer: `fn(*args)`, or the exception it raised, as data."""
    from tlint import signed

    try:
        answer: tuple = ("value", fn(*args))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent
        answer = ("error", type(exc).__name__, str(exc))
    try:
        return signed.dumps(answer, key)
    except Exception as exc:
        return signed.dumps(("error", "RuntimeError", f"cannot send the result back: {exc}"), key)


def _result(data: bytes, key: bytes) -> Any:
    """The value the child answered, or its exception raised here (a builtin exception
    type by name, else RuntimeError)."""
    import builtins

    from tlint import signed

    answer = signed.loads(data, key)
    if answer[0] == "value":
        return answer[1]
    kind = getattr(builtins, answer[1], None)
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        kind = RuntimeError
    raise kind(answer[2])


def _wait(pid: int) -> tuple[int, int]:
    while True:
        try:
            return os.waitpid(pid, 0)
        except InterruptedError:
            continue


def _child(conn, fn: Callable[..., Any], args: tuple, key: bytes) -> None:
    conn.send_bytes(_answer(fn, args, key))
    conn.close()


def _run_spawned(fn: Callable[..., Any], args: tuple, time_limit: float) -> Any:
    """Where there is no fork (Windows): a spawned child (it imports tlint afresh)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    key = os.urandom(32)
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, fn, args, key))
    try:
        process.start()
        sender.close()
        if not receiver.poll(time_limit):
            raise GuardFailed(False, f"took longer than {time_limit:g} s")
        try:
            data = receiver.recv_bytes()
        except (EOFError, OSError):
            process.join()
            raise GuardFailed(True, _how_it_died(process.exitcode)) from None
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receiver.close()
    return _result(data, key)


def _how_it_died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"
