"""Bounded waits for tests: a forked child (a run in-process, a namespace to unshare), reads
from a child's pipe, reaping. Whatever the child does, the test gets its answer or a failure
within the timeout, and the child is reaped.

Why not a bare ``os.fork()`` and ``os.read``: the parent must close its copy of the pipe's write
end, or a child that dies before writing leaves the read blocked for ever (the hang of
test_sockdiag's namespace test as an ordinary user: unshare failed, the child exited, the parent
still held the write end)."""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
from collections.abc import Callable
from typing import IO


class ChildFailed(AssertionError):
    """The child raised, was killed, or did not finish in time (its output so far is in the message)."""


def in_a_child(job: Callable[[], bytes], timeout: float = 30.0) -> bytes:
    """Run JOB in a forked child; the bytes it returns. ChildFailed when it raised (with its
    traceback), exited otherwise, or was not done within TIMEOUT (then it is SIGKILLed)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: never returns into pytest
        code, out = 70, b""
        try:
            os.close(r)
            out = job()
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent as text
            out = b"".join(line.encode() for line in traceback.format_exc())
        finally:
            try:
                os.write(w, out if code == 0 else b"\0" + out)
            finally:
                os._exit(code)
    os.close(w)  # ours closed: EOF as soon as the child is gone, whatever it did
    data, timed_out = read_until_eof(r, timeout)
    os.close(r)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        raise ChildFailed(f"the child did not finish within {timeout} s; its output: {data[-2000:]!r}")
    if os.waitstatus_to_exitcode(status) != 0 or data[:1] == b"\0":
        raise ChildFailed(f"the child failed (status {os.waitstatus_to_exitcode(status)}):\n"
                          + data.lstrip(b"\0").decode(errors="replace"))
    return data


def read_until_eof(fd: int, timeout: float) -> tuple[bytes, bool]:
    """Everything readable on FD until EOF; (data, True) when TIMEOUT came first."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return data, True
        chunk = os.read(fd, 65536)
        if not chunk:
            return data, False
        data += chunk


def first_read(fd: int, timeout: float, size: int = 65536) -> bytes:
    """What one read of FD (at most SIZE bytes) gives once readable (b"" at EOF);
    ChildFailed when nothing is readable within TIMEOUT."""
    if not select.select([fd], [], [], timeout)[0]:
        raise ChildFailed(f"nothing on fd {fd} within {timeout} s")
    return os.read(fd, size)


def reap(pid: int, timeout: float) -> int:
    """Wait for child PID (TIMEOUT), SIGKILL it if it has not ended by then; its wait status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def readline(stream: IO[str] | IO[bytes], timeout: float, what: str = "a line") -> str | bytes:
    """One line from STREAM (a Popen pipe), or ChildFailed when none is readable within
    TIMEOUT (a child that hangs before its line fails the test instead of hanging it).
    EOF gives an empty line, as readline() does."""
    if not select.select([stream], [], [], timeout)[0]:
        raise ChildFailed(f"no {what} within {timeout} s")
    return stream.readline()
