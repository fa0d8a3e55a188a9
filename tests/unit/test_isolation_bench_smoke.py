"""Smoke test of tests/bench/bench_run.py: runs it small and checks its JSON (not a timing test).

It builds the regular (non-editable) install the bench times into a cache dir of the test's own
(~3 s: a wheel of this tree, a venv, pip install) and checks that its start-up is that of a
clean install: no editable finder, no coverage hook, no_docker imported from the venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_helpers import bwrap_works

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_run.py"
NAMES = {"no_docker", "no_docker_direct", "bwrap_same_flags", "unshare", "firejail", "python_spawns_bwrap",
         "no_docker_warm"}


@pytest.mark.skipif(bwrap_works() is not None, reason=bwrap_works() or "")
def test_bench_run_prints_medians_cpu_ratios_and_targets(tmp_path):
    cache = tmp_path / "cache"
    argv = [sys.executable, str(BENCH), "--runs", "2", "--warmup", "0", "--cache-dir", str(cache)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert doc["runs"] == 2 and doc["errors"] == {}
    installed = doc["regular_install"]
    assert installed["problems"] == [] and installed["cached"] is False
    assert installed["script"].startswith(str(cache) + "/")
    assert installed["pth_files"] == ["_no_docker_bench_deps.pth"]
    for name in ("no_docker", "no_docker_direct", "bwrap_same_flags", "python_spawns_bwrap",
                 "no_docker_warm"):
        assert doc["median_ms"][name] > 0 and doc["cpu_median_ms"][name] > 0
        assert doc["wall_ms"][name]["n"] == 2
    assert set(doc["median_ms"]) | set(doc["missing"]) == NAMES
    assert "no_docker/bwrap_same_flags" in doc["ratios"]["wall"]
    assert "no_docker/bwrap_same_flags" in doc["ratios"]["cpu"]
    assert set(doc["targets"]) == {"wall_at_most_30_ms", "wall_below_firejail", "cpu_at_most_1_5x_firejail",
                                   "cpu_at_most_4x_firejail", "wall_at_most_6x_bwrap"}
    if "firejail" in doc["median_ms"]:
        assert all(row["met"] in (True, False) for row in doc["targets"].values())
    else:  # absent: said so, and the targets against it are not judged
        assert "not installed" in doc["missing"]["firejail"]
        assert doc["targets"]["wall_below_firejail"]["met"] is None
        assert "firejail" in doc["targets"]["cpu_at_most_1_5x_firejail"]["why"]
    assert doc["orphans_left_running"] == 0
    assert "| target | value | met |" in done.stderr  # the Markdown table


def test_bench_run_rejects_bad_arguments():
    done = subprocess.run([sys.executable, str(BENCH), "--runs", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--runs must be >= 1" in done.stderr
