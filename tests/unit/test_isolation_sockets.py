"""Every socket listening outside is unreachable inside a run (P2, P3, P7), with real bwrap.

A listener started by the test stands in for an engine; ``reached()`` is the proof that nothing
arrived. Each case also runs twice against a weakened build:

* policy weakened only: the probe must catch it (exit 125, the command never runs);
* policy and the probe's check weakened: the route must work, i.e. this test would fail
  against such a build (the positive control; docs/isolation.md records each pair).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_helpers import (
    TcpListener,
    UnixListener,
    bwrap_works,
    connect_script,
    run_no_docker,
    weakened_probe,
)

pytestmark = pytest.mark.needs_bwrap

_why = bwrap_works()
if _why:
    pytest.skip(_why, allow_module_level=True)

BUILDS = ["real", "weak-policy", "weak-policy-and-probe"]


def outcome(build: str, result: subprocess.CompletedProcess, reached: bool) -> None:
    """The verdict each build must give for one route."""
    if build == "real":
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("REFUSED"), result.stdout
        assert not reached, "the listener outside was reached"
    elif build == "weak-policy":
        assert result.returncode == 125, (result.returncode, result.stdout, result.stderr)
        assert "not proven" in result.stderr
        assert result.stdout == "", "the command ran although the probe refused"
        # `reached` may be True here: the probe's own connect() (which sends nothing) is how
        # it found the route.
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("REACHED"), (result.stdout, result.stderr)
        assert reached


def build_args(build: str, tmp_path, weaken: tuple[str, ...], checks: tuple[str, ...]) -> dict:
    if build == "real":
        return {}
    if build == "weak-policy":
        return {"weaken": weaken}
    # Each layer alone: the connect mediation (P12), the layer behind every other, off too.
    return {"weaken": (*weaken, "no-mediation"), "probe": weakened_probe(tmp_path, (*checks, "P12"))}


@pytest.mark.parametrize("build", BUILDS)
def test_socket_in_visible_readonly_dir_is_masked(tmp_path, build):
    shared = tmp_path / "shared"
    shared.mkdir()
    listener = UnixListener(str(shared / "engine.sock"))
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = run_no_docker(["--ro", str(shared), "--", *connect_script(str(shared / "engine.sock"))],
                               cwd=work, **build_args(build, tmp_path, ("no-mask",), ("P3",)))
        outcome(build, result, listener.reached())
    finally:
        listener.close()


@pytest.mark.parametrize("build", BUILDS)
def test_socket_in_work_dir_is_masked(tmp_path, build):
    listener = UnixListener(str(tmp_path / "engine.sock"))
    try:
        result = run_no_docker(["--", *connect_script(str(tmp_path / "engine.sock"))], cwd=tmp_path,
                               **build_args(build, tmp_path, ("no-mask",), ("P3",)))
        outcome(build, result, listener.reached())
        assert (tmp_path / "engine.sock").exists(), "the socket outside must be untouched"
    finally:
        listener.close()


@pytest.mark.parametrize("build", BUILDS)
def test_symlink_in_work_dir_to_hidden_socket(tmp_path, build):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    listener = UnixListener(str(hidden / "engine.sock"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "docker.sock").symlink_to(hidden / "engine.sock")
    try:
        result = run_no_docker(["--", *connect_script("docker.sock")], cwd=work,
                               **build_args(build, tmp_path, ("expose-tmp", "no-mask"), ("P3",)))
        outcome(build, result, listener.reached())
    finally:
        listener.close()


@pytest.mark.parametrize("build", BUILDS)
def test_abstract_socket_unreachable(tmp_path, build):
    name = f"no-docker-test-{secrets.token_hex(6)}"
    listener = UnixListener("\0" + name)
    try:
        result = run_no_docker(["--", *connect_script("@" + name)], cwd=tmp_path,
                               **build_args(build, tmp_path, ("share-net",), ("P2",)))
        outcome(build, result, listener.reached())
    finally:
        listener.close()


@pytest.mark.parametrize("build", BUILDS)
def test_loopback_tcp_listener_unreachable(tmp_path, build):
    listener = TcpListener()
    try:
        result = run_no_docker(["--", *connect_script(f"tcp:{listener.port}")], cwd=tmp_path,
                               **build_args(build, tmp_path, ("share-net",), ("P2",)))
        outcome(build, result, listener.reached())
    finally:
        listener.close()


@pytest.mark.parametrize("build", BUILDS)
def test_inherited_fd_connected_to_listener_does_not_cross(tmp_path, build):
    listener = UnixListener(str(tmp_path / "engine.sock"))
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(tmp_path / "engine.sock"))
    # Left in the backlog, not accepted: a send() on it succeeds as long as the fd exists.
    fd = client.fileno()
    env = dict(os.environ, NO_DOCKER_TEST_FDS=str(fd))
    try:
        result = run_no_docker(["--", *connect_script(f"fd:{fd}")], cwd=tmp_path, env=env, pass_fds=(fd,),
                               **build_args(build, tmp_path, ("pass-fds", "no-mask", "gate-keeps-fds"),
                                            ("P7", "P3")))
        if build == "real":
            assert result.returncode == 0, result.stderr
            assert result.stdout.startswith(f"REFUSED {9}"), result.stdout  # EBADF: no such fd inside
        elif build == "weak-policy":
            assert result.returncode == 125 and "P7 not proven" in result.stderr, result.stderr
            assert result.stdout == ""
        else:
            assert result.stdout.startswith("REACHED"), (result.stdout, result.stderr)
    finally:
        client.close()
        listener.close()


def test_stdin_connected_to_listener_is_refused(tmp_path):
    listener = UnixListener(str(tmp_path / "engine.sock"))
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(tmp_path / "engine.sock"))
    try:
        result = run_no_docker(["--", "sh", "-c", "echo CMD RAN"], cwd=tmp_path, stdin=client.fileno())
        assert result.returncode == 125, result.stderr
        # Refused by the supervisor before the sandbox exists (isolation/stdio.py): no relay
        # of a connection to a local listener.
        assert "P7: fd 0 is a socket connected to" in result.stderr, result.stderr
        assert "CMD RAN" not in result.stdout
    finally:
        client.close()
        listener.close()


@pytest.mark.parametrize("build", ["real", "no-mediation"])
def test_relative_socket_name_stops_nothing_and_reaches_nothing(tmp_path, build):
    """A listener bound to a relative name (in the work dir) cannot be located by the listing:
    it does not refuse the run (any local user can bind one, issue 24), and the connect
    mediation alone refuses the run's connect to it. Without the mediation it is reached."""
    sock = socket.socket(socket.AF_UNIX)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        sock.bind("relative-engine.sock")
    finally:
        os.chdir(old)
    sock.listen(1)
    sock.setblocking(False)
    weak = {} if build == "real" else build_args("weak-policy-and-probe", tmp_path, (), ())
    try:
        result = run_no_docker(["--", *connect_script("relative-engine.sock")], cwd=tmp_path, **weak)
        assert result.returncode == 0, result.stderr
        assert "P3" not in result.stderr, result.stderr
        try:
            sock.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
        if build == "real":
            assert result.stdout.startswith("REFUSED 111"), result.stdout  # ECONNREFUSED
            assert not reached, "the listener outside was reached"
        else:
            assert result.stdout.startswith("REACHED") and reached, (result.stdout, result.stderr)
    finally:
        sock.close()


KERNEL_SETTING = r"""
import os
try:
    fd = os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)  # opened, never written
    os.close(fd)
    print("REACHED")
except OSError as e:
    print("REFUSED", e.errno)
"""


@pytest.mark.parametrize("build", BUILDS)
def test_host_kernel_settings_are_read_only(tmp_path, build):
    # Root in bwrap's user namespace is still uid 0 to the sysctl permission check: without a
    # read-only /proc/sys, kernel.core_pattern (a program the kernel runs as root on the host)
    # would be writable. The test only ever opens it; nothing is written, in any build.
    if build != "real" and os.geteuid() != 0:
        pytest.skip("an ordinary user's run is not global root: the sysctl check itself refuses "
                    "the write (EACCES), so a weakened build cannot be shown here; shown as root")
    core_pattern = Path("/proc/sys/kernel/core_pattern")
    before = core_pattern.read_text()
    result = run_no_docker(["--", sys.executable, "-I", "-S", "-c", KERNEL_SETTING], cwd=tmp_path,
                           **build_args(build, tmp_path, ("proc-sys-writable",), ("P4w",)))
    outcome(build, result, result.stdout.startswith("REACHED"))
    assert core_pattern.read_text() == before
