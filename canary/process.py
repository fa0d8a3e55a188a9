"""Start a canary as a child process and wait until it accepts: for tests, benchmarks, ``prove``.

``started_canary(...)`` is a context manager: it starts ``python -m no_docker.canary serve``
in its own session, waits for the ready file, yields a ``CanaryProcess``, and on every way
out (including a failing test) stops it with SIGTERM, then SIGKILL, and reaps it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CanaryError
from .records import Record, parse_log


@dataclass
class CanaryProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    ready: dict[str, Any]
    stderr_path: Path

    def listener(self, kind: str, index: int = 0) -> dict[str, Any]:
        """The ``index``-th listener of ``kind`` in the ready file (real port included)."""
        return [entry for entry in self.ready["listeners"] if entry["kind"] == kind][index]

    def records(self) -> list[Record]:
        """Every readable record of the log so far, in order."""
        with self.log.open("rb") as log:
            return [line.record for line in parse_log(log) if line.record is not None]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def complaints(self) -> str:
        """stderr without the one line that says the canary is ready: what went wrong, if anything."""
        lines = self.stderr().splitlines(keepends=True)
        if lines and lines[0].startswith("no-docker canary: ready (pid ") and lines[0].endswith("\n"):
            lines = lines[1:]
        return "".join(lines)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait, SIGKILL if it must; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def serve_argv(log: Path, ready: Path, *, unix: Sequence[str] = (), tcp: Sequence[str] = (),
               abstract: Sequence[str] = (), mode: str = "answer", extra: Sequence[str] = ()) -> list[str]:
    argv = [sys.executable, "-m", "no_docker.canary", "serve", "--log", str(log), "--ready", str(ready),
            "--mode", mode]
    for flag, values in (("--unix", unix), ("--tcp", tcp), ("--abstract", abstract)):
        for value in values:
            argv += [flag, value]
    return argv + list(extra)


@contextmanager
def started_canary(workdir: Path, *, unix: Sequence[str] = (), tcp: Sequence[str] = (),
                   abstract: Sequence[str] = (), mode: str = "answer", extra: Sequence[str] = (),
                   timeout: float = 30.0) -> Iterator[CanaryProcess]:
    workdir.mkdir(parents=True, exist_ok=True)
    log, ready, stderr_path = workdir / "canary.jsonl", workdir / "canary.ready", workdir / "canary.stderr"
    ready.unlink(missing_ok=True)
    argv = serve_argv(log, ready, unix=unix, tcp=tcp, abstract=abstract, mode=mode, extra=extra)
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if proc.poll() is not None:
                raise CanaryError(f"canary exited with {proc.returncode} before it was ready: "
                                  f"{stderr_path.read_text(errors='replace').strip()}")
            if time.monotonic() > deadline:
                raise CanaryError(f"canary not ready after {timeout} s")
            time.sleep(0.02)
        canary = CanaryProcess(proc, log, json.loads(ready.read_text()), stderr_path)
        yield canary
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                proc.kill()
        proc.wait()
