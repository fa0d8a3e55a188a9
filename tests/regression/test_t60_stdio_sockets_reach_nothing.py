"""T-60: a socket on stdio carries the run nowhere (P7), and a socket from outside cannot connect (P12).

A socket keeps the network namespace it was created in. Given an unconnected TCP socket on
stdin, ``connect(0, 127.0.0.1:P)`` from inside reached the host's loopback (issue 16 C.8), and
``sendto`` on an unconnected UDP one reaches any host port — no connect mediation sees a
``sendto``, so P7 must hold on its own. A control without no-docker reaches a stand-in listener
(a loopback port this test binds, never an engine's) both ways; under ``no-docker run`` nothing
arrives. A stdio that *is* a connected socket (socat ``EXEC:``, a CI runner's socketpair, a
systemd ``StandardInput=socket`` unit) keeps working: the run gets a pipe that no-docker
relays, and sees no socket. A socket of the host's namespace handed to the run another way
(over SCM_RIGHTS through a socket the run bound in its work dir) cannot ``connect`` either:
the mediation refuses a connect on a socket of another network namespace.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import no_docker_argv
from isolation_cases import require_bwrap

FROM_STDIN = r"""
import os, socket, sys
port = int(sys.argv[1])
try:
    s = socket.socket(fileno=os.dup(0))
except OSError as err:
    print("NOT A SOCKET", err.errno); sys.exit(0)
try:
    if s.type == socket.SOCK_STREAM:
        s.settimeout(5); s.connect(("127.0.0.1", port)); s.sendall(b"t60")
    else:
        s.sendto(b"t60", ("127.0.0.1", port))
    print("REACHED")
except OSError as err:
    print("REFUSED", err.errno)
"""

PASSED_IN = r"""
import socket, sys
port = int(sys.argv[1])
srv = socket.socket(socket.AF_UNIX); srv.bind("in.sock"); srv.listen(1)
open("ready", "w").close()
srv.settimeout(60)
conn, _ = srv.accept()
_, fds, _, _ = socket.recv_fds(conn, 16, 1)
s = socket.socket(fileno=fds[0])
try:
    s.settimeout(5); s.connect(("127.0.0.1", port)); s.sendall(b"t60")
    print("REACHED")
except OSError as err:
    print("REFUSED", err.errno)
