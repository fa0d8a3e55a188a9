"""``--publish [127.0.0.1:]PORT`` (issue 15 item 3, DESIGN §3): a host loopback port forwarded to
the same port on the run's own loopback; loopback only; engine ports refused (2); the forwarder
ends with the run and leaks nothing; the host side is not a way out of the run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from isolation_helpers import REPO, bwrap_works, no_docker_argv, run_no_docker
from no_docker.supervisor.errors import UsageError
from no_docker.supervisor.isolation.publish import ENGINE_PORTS, parse_publish

_why = bwrap_works()
needs_bwrap = pytest.mark.skipif(_why is not None, reason=_why or "")

# Serves COUNT connections on 127.0.0.1:PORT inside the run: echoes "inside:" + what it got.
SERVER = r"""
import socket, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
print("listening", flush=True)
for _ in range(count):
    c, _ = s.accept()
    data = b""
    while not data.endswith(b"\n"):
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.sendall(b"inside:" + data)
    c.close()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """No listener left on PORT (relayed connections closed by us may linger in TIME_WAIT,
    which SO_REUSEADDR allows, as any server restart does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def ask(port: int, text: bytes, deadline: float) -> bytes:
    """Connect through the forwarder until the inside server answers (it may still be starting)."""
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(text)
                answer = b""
                while chunk := c.recv(65536):
                    answer += chunk
                if answer:
                    return answer
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the published port never answered")
        time.sleep(0.05)


@pytest.mark.parametrize("text, port", [("8000", 8000), ("127.0.0.1:8001", 8001), ("65535", 65535)])
def test_publish_accepts_loopback_ports(text, port):
    assert parse_publish(text) == port


@pytest.mark.parametrize("text, message", [
    *((str(p), "is a container engine's port") for p in sorted(ENGINE_PORTS)),
    ("127.0.0.1:2375", "is a container engine's port"),
    ("0.0.0.0:8000", "loopback only"), ("localhost:8000", "loopback only"), ("[::1]:8000", "loopback only"),
    ("0", "a TCP port"), ("65536", "a TCP port"), ("http", "a TCP port"), ("127.0.0.1:", "a TCP port"),
])
def test_publish_refuses_engine_ports_and_other_hosts(text, message):
    with pytest.raises(UsageError, match=message):
        parse_publish(text)


def test_publish_usage_error_is_exit_2_one_line(tmp_path):
    result = run_no_docker(["--publish", "2375", "--", "true"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "no-docker: --publish 2375: refused, 2375 is a container engine's port\n"


@needs_bwrap
def test_published_port_reaches_the_runs_server_and_nothing_leaks(tmp_path, spawn):
    port = free_port()
    (tmp_path / "server.py").write_text(SERVER)
    proc = spawn(no_docker_argv(["--publish", f"127.0.0.1:{port}", "--", sys.executable, "server.py",
                                 str(port), "3"]), cwd=tmp_path, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    answers = [ask(port, b"hello %d\n" % i, deadline) for i in range(3)]
    assert answers == [b"inside:hello %d\n" % i for i in range(3)]
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == b"listening\n"
    assert port_is_free(port), "the forwarder's listener outlived the run"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@needs_bwrap
def test_the_host_listener_is_not_a_way_out_of_the_run(tmp_path, spawn):
    """Inside, 127.0.0.1:PORT is the run's own loopback: before its server binds, a connect
    there is refused, so the forwarder's host socket cannot be reached from inside."""
    port = free_port()
    code = (f"import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('REACHED')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n")
    result = run_no_docker(["--quiet", "--publish", str(port), "--", sys.executable, "-c", code],
                           cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("REFUSED"), result.stdout


@needs_bwrap
def test_a_taken_port_is_refused_before_the_run(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_no_docker(["--publish", str(port), "--", "touch", "ran"], cwd=tmp_path)
    assert result.returncode == 125, result.stderr
    assert f"--publish: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert not (tmp_path / "ran").exists()


def _nonroot_skip() -> str | None:
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.access("/usr/bin/python3", os.X_OK):
        return "needs root, setpriv and /usr/bin/python3 to run as an unprivileged user"
    return bwrap_works()


@pytest.mark.skipif(_nonroot_skip() is not None, reason=_nonroot_skip() or "")
def test_publish_as_an_unprivileged_user(spawn):
    """Without CAP_SYS_ADMIN the supervisor cannot setns into the run's network namespace
    from a thread; its socket factory joins the run's user namespace first."""
    uid = 61000 + int.from_bytes(os.urandom(2), "big") % 4000
    base = Path(tempfile.mkdtemp(prefix="no-docker-publish-"))
    try:
        shutil.copytree(REPO / "supervisor", base / "pkg" / "no_docker" / "supervisor",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("home", "work"):
            (base / name).mkdir()
            os.chown(base / name, uid, uid)
        (base / "work" / "server.py").write_text(SERVER)
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o755)
        port = free_port()
        env = ["PATH=/usr/bin:/bin", f"HOME={base / 'home'}", f"PYTHONPATH={base / 'pkg'}"]
        proc = spawn(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "env", "-i", *env,
                      "/usr/bin/python3", "-m", "no_docker.supervisor.cli", "run", "--publish", str(port),
                      "--", "python3", "server.py", str(port), "1"],
                     cwd=base / "work", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert ask(port, b"from outside\n", time.monotonic() + 30) == b"inside:from outside\n"
        _, err = proc.communicate(timeout=30)
        assert b"isolation proven" in err, err
        assert port_is_free(port)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(f"/tmp/no-docker-{uid}", ignore_errors=True)
