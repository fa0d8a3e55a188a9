"""T-37: a pid namespace nested in the run's is ended, and counted as the run's.

A pid namespace nested in the run's, with a daemon in it. (1) While the run is up, every
process of the nested namespace is reported a *member* by a proof pass (not an outsider:
nobody leaves a pid namespace, but one can go deeper). (2) When the run is ended (SIGTERM to
the supervisor), nothing of the nested namespace is left.

Since T-48 nothing inside a run can make a user namespace, and without one no pid namespace
either (no capability): the nested namespace is made from outside, by root entering the
run's user and pid namespaces (``nsenter -U -p``) and going one deeper there (``unshare
-pf``). That is the nesting the run itself could once make; what this case guards,
membership through nesting and the kernel's ending of it, is unchanged.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
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
    if shutil.which("nsenter") is None or shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root, nsenter and unshare (util-linux) to nest a namespace in the run's")
    tok = token()
    sup = Supervisor(["--", "sh", "-c", f"echo ready; sleep {tok}"], cwd=tmp_path)
    entered = None
    try:
        sup.wait_line("ready")
        fs = ProcFS()
        rows = [r for r in runs_json() if r["owner_pid"] == sup.pid]
        assert rows, "the run has no marker"
        row_state = rows[0]
        from no_docker.supervisor.ending import markers

        rec = markers.read_record(markers.marker_dir(markers.state_dir(), row_state["run_id"]))
        run_ns = RunNamespace(NsIdentity(rec.ns_id, rec.ns_inode), rec.ns_depth)
        nest = ["nsenter", "-t", str(rec.init.pid), "-U", "-p", "--", "unshare", "-pf",
                "sh", "-c", f"sleep {tok} & exec sleep {tok}"]
        entered = subprocess.Popen(nest, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        deeper: list[int] = []
        while len(deeper) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
            deeper = [pid for pid in alive_with_token(tok) if len(fs.nspid(pid)) > rec.ns_depth + 1]
        assert len(deeper) == 2, "nsenter + unshare -pf did not make a nested namespace in the run's"
        members = {i.pid for i in verdict(take_pass(LiveTable(fs, run_ns)), run_can_fork=True).members}
        assert set(deeper) <= members, "processes of a nested namespace were not counted as the run's"
        sup.signal(signal.SIGTERM)
        code, err = sup.finish()
        assert code == 128 + signal.SIGTERM, err
        assert settled_without(tok) == []
    finally:
        sup.kill()
        if entered is not None:  # outside the run (only its child went in): ours to reap
            try:
                entered.wait(timeout=10)
            except subprocess.TimeoutExpired:
                entered.kill()
                entered.wait(timeout=30)
        kill_token(tok)
        end_all()