"""


class StandIn:
    """A loopback listener of KIND ("tcp" or "udp") on a port of our choosing; ``reached()``
    says whether anything arrived."""

    def __init__(self, kind: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        if kind == "tcp":
            self.sock.listen(8)
        self.sock.setblocking(False)
        self.kind = kind
        self.port = self.sock.getsockname()[1]

    def reached(self) -> bool:
        try:
            if self.kind == "tcp":
                self.sock.accept()[0].close()
            else:
                self.sock.recv(16)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        self.sock.close()


def unconnected(kind: str) -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)


def run_with_stdin(cwd, stdin_fd: int, *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(no_docker_argv("run", "--", *command), cwd=cwd, stdin=stdin_fd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_control_an_outside_socket_on_stdin_reaches_the_stand_in(tmp_path, kind):
    stand_in, given = StandIn(kind), unconnected(kind)
    try:
        done = subprocess.run([sys.executable, "-I", "-c", FROM_STDIN, str(stand_in.port)],
                              stdin=given.fileno(), capture_output=True, text=True, timeout=30)
        assert done.stdout.strip() == "REACHED", done.stderr
        assert stand_in.reached()
    finally:
        given.close()
        stand_in.close()


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_an_unconnected_socket_on_stdin_reaches_nothing(tmp_path, kind):
    require_bwrap()
    stand_in, given = StandIn(kind), unconnected(kind)
    try:
        command = (sys.executable, "-I", "-c", FROM_STDIN, str(stand_in.port))
        result = run_with_stdin(tmp_path, given.fileno(), *command)
        assert "REACHED" not in result.stdout, (result.stdout, result.stderr)
        assert not stand_in.reached(), f"the stand-in outside was reached: {result.stderr}"
        # Refused before the sandbox exists, naming the fd and what to do; the command never ran.
        assert result.returncode == 125 and result.stdout == "", (result.returncode, result.stderr)
        assert "P7: fd 0 is a socket that is not connected" in result.stderr or (
            kind == "udp" and "P7: fd 0 is a socket of type" in result.stderr), result.stderr
    finally:
        given.close()
        stand_in.close()


def test_a_connected_socket_on_stdio_keeps_working_through_a_pipe(tmp_path):
    require_bwrap()
    outside, given = socket.socketpair()
    code = ("import os, stat, sys; data = sys.stdin.read(); "
            "print(data.strip().upper(), [stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in (0, 1)])")
    proc = subprocess.Popen(no_docker_argv("run", "--quiet", "--", sys.executable, "-I", "-c", code),
                            cwd=tmp_path, stdin=given, stdout=given, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        given.close()
        outside.sendall(b"through the relay\n")
        outside.shutdown(socket.SHUT_WR)
        outside.settimeout(60)
        out = b""
        while chunk := outside.recv(4096):
            out += chunk
        assert proc.wait(60) == 0, proc.stderr.read()
        assert out == b"THROUGH THE RELAY [False, False]\n", out
    finally:
        outside.close()
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        proc.stderr.close()


def test_a_socket_passed_in_from_outside_cannot_connect(tmp_path):
    require_bwrap()
    stand_in, given = StandIn("tcp"), unconnected("tcp")
    report = tmp_path / "report.json"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(no_docker_argv("run", "--report", str(report), "--", sys.executable, "-I", "-c",
                                           PASSED_IN, str(stand_in.port)),
                            cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (work / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=30)[1]
            time.sleep(0.02)
        carrier = socket.socket(socket.AF_UNIX)
        carrier.connect(str(work / "in.sock"))  # the run's own socket, reached from outside
        socket.send_fds(carrier, [b"s"], [given.fileno()])
        carrier.close()
        out, err = proc.communicate(timeout=60)
        assert out.decode().strip() == f"REFUSED {111}", (out, err)
        assert not stand_in.reached(), "a socket from outside connected to the host's loopback"
        assert proc.returncode == 0, err
        refused = json.loads(report.read_text())["connects_refused"]
        assert [r["target"] for r in refused] == [f"127.0.0.1:{stand_in.port}"], refused
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        given.close()
        stand_in.close()


def own_non_loopback_addresses() -> list[tuple[int, str]]:
    """This machine's global addresses (iproute2), to reach a local listener the long way."""
    found = []
    for family, flag in ((socket.AF_INET, "-4"), (socket.AF_INET6, "-6")):
        done = subprocess.run(["ip", flag, "-o", "addr", "show", "scope", "global"], capture_output=True,
                              text=True, timeout=120)
        found += [(family, line.split()[3].split("/")[0]) for line in done.stdout.splitlines()
                  if len(line.split()) > 3]
    return found


HOLD = r"""
import os, socket, sys
family, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.create_connection((host, port), timeout=5)
os.dup2(s.fileno(), 0); os.dup2(s.fileno(), 1); s.close()
os.execvp(sys.argv[4], sys.argv[4:])
"""


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6])
def test_stdio_connected_to_a_listener_of_this_machine_through_its_own_address_is_refused(tmp_path, family):
    # Red-team review of issue 13: the P7 refusal of a stdio socket connected to a local
    # listener only knew loopback addresses; through the host's own eth0 address the same
    # listener (think: an engine on 0.0.0.0:2375) was relayed and CMD talked to it.
    require_bwrap()
    mine = [host for fam, host in own_non_loopback_addresses() if fam == family]
    if not mine:
        pytest.skip(f"this machine has no global address of family {family} to try")
    server = socket.socket(family)
    server.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
    server.listen(4)
    server.settimeout(10)
    port = server.getsockname()[1]
    marker = tmp_path / "cmd-ran"
    try:
        # The control: the same stdio, without no-docker, reaches the stand-in.
        control = subprocess.Popen([sys.executable, "-c", HOLD, str(family), mine[0], str(port),
                                    "sh", "-c", "printf control"], cwd=tmp_path)
        conn, _ = server.accept()
        assert conn.recv(16) == b"control"
        conn.close()
        control.wait(30)
        run = no_docker_argv("run", "--", "sh", "-c", f"touch {marker}; printf inside")
        isolated = subprocess.Popen([sys.executable, "-c", HOLD, str(family), mine[0], str(port), *run],
                                    cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        conn, _ = server.accept()
        conn.settimeout(30)
        got = conn.recv(16)
        conn.close()
        _, err = isolated.communicate(timeout=60)
        assert isolated.returncode == 125 and "P7" in err, err
        assert got == b"" and not marker.exists(), f"the run talked to the listener: {got!r}"
    finally:
        server.close()
