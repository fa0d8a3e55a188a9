"""T-46: a local user's socket whose path holds a newline, invalid UTF-8 or all 108 bytes of
``sun_path`` neither stops runs nor hides from the outside listing.

``/proc/net/unix`` prints a path as raw bytes and ends the line with a newline: any local user
could make it ambiguous and so make every run fail closed, or hide a socket. The listing comes
from sock_diag instead (a length-prefixed attribute). Here three such sockets listen in a
directory the run sees (``/srv``, the guard's own tmpfs); the run must start (exit 0), its
``--report`` listing must hold each path byte for byte, and none may be reached from inside.
"""

from __future__ import annotations

import json
import os
import sys
import time

from conftest import no_docker_argv
from isolation_cases import require_bwrap
from lifetime_cases import lifetime_guard

NAMES = [b"/srv/engine\nnewline.sock", b"/srv/bad-\xff\xfe-utf8.sock",
         b"/srv/" + b"L" * (108 - len(b"/srv/"))]  # all 108 bytes of sun_path, no NUL

LISTEN = r"""
import ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def raw(call, s, name):
    # Python's socket refuses a sun_path without room for a NUL; the kernel takes all 108 bytes.
    addr = (1).to_bytes(2, "little") + name
    if getattr(libc, call)(s.fileno(), addr, len(addr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
socks = []
for name in sys.argv[2:]:
    s = socket.socket(socket.AF_UNIX); raw("bind", s, os.fsencode(name)); s.listen(8); s.setblocking(False)
    socks.append((name, s))
open(sys.argv[1], "w").close()
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    for name, s in socks:
        try:
            conn, _ = s.accept()
        except BlockingIOError:
            continue
        with open(sys.argv[1] + ".accepted", "ab") as f:
            f.write(os.fsencode(name) + b"\0")
        conn.close()
    time.sleep(0.01)
"""

TRY = r"""
import json
import ctypes, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def raw(call, s, name):
    # Python's socket refuses a sun_path without room for a NUL; the kernel takes all 108 bytes.
    addr = (1).to_bytes(2, "little") + name
    if getattr(libc, call)(s.fileno(), addr, len(addr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
out = []
for name in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        raw("connect", s, os.fsencode(name)); out.append("reached")
    except OSError as err:
        out.append(err.errno)
    s.close()
print(json.dumps(out))
"""


def test_hostile_socket_names_are_listed_exactly_and_stop_nothing(tmp_path):
    require_bwrap()
    ready = tmp_path / "listener.ready"
    args = [os.fsdecode(n) for n in NAMES]
    with lifetime_guard(tmp_path) as guard:
        listener = guard.spawn([sys.executable, "-I", "-c", LISTEN, str(ready), *args],
                               output=tmp_path / "listener.out")
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                assert listener.poll() is None and time.monotonic() < deadline, \
                    (tmp_path / "listener.out").read_text(errors="replace")
                time.sleep(0.02)
            report = tmp_path / "report.json"
            work = tmp_path / "work"
            work.mkdir()
            done = guard.run(no_docker_argv("run", "--report", str(report), "--", sys.executable, "-I", "-c",
                                            TRY, *args), cwd=work)
            stderr = done.stderr.decode(errors="replace")
            assert done.returncode == 0, stderr
            assert json.loads(done.stdout) == [111, 111, 111], done.stdout  # ECONNREFUSED each
            listed = {os.fsencode(p) for p in json.loads(report.read_text())["listing"]["unix_paths"]}
            assert set(NAMES) <= listed, sorted(set(NAMES) - listed)
            assert not (tmp_path / "listener.ready.accepted").exists(), "the run reached a listener"
            # The control: from outside the run each listener is reached.
            control = guard.run([sys.executable, "-I", "-c", TRY, *args])
            assert json.loads(control.stdout) == ["reached"] * 3, control.stdout
        finally:
            guard.stop(listener)
