"""T-31: two runs at once never touch each other's processes.

Run A (a daemon and CMD sleeping) is up; run B (its own daemon) starts, ends and is proven
empty; every process of A is still alive, with the same pids. Then A is ended by SIGTERM.
"""

from __future__ import annotations

import signal
import time

from ending_cases import (
    Supervisor,
    alive_with_token,
    daemon,
    end_all,
    kill_token,
    require_bwrap,
    run_to_end,
    settled_without,
    token,
)


def test_ending_one_run_leaves_the_other_alone(tmp_path):
    require_bwrap()
    tok_a, tok_b = token(), token()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Supervisor(["--", "sh", "-c", f"{daemon(tok_a)}; sleep 0.2; echo ready; sleep {tok_a}"],
                   cwd=tmp_path / "a")
    try:
        a.wait_line("ready")
        time.sleep(0.2)  # CMD forks its last `sleep` after printing "ready"
        before = sorted(alive_with_token(tok_a))
        assert len(before) >= 3
        b = run_to_end(["--", "sh", "-c", f"{daemon(tok_b)}; sleep 0.2; exit 0"], cwd=tmp_path / "b")
        assert b.returncode == 0, b.stderr
        assert settled_without(tok_b) == []
        after = alive_with_token(tok_a)
        assert set(before) <= set(after), f"ending run B ended {sorted(set(before) - set(after))} of run A"
        a.signal(signal.SIGTERM)
        code, err = a.finish()
        assert code == 128 + signal.SIGTERM, err
        assert settled_without(tok_a) == []
    finally:
        a.kill()
        kill_token(tok_a)
        kill_token(tok_b)
        end_all()
