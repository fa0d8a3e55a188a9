"""Attempts to reach an engine, named per run (issue 26 item 2): the pure parts (which connect
is an attempt, the status line) and the mediator on the real kernel (a child under the filter
in a fresh network namespace; nothing here binds an engine path)."""

from __future__ import annotations

import errno
import os
import socket
import sys

from hypothesis import given
from hypothesis import strategies as st
from mediation_harness import no_fd_leak, spawn  # noqa: F401 - fixtures
from no_docker.supervisor.isolation.mediation import (
    EngineTargets,
    caller_hosts,
    engine_targets,
    host_endpoint,
    path_attempt,
)
from no_docker.supervisor.run import attempt_line

TARGETS = EngineTargets(frozenset({b"/run/docker.sock", b"/srv/engine/api"}), frozenset({2375, 2376}))


def test_host_endpoints_as_docker_and_podman_read_them():
    assert host_endpoint("unix:///run/podman/podman.sock") == ("path", b"/run/podman/podman.sock")
    assert host_endpoint("tcp://127.0.0.1:4243") == ("port", 4243)
    assert host_endpoint("tcp://[::1]:2375/") == ("port", 2375)
    assert host_endpoint("tcp://[::1]") == ("port", 2375)  # docker's default port for a bare host
    assert host_endpoint("https://engine.example") == ("port", 2376)
    assert host_endpoint("tcp://user@10.0.0.5:12345") == ("port", 12345)
    for other in ("", "ssh://me@host", "npipe:////./pipe/docker_engine", "unix://relative", "default",
                  "tcp://h:99999"):
        assert host_endpoint(other) in (None, ("port", 2375)) and host_endpoint(other) != ("port", 99999)
    assert host_endpoint("ssh://me@host") is None and host_endpoint("unix://relative") is None


@given(st.text(max_size=60))
def test_host_endpoint_never_raises(value):
    found = host_endpoint(value)
    assert found is None or found[0] in ("path", "port")
    if found is not None and found[0] == "port":
        assert 0 < found[1] < 65536


def test_caller_hosts_reads_only_the_two_variables():
    block = b"PATH=/bin\0DOCKER_HOST=unix:///srv/e.sock\0XDOCKER_HOST=tcp://h:1\0CONTAINER_HOST=tcp://h:9\0"
    assert caller_hosts(block) == [("path", b"/srv/e.sock"), ("port", 9)]
    assert caller_hosts(b"") == []


def test_which_hidden_paths_are_attempts():
    assert path_attempt(b"/run/docker.sock", errno.ENOENT, TARGETS) == \
        "an engine's path, hidden from the run (ENOENT)"
    assert path_attempt(b"/srv/engine/api", errno.ECONNREFUSED, TARGETS) == \
        "an engine's path, masked (ECONNREFUSED)"
    # an engine's socket name anywhere, relative too (a context or -H pointing elsewhere)
    assert path_attempt(b"/opt/x/podman.sock", errno.ENOENT, TARGETS).startswith("an engine's socket name")
    assert path_attempt(b"docker.sock", errno.ENOENT, TARGETS) is not None
    # what the caller's DOCKER_HOST names, whatever its name
    assert path_attempt(b"/srv/e", errno.ENOENT, TARGETS, [("path", b"/srv/e")]).startswith(
        "the caller's DOCKER_HOST")
    # not engines: glibc's nscd socket, syslog, a name that only contains an engine's
    for path in (b"/var/run/nscd/socket", b"/dev/log", b"/tmp/mydocker.sock.bak", b"/srv/e"):
        assert path_attempt(path, errno.ENOENT, TARGETS) is None, path


def test_engine_targets_from_the_plan_and_the_outside_environment():
    plan = {"outside_home": ["/home/dev"], "home": ["/home/dev"], "outside_xdg": ["/run/user/1000"],
            "masked": ["/srv/engine/api.sock"]}
    found = engine_targets(plan, {"DOCKER_HOST": "tcp://10.1.1.1:12375", "CONTAINER_HOST": "unix:///opt/p.sock"},
                           1000)
    assert {b"/run/docker.sock", b"/home/dev/.docker/run/docker.sock", b"/run/user/1000/docker.sock",
            b"/srv/engine/api.sock", b"/opt/p.sock"} <= found.paths
    assert {2375, 2376, 2377, 4243, 12375} <= found.ports and 8000 not in found.ports
    # no outside XDG_RUNTIME_DIR: the uid's default place still counts
    assert b"/run/user/0/podman/podman.sock" in engine_targets({}, {}, 0).paths


def test_the_status_line_names_target_count_command_and_pid():
    attempts = [{"target": "/run/docker.sock", "reason": "r", "count": 2,
                 "callers": [{"pid": 812, "command": "docker"}, {"pid": 813, "command": "curl"}]},
                {"target": "127.0.0.1:2375", "reason": "r", "count": 1,
                 "callers": [{"pid": 9, "command": "nc\x1b]0"}]}]
    assert attempt_line(attempts) == ("3 attempts to reach an engine: /run/docker.sock x2 (docker, pid 812, "
                                      "+1 more), 127.0.0.1:2375 x1 (nc\\x1b]0, pid 9)")
    assert attempt_line([]) is None


