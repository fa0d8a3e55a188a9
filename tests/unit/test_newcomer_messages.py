"""What a first-time user meets (issue 18): a nested run, a command that needs the network,
where a run may not start. Each message is one line that says what happened and what to do.
Real bwrap, real namespaces; the kernel's own counters and marks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from isolation_helpers import bwrap_works, run_no_docker

_why = bwrap_works()
if _why:
    pytest.skip(_why, allow_module_level=True)

NO_DOCKER = [sys.executable, "-m", "no_docker.supervisor.cli"]
CONNECT = ("import socket\n"
           "for host in ('198.51.100.7', '203.0.113.9'):\n"
           "    try: socket.create_connection((host, 80), timeout=1)\n"
           "    except OSError as err: print(err.errno)\n")


def test_a_nested_run_says_it_is_already_inside_a_run(tmp_path):
    result = run_no_docker(["--quiet", "--", *NO_DOCKER, "run", "--", "true"], cwd=tmp_path)
    assert result.returncode == 125, result.stderr
    assert "already inside a no-docker run" in result.stderr
    assert "working bubblewrap" not in result.stderr
    assert "Traceback" not in result.stderr


def test_a_command_that_tried_the_network_gets_one_line_at_the_end(tmp_path):
    report = tmp_path / "report.json"
    result = run_no_docker(["--report", str(report), "--", sys.executable, "-c", CONNECT], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["101", "101"]  # ENETUNREACH inside
    lines = [line for line in result.stderr.splitlines() if "network" in line]
    assert lines == ["no-docker: the command tried to reach the network (2 times, no route): there is "
                     "no network inside a run; install what it needs before the run, outside it"]
    assert json.loads(report.read_text())["network_attempts"] == 2


@pytest.mark.parametrize("command", [["true"], [*NO_DOCKER, "check"]])
def test_no_network_line_when_nothing_tried_the_network(tmp_path, command):
    """`no-docker check` inside a run (the pytest plugin and the stanza run it) tries one IPv4
    and one IPv6 route as its proof: that is not the command trying the network."""
    report = tmp_path / "report.json"
    result = run_no_docker(["--report", str(report), "--", *command], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "network" not in result.stderr
    assert json.loads(report.read_text())["network_attempts"] == 0


@pytest.mark.parametrize("how", ["--work", "cwd"])
def test_home_as_the_work_dir_is_a_usage_error_whichever_way_it_is_asked(tmp_path, how):
    home = tmp_path / "home"
    home.mkdir()
    env = {**__import__("os").environ, "HOME": str(home)}
    args = ["--work", str(home), "--", "true"] if how == "--work" else ["--", "true"]
    result = run_no_docker(args, cwd=home if how == "cwd" else tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert "$HOME" in result.stderr and "--work" in result.stderr


@pytest.mark.parametrize("how", ["--work", "cwd"])
def test_root_as_the_work_dir_is_a_usage_error_whichever_way_it_is_asked(tmp_path, how):
    args = ["--work", "/", "--", "true"] if how == "--work" else ["--", "true"]
    result = run_no_docker(args, cwd=Path("/") if how == "cwd" else tmp_path)
    assert result.returncode == 2, result.stderr


def test_check_names_each_property_not_only_its_number(tmp_path):
    from no_docker.supervisor.isolation.check import NAMES

    result = run_no_docker(["--quiet", "--", *NO_DOCKER, "check"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()
    assert len(rows) == 13
    for row in rows:
        prop, state, name = row.split(None, 2)
        assert state == "proven" and name == NAMES[prop] and len(name) > 10


def test_a_missing_rw_dir_says_how_to_make_it(tmp_path):
    """Issue 18.10: the README's `--rw ~/.cache/pip` on a fresh machine: exit 2, and what to do."""
    missing = tmp_path / "home" / ".cache" / "pip"
    result = run_no_docker(["--rw", str(missing), "--", "true"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (f"no-docker: --rw {missing}: no such file or directory "
                                     f"(create it first: mkdir -p {missing})")
