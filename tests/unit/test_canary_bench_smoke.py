"""The canary benchmark runs small and prints the JSON the figures are read from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_canary.py"


@pytest.mark.parametrize("extra", [[], ["--new-connections"]])
def test_bench_canary_smoke(extra):
    done = subprocess.run([sys.executable, str(BENCH), "--clients", "5", "--requests", "200", *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["answered"], result["in_log"], result["lost"]) == (200, 200, 0)
    assert result["seq_without_gaps"] is True and result["canary_exit"] == 0
    assert result["connection_per_request"] is bool(extra)
    assert result["recorded_requests_per_s"] > 0