# --- on the real kernel ----------------------------------------------------------------------
TRIES = """
import errno, json, socket, sys
R = {}
def unix(path):
    s = socket.socket(socket.AF_UNIX)
    try:
        return s.connect_ex(path)
    finally:
        s.close()
def tcp(port, blocking=True):
    s = socket.socket()
    s.setblocking(blocking)
    try:
        return s.connect_ex(("127.0.0.1", port))
    finally:
        s.close()
own = socket.socket(); own.bind(("127.0.0.1", 2376)); own.listen(1)  # the run's own fake engine
R["hidden"] = [unix(%(hidden)r), unix(%(hidden)r)]
R["other"] = unix(%(other)r)
R["outside"] = unix(%(outside)r)
R["link"] = unix(%(link)r)
R["port"] = tcp(2375, blocking=False)
R["own"] = tcp(2376)
print(json.dumps(R), flush=True)
"""


def test_the_command_s_attempts_are_named_and_the_proof_s_are_not(spawn, tmp_path):  # noqa: F811 - the fixture
    hidden, other = str(tmp_path / "gone" / "docker.sock"), str(tmp_path / "gone" / "app.sock")
    outside = socket.socket(socket.AF_UNIX)  # bound outside the run: the mediation refuses it
    outside.bind(str(tmp_path / "outside.sock"))
    outside.listen(4)
    (tmp_path / "d.sock").symlink_to(hidden)  # ln -s /run/docker.sock ./d.sock
    try:
        _attempts_named(spawn, hidden, other, str(tmp_path / "outside.sock"))
    finally:
        outside.close()


def _attempts_named(make, hidden: str, other: str, outside: str) -> None:
    # The proof's tries: before end_proof, the same connects name nothing.
    proof = make(TRIES % {"hidden": hidden, "other": other, "outside": outside,
                            "link": os.path.join(os.path.dirname(outside), "d.sock")}, start=False)
    proof.mediator._make_targets = lambda: TARGETS
    proof.mediator.start()
    assert proof.result()["hidden"] == [errno.ENOENT] * 2
    assert proof.mediator.attempt_summary() == []
    child = make(TRIES % {"hidden": hidden, "other": other, "outside": outside,
                            "link": os.path.join(os.path.dirname(outside), "d.sock")}, start=False)
    child.mediator._make_targets = lambda: TARGETS
    child.mediator.end_proof()
    child.mediator.start()
    said = child.result()
    assert said == {"hidden": [errno.ENOENT] * 2, "other": errno.ENOENT, "outside": errno.ECONNREFUSED,
                    "link": errno.ENOENT, "port": errno.EINPROGRESS, "own": 0}, said
    link = os.path.join(os.path.dirname(outside), "d.sock")
    found = {a["target"]: a for a in child.mediator.attempt_summary()}
    # not app.sock (no engine's), not the run's own fake engine on 2376
    assert set(found) == {hidden, outside, link, "127.0.0.1:2375"}, found
    assert found[link]["reason"].startswith(f"a symlink to {hidden}: "), found[link]
    assert found[outside]["reason"] == "bound outside the run" and found[outside]["count"] == 1
    assert found[hidden]["count"] == 2 and found[hidden]["reason"].startswith("an engine's socket name")
    assert found["127.0.0.1:2375"]["count"] == 1
    caller = found[hidden]["callers"]
    assert len(caller) == 1 and caller[0]["pid"] > 0  # one caller, named once for both tries
    assert caller[0]["command"] == os.path.basename(sys.executable)[:15]
    # the refusal is in connects_refused as before; the kernel's answers are not refusals
    assert [r["target"] for r in child.mediator.summary()] == [outside]


def test_a_path_named_by_the_caller_s_docker_host_is_an_attempt(spawn, tmp_path, monkeypatch):  # noqa: F811
    custom = str(tmp_path / "gone" / "api")  # no engine's name: only DOCKER_HOST makes it one
    monkeypatch.setenv("DOCKER_HOST", f"unix://{custom}")
    code = TRIES.split("own = ")[0] + f"R['custom'] = [unix({custom!r}) for _ in range(3)]\n" \
        "print(json.dumps(R), flush=True)\n"
    child = spawn(code, start=False)
    child.mediator._make_targets = lambda: TARGETS
    child.mediator.end_proof()
    child.mediator.start()
    assert child.result() == {"custom": [errno.ENOENT] * 3}
    [attempt] = child.mediator.attempt_summary()
    assert attempt["target"] == custom and attempt["count"] == 3, attempt
    assert attempt["reason"] == "the caller's DOCKER_HOST, hidden from the run (ENOENT)"
    assert len(attempt["callers"]) == 1


def test_no_dockers_own_check_inside_a_run_is_no_attempt(tmp_path):
    """`pytest --no-docker` and the stanza run `no-docker check` inside the run: its P2 reads
    the listening tables instead of connecting, so no session reports "12 attempts to reach an
    engine" of its own (it did: every engine port, tried by the check). A listener of the
    command on an engine port still fails the check."""
    import subprocess

    from isolation_helpers import bwrap_works

    if bwrap_works():
        import pytest

        pytest.skip(str(bwrap_works()))
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")  # a session to collect
    session = subprocess.run([sys.executable, "-m", "pytest", "--no-docker", "-q", "-p",
                              "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert session.returncode == 0 and "1 passed" in session.stdout, session.stderr
    assert "attempt" not in session.stderr, session.stderr
    check = [sys.executable, "-m", "no_docker.supervisor.cli", "check"]
    listener = ("import socket, subprocess, sys; s = socket.socket(); s.bind(('127.0.0.1', 2375)); "
                f"s.listen(); sys.exit(subprocess.run({check!r}).returncode)")
    held = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--quiet", "--",
                           sys.executable, "-c", listener], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert held.returncode == 125, held.stderr
    assert "P2 not proven: a listening TCP socket on port 2375" in held.stderr, held.stderr
