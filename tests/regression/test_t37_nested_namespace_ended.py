"""T-37: a nested user+pid namespace inside the run is ended, and counted as the run's.

Inside the run, ``unshare -Upf`` makes a user+pid namespace below the run's and starts a
daemon there (``-r`` cannot write a uid map inside a run: its user namespace maps only the
caller's uid, so the nested one stays unmapped, which changes nothing for the pid
namespace). (1) While the run is up, every process of the nested namespace is reported a
*member* by a proof pass (not an outsider: nobody leaves a pid namespace, but one can go
deeper). (2) When the run is ended (SIGTERM to the supervisor), nothing of the nested
namespace is left.
"""

from __future__ import annotations

import signal

from ending_cases import (
    Supervisor,
    alive_with_token,
    end_all,
    kill_token,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)
from no_docker.supervisor.ending.membership import LiveTable, RunNamespace
from no_docker.supervisor.ending.procfs import NsIdentity, ProcFS
from no_docker.supervisor.ending.snapshot import take_pass, verdict


def test_nested_namespace_members_are_seen_and_ended(tmp_path):
    require_bwrap()
    tok = token()
    nested = (f"unshare -Upf sh -c 'sleep {tok} & exec sleep {tok}' </dev/null >/dev/null 2>&1 & "
              f"sleep 0.3; echo ready; sleep {tok}")
    sup = Supervisor(["--", "sh", "-c", nested], cwd=tmp_path)
    try:
        sup.wait_line("ready")
        fs = ProcFS()
        rows = [r for r in runs_json() if r["owner_pid"] == sup.pid]
        assert rows, "the run has no marker"
        row_state = rows[0]
        from no_docker.supervisor.ending import markers

        rec = markers.read_record(markers.marker_dir(markers.state_dir(), row_state["run_id"]))
        run_ns = RunNamespace(NsIdentity(rec.ns_id, rec.ns_inode), rec.ns_depth)
        deeper = [pid for pid in alive_with_token(tok) if len(fs.nspid(pid)) > rec.ns_depth + 1]
        assert deeper, "unshare -Upf did not make a nested namespace inside the run"
        members = {i.pid for i in verdict(take_pass(LiveTable(fs, run_ns)), run_can_fork=True).members}
        assert set(deeper) <= members, "processes of a nested namespace were not counted as the run's"
        sup.signal(signal.SIGTERM)
        code, err = sup.finish()
        assert code == 128 + signal.SIGTERM, err
        assert settled_without(tok) == []
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
