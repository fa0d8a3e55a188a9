"""The run's cgroup: pure parsers, placement rules, and a real leaf + v1 pids limit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounded import readline
from no_docker.supervisor.ending import cgroup
from no_docker.supervisor.ending.procfs import ProcFS

MOUNTINFO = (
    "30 25 0:26 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    "31 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids\n"
)


def test_parsers():
    assert cgroup.parse_events("populated 1\nfrozen 0\n") == {"populated": 1, "frozen": 0}
    assert cgroup.cgroup2_mounts(MOUNTINFO) == ["/sys/fs/cgroup/unified"]
    assert cgroup.own_v2_path("8:pids:/\n0::/user.slice/x\n") == "/user.slice/x"
    assert cgroup.own_v2_path("8:pids:/\n") is None


def test_systemd_host_without_delegation_gets_no_cgroup():
    assert cgroup.v2_parent(MOUNTINFO, "0::/\n", systemd=True) is None


def test_record_round_trip():
    cg = cgroup.RunCgroup(Path("/a"), Path("/b"))
    back = cgroup.RunCgroup.from_record(cg.as_record())
    assert (back.path, back.pids_v1) == ("/a", "/b")
    assert cgroup.RunCgroup.from_record({"v2": None, "pids_v1": None}) is None


def test_max_pids_that_cannot_be_enforced_is_an_error(tmp_path):
    with pytest.raises(cgroup.CgroupError, match="pids"):
        cgroup.create("t-nolimit", max_pids=10, parent=tmp_path / "nowhere", v1_pids_root=tmp_path / "none")


usable = cgroup.v2_parent() is not None and os.path.exists(f"{cgroup.V1_PIDS_ROOT}/cgroup.procs")


@pytest.mark.skipif(not usable, reason="needs a writable cgroup2 hierarchy and the v1 pids controller")
def test_real_leaf_hook_limit_kill_and_removal():
    run_id = f"test-{os.getpid()}-{time.monotonic_ns()}"
    cg = cgroup.create(run_id, max_pids=5)
    assert cg is not None and os.path.isdir(cg.path) and os.path.isdir(cg.pids_v1)
    child = None
    try:
        assert Path(cg.pids_v1, "pids.max").read_text().strip() == "5"
        child = subprocess.Popen(
            [sys.executable, "-c", "import os,time\nfor _ in range(20):\n    try: os.fork()\n"
             "    except OSError: print('limited', flush=True); break\ntime.sleep(60)"],
            preexec_fn=cg.spawn_hook(), stdout=subprocess.PIPE, text=True)
        cg.close_hook()
        # pids.max stopped the forks
        assert readline(child.stdout, 30, "the forks' verdict").startswith("limited")
        groups = ProcFS().cgroup(child.pid)
        assert groups[""].endswith(f"/no-docker/{run_id}")
        assert groups["pids"] == f"/no-docker/{run_id}"
        assert cg.populated()
        assert cg.kill()
        assert cg.wait_empty(time.monotonic() + 5)
        child.wait(timeout=5)
        assert cg.remove(time.monotonic() + 5)
        assert not os.path.exists(cg.path) and not os.path.exists(cg.pids_v1)
    finally:
        if child is not None and child.poll() is None:
            cg.kill()
            child.wait(timeout=30)
        cg.remove(time.monotonic() + 5)


@pytest.mark.skipif(not usable, reason="needs a writable cgroup2 hierarchy and the v1 pids controller")
def test_posix_spawn_inside_entered_cgroup_and_we_move_back():
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    before = ProcFS().cgroup(os.getpid())
    with RunLifecycle(["x"], max_pids=10, check_stale=False) as life:
        with life.cgroup_entered():
            pid = os.posix_spawn("/bin/sleep", ["sleep", "30"], os.environ)
        life.launched(pid)
        assert ProcFS().cgroup(os.getpid()) == before  # the supervisor is not a member
        child = ProcFS().cgroup(pid)
        assert child[""].endswith(life.run_id) and child["pids"].endswith(life.run_id)
        life.cgroup.kill()
        assert life.reap(block=True) == -9
        life.end()
    assert ProcFS().cgroup(os.getpid()) == before


@pytest.mark.skipif(not usable, reason="needs a writable cgroup2 hierarchy and the v1 pids controller")
def test_freeze_stops_a_forking_child_and_thaw_resumes_it(tmp_path):
    cg = cgroup.create(f"test-freeze-{os.getpid()}-{time.monotonic_ns()}", max_pids=50)
    beat = tmp_path / "beat"
    child = None
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", f"import os,time\nwhile True:\n    open({str(beat)!r}, 'a').write('.')\n"
             "    time.sleep(0.01)"], preexec_fn=cg.spawn_hook())
        cg.close_hook()
        while not beat.exists():
            time.sleep(0.01)
        assert cg.freeze(True)
        size = beat.stat().st_size
        time.sleep(0.2)
        assert beat.stat().st_size == size, "a frozen task kept running"
        assert cg.freeze(False)
        time.sleep(0.2)
        assert beat.stat().st_size > size
    finally:
        cg.kill()
        if child is not None:
            child.wait(timeout=30)
        cg.remove(time.monotonic() + 5)


@pytest.mark.skipif(not usable, reason="needs a writable cgroup2 hierarchy and the v1 pids controller")
def test_early_entry_puts_the_spawn_inside_and_every_way_out_moves_us_back():
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    before = ProcFS().cgroup(os.getpid())
    # Spawned: the child is born in the run's cgroups; we are back home after the block.
    with RunLifecycle(["x"], max_pids=10, check_stale=False, enter_cgroup_early=True) as life:
        with life.cgroup_entered():
            assert ProcFS().cgroup(os.getpid())[""].endswith(life.run_id)
            pid = os.posix_spawn("/bin/sleep", ["sleep", "30"], os.environ)
        life.launched(pid)
        assert ProcFS().cgroup(os.getpid()) == before
        assert ProcFS().cgroup(pid)[""].endswith(life.run_id)
        leaf = life.cgroup.path
        report = life.end()
    assert report.clean, report.reason
    assert ProcFS().cgroup(os.getpid()) == before and not os.path.exists(leaf)
    # Ended before anything was spawned (a refused listing, a signal): the background move is
    # waited for and undone before the cgroup is removed, which would otherwise fail (EBUSY).
    with RunLifecycle(["x"], max_pids=10, check_stale=False, enter_cgroup_early=True) as life:
        leaf = life.cgroup.path
    assert ProcFS().cgroup(os.getpid()) == before and not os.path.exists(leaf)
