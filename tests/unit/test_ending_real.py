"""Ending real process trees: every member gone and shown gone; nothing else touched.

Each tree runs in its own pid namespace (bwrap) inside a v1 pids cgroup with pids.max, so even
the fork bomb is bounded; ``supervisor_trees.Tree`` reaps everything even when a test fails.
Evidence that does not come from the proof passes: the v1 pids cgroup (which counts zombies
too) can only be removed once it holds no task at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from no_docker.supervisor.ending.algorithm import end_run
from no_docker.supervisor.ending.cgroup import RunCgroup
from no_docker.supervisor.ending.procfs import ProcFS
from supervisor_trees import BOMB, DAEMON, HOPPER, IGNORES_TERM, NESTED, READY, STOPPED, Tree

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

SCENARIOS = {
    "plain-exit": (f"{READY}; exit 0", 0),
    "cmd-still-running": (f"{READY}; sleep 1000", 2),
    "setsid-double-fork-daemon": (f"{DAEMON}; sleep 0.2; {READY}; sleep 1000", 3),
    "cmd-exits-leaving-a-daemon": (f"{DAEMON}; sleep 0.2; {READY}", 0),
    "four-pid-hoppers": (f"for i in 1 2 3 4; do {HOPPER} done; sleep 0.3; {READY}; sleep 1000", 3),
    "bounded-fork-bomb": (f"{BOMB} sleep 1; {READY}; sleep 1000", 50),
    "sigstopped-member": (f"{STOPPED}; {READY}; sleep 1000", 3),
    "ignores-sigterm": (f"{IGNORES_TERM} sleep 0.2; {READY}; sleep 1000", 3),
    "nested-user-pid-namespace": (f"{NESTED} sleep 0.5; {READY}; sleep 1000", 4),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_tree_is_ended_and_proven(name):
    script, at_least = SCENARIOS[name]
    with Tree(script, max_pids=300) as tree:
        cg = tree.life.cgroup
        before = tree.count_in_cgroup()
        assert before >= at_least, f"{name}: only {before} tasks started"
        report = tree.life.end()
        assert report.clean, report.reason
        assert report.passes >= 1 or tree.life.namespace is None  # init gone before it was taken
        if cg is not None and cg.pids_v1 is not None:
            # kernel evidence: a v1 pids cgroup cannot be removed while any task (even a zombie) is in it
            assert not os.path.exists(cg.pids_v1), f"{name}: tasks left in {cg.pids_v1}"
        else:  # an ordinary user's run: no cgroup; the pid namespace is the bound
            assert tree.members_left() == [], f"{name}: left in the run's pid namespace"
        assert cg is None or cg.path is None or not os.path.exists(cg.path)
        assert not tree.life.directory  # marker removed only when proven


def _procfs_hiding(tmp_path: Path, member: int, uid_line: bytes | None = None) -> ProcFS:
    """/proc as symlinks, but MEMBER looks alive forever (a frozen stat) and its pid-namespace
    link cannot be read; UID_LINE replaces its status's Uid line."""
    fake = tmp_path / "proc"
    fake.mkdir()
    for pid in ProcFS().pids():
        if pid != member:
            (fake / str(pid)).symlink_to(f"/proc/{pid}")
    entry = fake / str(member)
    (entry / "ns").mkdir(parents=True)
    (entry / "stat").write_bytes(Path(f"/proc/{member}/stat").read_bytes())  # alive forever
    status = Path(f"/proc/{member}/status").read_bytes()
    if uid_line is not None:
        status = b"\n".join(uid_line if line.startswith(b"Uid:") else line for line in status.split(b"\n"))
    (entry / "status").write_bytes(status)
    (entry / "ns" / "pid").symlink_to("unreadable")  # readlink gives no namespace
    (fake / "sys").symlink_to("/proc/sys")
    return ProcFS(fake)


def _target_with(tree: Tree, cgroup: RunCgroup | None):  # noqa: ANN202
    from no_docker.supervisor.ending.algorithm import RunTarget
    return RunTarget(tree.life.run_id, tree.life.namespace, tree.life.record.init, cgroup)


def test_unreadable_member_marker_is_never_clean(tmp_path):
    """A member whose /proc marker cannot be read, where no cgroup speaks for the run: the
    ending must not be shown (→ 125)."""
    with Tree(f"{READY}; sleep 1000") as tree:
        member = tree.life.record.init.pid
        report = end_run(_target_with(tree, None), procfs=_procfs_hiding(tmp_path, member),
                         timeout=0.5, init_pidfd=tree.life.init_pidfd, reap=tree.life.reap)
        assert not report.clean
        assert [i.pid for i in report.unknown] == [member], report
        assert "cannot be read" in report.reason
        assert f"pid {member} " in report.reason and f"of uid {os.getuid()}" in report.reason


