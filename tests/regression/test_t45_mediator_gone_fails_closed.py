"""T-45: with the connect mediation gone, every connect fails closed and the run ends 125.

Three ways for the mediation to go, each with an engine (the canary) that appears in ``/srv``
during the run and that the run's command keeps trying to reach, next to a socket of its own:

* its listener closed under it (a fault injected into the supervisor process by a test-only
  prelude): the kernel answers ENOSYS to every later connect of the run, and the supervisor
  ends the run: exit 125, one line naming P12;
* the supervisor stopped (SIGSTOP): the run's connects wait for an answer that does not come;
  nothing passes meanwhile, and after SIGCONT each is refused;
* the supervisor killed (SIGKILL): the run dies with it (bwrap --die-with-parent); nothing
  passes.

In every case the engine records no connection from the run; the control from outside the
run reaches it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from conftest import no_docker_argv
from isolation_cases import require_bwrap
from lifetime_cases import Engine, control_reaches, lifetime_guard

ENGINE = "/srv/engine/docker.sock"

KEEP_TRYING = r"""
import errno, json, os, socket, sys, time
engine = sys.argv[1]
own = socket.socket(socket.AF_UNIX); own.bind("/tmp/own.sock"); own.listen(64)
open("ready", "w").close()
while not os.path.exists("go"):
    time.sleep(0.01)
seen = {}
stop = time.monotonic() + float(sys.argv[2])
while time.monotonic() < stop:
    for label, path in (("own", "/tmp/own.sock"), ("engine", engine)):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            result = "connected"
        except OSError as err:
            result = errno.errorcode.get(err.errno, str(err.errno))
        s.close()
        key = f"{label}:{result}"
        seen[key] = seen.get(key, 0) + 1
        if label == "own" and result == "connected":
            own.accept()[0].close()
    with open("seen.json.tmp", "w") as f:
        json.dump(seen, f)
    os.replace("seen.json.tmp", "seen.json")
    time.sleep(0.01)
print(json.dumps(seen))
"""

# Test-only fault injection: one second after the mediation starts, its listener is closed
# inside the supervisor process (what a bug or a closed fd would do).
CLOSE_LISTENER = """
import os, sys, threading
from no_docker.supervisor.isolation import mediation
_start = mediation.Mediator.start
def start(self):
    _start(self)
    threading.Timer(1.0, lambda: os.close(self.listener)).start()
mediation.Mediator.start = start
from no_docker.supervisor import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def wait_for(path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def supervisor_pid(work) -> int:
    """The no-docker supervisor of this test: ``python -m no_docker.supervisor.cli run`` whose
    cwd is the test's work dir (the shell nsenter starts has the same cwd, another argv)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if argv[1:4] == [b"-m", b"no_docker.supervisor.cli", b"run"] and cwd == str(work):
            return int(name)
    raise AssertionError("the supervisor process was not found")


def start_run(guard, work, argv):
    box: dict = {}

    def target() -> None:
        box["result"] = guard.run(argv, cwd=work, timeout=120)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def test_listener_closed_every_connect_fails_and_the_run_ends_125(tmp_path):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    with lifetime_guard(tmp_path) as guard:
        argv = [sys.executable, "-c", CLOSE_LISTENER, "run", "--", sys.executable, "-I", "-c", KEEP_TRYING,
                ENGINE, "20"]
        thread, box = start_run(guard, work, argv)
        wait_for(work / "ready")
        engine = Engine(guard, tmp_path, "engine", [ENGINE])
        try:
            (work / "go").touch()
            thread.join(10)  # the real build ends it within 2 s; a weakened one runs on (20 s)
            assert not thread.is_alive(), "the run went on after its mediation stopped"
            result = box["result"]
            stderr = result.stderr.decode(errors="replace")
            assert result.returncode == 125, stderr
            assert "no-docker: P12 not proven: the connect mediation stopped" in stderr, stderr
            assert engine.records("connection") == [], engine.records()
            seen = json.loads((work / "seen.json").read_text())
            assert "engine:connected" not in seen, seen
            assert seen.get("own:connected", 0) > 0, f"the run's own socket was never reached: {seen}"
            assert control_reaches(guard, ENGINE).startswith("HTTP/1.")
        finally:
            engine.stop()


def test_supervisor_stopped_nothing_passes_until_it_answers(tmp_path):
    require_bwrap()
    work = tmp_path / "work-stopped"
    work.mkdir()
    with lifetime_guard(tmp_path) as guard:
        argv = no_docker_argv("run", "--report", str(tmp_path / "r.json"), "--", sys.executable, "-I", "-c",
                              KEEP_TRYING, ENGINE, "3")
        thread, box = start_run(guard, work, argv)
        wait_for(work / "ready")
        engine = Engine(guard, tmp_path, "engine", [ENGINE])
        pid = supervisor_pid(work)
        try:
            os.kill(pid, signal.SIGSTOP)
            try:
                (work / "go").touch()
                time.sleep(1.5)
                assert engine.records("connection") == [], "a connect passed while the supervisor was stopped"
                assert not (work / "seen.json").exists(), "a connect returned while nobody could answer it"
            finally:
                os.kill(pid, signal.SIGCONT)
            thread.join(90)
            result = box["result"]
            assert result.returncode == 0, result.stderr.decode(errors="replace")
            seen = json.loads(result.stdout)
            assert "engine:connected" not in seen and seen.get("engine:ECONNREFUSED", 0) > 0, seen
            assert engine.records("connection") == []
        finally:
            engine.stop()


def test_supervisor_killed_nothing_passes(tmp_path):
    require_bwrap()
    work = tmp_path / "work-killed"
    work.mkdir()
    with lifetime_guard(tmp_path) as guard:
        argv = no_docker_argv("run", "--", sys.executable, "-I", "-c", KEEP_TRYING, ENGINE, "30")
        thread, box = start_run(guard, work, argv)
        wait_for(work / "ready")
        engine = Engine(guard, tmp_path, "engine", [ENGINE])
        try:
            pid = supervisor_pid(work)
            os.kill(pid, signal.SIGSTOP)
            (work / "go").touch()
            time.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
            thread.join(90)
            time.sleep(0.5)
            assert engine.records("connection") == [], "a connect passed after the supervisor was killed"
            assert "result" in box and box["result"].returncode != 0
        finally:
            engine.stop()
            # The killed supervisor left its marker and cgroup (T-26): end them, as a user would.
            guard.run(no_docker_argv("end", "--all"), timeout=60)
