"""`no-docker end` and `no-docker runs` after the supervisor was SIGKILLed mid-run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounded import readline
from no_docker.supervisor.ending import markers
from no_docker.supervisor.ending.lifecycle import refuse_if_stale
from no_docker.supervisor.ending.procfs import ProcFS, ProcfsError
from no_docker.supervisor.errors import NotProven
from nonroot import pids_limit_unavailable
from supervisor_trees import BWRAP, DAEMON

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

NO_DOCKER = [sys.executable, "-m", "no_docker.supervisor.cli"]

# A supervisor that starts a tree with a setsid daemon and prints its run id, then waits to be
# SIGKILLed. With die_with_parent False it imitates the bwrap races (#633, #692) that leave
# processes behind: exactly what `end` exists for.
OWNER = r"""
import json, os, subprocess, sys, time
from no_docker.supervisor.ending.lifecycle import RunLifecycle
die = sys.argv[1] == "1"
life = RunLifecycle(["tree"], max_pids=int(sys.argv[2]) or None, check_stale=False).__enter__()
r, w = os.pipe()
life.spawning()
argv = [BWRAP, "--dev-bind", "/", "/", "--unshare-pid"] + (["--die-with-parent"] if die else []) + [
    "--info-fd", str(w), "--", "bash", "-c", DAEMON + "; sleep 1000"]
