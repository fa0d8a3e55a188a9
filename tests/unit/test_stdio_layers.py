"""P7 for stdio, each layer alone, with real bwrap (issue 16 C.8).

A socket made outside keeps the host's network namespace: on stdin, ``connect(0, 127.0.0.1:P)``
and ``sendto(0, ..., 127.0.0.1:P)`` from inside reach the host's loopback. Three layers stop it:
the supervisor relays or refuses a stdio socket (isolation/stdio.py), the probe's P7 refuses a
socket of another namespace on 0-2, and the connect mediation refuses a connect on one. Each is
shown enough on its own for ``connect``; ``sendto`` on a UDP socket is stopped by P7 alone (no
mediation sees it): that is why P7 must hold by itself. The stand-ins are loopback listeners
this test binds on ports it chose (never an engine's).
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from isolation_helpers import TcpListener, bwrap_works, run_no_docker, weakened_probe

pytestmark = pytest.mark.needs_bwrap

_why = bwrap_works()
if _why:
    pytest.skip(_why, allow_module_level=True)

FROM_STDIN = (
    "import os, socket, sys\n"
    "port = int(sys.argv[1])\n"
    "try:\n"
    "    s = socket.socket(fileno=os.dup(0))\n"
    "except OSError as err:\n"
    "    print('NOT A SOCKET', err.errno); sys.exit(0)\n"
    "try:\n"
    "    if s.type == socket.SOCK_STREAM:\n"
    "        s.settimeout(5); s.connect(('127.0.0.1', port))\n"
    "    else:\n"
    "        s.sendto(b'x', ('127.0.0.1', port))\n"
    "    print('REACHED')\n"
    "except OSError as err:\n"
    "    print('REFUSED', err.errno)\n"
)


class UdpListener:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def reached(self) -> bool:
        try:
            self.sock.recv(16)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        self.sock.close()


def attempt(tmp_path, kind: str, build: str) -> tuple[subprocess.CompletedProcess, bool]:
    listener = TcpListener() if kind == "tcp" else UdpListener()
    stdin = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
    weaken = {"real": (), "no-relay": ("no-stdio-relay",), "no-relay-no-p7": ("no-stdio-relay",),
              "no-mediation": ("no-mediation",)}[build]
    probe = weakened_probe(tmp_path, ("P7",)) if build == "no-relay-no-p7" else None
    try:
        command = ["--", sys.executable, "-I", "-c", FROM_STDIN, str(listener.port)]
        result = run_no_docker(command, cwd=tmp_path, weaken=weaken, probe=probe, stdin=stdin.fileno())
        return result, listener.reached()
    finally:
        stdin.close()
        listener.close()


def test_control_an_outside_socket_on_stdin_reaches_the_host_loopback(tmp_path):
    for kind in ("tcp", "udp"):
        listener = TcpListener() if kind == "tcp" else UdpListener()
        stdin = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
        try:
            done = subprocess.run([sys.executable, "-I", "-c", FROM_STDIN, str(listener.port)],
                                  stdin=stdin.fileno(), capture_output=True, text=True, timeout=30)
            assert done.stdout.strip() == "REACHED" and listener.reached(), (kind, done.stdout, done.stderr)
        finally:
            stdin.close()
            listener.close()


@pytest.mark.parametrize("kind", ["tcp", "udp"])
@pytest.mark.parametrize("build", ["real", "no-mediation"])
def test_the_supervisor_refuses_an_unconnected_stdio_socket(tmp_path, kind, build):
    result, reached = attempt(tmp_path, kind, build)
    assert result.returncode == 125, (result.stdout, result.stderr)
    assert "P7: fd 0 is a socket" in result.stderr and result.stdout == "", result.stderr
    assert not reached


@pytest.mark.parametrize("kind", ["tcp", "udp"])
def test_without_the_relay_the_probe_refuses_alone(tmp_path, kind):
    result, reached = attempt(tmp_path, kind, "no-relay")
    assert result.returncode == 125, (result.stdout, result.stderr)
    assert "P7 not proven: fd 0 is a socket of another network namespace" in result.stderr, result.stderr
    assert result.stdout == "" and not reached


def test_without_p7_the_mediation_alone_refuses_the_connect_but_not_sendto(tmp_path):
    result, reached = attempt(tmp_path, "tcp", "no-relay-no-p7")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "REFUSED 111" and not reached, (result.stdout, result.stderr)
    assert "connect refused: 127.0.0.1:" in result.stderr, result.stderr
    # No mediation sees sendto: with P7 gone, the UDP socket from outside reaches the host.
    result, reached = attempt(tmp_path, "udp", "no-relay-no-p7")
    assert result.stdout.strip() == "REACHED" and reached, (result.stdout, result.stderr)


def test_a_socketpair_on_stdio_is_relayed(tmp_path):
    outside, given = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "no_docker.supervisor.cli", "run", "--quiet", "--", sys.executable, "-I",
             "-c", "import os, stat, sys; d = sys.stdin.read(); print(d.upper().strip(), "
             "stat.S_ISFIFO(os.fstat(0).st_mode), stat.S_ISFIFO(os.fstat(1).st_mode))"],
            cwd=tmp_path, stdin=given, stdout=given, stderr=subprocess.PIPE, start_new_session=True)
        given.close()
        outside.sendall(b"hello from outside\n")
        outside.shutdown(socket.SHUT_WR)
        outside.settimeout(60)
        out = b""
        while chunk := outside.recv(4096):
            out += chunk
        assert proc.wait(60) == 0, proc.stderr.read()
        assert out == b"HELLO FROM OUTSIDE True True\n"
    finally:
        outside.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stderr.close()
