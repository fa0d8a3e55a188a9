"""Real process trees for the supervisor's tests: a shell script in its own pid namespace
(bwrap --unshare-pid) inside a bounded cgroup (v1 pids.max), reaped even when a test fails.

``Tree(script)`` starts ``bwrap --dev-bind / / --unshare-pid --die-with-parent --info-fd N --
bash -c SCRIPT`` through ``RunLifecycle`` (marker + cgroup + spawn hook) and waits until the
script writes a line to fd 4 (``echo ready >&$READY_FD``). On exit, whatever the test did: the run is
ended, the cgroups are killed (v2 ``cgroup.kill``; every task of the v1 pids cgroup SIGKILLed),
bwrap is reaped and the cgroups removed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

from no_docker.supervisor.ending.lifecycle import RunLifecycle
from no_docker.supervisor.ending.procfs import ProcFS, ProcfsError
from nonroot import pids_limit_unavailable, require_pids_limit

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"

# building blocks for scripts (bash)
DAEMON = "(setsid sh -c 'sleep 1000 & exec sleep 1000' </dev/null >/dev/null 2>&1 &)"
HOPPER = ("python3 -c 'import os\nwhile True:\n    if os.fork(): os._exit(0)\n' "
          "</dev/null >/dev/null 2>&1 &")
BOMB = "( b() { b | b & }; b ) 2>/dev/null &"
STOPPED = "sleep 1000 & kill -STOP $!"
IGNORES_TERM = "sh -c 'trap \"\" TERM INT HUP; while :; do sleep 1; done' &"
NESTED = "unshare -Urpf --mount-proc sh -c 'sleep 1000 & sleep 1000' &"
READY = "echo ready >&$READY_FD"


class Tree:
    """A run's process tree. MAX_PIDS bounds it where this user can make a pids cgroup; where
    it cannot (an ordinary user without a delegated cgroup), a script without a fork bomb runs
    unbounded, as that user's ``no-docker run`` does, its pid namespace the only bound, and a
    fork bomb skips: it is never started without a limit."""

    def __init__(self, script: str, *, max_pids: int | None = 400, procfs: ProcFS | None = None,
                 use_cgroup: bool = True, end_timeout: float = 10.0, userns: bool = False,
                 subreaper: bool = False) -> None:
        if max_pids is not None and pids_limit_unavailable() is not None:
            if BOMB in script:
                require_pids_limit()
            max_pids = None
        self.script = script
        self.userns = userns  # a user namespace mapping one uid, as every `no-docker run` has
        self.life = RunLifecycle(["tree"], max_pids=max_pids, procfs=procfs, use_cgroup=use_cgroup,
                                 end_timeout=end_timeout, check_stale=False, subreaper=subreaper)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Tree:
        life = self.life.__enter__()
        try:
            info_r, info_w = os.pipe()
            ready_r, ready_w = os.pipe()
            try:
                life.spawning()
                self.proc = subprocess.Popen(
                    [BWRAP, "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent",
                     *(["--unshare-user"] if self.userns else []),
                     "--info-fd", str(info_w), "--", "bash", "-c", self.script],
                    preexec_fn=life.spawn_hook(), pass_fds=(info_w, ready_w),
                    stdin=subprocess.DEVNULL, start_new_session=True,
                    env={**os.environ, "READY_FD": str(ready_w)})
                os.close(info_w)
                os.close(ready_w)
                info_w = ready_w = -1
                life.launched(self.proc.pid)
                info = json.loads(_read_all(info_r, 10.0, b"}"))
                life.set_init(int(info["child-pid"]))
                if _read_all(ready_r, 30.0, b"\n").strip() != b"ready":
                    raise RuntimeError("tree did not become ready")
                life.note_user_namespace()  # as `run` does once the sandbox is set up
            finally:
                for fd in (info_r, info_w, ready_r, ready_w):
                    if fd >= 0:
                        os.close(fd)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @property
    def target(self):  # noqa: ANN201
        from no_docker.supervisor.ending.algorithm import RunTarget
        return RunTarget(self.life.run_id, self.life.namespace, self.life.record.init, self.life.cgroup)

    def count_in_cgroup(self) -> int:
        """Tasks in the v1 pids cgroup (zombies included): independent of the proof passes.
        Without one, the processes descended from the run's init by ``/proc``'s parent links
        (init included; nested namespaces' members too) and every member of the run's own pid
        namespace by its ``/proc/PID/ns/pid``."""
        cg = self.life.cgroup
        if cg is None or cg.pids_v1 is None:
            # A pid-hopper's child can be read before its parent's exit reparents it (its ppid
            # then names a pid already gone): the namespace's own members count it.
            return len(self.descendants() | set(self.members_left(timeout=0)))
        try:
            return len(Path(cg.pids_v1, "cgroup.procs").read_text().split())
        except FileNotFoundError:
            return 0

    def descendants(self) -> set[int]:
        """The run's init and every process below it now (by ``/proc/PID/stat`` ppid)."""
        record = self.life.record
        if record is None or record.init is None:
            return set()
        init = record.init.pid
        procfs = ProcFS()
        children: dict[int, list[int]] = {}
        alive_init = False
        for pid in procfs.pids():
            try:
                st = procfs.stat(pid)
            except ProcfsError:
                continue
            if pid == init:
                alive_init = st.start_time == record.init.start_time
            children.setdefault(st.ppid, []).append(pid)
        if not alive_init:
            return set()
        out, todo = {init}, [init]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in out:
                    out.add(child)
                    todo.append(child)
        return out

    def members_left(self, timeout: float = 5.0) -> list[int]:
        """Processes still in the run's own pid namespace (by ``/proc/PID/ns/pid``, zombies
        included) once TIMEOUT has passed or none is: with the namespace's init gone the kernel
        kills every member and every nested namespace, so an empty answer is the kernel's word
        where no cgroup counts. A zombie init whose bwrap has just exited is reaped by the
        host's init a moment later: hence the wait."""
        ns = self.life.namespace
        if ns is None:
            return []
        procfs = ProcFS()
        deadline = time.monotonic() + timeout
        while True:
            left = []
            for pid in procfs.pids():
                try:
                    if procfs.pidns_inode(pid) == ns.ns.inode:
                        left.append(pid)
                except ProcfsError:
                    continue
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        cg = self.life.cgroup
        try:
            if self.life.report is None and self.life.record is not None:
                self.life.end()
        finally:
            if cg is not None:
                _kill_cgroups(cg.path, cg.pids_v1)
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
            if self.proc is not None:
                self.proc.wait(timeout=30)
            if cg is not None:
                cg.remove(deadline=time.monotonic() + 5)
            if self.life.directory is not None:
                self.life._discard()


def _kill_cgroups(v2: str | Path | None, v1: str | Path | None) -> None:
    v2, v1 = (None if v2 is None else Path(v2)), (None if v1 is None else Path(v1))
    if v2 is not None and v2.exists():
        try:
            (v2 / "cgroup.kill").write_text("1")
        except OSError:
            pass
    if v1 is not None:
        for _ in range(50):
            try:
                pids = [int(p) for p in (v1 / "cgroup.procs").read_text().split()]
            except FileNotFoundError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)  # tasks of our own bounded test cgroup only
                except ProcessLookupError:
                    pass
            time.sleep(0.02)


def _read_all(fd: int, timeout: float, end: bytes) -> bytes:
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer on pipe")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        data = os.read(fd, 4096)
        if not data:
            return b"".join(chunks)
        chunks.append(data)
        if end in data:
            return b"".join(chunks)
