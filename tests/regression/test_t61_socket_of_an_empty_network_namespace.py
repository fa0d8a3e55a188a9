"""T-61: a listening socket whose network namespace has no process left is not reached (P12).

An "engine" binds ``/srv/engine/docker.sock`` inside ``unshare -n``, passes the listening fd
out to its parent and exits: the namespace now holds a socket and no process, so no listing
can name it (sock_diag answers per namespace, and no ``/proc/PID/ns/net`` leads there), and
nothing masks it (issue 16 D.11). The parent serves on the fd and records every connection:
the witness. A control from inside the outer guard, outside any run, reaches it; a run's
connect is refused by the mediation (the file is not bound by a socket of the run's own
namespace), the witness records nothing, and the refusal is in the status line and
``--report``.
"""

from __future__ import annotations

import errno
import sys
import time

from isolation_cases import require_bwrap
from lifetime_cases import control_reaches, lifetime_guard, run_connect

ENGINE = "/srv/engine/docker.sock"

# The parent: the bind happens in a child under `unshare -n`, which hands the fd over and exits.
ORPHANED_LISTENER = r"""
import os, socket, subprocess, sys
path, log, ready = sys.argv[1:4]
mine, theirs = socket.socketpair()
child = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); "
         "socket.send_fds(socket.socket(fileno=int(sys.argv[2])), [b'L'], [s.fileno()])")
os.makedirs(os.path.dirname(path), exist_ok=True)
subprocess.run(["unshare", "--net", sys.executable, "-I", "-c", child, path, str(theirs.fileno())],
               pass_fds=(theirs.fileno(),), check=True)  # returns once the namespace's only process is gone
theirs.close()
_, fds, _, _ = socket.recv_fds(mine, 4, 1)
listener = socket.socket(fileno=fds[0])
with open(ready, "w") as f:
    f.write(os.readlink(f"/proc/self/fd/{fds[0]}"))
while True:
    conn, _ = listener.accept()
    data = conn.recv(256)
    with open(log, "a") as f:
        f.write(repr(data) + "\n")
    conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
    conn.close()
"""


def test_socket_of_a_namespace_without_processes_is_not_reached(tmp_path):
    require_bwrap()
    log, ready = tmp_path / "orphan.log", tmp_path / "orphan.ready"
    with lifetime_guard(tmp_path) as guard:
        engine = guard.spawn([sys.executable, "-I", "-c", ORPHANED_LISTENER, ENGINE, str(log), str(ready)],
                             output=tmp_path / "orphan.out")
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                started = engine.poll() is None and time.monotonic() < deadline
                assert started, f"the listener did not start: {(tmp_path / 'orphan.out').read_text()}"
                time.sleep(0.02)
            work = tmp_path / "work"
            work.mkdir()
            status, said, stderr, report = run_connect(guard, work, ENGINE, "t61-orphan")
            assert said == errno.ECONNREFUSED, (said, stderr)
            assert not log.exists(), f"the run reached the listener: {log.read_text()}"
            assert status == 0, stderr
            assert f"no-docker: 1 connect refused: {ENGINE} x1" in stderr, stderr
            assert [r["target"] for r in report.get("connects_refused", [])] == [ENGINE], report
            # The witness is alive: outside the run, the orphaned listener answers.
            assert control_reaches(guard, ENGINE).startswith("HTTP/1."), "the control did not reach"
            assert "route=control" in log.read_text()
        finally:
            guard.stop(engine)
