"""T-36: a bounded fork bomb is ended and proven within 1 s.

``--max-pids 400`` bounds the bomb (a pids cgroup: it cannot take the machine). CMD lights it
and exits while it storms; the run must be ended and *proven* empty, and the supervisor's own
figure for the ending (``--report``: ``timings_ms.ending``) must be under 1000 ms.
"""

from __future__ import annotations

from ending_cases import (
    cgroups_left,
    kill_token,
    report_of,
    require_bwrap,
    run_to_end,
    settled_without,
    token,
)
from nonroot import require_pids_limit


def test_bounded_fork_bomb_is_ended_within_a_second(tmp_path):
    require_bwrap()
    require_pids_limit()  # a fork bomb is never lit without a bound
    tok = token()
    report = tmp_path / "report.json"
    bomb = f"( b() {{ sleep {tok} & b | b & }}; b ) 2>/dev/null & sleep 1; exit 0"
    try:
        result = run_to_end(["--max-pids", "400", "--report", str(report), "--", "bash", "-c", bomb],
                            cwd=tmp_path, timeout=120)
        assert result.returncode == 0, result.stderr
        doc = report_of(report)
        assert doc["ending"]["clean"] is True, doc["ending"]
        assert doc["timings_ms"]["ending"] < 1000, f"ending took {doc['timings_ms']['ending']} ms"
        assert settled_without(tok) == []
        assert cgroups_left(doc["run_id"]) == []
    finally:
        kill_token(tok)
