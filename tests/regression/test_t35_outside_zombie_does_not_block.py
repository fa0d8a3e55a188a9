"""T-35: a zombie that is not the run's does not block an end.

This test process keeps an unreaped child (state Z) for the whole case; a run with a daemon
ends and is proven empty ("0 left", status 0) all the same. A zombie is dead: it runs no code
and forks nothing; whose it is does not matter.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from ending_cases import (
    daemon,
    kill_token,
    patched_run_argv,
    require_bwrap,
    run_to_end,
    settled_without,
    token,
)


def _state(pid: int) -> str:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return data[data.rfind(b")") + 2 :].split()[0].decode()


@pytest.mark.parametrize("shape", ["default", "no-cgroup"])
def test_outside_zombie_does_not_block_the_proof(tmp_path, shape):
    """no-cgroup: the run has no v2 leaf (an ordinary user without delegation), so the proof
    passes over /proc are the whole proof; with a leaf, its emptiness would settle a zombie the
    passes could not (docs/supervision.md, "When the cgroup is the proof")."""
    require_bwrap()
    zombie = subprocess.Popen(["true"])
    tok = token()
    try:
        for _ in range(200):
            if _state(zombie.pid) == "Z":
                break
            time.sleep(0.01)
        assert _state(zombie.pid) == "Z"
        args = ["--end-timeout", "2", "--", "sh", "-c", f"{daemon(tok)}; sleep 0.1"]
        argv = None if shape == "default" else patched_run_argv("nocgroup", tmp_path / "unused", *args)
        result = run_to_end(args if argv is None else [], cwd=tmp_path, argv=argv)
        assert result.returncode == 0, result.stderr
        assert "0 left" in result.stderr, result.stderr
        assert _state(zombie.pid) == "Z", "the outside zombie was touched"
        assert settled_without(tok) == []
    finally:
        zombie.wait(timeout=30)
        kill_token(tok)
