"""bwrap born in the run's cgroup: ``syscalls.spawn_into_cgroup`` (clone3 CLONE_INTO_CGROUP),
``mediation.spawn_filtered`` with a cgroup fd, ``RunLifecycle.into_cgroup``, and the fallback
(moving the supervisor in) where the kernel refuses the clone or the run has a v1 pids cgroup.

Pure parts (the ``struct clone_args`` bytes, execve's strings) are property tests; the rest runs
on the real kernel, in real cgroups this test makes and removes.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounded import read_until_eof
from hypothesis import given
from hypothesis import strategies as st
from isolation_helpers import BWRAP, bwrap_works, run_no_docker
from no_docker.supervisor.ending import cgroup
from no_docker.supervisor.ending.lifecycle import RunLifecycle
from no_docker.supervisor.ending.procfs import ProcFS
from no_docker.supervisor.isolation import mediation, syscall_filter
from no_docker.supervisor.isolation import syscalls as _linux

# --- pure -----------------------------------------------------------------------------------

U64 = st.integers(0, 2**64 - 1)


@given(flags=U64, fd=st.integers(0, 2**31 - 1), signum=st.integers(0, 64))
def test_clone_args_is_the_kernels_struct(flags, fd, signum):
    # include/uapi/linux/sched.h: eleven __aligned_u64, CLONE_ARGS_SIZE_VER2 = 88
    raw = _linux.clone_args(flags, fd, signum)
    assert len(raw) == 88
    (f, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
     cg) = struct.unpack("=11Q", raw)
    assert (f, exit_signal, cg) == (flags, signum, fd)
    assert pidfd == child_tid == parent_tid == stack == stack_size == tls == set_tid == set_tid_size == 0


def test_clone_args_defaults_to_sigchld_and_the_flags_are_the_kernels():
    assert struct.unpack("=11Q", _linux.clone_args(0, 5))[4] == signal.SIGCHLD == _linux.SIGCHLD
    assert (_linux.CLONE_VFORK, _linux.CLONE_CLEAR_SIGHAND, _linux.CLONE_INTO_CGROUP) == (
        0x4000, 0x100000000, 0x200000000)


TEXT = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)
KEY = st.text(st.characters(blacklist_characters="\0=", blacklist_categories=("Cs",)), min_size=1, max_size=8)


@given(path=TEXT, argv=st.lists(TEXT, min_size=1, max_size=6), env=st.dictionaries(KEY, TEXT, max_size=6))
def test_exec_strings_point_at_each_string_in_order(path, argv, env):
    blob, argv_at, env_at = _linux.exec_strings(path, argv, env)

    def at(offset: int) -> bytes:
        return blob[offset:blob.index(b"\0", offset)]

    assert blob.endswith(b"\0") and at(0) == os.fsencode(path)
    assert [at(o) for o in argv_at] == [os.fsencode(a) for a in argv]
    assert [at(o) for o in env_at] == [os.fsencode(f"{k}={v}") for k, v in env.items()]
    assert blob.count(b"\0") == 1 + len(argv) + len(env)


@pytest.mark.parametrize("argv, env", [(["a\0b"], {}), (["a"], {"K": "v\0"}), (["a"], {"K=": "v"}),
                                       (["a"], {"": "v"}), ([], {})])
def test_exec_strings_refuses_what_posix_spawn_refuses(argv, env):
    with pytest.raises(ValueError):
        _linux.exec_strings("/bin/true", argv, env)
    with pytest.raises(ValueError):  # posix_spawn checks before it forks: nothing is started
        os.posix_spawn("/bin/true", argv, env)


def test_unsupported_file_action_is_refused_before_any_clone():
    with pytest.raises(ValueError, match="not supported"):
        _linux.spawn_into_cgroup("/bin/true", ["true"], {}, 0,
                                 file_actions=[(os.POSIX_SPAWN_OPEN, 3, "/dev/null", os.O_RDONLY, 0)])


# --- the real kernel --------------------------------------------------------------------------

_parent = cgroup.v2_parent()
needs_v2 = pytest.mark.skipif(_parent is None, reason="needs a writable cgroup2 directory of ours")
_why = bwrap_works()
needs_bwrap = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.fixture
def leaf():
    """A fresh v2 leaf (no-docker/<id>) and an O_DIRECTORY fd of it; everything in it is killed
    and the leaf removed afterwards."""
    cg = cgroup.create(f"test-spawn-{os.getpid()}-{time.monotonic_ns()}")
    assert cg is not None and cg.path is not None
    fd = os.open(cg.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield cg, fd
    finally:
        os.close(fd)
        cg.kill()
        cg.wait_empty(time.monotonic() + 5)
        assert cg.remove(time.monotonic() + 5)


def _read_all(fd: int) -> str:
    out, timed_out = read_until_eof(fd, 30)
    os.close(fd)
    assert not timed_out, f"no EOF within 30 s: {out!r}"
    return out.decode()


def _leaf_of(path: str) -> str:
    """A leaf's path as /proc/PID/cgroup shows it: our own cgroup + /no-docker/<id>."""
    return os.path.join(ProcFS().cgroup(os.getpid())[""], cgroup.GROUP_DIR, os.path.basename(path))


