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


@needs_bwrap
def test_check_json_says_what_was_tried_and_what_the_kernel_answered(tmp_path):
    """Issue 28.5: every detail was "" although `check --help` lists it."""
    result = run_no_docker(["--quiet", "--", *CHECK, "--json"], cwd=tmp_path)
    detail = {p["id"]: p["detail"] for p in json.loads(result.stdout)["properties"]}
    assert all(detail.values()), detail
    assert "pid namespace pid:[" in detail["P1"] and "outside pid:[" in detail["P1"]
    assert "interfaces: lo only" in detail["P2"] and "all refused" in detail["P2"]
    assert "CapEff 0000000000000000" in detail["P5"] and "NoNewPrivs 1" in detail["P5"]
    assert "Seccomp 2" in detail["P5"]
    assert "ECONNREFUSED" in detail["P12"]
    assert "socket(AF_VSOCK): E" in detail["P13"]
    # the text table stays one short line per proven property
    table = run_no_docker(["--quiet", "--", *CHECK], cwd=tmp_path).stdout
    assert len(table.splitlines()) == 13
    assert "pid:[" not in table and "CapEff" not in table


def test_p5_detail_reads_the_status_fields():
    from no_docker.supervisor.isolation.check import p5_detail

    text = "Name:\tx\nCapEff:\t0000000000000000\nCapPrm:\t0\nNoNewPrivs:\t1\nSeccomp:\t2\n"
    said = p5_detail(text)
    assert said.startswith("CapEff 0000000000000000, CapPrm 0, CapBnd ?, CapAmb ?; NoNewPrivs 1; Seccomp 2")


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
        # A tmpfs on /run holds the plan: bwrap makes its mount point there, which an ordinary
        # user cannot do in the host's /run (and root would leave it on the host); read-only after,
        # as no-docker's own /run is, so only the weakening named in each case fails.
        return subprocess.run([BWRAP, *flags, "--tmpfs", "/run", "--ro-bind-data", str(fd), PLAN_PATH,
                               "--remount-ro", "/run", "--", *CHECK],
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
    # Everything but the file-system view: the host's /tmp (and its sockets) is still there.
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
