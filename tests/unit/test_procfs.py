"""procfs: pure parsers over hostile bytes, and the reader's error boundary on real /proc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from no_docker.supervisor.ending import procfs
from no_docker.supervisor.ending.procfs import ProcessGone, ProcFS, Unreadable

STAT = (b"4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 10 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 "
        b"18446744073709551615\n")


def test_parse_stat_takes_comm_up_to_the_last_paren():
    st = procfs.parse_stat(STAT)
    assert st.pid == 4242
    assert st.comm == b"a) b) (c"
    assert st.state == "S"
    assert st.ppid == 1
    assert st.start_time == 987654
    assert not st.is_dead


@pytest.mark.parametrize("state, dead", [(b"Z", True), (b"X", True), (b"T", False), (b"D", False)])
def test_zombie_and_dead_states_count_as_dead(state, dead):
    st = procfs.parse_stat(STAT.replace(b" S 1 ", b" " + state + b" 1 "))
    assert st.is_dead is dead


@pytest.mark.parametrize("data", [b"", b"4242 no parens", b"4242 (x) S 1 2"])
def test_parse_stat_rejects_truncated_lines(data):
    with pytest.raises(ValueError, match="stat"):
        procfs.parse_stat(data)


def test_parse_nspid():
    status = b"Name:\tsleep\nPid:\t90\nNSpid:\t90\t7\t1\nNSpgid:\t1\n"
    assert procfs.parse_nspid(status) == (90, 7, 1)
    with pytest.raises(ValueError, match="NSpid"):
        procfs.parse_nspid(b"Name:\tx\n")


def test_parse_cgroup_keeps_v1_and_v2_lines():
    data = b"8:pids:/no-docker/r1\n4:memory:/a:b\n0::/no-docker/r1\n"
    assert procfs.parse_cgroup(data) == {"pids": "/no-docker/r1", "memory": "/a:b", "": "/no-docker/r1"}
    with pytest.raises(ValueError):
        procfs.parse_cgroup(b"garbage\n")


def test_parse_ns_link_and_boot_id():
    assert procfs.parse_ns_link(b"pid:[4026531836]") == 4026531836
    assert procfs.parse_ns_link("pid:[7]") == 7
    with pytest.raises(ValueError):
        procfs.parse_ns_link(b"/nonexistent")
    assert procfs.parse_boot_id(b"837aacdb-ea6f-4310-aa43-836536139f60\n").startswith("837a")


def test_reader_on_a_real_child_then_gone_after_reaping():
    fs = ProcFS()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        st = fs.stat(child.pid)
        assert st.pid == child.pid and st.ppid == os.getpid()
        assert fs.nspid(child.pid) == (child.pid,)
        assert fs.pidns_inode(child.pid) == fs.pidns_inode(os.getpid())
        ident = fs.pidns_identity(child.pid)
        assert ident.inode == os.stat("/proc/self/ns/pid").st_ino
        assert child.pid in fs.pids()
        fd = fs.open_stat(child.pid)
    finally:
        child.kill()
        child.wait(timeout=30)
    try:
        # the fd is bound to the process, not the number: a reaped process reads as gone
        with pytest.raises(ProcessGone):
            fs.read_stat_fd(fd)
    finally:
        os.close(fd)
    with pytest.raises(ProcessGone):
        fs.stat(child.pid)


def test_unreadable_is_not_gone(tmp_path):
    """EACCES-like failures are Unreadable (unknown), never ProcessGone."""
    fake = tmp_path / "proc"
    (fake / "77" / "ns").mkdir(parents=True)
    (fake / "77" / "ns" / "pid").symlink_to("/nonexistent-target")
    (fake / "77" / "stat").mkdir()  # reading a directory: EISDIR
    fs = ProcFS(fake)
    with pytest.raises(Unreadable):
        fs.pidns_inode(77)
    with pytest.raises(Unreadable):
        fs.stat(77)
    with pytest.raises(ProcessGone):
        fs.stat(78)
    assert fs.pids() == [77]


def test_ns_get_id_distinguishes_our_namespace():
    fd = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        ns_id = procfs.ns_fd_id(fd)
        chain = procfs.ns_fd_ancestry(fd)
    finally:
        os.close(fd)
    assert ns_id is None or ns_id > 0
    assert len(chain) == 1  # NS_GET_PARENT stops at our own namespace
