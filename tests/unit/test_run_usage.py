"""The run's CPU time and peak memory (issue 28 item 9): read from the run's cgroup where it
counts them, else from what the ending reaped; in the ending's status line and --report.
``time no-docker run`` cannot see them (docs/supervision.md, "CPU time and peak memory")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from isolation_helpers import BWRAP, bwrap_works
from no_docker.supervisor.ending.algorithm import EndReport, Usage, usage_of
from no_docker.supervisor.ending.cgroup import RunCgroup
from nonroot import memory_limit_args

# Burns CPU in user space for SECONDS of its own CPU time, then touches MiB of memory.
BURN = """
import sys, time
seconds, mib = float(sys.argv[1]), int(sys.argv[2])
t = time.process_time()
x = 0
while time.process_time() - t < seconds:
    for i in range(20000):
        x += i
b = bytearray(mib << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
"""


def test_the_cgroup_s_figures_win_and_the_reaped_ones_fill_in():
    both = usage_of((1_500_000, 250_000, 64 << 20), (9.0, 9.0, 1))
    assert both == Usage(1500.0, 250.0, "cgroup", 64 << 20, "cgroup")
    # a v2 leaf without the memory controller: CPU from the cgroup, memory from the reaped
    assert usage_of((2000, 1000, None), (0.5, 0.25, 2048)) == Usage(2.0, 1.0, "cgroup", 2 << 20, "reaped")
    # no cgroup at all (an ordinary user): all reaped; ru_maxrss is KiB
    assert usage_of(None, (0.5, 0.25, 2048)) == Usage(500.0, 250.0, "reaped", 2 << 20, "reaped")
    assert usage_of((None, None, None), None) is None
    assert usage_of(None, None) is None
    assert usage_of((5, 5, None), None) == Usage(0.005, 0.005, "cgroup", None, None)


@given(st.integers(0, 10**12), st.integers(0, 10**12), st.one_of(st.none(), st.integers(0, 1 << 50)))
def test_the_cpu_is_user_plus_sys_whatever_the_figures(user, system, peak):
    usage = usage_of((user, system, peak), None)
    doc = usage.to_json()
    assert doc["cpu_ms"] == pytest.approx((user + system) / 1000, abs=0.002)
    assert doc["cpu_from"] == "cgroup" and doc["peak_memory_bytes"] == peak
    assert usage.words().startswith("CPU ") and ("peak memory" in usage.words()) == (peak is not None)


def test_the_status_line_says_cpu_and_memory_and_where_memory_comes_from():
    report = EndReport("r1", clean=True, killed=2, elapsed_ms=4.0,
                       usage=Usage(22900.0, 510.0, "cgroup", int(312.4 * (1 << 20)), "reaped"))
    assert report.line() == ("run r1 ended, 2 processes killed, 0 left, 4 ms; CPU 23.41 s (user 22.90 + "
                             "sys 0.51), peak memory 312.4 MiB (largest process)")
    assert report.to_json()["usage"]["cpu_ms"] == 23410.0
    assert EndReport("r1", clean=True, elapsed_ms=4.0).line() == \
        "run r1 ended, 0 processes killed, 0 left, 4 ms"
    assert EndReport("r1", clean=True).to_json()["usage"] is None


def test_a_cgroup_s_counters_are_read_from_its_files(tmp_path):
    leaf, v1 = tmp_path / "leaf", tmp_path / "v1"
    leaf.mkdir()
    v1.mkdir()
    (leaf / "cpu.stat").write_text("usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\nnr_periods 0\n")
    assert RunCgroup(str(leaf)).usage() == (2000, 1000, None)
    (v1 / "memory.max_usage_in_bytes").write_text("4096\n")
    assert RunCgroup(str(leaf), memory_v1=str(v1)).usage() == (2000, 1000, 4096)
    (leaf / "memory.peak").write_text("8192\n")  # v2's own count first
    assert RunCgroup(str(leaf), memory_v1=str(v1)).usage() == (2000, 1000, 8192)
    assert RunCgroup(None).usage() == (None, None, None)
    assert RunCgroup(str(tmp_path / "gone")).usage() == (None, None, None)


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(BWRAP is None or bwrap_works() is not None, reason="needs a working bwrap")
def test_a_run_s_cpu_time_is_counted_though_time_would_not_see_it(tmp_path):
    report = tmp_path / "report.json"
    before = os.times()
    # The limit gives the run a cgroup to count from where this user may have one; an
    # ordinary user's run is counted from what its ending reaped.
    result = _run(["--report", str(report), *memory_limit_args("512M"), "--",
                   sys.executable, "-I", "-c", BURN, "0.4", "40"], cwd=str(tmp_path))
    after = os.times()
    assert result.returncode == 0, result.stderr
    usage = json.loads(report.read_text())["usage"]
    assert usage["cpu_ms"] >= 380, usage  # the run's own 0.4 s (the interpreter's start on top)
    assert usage["peak_memory_bytes"] >= 40 << 20, usage
    assert f"CPU {usage['cpu_ms'] / 1000:.2f} s" in result.stderr, result.stderr
    # What time(1) would say: the supervisor's own children's CPU, not the run's 0.4 s.
    children = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if usage["cpu_from"] == "cgroup":
        assert children < 0.38, f"the caller saw {children:.2f} s: no longer a reason for this figure"