proc = subprocess.Popen(argv, preexec_fn=life.spawn_hook(), pass_fds=[w], start_new_session=True,
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
os.close(w)
life.launched(proc.pid)
buf = b""
while b"}" not in buf:
    buf += os.read(r, 4096)
life.set_init(json.loads(buf)["child-pid"])
time.sleep(0.3)
print(life.run_id, flush=True)
time.sleep(1000)
""".replace("BWRAP", repr(BWRAP)).replace("DAEMON", repr(DAEMON))


def _orphaned_run(die_with_parent: bool) -> tuple[str, markers.RunRecord]:
    # Bounded where this user can have a pids limit; an ordinary user's run has none (a
    # daemon, no storm; _cleanup kills its init, and with it the pid namespace).
    limit = "0" if pids_limit_unavailable() else "100"
    owner = subprocess.Popen([sys.executable, "-c", OWNER, "1" if die_with_parent else "0", limit],
                             stdout=subprocess.PIPE, text=True)
    try:
        run_id = readline(owner.stdout, 60, "run id from the orphaning owner").strip()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    assert run_id, "the owner did not start its run"
    return run_id, markers.read_record(markers.marker_dir(markers.state_dir(), run_id))


def _cleanup(record: markers.RunRecord) -> None:
    """Whatever the test did: kill every task of the run's bounded v1 cgroup and remove it;
    without one, SIGKILL the run's init (pid and start time checked), which ends its pid
    namespace and every member (pid_namespaces(7))."""
    init = record.init
    if init is not None:
        try:
            if ProcFS().stat(init.pid).start_time == init.start_time:
                os.kill(init.pid, signal.SIGKILL)
        except (ProcfsError, ProcessLookupError):
            pass
    v1 = Path(record.cgroup["pids_v1"]) if record.cgroup and record.cgroup.get("pids_v1") else None
    v2 = Path(record.cgroup["v2"]) if record.cgroup and record.cgroup.get("v2") else None
    if v2 is not None and v2.exists():
        (v2 / "cgroup.kill").write_text("1")
    for _ in range(100):
        if v1 is None or not v1.exists():
            break
        pids = (v1 / "cgroup.procs").read_text().split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            v1.rmdir()
        except OSError:
            time.sleep(0.02)
    for d in (v2,):
        if d is not None and d.exists():
            try:
                d.rmdir()
            except OSError:
                pass


def _assert_nothing_left(record: markers.RunRecord) -> None:
    """The kernel's word that the run is empty: its v1 pids cgroup could be removed (no task,
    zombies included), or, for a run without one, no process is in its pid namespace."""
    if record.cgroup and record.cgroup.get("pids_v1"):
        assert not Path(record.cgroup["pids_v1"]).exists()
        return
    procfs, left = ProcFS(), []
    for pid in procfs.pids():
        try:
            if procfs.pidns_inode(pid) == record.ns_inode:
                left.append(pid)
        except ProcfsError:
            continue
    assert left == [], f"left in the run's pid namespace: {left}"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(NO_DOCKER + list(args), capture_output=True, text=True, timeout=60)


def test_sigkilled_supervisor_leaves_nothing_and_the_next_run_cleans_the_marker():
    run_id, record = _orphaned_run(die_with_parent=True)
    try:
        deadline = time.monotonic() + 2  # issue: nothing left within 2 s
        while os.path.exists(f"/proc/{record.init.pid}") and time.monotonic() < deadline:
            time.sleep(0.02)
        rows = json.loads(_cli("runs", "--json").stdout)
        row = next(r for r in rows if r["run_id"] == run_id)
        assert row["owner_alive"] is False and row["members"] == 0, row
        assert row["status"] == "stale" and "only removes the marker" in row["end_would"], row
        refuse_if_stale(markers.state_dir(), ProcFS())  # shown empty: removed, no refusal
        assert not os.path.exists(markers.marker_dir(markers.state_dir(), run_id))
    finally:
        _cleanup(record)


def test_leftover_members_make_the_next_run_refuse_until_end():
    run_id, record = _orphaned_run(die_with_parent=False)
    try:
        rows = json.loads(_cli("runs", "--json").stdout)
        row = next(r for r in rows if r["run_id"] == run_id)
        assert row["owner_alive"] is False and row["members"] >= 3, row
        # issue 18 item 11: "stale", with what `end` will do, never "running"
        assert row["status"] == "stale", row
        assert row["end_would"].startswith(f"`no-docker end {run_id}` will kill its {row['members']} "), row
        assert row["rss_bytes"] > 0 and row["cpu_seconds"] >= 0 and row["age_seconds"] >= 0, row
        text = _cli("runs").stdout
        assert re.search(f"^{run_id} +stale ", text, re.M), text
        assert f"  stale: `no-docker end {run_id}` will kill" in text, text
        with pytest.raises(NotProven, match=f"no-docker end {run_id}"):
            refuse_if_stale(markers.state_dir(), ProcFS())
        done = _cli("end", run_id)
        assert done.returncode == 0, done.stderr
        assert f"run {run_id} ended" in done.stderr and "0 left" in done.stderr
        assert not os.path.exists(markers.marker_dir(markers.state_dir(), run_id))
        _assert_nothing_left(record)
    finally:
        _cleanup(record)


def test_end_refuses_a_live_owner_unless_forced():
    me = markers.own_identity()
    rec = markers.RunRecord(run_id=markers.new_run_id(), owner=me, boot_id=ProcFS().boot_id(),
                            command=["x"], state=markers.CREATED)
    markers.create_marker(markers.ensure_state_dir(markers.state_dir()), rec)
    refused = _cli("end", rec.run_id)
    assert refused.returncode == 1 and "--force" in refused.stderr
    # the owner is this pytest process, which the CLI sees alive
    assert os.path.exists(markers.marker_dir(markers.state_dir(), rec.run_id))
    forced = _cli("end", "--force", rec.run_id)
    assert forced.returncode == 0, forced.stderr
    assert not os.path.exists(markers.marker_dir(markers.state_dir(), rec.run_id))


@pytest.mark.parametrize("args, message", [
    ([], "name a RUN_ID or --all"),
    (["--all", "x"], "exclude each other"),
    (["../etc"], "is not a run id"),
    (["20990101T000000-deadbeef"], "no run"),
    (["--timeout", "0", "--all"], "positive"),
])
def test_end_usage_errors(args, message):
    result = _cli("end", *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_dash_dash_end_alias_and_runs_with_nothing():
    assert _cli("--end", "--all").returncode == 0
    listing = _cli("runs")
    assert listing.returncode == 0 and listing.stdout == ""


def test_concurrent_ends_of_one_run_one_works_the_others_report(tmp_path, monkeypatch):
    """Issue 18.2: N `end` of one run at once (`end ID` and `end --all` mixed) printed a
    double traceback (FileNotFoundError in markers.write_record) or 125 "no run.json". One
    must do the work; each other one waits and reports, or (started after it) finds no run."""
    monkeypatch.setenv("NO_DOCKER_STATE_DIR", str(tmp_path / "state"))  # --all sees only ours
    for _ in range(2):
        run_id, record = _orphaned_run(die_with_parent=False)
        try:
            argvs = [["end", run_id] if i % 2 else ["end", "--all"] for i in range(5)]
            procs = [subprocess.Popen(NO_DOCKER + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for argv in argvs]
            results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
            for p in procs:
                p.stdout.close()
                p.stderr.close()
            for code, err in results:
                assert "Traceback" not in err and code in (0, 2), (code, err)
                if code == 2:
                    assert f"no run {run_id}" in err and "it has ended" in err, err
            workers = [err for _, err in results if f"run {run_id} ended, " in err]
            assert len(workers) == 1, results
            assert "0 left" in workers[0]
            assert not os.path.exists(markers.marker_dir(markers.state_dir(), run_id))
            _assert_nothing_left(record)
        finally:
            _cleanup(record)


def test_runs_says_in_words_what_end_will_do_when_the_members_cannot_be_counted():
    from no_docker.supervisor.ending import runs

    row = {"run_id": "r1", "status": "stale", "state": "not-proven", "members": None,
           "detail": "1 process whose pid namespace cannot be read could be the run's: pid 7"}
    said = runs.end_would(row, "/state/r1")
    assert "an unknown number" not in said and "its None" not in said
    assert said.startswith("`no-docker end r1` will kill what is left of it")
    assert "(1 process whose pid namespace cannot be read" in said
    # the STATUS column and the hint's word agree
    assert runs._status_word(row) == "unended"
    assert runs._status_word({**row, "state": "running"}) == "stale"
    assert runs._status_word({**row, "status": "elsewhere"}) == "elsewhere"
    assert "another pid namespace" in runs.end_would({**row, "status": "elsewhere"}, "/state/r1")
    one = runs.end_would({**row, "members": 1}, "/s")
    assert one.startswith("`no-docker end r1` will kill its 1 process left")
