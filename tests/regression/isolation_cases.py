"""Helpers of the isolation T-cases (T-01, 02, 06-10, 12, 13, 15, 16, 18, 20, 28, 29).

Everything goes through ``python -m no_docker.supervisor.cli`` of the interpreter running the
tests, so a weakened copy (tests/regression/weakened/) runs its own code.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FAKE_BWRAP = """#!/bin/sh
# A "bubblewrap" that isolates nothing: skip its options, exec the command.
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "no_docker.supervisor.cli", *args]


def require_bwrap() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True,
                           text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot create namespaces here: {probe.stderr.strip()}")
    return bwrap


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60,
        **kwargs: object) -> subprocess.CompletedProcess:
    """``no-docker run ARGS`` to completion, killed (whole session) if the test fails first."""
    proc = subprocess.Popen(cli("run", *args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            **kwargs)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def inside_python(code: str) -> list[str]:
    """A command for inside the run: the test's own interpreter (the run keeps it visible)."""
    return [sys.executable, "-I", "-S", "-c", code]


class Sleeper:
    """An outside process the run must not be able to touch; killed and reaped on close."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["sleep", "600"], start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