def _status_mask(text: str, field: str) -> int:
    return int(next(line for line in text.splitlines() if line.startswith(field + ":")).split()[1], 16)


@needs_v2
def test_child_is_born_in_the_leaf_with_posix_spawns_file_actions_and_signals(leaf):
    cg, fd = leaf
    before = ProcFS().cgroup(os.getpid())
    out_r, out_w = os.pipe()
    kept_r, kept_w = os.pipe()
    stray = os.dup(kept_r)  # inheritable: only the CLOSE action keeps it out of the child
    os.set_inheritable(kept_w, True)
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE)}
    signal.signal(signal.SIGUSR1, lambda *_: None)  # caught here: default in the child
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # ignored here: still ignored there
    script = ("cat /proc/self/cgroup; cat /proc/$$/status; echo \"env=$ONLY\"; ls /proc/$$/fd; "
              "echo \"sid=$(cut -d' ' -f6 /proc/$$/stat)\"")
    try:
        pid = _linux.spawn_into_cgroup(
            "/bin/sh", ["sh", "-c", script], {"ONLY": "this", "PATH": "/usr/bin:/bin"}, fd,
            file_actions=[(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_CLOSE, stray),
                          (os.POSIX_SPAWN_CLOSE, out_w)],
            setsigdef=(signal.SIGPIPE,), setsid=True)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(out_w)
        os.close(stray)
    text = _read_all(out_r)
    assert os.waitpid(pid, 0)[1] == 0
    os.close(kept_r)
    os.close(kept_w)
    assert f"0::{_leaf_of(cg.path)}\n" in text
    assert ProcFS().cgroup(os.getpid()) == before  # we never moved
    sig_ign, sig_cgt = _status_mask(text, "SigIgn"), _status_mask(text, "SigCgt")
    bit = lambda sig: 1 << (sig - 1)  # noqa: E731
    assert sig_ign & bit(signal.SIGUSR2), "an ignored signal must stay ignored"
    assert not sig_ign & bit(signal.SIGPIPE), "setsigdef: SIGPIPE is default again"
    assert not (sig_ign | sig_cgt) & bit(signal.SIGUSR1), "a caught signal is default in the child"
    assert "env=this" in text
    fds = {int(x) for x in text.split("env=this", 1)[1].split("sid=")[0].split()}
    assert kept_w in fds and stray not in fds and out_w not in fds and kept_r not in fds
    assert f"sid={pid}" in text  # setsid: a session of its own


@needs_v2
@pytest.mark.parametrize("make, code", [(lambda tmp: str(tmp / "missing"), errno.ENOENT),
                                        (lambda tmp: str(tmp), errno.EACCES)])
def test_exec_failure_comes_back_with_the_childs_errno_and_nothing_left(leaf, tmp_path, make, code):
    cg, fd = leaf
    with pytest.raises(OSError) as failed:
        _linux.spawn_into_cgroup(make(tmp_path), ["x"], {}, fd)
    assert failed.value.errno == code and not isinstance(failed.value, _linux.NoCloneIntoCgroup)
    assert not cg.populated()  # the child exited and was reaped


@needs_v2
def test_a_refused_clone_is_no_clone_into_cgroup_and_starts_nothing(tmp_path):
    not_a_cgroup = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    closed = os.dup(not_a_cgroup)
    os.close(closed)
    try:
        for fd in (not_a_cgroup, closed):
            with pytest.raises(_linux.NoCloneIntoCgroup) as refused:
                _linux.spawn_into_cgroup("/bin/true", ["true"], {}, fd)
            assert refused.value.errno == errno.EBADF
    finally:
        os.close(not_a_cgroup)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of ours was made


# Many spawns while other threads fight for the GIL (a switch interval of 1 us: a waiting thread
# asks for the GIL almost at once). A child that ran bytecode would sometimes find that request
# and wait in drop_gil for a thread it does not have: the spawn hangs. Shown by hand: a variant
# whose child runs a Python loop after clone3 hangs within 300 spawns; this one never does.
GIL_STORM = r"""
import os, sys, threading
from no_docker.supervisor.isolation import syscalls
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
stop = []
def spin():
    while not stop:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
sys.setswitchinterval(1e-6)
for _ in range(int(sys.argv[2])):
    os.waitpid(syscalls.spawn_into_cgroup("/bin/true", ["true"], {}, fd), 0)
stop.append(1)
print("done")
"""


