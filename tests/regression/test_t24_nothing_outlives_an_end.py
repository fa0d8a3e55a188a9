"""T-24: nothing outlives a normal end, a failing CMD, or a SIGKILLed CMD.

CMD leaves a setsid daemon, a plain background child and a TERM-ignoring loop behind, then
ends in one of three ways. `no-docker run` returns CMD's status (128+9 for SIGKILL), says
"0 left", removes its marker and its cgroups, and no process carrying the token is alive.
"""

from __future__ import annotations

import pytest
from ending_cases import (
    cgroups_left,
    daemon,
    kill_token,
    report_of,
    require_bwrap,
    run_to_end,
    runs_json,
    settled_without,
    token,
)

ENDINGS = {"exit-0": ("exit 0", 0), "exit-3": ("exit 3", 3), "sigkill-cmd": ("kill -KILL $$", 137)}


@pytest.mark.parametrize("how", sorted(ENDINGS))
def test_nothing_outlives_the_end(tmp_path, how):
    require_bwrap()
    tok = token()
    tail, expected = ENDINGS[how]
    script = (f"{daemon(tok)}; (sleep {tok} </dev/null >/dev/null 2>&1 &); "
              f"sh -c 'trap \"\" TERM HUP INT; exec sleep {tok}' </dev/null >/dev/null 2>&1 & "
              f"sleep 0.2; {tail}")
    report = tmp_path / "report.json"
    try:
        result = run_to_end(["--report", str(report), "--", "sh", "-c", script], cwd=tmp_path)
        assert result.returncode == expected, result.stderr
        assert "0 left" in result.stderr, result.stderr
        assert settled_without(tok) == [], "a process of the run outlived it"
        doc = report_of(report)
        assert doc["ending"]["clean"] is True
        assert runs_json() == [], "the run's marker was not removed"
        assert cgroups_left(doc["run_id"]) == []
    finally:
        kill_token(tok)
