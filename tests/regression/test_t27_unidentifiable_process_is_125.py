"""T-27: 125 when a process of the run cannot be identified.

The supervisor's procfs root is replaced (in a child interpreter: the injectable root of
``supervisor/procfs.py``) by one where a member looks alive forever and its pid-namespace link
cannot be read — as ``/proc/1/ns/*`` gives EACCES even to root on this machine kind. An
unreadable marker is *unknown*, never "not a member": the run exits 125, prints the exact
`no-docker end RUN_ID`, and keeps its marker; that command then finishes the job.
"""

from __future__ import annotations

import re
import signal
import subprocess

from ending_cases import (
    Supervisor,
    cli,
    end_all,
    kill_token,
    patched_run_argv,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)


def test_unreadable_member_gives_125_and_the_end_command(tmp_path):
    require_bwrap()
    tok = token()
    try:
        argv = patched_run_argv("unreadable", tmp_path / "fakeproc", "--end-timeout", "1", "--",
                                "sh", "-c", f"sleep {tok} & sleep 0.2; echo ready; sleep {tok}")
        sup = Supervisor([], cwd=tmp_path, argv=argv)
        try:
            sup.wait_line("ready")
            sup.signal(signal.SIGTERM)  # the ending starts while the namespace's init is alive
            code, err = sup.finish()
        finally:
            sup.kill()
        assert code == 125, err
        found = re.search(r"no-docker end (\S+)", err)
        assert found, err
        assert "cannot be read" in err
        rows = runs_json()
        assert [r["run_id"] for r in rows] == [found.group(1)] and rows[0]["state"] == "not-proven"
        ended = subprocess.run(cli("end", found.group(1)), capture_output=True, text=True, timeout=60)
        assert ended.returncode == 0, ended.stderr
        assert runs_json() == []
        assert settled_without(tok) == []
    finally:
        kill_token(tok)
        end_all()
