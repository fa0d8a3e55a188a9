"""A process that is nobody's child here: the suite's long-lived helpers (the namespaces of
other users that tests/conftest.py holds, the weakened builds run beside the suite) must not
show up among the test process's children, which tests check (``waitpid(-1)`` raising
ChildProcessError, ``/proc/self/task/*/children``), nor keep a pipe open in it."""

from __future__ import annotations

import os


def start_detached(argv: list[str]) -> int | None:
    """Start ARGV as a grandchild in a session of its own (its parent exits at once, so it is
    nobody's child here); a pidfd on it, or None."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # only fork, exec and _exit here: the test process may have threads
        try:
            os.close(r)
            grandchild = os.fork()
            if grandchild == 0:
                os.setsid()
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.execvp(argv[0], argv)
            os.write(w, str(grandchild).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    data = os.read(r, 32)
    os.close(r)
    try:
        return os.pidfd_open(int(data))
    except (ValueError, OSError):
        return None
