"""The marker: who is a member, and why an unreadable namespace link is never "outsider"."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from no_docker.supervisor.ending.membership import LiveTable, Membership, RunNamespace
from no_docker.supervisor.ending.procfs import NsIdentity, ProcFS
from no_docker.supervisor.ending.snapshot import Marker, Verdict, take_pass, verdict
from supervisor_trees import NESTED, READY, Tree

RUN = RunNamespace(NsIdentity(ns_id=123456789, inode=4026599999), depth=1)


def _fake_entry(root: Path, pid: int, nspid: str, link: str | None) -> None:
    entry = root / str(pid)
    (entry / "ns").mkdir(parents=True)
    (entry / "stat").write_bytes(b"%d (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 0\n" % pid)
    (entry / "status").write_text(f"Name:\tx\nNSpid:\t{nspid}\n")
    if link is not None:
        (entry / "ns" / "pid").symlink_to(link)


def test_unreadable_link_in_a_shallower_namespace_is_an_outsider(tmp_path):
    # as /proc/1 here: its ns links give EACCES even to root; NSpid shows it in our namespace
    _fake_entry(tmp_path, 1, "1", "not-a-namespace-link")
    assert Membership(ProcFS(tmp_path), RUN).marker(1) == Marker.OUTSIDER


def test_unreadable_link_deep_enough_to_be_a_member_is_unreadable(tmp_path):
    _fake_entry(tmp_path, 50, "50\t1", "garbage")
    assert Membership(ProcFS(tmp_path), RUN).marker(50) == Marker.UNREADABLE
    _fake_entry(tmp_path, 51, "51\t2\t1", "pid-ish")
    assert Membership(ProcFS(tmp_path), RUN).marker(51) == Marker.UNREADABLE


def test_vanished_entry_is_gone(tmp_path):
    assert Membership(ProcFS(tmp_path), RUN).marker(4242) == Marker.GONE
    _fake_entry(tmp_path, 60, "60\t1", None)  # no link at all: judged by the identity re-read
    assert Membership(ProcFS(tmp_path), RUN).marker(60) == Marker.GONE


class CountingLiveTable(LiveTable):
    reads = 0

    def read(self, handle: int):  # type: ignore[override]
        self.reads += 1
        return super().read(handle)


def test_live_table_reads_no_identity_of_an_outsider_and_two_of_an_unreadable_process(tmp_path):
    _fake_entry(tmp_path, 1, "1", "not-a-namespace-link")  # outsider, by depth
    table = CountingLiveTable(ProcFS(tmp_path), RUN)
    kept = take_pass(table)
    assert (table.reads, list(kept), kept.seen) == (0, [], 1)
    _fake_entry(tmp_path, 50, "50\t1", "garbage")  # deep enough to be a member: unreadable
    table = CountingLiveTable(ProcFS(tmp_path), RUN)
    result = verdict(take_pass(table), run_can_fork=False)
    assert table.reads == 2
    assert (result.verdict, [i.pid for i in result.unknown], result.seen) == (Verdict.INCONCLUSIVE, [50], 2)


def test_this_process_is_an_outsider_of_a_made_up_run():
    assert Membership(ProcFS(), RUN).marker(os.getpid()) == Marker.OUTSIDER


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_members_of_a_real_run_and_its_nested_namespace():
    with Tree(f"{NESTED} sleep 0.5; {READY}; sleep 1000") as tree:
        fs = ProcFS()
        # every task of the run's cgroup but the outer bwrap (our child, outside the namespace);
        # without one (an ordinary user), every process below the run's init by /proc's ppids
        if tree.life.cgroup is not None and tree.life.cgroup.pids_v1 is not None:
            in_tree = [int(p) for p in Path(tree.life.cgroup.pids_v1, "cgroup.procs").read_text().split()
                       if int(p) != tree.life.launcher_pid]
        else:
            in_tree = sorted(tree.descendants())
        nested = [pid for pid in in_tree if len(fs.nspid(pid)) > tree.life.namespace.depth + 1]
        assert nested, "no nested namespace was made"
        result = verdict(take_pass(LiveTable(fs, tree.life.namespace)), run_can_fork=True)
        assert result.verdict == Verdict.MEMBERS
        seen = {i.pid for i in result.members}
        assert set(in_tree) <= seen | _exited(in_tree)
        assert os.getpid() not in seen


def _exited(pids: list[int]) -> set[int]:
    return {pid for pid in pids if not os.path.exists(f"/proc/{pid}")}
