"""T-38: stopped members are ended.

CMD leaves a SIGSTOPped daemon and a SIGSTOPped child that ignores SIGTERM, then the
supervisor is told to stop (SIGTERM) while they sit stopped. A stopped process does not act on
SIGTERM until continued; it must be gone all the same, and the run proven empty.
"""

from __future__ import annotations

import signal

from ending_cases import Supervisor, end_all, kill_token, require_bwrap, runs_json, settled_without, token


def test_stopped_members_are_ended(tmp_path):
    require_bwrap()
    tok = token()
    script = (f"(setsid sleep {tok} </dev/null >/dev/null 2>&1 & echo $! > pid1); "
              f"sh -c 'trap \"\" TERM; exec sleep {tok}' </dev/null >/dev/null 2>&1 & echo $! > pid2; "
              "sleep 0.2; kill -STOP $(cat pid1) $(cat pid2); echo ready; "
              f"sleep {tok}")
    sup = Supervisor(["--work", str(tmp_path), "--", "sh", "-c", script], cwd=tmp_path)
    try:
        sup.wait_line("ready")
        sup.signal(signal.SIGTERM)
        code, err = sup.finish()
        assert code == 128 + signal.SIGTERM, err
        assert settled_without(tok) == []
        assert runs_json() == []
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