@needs_v2
def test_spawns_never_hang_while_other_threads_want_the_gil(leaf):
    cg, _ = leaf
    child = subprocess.Popen([sys.executable, "-c", GIL_STORM, cg.path, "150"], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        pytest.fail("a spawn hung: the child deadlocked on the GIL")
    assert child.returncode == 0 and out.strip() == "done"


# --- spawn_filtered and the lifecycle ---------------------------------------------------------

BWRAP_ARGV = [BWRAP or "bwrap", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
              "--proc", "/proc", "--dev", "/dev"]


def _spawn_bwrap_in(life: RunLifecycle, into, command: list[str]) -> tuple[int, int, object, dict]:
    """spawn_filtered as Run.start calls it: bwrap under the mediation filter, its info fd read
    (the sandbox init's outside pid). (bwrap pid, listener, keeper, info)."""
    info_r, info_w = os.pipe()
    try:
        pid, listener, keeper = mediation.spawn_filtered(
            [*BWRAP_ARGV, "--info-fd", str(info_w), "--", *command], dict(os.environ),
            pass_fds=(info_w,), cgroup_fd=into.fd, enter_cgroup=into.enter)
    finally:
        os.close(info_w)
    life.launched(pid)
    info = json.loads(_read_all(info_r))
    return pid, listener, keeper, info


def _children_soon(pid: int) -> list[int]:
    """PID's children once it has one (the sandbox init forks the command after the info fd)."""
    deadline = time.monotonic() + 10
    while True:
        children = [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        if children or time.monotonic() > deadline:
            return children
        time.sleep(0.005)


def _end(life: RunLifecycle, listener: int, keeper) -> None:
    os.close(listener)
    report = life.end()
    keeper.release()
    assert report.clean, report.reason


@needs_v2
@needs_bwrap
def test_bwrap_and_the_sandbox_are_born_in_the_runs_leaf_and_we_never_move(monkeypatch):
    def no_move(self) -> None:
        raise AssertionError("the supervisor moved itself into the run's cgroup")

    monkeypatch.setattr(cgroup.RunCgroup, "enter_self", no_move)
    before = ProcFS().cgroup(os.getpid())
    with RunLifecycle(["x"], check_stale=False, enter_cgroup_early=True) as life:
        with life.into_cgroup() as into:
            assert into.fd is not None
            pid, listener, keeper, info = _spawn_bwrap_in(life, into, ["sleep", "30"])
        try:
            leaf = _leaf_of(life.cgroup.path)
            procfs = ProcFS()
            init = info["child-pid"]
            assert procfs.cgroup(pid)[""] == leaf  # bwrap
            assert procfs.cgroup(init)[""] == leaf  # the sandbox init, forked by bwrap
            command = _children_soon(init)
            assert len(command) == 1 and procfs.cgroup(command[0])[""] == leaf
            assert sorted(life.cgroup.procs()) == sorted([pid, init, *command])  # the whole run
            status = Path(f"/proc/{pid}/status").read_text()
            assert "Seccomp:\t2" in status  # the keeper's connect filter, inherited
            assert procfs.cgroup(os.getpid()) == before
        finally:
            _end(life, listener, keeper)
    assert not os.path.exists(life.cgroup.path)


@needs_v2
@needs_bwrap
def test_a_refused_clone_falls_back_to_moving_in_and_back(monkeypatch):
    calls = []

    def refused(*args, **kwargs) -> int:
        calls.append(args[3])
        raise _linux.NoCloneIntoCgroup(errno.ENOSYS, "clone3: Function not implemented")

    monkeypatch.setattr(_linux, "spawn_into_cgroup", refused)
    before = ProcFS().cgroup(os.getpid())
    with RunLifecycle(["x"], check_stale=False) as life:
        leaf = _leaf_of(life.cgroup.path)
        with life.into_cgroup() as into:
            pid, listener, keeper, info = _spawn_bwrap_in(life, into, ["sleep", "30"])
            assert ProcFS().cgroup(os.getpid())[""] == leaf  # moved in
        try:
            assert calls and ProcFS().cgroup(os.getpid()) == before  # and back out
            assert ProcFS().cgroup(pid)[""] == leaf
            assert ProcFS().cgroup(info["child-pid"])[""] == leaf
        finally:
            _end(life, listener, keeper)


# A supervisor whose own process carries the run's syscall filter, which answers clone3 with
# ENOSYS (as container runtimes' default profiles do): the real kernel refuses the clone, the
# spawn falls back, and the child is in the leaf all the same.
UNDER_ENOSYS = r"""
import json, os, sys
from no_docker.supervisor.ending import cgroup
from no_docker.supervisor.ending.lifecycle import RunLifecycle
from no_docker.supervisor.ending.procfs import ProcFS
from no_docker.supervisor.isolation import mediation, syscall_filter, syscalls
syscalls.set_no_new_privs()
syscalls.install_filter(syscall_filter.program(os.uname().machine), 0)
try:
    syscalls.spawn_into_cgroup("/bin/true", ["true"], {}, 0)
    refused = None
except syscalls.NoCloneIntoCgroup as err:
    refused = err.errno
with RunLifecycle(["x"], check_stale=False) as life:
    with life.into_cgroup() as into:
        direct = into.fd is not None
        pid, listener, keeper = mediation.spawn_filtered(["/bin/sleep", "30"], dict(os.environ), (),
                                                         cgroup_fd=into.fd, enter_cgroup=into.enter)
    life.launched(pid)
    seen = ProcFS().cgroup(pid)[""]
    back = ProcFS().cgroup(os.getpid()) == ProcFS().cgroup(os.getppid())
    os.close(listener)
    report = life.end()
    keeper.release()
leaf = os.path.join(ProcFS().cgroup(os.getpid())[""], cgroup.GROUP_DIR, life.run_id)
print(json.dumps({"refused": refused, "direct": direct, "leaf": leaf,
                  "seen": seen, "back": back, "clean": report.clean}))
"""


@needs_v2
def test_under_a_filter_that_refuses_clone3_the_child_is_in_the_leaf_all_the_same():
    done = subprocess.run([sys.executable, "-c", UNDER_ENOSYS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["refused"] == errno.ENOSYS and syscall_filter.CLONE3 == 435
    assert got["direct"] and got["seen"] == got["leaf"] and got["back"] and got["clean"]


@needs_v2
def test_into_cgroup_gives_an_fd_of_the_v2_leaf_and_does_not_move_us():
    before = ProcFS().cgroup(os.getpid())
    with RunLifecycle(["x"], check_stale=False) as life:
        with life.into_cgroup() as into:
            assert into.fd is not None and os.path.samefile(f"/proc/self/fd/{into.fd}", life.cgroup.path)
            assert ProcFS().cgroup(os.getpid()) == before
            fd = into.fd
        assert into.fd is None
        with pytest.raises(OSError):
            os.fstat(fd)  # closed on leaving


@needs_v2
def test_into_cgroup_moves_us_where_a_v1_pids_cgroup_must_be_entered():
    with RunLifecycle(["x"], check_stale=False) as life:
        leaf_parent = os.path.dirname(life.cgroup.path)
    if not os.path.exists(f"{cgroup.V1_PIDS_ROOT}/cgroup.procs") or cgroup._v2_has_pids(leaf_parent):
        pytest.skip("--max-pids goes to the v2 leaf here (no v1 pids controller, or v2 has pids): "
                    "the clone reaches it and nothing is moved")
    before = ProcFS().cgroup(os.getpid())
    with RunLifecycle(["x"], max_pids=10, check_stale=False, enter_cgroup_early=True) as life:
        with life.into_cgroup() as into:
            assert into.fd is None
            assert ProcFS().cgroup(os.getpid())["pids"].endswith(f"/no-docker/{life.run_id}")
        assert ProcFS().cgroup(os.getpid()) == before


# --- no-docker run ----------------------------------------------------------------------------

# `no-docker run` with the supervisor's own move into a cgroup recorded: none on the run's path
# (bwrap is cloned into the leaf); with --max-pids on a v1 pids controller, the move remains.
COUNT_MOVES = r"""
import os, sys
from no_docker.supervisor.ending import cgroup
moves = []
real = cgroup.RunCgroup.enter_self
def counted(self):
    moves.append(1)
    real(self)
cgroup.RunCgroup.enter_self = counted
from no_docker.supervisor import cli
code = cli.main(["run", "--quiet", *sys.argv[1:], "--", "true"])
print(len(moves))
sys.exit(code)
"""


@needs_v2
@needs_bwrap
def test_a_run_never_moves_the_supervisor(tmp_path):
    done = subprocess.run([sys.executable, "-c", COUNT_MOVES], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


@needs_v2
@needs_bwrap
def test_max_pids_caps_a_fork_storm_from_the_first_fork(tmp_path):
    storm = ("import os, time\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
             "        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\n"
             "print('forked', n, flush=True)\nos._exit(0)")
    result = run_no_docker(["--max-pids", "24", "--", sys.executable, "-I", "-c", storm], cwd=tmp_path,
                           timeout=120)
    assert result.returncode == 0, result.stderr
    forked = int(result.stdout.split()[-1])
    # bwrap, its init and CMD count from their birth: 24 - 3 forks at most (a bwrap that was
    # moved in after it was born would have left room for one more)
    assert 0 < forked <= 24 - 3, result.stdout
    assert ", 0 left, " in result.stderr