def test_the_runs_uid_map_is_read_from_its_init():
    with Tree(f"{READY}; sleep 1000", userns=True) as tree:
        assert tree.life.namespace.uid == os.getuid()
        assert tree.life.record.member_uid == os.getuid()
        assert tree.life.end().clean
    # no user namespace of its own: its map is the whole range, and no uid settles anything;
    # an ordinary user's bwrap always makes one (a pid namespace needs it), mapping that user
    with Tree(f"{READY}; sleep 1000") as tree:
        assert tree.life.namespace.uid == (None if os.getuid() == 0 else os.getuid())


@pytest.mark.parametrize("uids", ["1 1 1 1", "0 1 0 0", "0 0 0 70000", "65534 65534 65534 65534"])
def test_an_unreadable_process_of_another_uid_is_an_outsider(tmp_path, uids):
    """A process whose ns link we may not read, holding any uid the run's user namespace does
    not map, is not a member (membership.marker_from_status): the ending is shown."""
    if os.getuid() != 0:
        pytest.skip("the uids below are chosen to differ from root's")
    with Tree(f"{READY}; sleep 1000", userns=True) as tree:
        member = tree.life.record.init.pid
        procfs = _procfs_hiding(tmp_path, member, b"Uid:\t" + uids.replace(" ", "\t").encode())
        report = end_run(_target_with(tree, None), procfs=procfs, timeout=2,
                         init_pidfd=tree.life.init_pidfd, reap=tree.life.reap)
        assert report.clean, report.reason


def test_an_empty_v2_leaf_settles_what_proc_cannot_and_a_populated_one_does_not(tmp_path):
    """Where the run has a v2 leaf, its emptiness once the run cannot fork is the proof; a
    leaf that still counts a process is not, whatever /proc says."""
    with Tree(f"{READY}; sleep 1000") as tree:
        member = tree.life.record.init.pid
        leaf = tmp_path / "leaf"
        leaf.mkdir()
        (leaf / "cgroup.events").write_text("populated 1\nfrozen 0\n")
        report = end_run(_target_with(tree, RunCgroup(str(leaf))), procfs=_procfs_hiding(tmp_path, member),
                         timeout=0.5, init_pidfd=tree.life.init_pidfd, reap=tree.life.reap)
        assert not report.clean, report
        assert report.settled_by_cgroup == 0
        (leaf / "cgroup.events").write_text("populated 0\nfrozen 0\n")
        report = end_run(_target_with(tree, RunCgroup(str(leaf))), procfs=ProcFS(tmp_path / "proc"),
                         timeout=2, reap=tree.life.reap)
        assert report.clean, report.reason
        assert report.settled_by_cgroup == 1


def test_two_runs_never_touch_each_other():
    with Tree(f"{DAEMON}; {READY}; sleep 1000") as other, Tree(f"{DAEMON}; {READY}; sleep 1000") as mine:
        theirs = other.count_in_cgroup()
        assert mine.life.end().clean
        time.sleep(0.1)
        assert other.count_in_cgroup() == theirs
        assert os.path.exists(f"/proc/{other.life.record.init.pid}")


def test_outside_processes_and_an_outside_zombie_are_not_signalled(spawn):
    churn = spawn([sys.executable, "-c",
                   "import subprocess\nwhile True: subprocess.run(['true'])"])
    zombie = subprocess.Popen(["true"])  # our child, never waited during the ending: a zombie
    time.sleep(0.1)
    try:
        with Tree(f"{HOPPER} {READY}; sleep 1000") as tree:
            report = tree.life.end()
            assert report.clean, report.reason
        assert churn.poll() is None, "an outside process was signalled"
        assert ProcFS().stat(zombie.pid).state == "Z"
    finally:
        zombie.wait(timeout=30)


def test_stale_check_does_not_kill_and_does_not_call_a_live_run_ended():
    from no_docker.supervisor.ending.lifecycle import stale_is_empty

    with Tree(f"{READY}; sleep 1000") as tree:
        report = stale_is_empty(tree.life.record, ProcFS())
        assert not report.clean
        assert report.killed == 0
        assert os.path.exists(f"/proc/{tree.life.record.init.pid}")


def _fds() -> set[str]:
    return set(os.listdir("/dev/fd"))


def test_no_descriptor_leaks_on_a_clean_and_an_unproven_ending(tmp_path):
    before = _fds()
    with Tree(f"{DAEMON}; {READY}; sleep 1000") as tree:
        assert tree.life.end().clean
    assert _fds() == before
    with Tree(f"{READY}; sleep 1000", use_cgroup=False) as tree:
        fake = tmp_path / "empty-proc"
        fake.mkdir()
        report = end_run(tree.target, procfs=ProcFS(fake), timeout=0.2)
        # a procfs view that shows nothing, while the init's pidfd says it lives: never clean
        assert not report.clean and report.killed == 0, report
    assert _fds() == before
