"""Every test is bounded: a test (setup, call and teardown) still running after
``NO_DOCKER_TEST_TIMEOUT`` seconds (600 by default; 0 turns it off) is interrupted by SIGALRM
and fails with one line naming it, and the suite goes on.

Why: a test that waits without a bound (a read of a pipe whose writer is gone but whose write
end the test itself still holds, a child that never answers) hangs ``make test`` for ever, as
test_sockdiag's namespace test did for an ordinary user. Every spawn and wait in the tests has a
timeout of its own; this is the net under them. The handler raises in the main thread, where
every blocking call pytest runs the test in (read, select, waitpid, sleep, a lock) returns EINTR
and is not retried when a handler raises (PEP 475), so the test's own ``finally`` and the
fixtures still reap what it started. Timers are not inherited across fork(2) or execve(2): no
child of a test is ever hit. Loaded by tests/conftest.py.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

DEFAULT_LIMIT = 600.0


class TestTimedOut(Exception):
    """A test ran past NO_DOCKER_TEST_TIMEOUT."""

    __test__ = False  # not a test class, whatever its name


def limit(environ: dict[str, str] | os._Environ[str] = os.environ) -> float:
    """The per-test bound in seconds (0: none); a bad value is a usage error of the suite."""
    raw = environ.get("NO_DOCKER_TEST_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_LIMIT
    except ValueError:
        raise pytest.UsageError(f"NO_DOCKER_TEST_TIMEOUT={raw!r}: not a number of seconds") from None
    if value < 0:
        raise pytest.UsageError(f"NO_DOCKER_TEST_TIMEOUT={raw!r}: negative")
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    seconds = limit()
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise TestTimedOut(f"{item.nodeid}: still running after {seconds:g} s (NO_DOCKER_TEST_TIMEOUT)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
