"""``no-docker check``: exit 0 and a table inside a run; 125 outside or in a weaker sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from isolation_helpers import BWRAP, bwrap_works, run_no_docker
from no_docker.supervisor.isolation.plan import encode_plan, namespace_ids
from no_docker.supervisor.isolation.policy import PLAN_PATH

_why = bwrap_works()
needs_bwrap = pytest.mark.skipif(_why is not None, reason=_why or "")
CHECK = [sys.executable, "-m", "no_docker.supervisor.cli", "check"]


@needs_bwrap
def test_check_inside_a_run_proves_every_property(tmp_path):
    result = run_no_docker(["--quiet", "--", *CHECK], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split()[:2] for line in result.stdout.splitlines()]
    assert rows == [[f"P{i}", "proven"] for i in range(1, 14)]


@needs_bwrap
def test_check_json_inside_a_run(tmp_path):
    result = run_no_docker(["--quiet", "--", *CHECK, "--json"], cwd=tmp_path)
    doc = json.loads(result.stdout)
    assert doc["proven"] is True and doc["inside_run"] is True
    assert {p["state"] for p in doc["properties"]} == {"proven"}


def test_check_outside_fails_naming_p1(tmp_path):
    result = subprocess.run(CHECK, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 125
    assert result.stderr.startswith("no-docker: P1 not proven"), result.stderr
    assert "not tried" in result.stdout  # nothing past P1 was attempted


def _weaker(tmp_path, flags: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")
    """`no-docker check` in a bwrap sandbox made without no-docker's policy, given a real plan."""
    plan = encode_plan([(f"ns.{k}", v) for k, v in namespace_ids().items()]
                             + [("hidden", "/run"), ("hidden", "/tmp"), ("home", os.environ.get("HOME", ""))])
    fd = os.memfd_create("plan", 0)
    os.write(fd, plan)
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        return subprocess.run([BWRAP, *flags, "--ro-bind-data", str(fd), PLAN_PATH, "--", *CHECK],
                              cwd=tmp_path, pass_fds=(fd,), capture_output=True, text=True, timeout=60,
                              env=env)
    finally:
        os.close(fd)


@needs_bwrap
@pytest.mark.parametrize("flags, failed", [
    (["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"], "P5"),
    # No --clearenv: $DOCKER_HOST (set for this test) crosses.
    (["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--cap-drop", "ALL"], "P6"),
    # Nested user namespaces not denied: P9 makes one (in a child) and refuses.
    (["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--cap-drop", "ALL",
      "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"], "P9"),
    # Everything but the file-system view: the host's /run (and its sockets) is still there.
    (["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--cap-drop", "ALL",
      "--unshare-user", "--disable-userns",
      "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"], "P3"),
])
def test_check_in_a_weaker_sandbox_fails(tmp_path, flags, failed):
    if os.geteuid() != 0 and failed == "P5":
        pytest.skip("as an ordinary user bwrap drops every capability by itself")
    result = _weaker(tmp_path, flags)
    assert result.returncode == 125, result.stdout + result.stderr
    assert " not proven: " in result.stderr
    assert result.stderr.startswith(f"no-docker: {failed} not proven"), result.stderr
