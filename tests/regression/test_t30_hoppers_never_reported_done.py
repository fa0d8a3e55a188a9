"""T-30: a fork chain that hops is never reported done while it runs.

Four pid-hoppers (fork, the parent exits, forever: a snapshot taken while they run misses them,
notes/process-ending.md §0) outlive CMD. When `no-docker run` says "0 left" and returns, every
hopper is gone. The oracle is not a /proc scan (which a hopper evades) but a heartbeat file
each hopper appends to on every hop: it must stop growing.
"""

from __future__ import annotations

import time

from ending_cases import heartbeat_stopped, hopper, require_bwrap, run_to_end


def test_hoppers_are_gone_when_the_run_says_done(tmp_path):
    require_bwrap()
    beats = [tmp_path / f"hop{i}" for i in range(4)]
    script = " ".join(hopper(str(b)) for b in beats) + " sleep 0.5; exit 0"
    result = run_to_end(["--work", str(tmp_path), "--", "sh", "-c", script], cwd=tmp_path)
    done = time.monotonic()
    assert result.returncode == 0, result.stderr
    assert "0 left" in result.stderr, result.stderr
    assert all(b.exists() and b.stat().st_size > 0 for b in beats), "the hoppers never hopped"
    assert all(heartbeat_stopped(b) for b in beats), (
        f"a hopper still ran {time.monotonic() - done:.1f} s after the run was reported done")
