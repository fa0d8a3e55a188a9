"""Smoke test of tests/bench/bench_run.py: runs it small and checks its JSON (not a timing test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_helpers import bwrap_works

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_run.py"


@pytest.mark.skipif(bwrap_works() is not None, reason=bwrap_works() or "")
def test_bench_run_prints_medians_and_ratios():
    done = subprocess.run([sys.executable, str(BENCH), "--runs", "2", "--warmup", "0"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert doc["runs"] == 2 and doc["errors"] == {}
    for name in ("no_docker_direct", "bwrap_same_flags"):
        assert doc["median_ms"][name] > 0
    assert "no_docker_direct/bwrap_same_flags" in doc["ratios"]
    names = {"no_docker", "no_docker_direct", "bwrap_same_flags", "unshare", "firejail"}
    assert set(doc["median_ms"]) | set(doc["missing"]) == names


def test_bench_run_rejects_bad_arguments():
    done = subprocess.run([sys.executable, str(BENCH), "--runs", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--runs must be >= 1" in done.stderr
