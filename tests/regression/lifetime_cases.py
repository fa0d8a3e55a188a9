"""Shared scenery of the lifetime cases (T-40, T-41, T-45, T-46): an engine that appears or
restarts *during* a run, in a directory the run sees, with the canary as its witness.

The outer guard gives ``/srv`` and ``/var/lib/misc`` a tmpfs of their own (``scratch``), so an
"engine" can bind there without touching the host's; the run binds both read-only (they are
system directories), exactly like an engine's ``/opt/engine`` or ``/var/lib/engine``.

A run's command (``WAITER``) writes ``ready`` into the work dir once it runs, waits for ``go``,
then connects to every path it was given, sends one ``GET /_ping`` carrying the route id, and
prints what each connect did as JSON. The test moves the engines in between.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import no_docker_argv, require, skip_without_namespaces

SCRATCH = ("/srv", "/var/lib/misc")

WAITER = r"""
import json, os, socket, sys, time
route, paths = sys.argv[1], sys.argv[2:]
open("ready", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists("go") and time.monotonic() < deadline:
    time.sleep(0.01)
out = {}
for path in paths:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(path)
        s.sendall(f"GET /_ping?route={route} HTTP/1.0\r\n\r\n".encode())
        out[path] = "reached: " + s.recv(64).decode(errors="replace").split("\r\n")[0]
    except OSError as err:
        out[path] = err.errno
    finally:
        s.close()
print(json.dumps(out))
"""

CONNECT_ONCE = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(b"GET /_ping?route=control HTTP/1.0\r\n\r\n"); print(s.recv(64).decode().split("\r\n")[0])
"""


def lifetime_guard(base: Path):
    """An outer guard with the scratch dirs (skips with the reason where it cannot exist)."""
    skip_without_namespaces()
    outer_guard = require("no_docker.supervisor.proving.outer_guard", "supervisor/proving/outer_guard.py")
    require("no_docker.canary.cli", "the canary (canary/cli.py)")
    missing = [p for p in SCRATCH if not os.path.isdir(p) or os.path.islink(p)]
    if missing:
        pytest.skip(f"no {', '.join(missing)} on this machine to stand for an engine's directory")
    return outer_guard.OuterGuard(base / "canary.jsonl", share=[base], scratch=SCRATCH)


class Engine:
    """A canary serving PATHS inside the guard, with its own log: the witness of one engine life."""

    def __init__(self, guard, base: Path, name: str, paths: list[str]) -> None:
        self.log = base / f"{name}.jsonl"
        ready = base / f"{name}.ready"
        argv = [sys.executable, "-m", "no_docker.supervisor.cli", "canary", "serve", "--log", str(self.log),
                "--ready", str(ready)]
        for path in paths:
            argv += ["--unix", path]
        self.proc = guard.spawn(argv, output=base / f"{name}.out")
        self.guard = guard
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out = (base / f"{name}.out").read_text(errors="replace")
                self.stop()
                raise AssertionError(f"engine {name} did not start: {out}")
            time.sleep(0.02)

    def records(self, kind: str | None = None) -> list[dict]:
        from no_docker.supervisor.proving.outer_guard import read_records

        return [r for r in read_records(self.log) if kind is None or r.get("kind") == kind]

    def stop(self) -> None:
        self.guard.stop(self.proc)


class BackgroundRun:
    """``no-docker run --report R -- python WAITER ROUTE PATHS...`` inside the guard, on a thread."""

    def __init__(self, guard, work: Path, route: str, paths: list[str], extra: tuple[str, ...] = (),
                 program: str = WAITER, program_args: list[str] | None = None) -> None:
        self.work = work
        self.report = work.parent / f"{work.name}-report.json"
        args = [route, *paths] if program_args is None else program_args
        argv = no_docker_argv("run", "--report", str(self.report), *extra, "--", sys.executable, "-I", "-c",
                              program, *args)
        self.result = None
        self.error: BaseException | None = None

        def target() -> None:
            try:
                self.result = guard.run(argv, cwd=work, timeout=120)
            except BaseException as err:  # noqa: BLE001 - handed to the test thread
                self.error = err

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not (self.work / "ready").exists():
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.go()
                self.finish()
                raise AssertionError(f"the run's command never started: {self.result and self.result.stderr}")
            time.sleep(0.02)

    def go(self) -> None:
        (self.work / "go").touch()

    def finish(self):
        self.thread.join(150)
        if self.error is not None:
            raise self.error
        assert self.result is not None, "the run did not finish"
        return self.result

    def outcome(self) -> tuple[int, dict, str, dict]:
        """(exit status, what each connect did, stderr, the --report document)."""
        result = self.finish()
        stderr = result.stderr.decode(errors="replace")
        try:
            said = json.loads(result.stdout.decode() or "{}")
        except ValueError:
            said = {"unparsable stdout": result.stdout.decode(errors="replace")}
        report = json.loads(self.report.read_text()) if self.report.exists() else {}
        return result.returncode, said, stderr, report


def control_reaches(guard, path: str) -> str:
    """The positive control: the same path, connected from inside the guard but outside any run."""
    done = guard.run([sys.executable, "-I", "-c", CONNECT_ONCE, path], timeout=30)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode().strip()


CONNECT_TRY = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
    s.sendall(b"GET /_ping?route=" + sys.argv[2].encode() + b" HTTP/1.0\r\n\r\n")
    print(json.dumps("reached: " + s.recv(64).decode(errors="replace").split("\r\n")[0]))
except OSError as err:
    print(json.dumps(err.errno))
"""


def run_connect(guard, work: Path, path: str, route: str) -> tuple[int, object, str, dict]:
    """``no-docker run --report R -- python CONNECT_TRY PATH`` inside the guard, to its end:
    (exit status, what the connect did, stderr, the --report document)."""
    report = work.parent / f"{work.name}-report.json"
    argv = no_docker_argv("run", "--report", str(report), "--", sys.executable, "-I", "-c", CONNECT_TRY,
                          path, route)
    done = guard.run(argv, cwd=work, timeout=120)
    stderr = done.stderr.decode(errors="replace")
    try:
        said = json.loads(done.stdout.decode() or "null")
    except ValueError:
        said = done.stdout.decode(errors="replace")
    return done.returncode, said, stderr, json.loads(report.read_text()) if report.exists() else {}
