"""The lifetime harness: engines that restart and appear *while* the pinned payload runs.

``no-docker prove`` and the T-series (T-03, T-05) show P12 on the pinned payload's lifetime
routes: a run must reach no engine for its whole life, not only at the moment of its proof.
Around one run of the payload (the control or the isolated one), inside the outer guard:

* before the run starts, an engine (a canary with its own log) listens at
  ``RESTART_SOCKET`` in ``/srv`` (a system directory the run sees; the guard gives it a tmpfs
  of its own), so the run's listing finds it and masks it;
* the harness arms each route it can set up by making ``./no-docker-lifetime-ROUTE`` in the
  work dir; the payload says ``unavailable`` at once for a route that is not armed (the
  dynamic check of ``mutants review``, any other user of the payload);
* when the payload reaches its lifetime routes it makes ``./no-docker-lifetime-waiting``;
  the harness then stops that engine, unlinks its socket and starts a new one that binds it
  again (a restart), at ``SYSTEM_SOCKET`` in ``/srv``, and in ``./no-docker-late-engine/``, a
  directory of the work dir that did not exist when the run started; then it makes
  ``./no-docker-lifetime-go`` and the payload connects.

What the engines recorded is the evidence, like the main canary's records: the control must
reach every armed route, the isolated run none. A route the harness could not arm, or a
phase the harness could not play out, is a *problem*: the caller makes the result
incomplete (prove) or skips/fails the case (T-series), never passed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .outer_guard import canary_argv, read_records

SCRATCH = "/srv"  # a system-like directory the run sees read-only; the guard gives it a tmpfs
RESTART_SOCKET = "/srv/no-docker-engine/docker.sock"
SYSTEM_SOCKET = "/srv/no-docker-late.sock"
LATE_SOCKET = "no-docker-late-engine/docker.sock"  # relative to the work dir; the dir is made late
WAITING = "no-docker-lifetime-waiting"
GO = "no-docker-lifetime-go"
ROUTES = ("lifetime-restart", "lifetime-late-dir", "lifetime-system-dir")
ENGINE_READY_TIMEOUT = 30.0


def armed_file(route: str) -> str:
    """The work-dir file whose presence tells the payload that ``route`` is armed."""
    return "no-docker-lifetime-" + route.removeprefix("lifetime-")


def scratch_dirs() -> list[str]:
    """The directories the outer guard must give a tmpfs of its own for the harness."""
    return [SCRATCH] if os.path.isdir(SCRATCH) and not os.path.islink(SCRATCH) else []


def unarmed(scratch: Sequence[str]) -> dict[str, str]:
    """Routes the harness cannot set up in a guard with these scratch dirs -> why (pure)."""
    if SCRATCH in scratch:
        return {}
    why = f"no {SCRATCH} on this machine to stand for an engine's system directory"
    return {"lifetime-restart": why, "lifetime-system-dir": why}


class Phase:
    """One run of the payload with the engines moving around it; see the module docstring."""

    def __init__(self, guard: object, base: Path, work: Path, name: str, scratch: Sequence[str]) -> None:
        self.guard = guard
        self.base = base
        self.work = Path(work)
        self.name = name
        self.unarmed = unarmed(scratch)
        self.armed = [r for r in ROUTES if r not in self.unarmed]
        self.problems: list[str] = []
        self.moved = False
        self._engines: list[tuple[subprocess.Popen, Path]] = []
        self._logs: list[Path] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.figures: dict[str, float] = {}

    # -- engines

    def _engine(self, label: str, paths: Sequence[str]) -> subprocess.Popen:
        log = self.base / f"lifetime-{self.name}-{label}.jsonl"
        ready = self.base / f"lifetime-{self.name}-{label}.ready"
        out = self.base / f"lifetime-{self.name}-{label}.out"
        argv = canary_argv(self.guard.canary, unix=list(paths), tcp=[], abstract=[],  # type: ignore[attr-defined]
                           log=str(log), mode="answer", ready=str(ready))
        proc = self.guard.spawn(argv, output=out)  # type: ignore[attr-defined]
        self._engines.append((proc, log))
        self._logs.append(log)
        deadline = time.monotonic() + ENGINE_READY_TIMEOUT
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                said = out.read_text(errors="replace").strip().splitlines() if out.exists() else []
                raise OSError(f"the {label} engine did not start: {said[-1] if said else 'no output'}")
            time.sleep(0.02)
        return proc

    def _stop(self, proc: subprocess.Popen) -> None:
        self.guard.stop(proc)  # type: ignore[attr-defined]
        self._engines = [(p, log) for p, log in self._engines if p is not proc]

    def _gone(self, path: str) -> None:
        """Make sure nothing is left at ``path`` (an inside path): the canary unlinks its own
        sockets when it stops; a killed one leaves the file, which a restart unlinks too."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.guard.inside(path))  # type: ignore[attr-defined]

    # -- the phase

    def __enter__(self) -> Phase:
        for route in ROUTES:
            with contextlib.suppress(FileNotFoundError):
                (self.work / armed_file(route)).unlink()
        for name in (WAITING, GO):
            with contextlib.suppress(FileNotFoundError):
                (self.work / name).unlink()
        try:
            if "lifetime-restart" in self.armed:
                self._gone(RESTART_SOCKET)
                self._before = self._engine("before", [RESTART_SOCKET])
            for path in (SYSTEM_SOCKET, str(self.work / LATE_SOCKET)):
                if os.path.lexists(self.guard.inside(path)):  # type: ignore[attr-defined]
                    raise OSError(f"{path} exists before the run: it would not be a late socket")
        except OSError as err:
            self.problems.append(f"the lifetime harness could not start ({self.name}): {err}")
            self._teardown()
            self.armed = []
            return self
        for route in self.armed:
            (self.work / armed_file(route)).touch()
        self._thread = threading.Thread(target=self._move, name=f"lifetime-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _move(self) -> None:
        """Once the payload waits: restart the engine, start the late ones, say go."""
        waiting = self.work / WAITING
        while not waiting.exists():
            if self._done.wait(0.02):
                self.problems.append(f"the payload never reached its lifetime routes ({self.name})")
                return
        started = time.monotonic()
        try:
            late = []
            if "lifetime-restart" in self.armed:
                self._stop(self._before)
                self._gone(RESTART_SOCKET)  # unlinked, then bound again by the new engine
                late.append(RESTART_SOCKET)
            if "lifetime-system-dir" in self.armed:
                late.append(SYSTEM_SOCKET)
            late.append(str(self.work / LATE_SOCKET))  # its directory is made now, by the engine
            self._engine("after", late)
        except OSError as err:
            self.problems.append(f"the lifetime harness could not move the engines ({self.name}): {err}")
        else:
            self.moved = True
        self.figures["move_s"] = round(time.monotonic() - started, 3)
        (self.work / GO).touch()

    def _teardown(self) -> None:
        for proc, _ in list(self._engines):
            self._stop(proc)
        if "lifetime-restart" not in self.unarmed:  # the guard has its own /srv
            for path in (RESTART_SOCKET, SYSTEM_SOCKET):
                self._gone(path)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(ENGINE_READY_TIMEOUT + 30)
        self._teardown()
        if self._thread is not None and self.armed and not self.moved and not self.problems:
            self.problems.append(f"the lifetime harness did not move the engines ({self.name})")

    def records(self) -> list[dict]:
        """Every record of this phase's engines (complete once the phase is over: a canary
        writes what it read before it exits)."""
        out: list[dict] = []
        for log in self._logs:
            out += read_records(log)
        return out


class Harness:
    """The lifetime harness of one outer guard (made with ``scratch=scratch_dirs()``)."""

    def __init__(self, guard: object, base: Path, scratch: Sequence[str]) -> None:
        self.guard = guard
        self.base = Path(base)
        self.scratch = list(scratch)
        self.unarmed = unarmed(self.scratch)

    @contextlib.contextmanager
    def phase(self, work: Path, name: str) -> Iterator[Phase]:
        with Phase(self.guard, self.base, work, name, self.scratch) as phase:
            yield phase
