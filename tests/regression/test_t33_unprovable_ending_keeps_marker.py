"""T-33: an ending that cannot be shown gives 125, keeps the marker, prints `no-docker end`.

In a child interpreter the supervisor's kills are made ineffective (signals not delivered,
``cgroup.kill`` refused: what a task stuck in the kernel looks like). Members stay visible to
every proof pass until ``--end-timeout``; the run must not be called ended: 125, the marker
kept with state ``not-proven``, and the exact command that finishes the job, which then works.
"""

from __future__ import annotations

import re
import signal
import subprocess

from ending_cases import (
    Supervisor,
    cli,
    daemon,
    end_all,
    kill_token,
    patched_run_argv,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)


def test_members_that_cannot_be_ended_give_125_and_keep_the_marker(tmp_path):
    require_bwrap()
    tok = token()
    try:
        argv = patched_run_argv("unkillable", tmp_path / "unused", "--end-timeout", "1", "--",
                                "sh", "-c", f"{daemon(tok)}; sleep 0.2; echo ready; sleep {tok}")
        sup = Supervisor([], cwd=tmp_path, argv=argv)
        try:
            sup.wait_line("ready")
            sup.signal(signal.SIGTERM)  # the ending starts while CMD and the daemon run
            code, err = sup.finish()
        finally:
            sup.kill()
        assert code == 125, err
        found = re.search(r"no-docker end (\S+)", err)
        assert found, err
        rows = runs_json()
        assert [(r["run_id"], r["state"]) for r in rows] == [(found.group(1), "not-proven")]
        ended = subprocess.run(cli("end", found.group(1)), capture_output=True, text=True, timeout=60)
        assert ended.returncode == 0, ended.stderr
        assert runs_json() == []
        assert settled_without(tok) == []
    finally:
        kill_token(tok)
        end_all()
