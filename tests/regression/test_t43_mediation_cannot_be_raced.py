"""T-43: the connect mediation cannot be raced (P12).

The mediation reads the caller's address once, resolves it in the caller's own root and cwd,
checks the very inode it then connects through, on the caller's own socket object. Each race
below flips something between a check and a use that an unsound mediator (one that lets the
kernel redo the connect after its check: ``SECCOMP_USER_NOTIF_FLAG_CONTINUE``) would get
wrong, thousands of times, against an engine (the canary) bound outside in ``/srv`` after
the run started, and a socket of the run's own in its ``/tmp`` that it may reach:

* a second thread rewriting the sockaddr buffer between the inside path and the engine's;
* a symlink swapped between the inside socket and the engine's by ``rename`` in a loop;
* ``dup2`` of another socket onto the fd being connected;
* a relative path while another thread changes the cwd between two dirs;
* paths through ``/proc/self/root`` and ``/proc/PID/cwd`` (refused: never resolved in the
  supervisor's view).

The engine must record no connection at all; the run's own server must have been reached
(so the races really ran); and the control (the same engine, from outside the run) is reached.
"""

from __future__ import annotations

import json

from isolation_cases import require_bwrap
from lifetime_cases import BackgroundRun, Engine, control_reaches, lifetime_guard

ENGINE = "/srv/engine/docker.sock"

RACES = r"""
import ctypes, json, os, socket, sys, threading, time
engine = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
inside = "/tmp/inside.sock"
srv = socket.socket(socket.AF_UNIX); srv.bind(inside); srv.listen(512)
accepted = [0]
def serve():
    while True:
        try:
            c, _ = srv.accept()
        except OSError:
            return
        accepted[0] += 1
        c.close()
threading.Thread(target=serve, daemon=True).start()
open("ready", "w").close()
while not os.path.exists("go"):
    time.sleep(0.01)
out = {}
DEADLINE = 1.5

def sockaddr(path):
    raw = path.encode()
    return (1).to_bytes(2, "little") + raw + b"\0" * (108 - len(raw))

def race(name, flip, attempt):
    stop = time.monotonic() + DEADLINE
    done = [0]
    def flipper():
        while time.monotonic() < stop:
            flip()
    t = threading.Thread(target=flipper); t.start()
    while time.monotonic() < stop:
        attempt(); done[0] += 1
    t.join()
    out[name] = done[0]

# 1. the address rewritten by another thread while connect() runs
buf = ctypes.create_string_buffer(sockaddr(inside), 110)
paths = [sockaddr(inside), sockaddr(engine)]
def flip_addr():
    for p in paths:
        ctypes.memmove(buf, p, 110)
def connect_buf():
    s = socket.socket(socket.AF_UNIX)
    libc.connect(s.fileno(), buf, 110); s.close()
race("rewritten-address", flip_addr, connect_buf)

# 2. a symlink swapped between check and use
for name, target in (("/tmp/l-in", inside), ("/tmp/l-out", engine)):
    os.symlink(target, name)
os.symlink(inside, "/tmp/link")
def flip_link():
    os.rename("/tmp/l-out", "/tmp/link"); os.symlink(engine, "/tmp/l-out")
    os.rename("/tmp/l-in", "/tmp/link"); os.symlink(inside, "/tmp/l-in")
def connect_link():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("/tmp/link")
    except OSError:
        pass
    s.close()
race("swapped-symlink", flip_link, connect_link)

# 3. dup2 of another socket onto the fd being connected
target = socket.socket(socket.AF_UNIX)
spares = [socket.socket(socket.AF_UNIX) for _ in range(2)]
fd = target.fileno()
def flip_fd():
    for s in spares:
        os.dup2(s.fileno(), fd)
def connect_fd():
    libc.connect(fd, sockaddr(engine), 110)
race("dup2-onto-the-fd", flip_fd, connect_fd)

# 4. a relative path while another thread changes the cwd
os.makedirs("/tmp/a", exist_ok=True)
os.symlink(inside, "/tmp/a/docker.sock")
dirs = ["/tmp/a", os.path.dirname(engine)]
def flip_cwd():
    for d in dirs:
        os.chdir(d)
def connect_relative():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("docker.sock")
    except OSError:
        pass
    s.close()
race("relative-after-chdir", flip_cwd, connect_relative)
os.chdir(sys.argv[2])

# 5. paths through /proc magic links
errs = []
for path in ("/proc/self/root" + engine, f"/proc/{os.getpid()}/cwd/../.." + engine,
             "/proc/thread-self/root" + engine):
    s = socket.socket(socket.AF_UNIX); s.settimeout(2)
    try:
        s.connect(path); errs.append("reached")
    except OSError as err:
        errs.append(err.errno)
    s.close()
out["proc-paths"] = errs
out["inside-accepted"] = accepted[0]
print(json.dumps(out))
"""


def test_the_mediation_cannot_be_raced(tmp_path):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    with lifetime_guard(tmp_path) as guard:
        run = BackgroundRun(guard, work, "t43", [], program=RACES, program_args=[ENGINE, str(work)])
        run.wait_ready()
        engine = Engine(guard, tmp_path, "engine", [ENGINE])
        try:
            run.go()
            status, said, stderr, report = run.outcome()
            assert status == 0, stderr
            assert engine.records("connection") == [], f"the run reached the engine: {said}"
            for race in ("rewritten-address", "swapped-symlink", "dup2-onto-the-fd", "relative-after-chdir"):
                assert said.get(race, 0) >= 50, f"the {race} race hardly ran: {said}"
            assert said["inside-accepted"] >= 50, f"the run's own socket was hardly reached: {said}"
            assert "reached" not in said["proc-paths"], said
            refused = {entry["target"] for entry in report.get("connects_refused", [])}
            assert ENGINE in refused, report.get("connects_refused")
            assert control_reaches(guard, ENGINE).startswith("HTTP/1."), "the control did not reach"
        finally:
            engine.stop()
        print(json.dumps(said))
