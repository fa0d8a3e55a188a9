"""The ending benchmark runs small and prints the JSON the closing note quotes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nonroot import pids_limit_unavailable

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_ending.py"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_bench_ending_smoke():
    out = subprocess.run([sys.executable, str(BENCH), "--bomb", "40", "--extra", "30", "--repeat", "1"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["bench"] == "ending"
    assert doc["plain_cmd_exit_to_proven"]["ms"]["n"] == 1
    if pids_limit_unavailable() is not None:  # an ordinary user: the bench says why, no traceback
        assert doc["fork_bomb"]["skipped"].startswith("this user cannot make a cgroup"), doc
        assert doc["proof_pass"]["skipped"] == doc["fork_bomb"]["skipped"], doc
        pytest.skip(f"the fork bomb and the pass need a pids cgroup: {doc['fork_bomb']['skipped']}")
    bomb = doc["fork_bomb"]
    assert bomb["processes"]["median"] >= 20
    for key in ("ended_and_proven_ms", "compare_kill_namespace_init_only_ms", "compare_cgroup_kill_only_ms"):
        assert bomb[key]["median"] > 0
    proof = doc["proof_pass"]
    assert proof["processes_seen"]["median"] >= 30
    assert proof["us_per_process"]["median"] > 0 and proof["raw_syscalls_only_us_per_process"]["median"] > 0
