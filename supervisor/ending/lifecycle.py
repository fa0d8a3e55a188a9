"""One run's life as the supervisor sees it: marker + cgroup before, ending + proof after.

The API ``run.py`` uses::

    # stale check, run marker, cgroup (+ pids limit); a subreaper where there is no cgroup
    with RunLifecycle(argv, max_pids=N, end_timeout=10.0, subreaper=True) as life:
        life.spawning()                                                # record: bwrap may exist now
        with life.into_cgroup() as into:                               # bwrap is born inside
            pid = spawn(bwrap, argv, cgroup_fd=into.fd, enter_cgroup=into.enter)
        life.launched(pid)        # (or `with life.cgroup_entered(): os.posix_spawn(...)`, or
                                  #  Popen(preexec_fn=life.spawn_hook()): both move a process)
        life.set_init(child_pid_from_info_fd)                          # pidfd + namespace identity
        status = life.reap(block=True)                                 # bwrap's exit code
        report = life.end()        # kill, prove; marker + cgroup removed only when proven
    # leaving the block ends the run too (exceptions, signals turned into exceptions)

``end()`` never raises for an unproven ending: ``report.clean`` is False, the marker is kept
with state ``not-proven`` and ``life.end_command()`` is the exact command that finishes it.
"""

from __future__ import annotations

import _signal as signal  # not signal: its enum import costs milliseconds on every run
import _thread
import os
import select
import time

from ..errors import NotProven
from . import markers
from .cgroup import CgroupError, RunCgroup, parse_events
from .cgroup import create as create_cgroup
from .procfs import ProcessGone, ProcFS, ProcfsError
from .snapshot import Identity

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    # Not at run time: collections.abc, contextlib, pathlib and types cost 10-15 ms of every
    # `no-docker run -- true` together (DESIGN §10: 30 ms); paths here are plain str.
    from collections.abc import Callable
    from types import TracebackType

    from .algorithm import EndReport, RunTarget
    from .membership import RunNamespace

# algorithm.DEFAULT_TIMEOUT (tests/unit/test_isolation_run.py checks they agree). The ending's
# modules (algorithm, membership) are imported once bwrap has been started (``launched``), not
# before: their 0.4 ms then overlaps bwrap building the sandbox instead of preceding it.
DEFAULT_TIMEOUT = 10.0


class RunLifecycle:
    def __init__(self, command: list[str], *, max_pids: int | None = None,
                 memory_max: int | None = None, end_timeout: float = DEFAULT_TIMEOUT,
                 procfs: ProcFS | None = None,
                 state: str | os.PathLike[str] | None = None, use_cgroup: bool = True,
                 check_stale: bool = True, subreaper: bool = False,
                 enter_cgroup_early: bool = False, work: str = "") -> None:
        self.command = list(command)
        self.work = work
        self.max_pids = max_pids
        self.memory_max = memory_max  # bytes: the run's cgroup memory limit (--memory-max)
        self.end_timeout = end_timeout
        self.procfs = procfs or ProcFS()
        self.state = None if state is None else os.fspath(state)
        self.use_cgroup = use_cgroup
        self.check_stale = check_stale
        self.subreaper = subreaper  # become a child subreaper when there is no cgroup
        # Where the spawn must move us into the run's cgroup (into_cgroup), start moving as soon
        # as the cgroup exists (see _start_entering).
        self.enter_cgroup_early = enter_cgroup_early
        self._entering: _thread.LockType | None = None  # held until the background move is done
        self._entering_error: BaseException | None = None
        self.is_subreaper = False
        self.run_id = markers.new_run_id()
        self.record: markers.RunRecord | None = None
        self.directory: str | None = None
        self.cgroup: RunCgroup | None = None
        self.namespace: RunNamespace | None = None
        self.init_untaken: str | None = None  # why set_init could not take the init
        self.init_pidfd: int | None = None
        self.seen_alive: set[int] = set()  # the run's processes seen alive before the ending
        self._launcher_held = False  # bwrap stopped while CMD runs (watch_command)
        self.launcher_pid: int | None = None  # the outer bwrap: our child
        self.launcher_status: int | None = None  # its exit code once reaped (-N: signal N)
        self.launcher_rusage: tuple[float, float, int] | None = None  # (user s, sys s, maxrss KiB) reaped
        self.report: EndReport | None = None
        # The first run.json write or removal that failed once the ending began (a full or
        # read-only state dir): the ending goes on (killing outranks recording), run says it.
        self.marker_failure: markers.NotProven | None = None
        self._ending = False

    # -- before the run

    def __enter__(self) -> RunLifecycle:
        self.state = markers.ensure_state_dir(self.state or markers.state_dir())
        if self.check_stale:
            refuse_if_stale(self.state, self.procfs)
        owner_ns_id, owner_ns_inode = markers.own_pid_namespace()
        self.record = markers.RunRecord(
            run_id=self.run_id, owner=markers.own_identity(self.procfs),
            boot_id=self.procfs.boot_id(), command=self.command, work=self.work,
            owner_ns_id=owner_ns_id, owner_ns_inode=owner_ns_inode)
        try:
            # The cgroups before the marker, so that run.json is written once, naming them (each
            # write is a measurable part of `run -- true`). A supervisor SIGKILLed between the
            # mkdir and the marker leaves an empty cgroup that no marker names; the same window
            # was there before, between the mkdir and a second write of run.json.
            if self.use_cgroup or self.max_pids is not None or self.memory_max is not None:
                try:
                    self.cgroup = create_cgroup(self.run_id, max_pids=self.max_pids,
                                                memory_max=self.memory_max)
                except CgroupError as err:
                    raise NotProven(err.option, str(err), f"run as root or without {err.option}") from err
                if self.cgroup is not None and not self.use_cgroup and self.cgroup.path is not None:
                    os.rmdir(self.cgroup.path)
                    self.cgroup.path = None
                self.record.cgroup = None if self.cgroup is None else self.cgroup.as_record()
            self.directory = markers.create_marker(self.state, self.record)
            if (self.cgroup is None or self.cgroup.path is None) and self.subreaper:
                self.is_subreaper = _become_subreaper()
            if self.enter_cgroup_early and self._must_move():
                self._start_entering()
        except BaseException:
            self._discard()
            raise
        return self

    def spawn_hook(self) -> Callable[[], None] | None:
        """``preexec_fn`` that puts the child into the run's cgroups before it can fork."""
        self.spawning()
        return None if self.cgroup is None else self.cgroup.spawn_hook()

    def into_cgroup(self) -> _IntoCgroup:
        """``with life.into_cgroup() as into: spawn(..., cgroup_fd=into.fd,
        enter_cgroup=into.enter)``: the child spawned in the block is born in the run's cgroups.

        Where the run's cgroup is a v2 leaf alone, ``into.fd`` is an fd of it for
        ``clone3(CLONE_INTO_CGROUP)`` (``mediation.spawn_filtered``) and we never move: a move
        into a cgroup costs a whole RCU grace period, and another to come back
        (``_start_entering``). Where there is a v1 pids cgroup too (``--max-pids`` without the
        v2 pids controller: no clone flag reaches v1), we move ourselves in as
        ``cgroup_entered`` does and ``into.fd`` is None. ``into.enter()`` makes that move late,
        for a kernel that refused the clone. Leaving the block moves us back where we moved,
        and closes the fd."""
        return _IntoCgroup(self)

    def cgroup_entered(self) -> _CgroupEntered:
        """``with life.cgroup_entered():`` within the block the supervisor itself is in the
        run's cgroups, so a child it spawns (posix_spawn has no preexec hook) is born inside;
        on leaving, it moves back. Nothing else of ours is forked meanwhile."""
        return _CgroupEntered(self)

    def _must_move(self) -> bool:
        """Whether a child can be born in the run's cgroups only if we move into them first."""
        return self.cgroup is not None and (self.cgroup.path is None or self.cgroup.v1())

    def _start_entering(self) -> None:
        """Move ourselves into the run's cgroup on a thread while the caller goes on (lists the
        outside, builds the policy). The first ``cgroup.procs`` write of a while waits for an RCU
        grace period: ``cgroup_attach_lock`` takes ``cgroup_threadgroup_rwsem`` for writing, and
        ``percpu_down_write`` must first ``rcu_sync_enter`` (kernel/cgroup/cgroup.c,
        kernel/locking/percpu-rwsem.c); measured 7-28 ms here, most of `run -- true` otherwise.
        The wait sleeps in the kernel (the GIL is released in write(2)), so it overlaps.
        Being in the cgroup early is harmless: we fork nothing before bwrap, and every path out
        (``end``, ``_discard``) moves back before the cgroup is killed or removed."""
        cgroup = self.cgroup
        assert cgroup is not None and self._entering is None
        done = _thread.allocate_lock()
        done.acquire()

        def move() -> None:
            try:
                cgroup.enter_self()
            except BaseException as err:  # handed to the main thread by _finish_entering
                self._entering_error = err
            finally:
                done.release()

        self._entering = done
        _thread.start_new_thread(move, ())

    def _finish_entering(self) -> None:
        """Wait for a background move into the cgroup; re-raise what it raised."""
        done, self._entering = self._entering, None
        if done is None:
            return
        done.acquire()
        err, self._entering_error = self._entering_error, None
        if err is not None:
            raise err

    def _enter_cgroup(self) -> None:
        self.spawning()
        if self.cgroup is None:
            return
        if self._entering is not None:
            self._finish_entering()
        else:
            self.cgroup.enter_self()

    def _leave_cgroup(self) -> None:
        """Back to where we came from (idempotent): before the cgroup is killed or removed."""
        if self._entering is not None:
            try:
                self._finish_entering()
            except OSError:
                pass  # the move failed: leave_self moves back whatever part of it was done
        if self.cgroup is not None:
            self.cgroup.leave_self()

    def spawning(self) -> None:
        """Record that processes of the run may exist from now on (before spawning them)."""
        if self.record is not None and self.record.state == markers.CREATED:
            self._set_state(markers.SPAWNING)

    def launched(self, pid: int) -> None:
        """The outer bwrap was started (our child, pid ``pid``): the ending reaps it."""
        from . import algorithm  # noqa: F401 - loaded now: the ending must not depend on a late import
        self.launcher_pid = pid
        if self.cgroup is not None:
            self.cgroup.close_hook()
        try:
            # Not written now: nothing reads the launcher back (the ending kills through the
            # namespace and the cgroup), so it goes to disk with set_init's write, saving one.
            self.record.launcher = Identity(pid, self.procfs.stat(pid).start_time)  # type: ignore[union-attr]
        except ProcfsError:
            pass  # it already exited; the ending reaps it

    def set_init(self, init_pid: int, *, checked: Callable[[], None] | None = None) -> None:
        """Take the namespace init (outside pid from bwrap's info fd): pidfd, identity, ns.

        The init is the outer bwrap's child, so its pid cannot be reused before bwrap reaps it;
        its parent is checked against the launcher all the same. If it has already exited, the
        kernel has ended its namespace (``zap_pid_ns_processes`` reaps every member before the
        init exits): the run is recorded as such and the ending relies on that and the cgroup.
        CHECKED is called once the init is shown to be bwrap's live child, before the marker
        is rewritten (0.3-0.8 ms on a journaled /run): the prover waits for that pid. When it
        is not (``init_untaken`` says why), CHECKED is not called: there is nothing to prove.
        """
        rec = self.record
        assert rec is not None
        try:
            fd = os.pidfd_open(init_pid)
        except ProcessLookupError:
            self.init_untaken = f"{init_pid} has exited"
            return self._init_gone(init_pid, -1)
        try:
            st = self.procfs.stat(init_pid)
            if self.launcher_pid is not None and st.ppid != self.launcher_pid:
                raise ProcessGone(f"{init_pid} is not bwrap's child (a wrapper around bwrap must exec it)")
            if st.is_dead:
                raise ProcessGone(f"{init_pid} has exited")
            from .algorithm import namespace_of

            namespace = namespace_of(init_pid, self.procfs)
            if self.procfs.stat(init_pid).start_time != st.start_time:
                raise ProcessGone(f"{init_pid} was replaced")
        except ProcessGone as err:
            os.close(fd)
            self.init_untaken = str(err) or f"{init_pid} is gone"
            return self._init_gone(init_pid, -1)
        except BaseException:
            os.close(fd)
            raise
        self.init_pidfd = fd
        self.namespace = namespace
        rec.init = Identity(init_pid, st.start_time)
        rec.ns_id, rec.ns_inode, rec.ns_depth = namespace.ns.ns_id, namespace.ns.inode, namespace.depth
        rec.state = markers.RUNNING
        if checked is not None:
            checked()
        self._save()

    def note_user_namespace(self) -> None:
        """Read the one uid the run's user namespace maps, from its init's ``uid_map``, once the
        sandbox is set up (bwrap reports its init before the map is written: read then, it is
        empty). Every member holds that uid, so the ending settles processes of other uids as
        outsiders without reading their ns links (membership.marker_from_status). Not written
        to run.json now (a rewrite costs 0.3-0.8 ms): a marker without it means our own uid."""
        from .membership import RunNamespace

        ns, rec = self.namespace, self.record
        if ns is None or rec is None or rec.init is None or self.init_pidfd is None:
            return
        try:
            uid = self.procfs.single_mapped_uid(rec.init.pid)
        except ProcfsError:
            return
        # Read through the pid: it was the init's only if the init is still alive after it.
        if uid is None or select.select([self.init_pidfd], [], [], 0)[0]:
            return
        self.namespace = RunNamespace(ns.ns, ns.depth, uid)
        rec.member_uid = uid

    def command_pidfd(self, inner_pid: int | None) -> int | None:
        """A pidfd on the sandbox's command: the gate that becomes CMD, the init's child whose
        pid in the run's namespace is INNER_PID (the gate says it in its first word; call this
        once it has). None when it cannot be told (CMD has exited already, or no such child): the
        caller then relies on bwrap alone, as before. Never "the init's only child": once CMD
        has exited, that is a daemon CMD left behind, which may never exit, while bwrap is held
        (a run that hung for good, found in review).

        Why: bwrap exits only after its init has reaped the command; an init that was frozen
        or stopped from inside never does, and a supervisor that watched bwrap alone waited
        forever (red-team review). The command's own exit is what the ending can trust.
        """
        init = self.record.init if self.record is not None else None
        if self.init_pidfd is None or init is None or inner_pid is None or inner_pid < 2:
            return None
        try:
            children = [int(c) for c in self.procfs.read(init.pid, b"task/%d/children" % init.pid).split()]
        except (ProcfsError, ValueError):
            return None
        for pid in children:
            try:
                if self.procfs.nspid(pid)[-1] != inner_pid:
                    continue
                fd = os.pidfd_open(pid)
            except (ProcfsError, IndexError, ValueError, OSError):
                continue
            try:
                # Read again through the pidfd's process: the pid was the init's child and had
                # the gate's inner pid; a pid is not reused while its parent has not reaped it.
                st = self.procfs.stat(pid)
                if st.ppid == init.pid and not st.is_dead and self.procfs.nspid(pid)[-1] == inner_pid:
                    return fd
            except (ProcfsError, IndexError):
                pass
            os.close(fd)
        return None

    def watch_command(self, inner_pid: int | None = None) -> int | None:
        """A pidfd on CMD (``command_pidfd``), and bwrap held until ``command_exited``.

        Why hold bwrap: when CMD exits, bwrap's init tells bwrap, bwrap exits, and the kernel
        SIGKILLs the init (``--die-with-parent``) and with it every process left in the run,
        all before the ending begins: nothing would be left to see, and "N processes killed"
        said 1 whatever the run left (issue 18). bwrap (the launcher, our child: its pid is
        ours until reaped) is stopped while CMD runs; it needs to do nothing meanwhile, and
        still dies with us if we are killed (``--die-with-parent``: SIGKILL ends a stopped
        process). ``release_launcher`` lets it go; the ending always does that first.
        """
        fd = self.command_pidfd(inner_pid)
        if fd is None:
            # CMD cannot be told (it has exited already, its children now the init's; or the
            # init shows several children): bwrap alone tells the run's end, as before. What
            # is alive is noted first: once bwrap goes, the kernel may kill it uncounted.
            self.command_exited()
            return None
        self.hold_launcher()
        return fd

    def hold_launcher(self) -> None:
        """Stop bwrap (see ``watch_command``) from before the sandbox is released, not from when
        the gate says it runs: by then CMD may have run and exited, and bwrap with it, under
        load (32 runs on 2 cores said "0 processes killed" for runs that left 300). bwrap's
        monitor has nothing to do between the release and CMD's exit: the sandbox's init forks
        CMD and waits for it on its own."""
        if self._launcher_held or self.launcher_pid is None or self.launcher_status is not None:
            return
        try:
            os.kill(self.launcher_pid, signal.SIGSTOP)  # our unreaped child: the pid is ours
            self._launcher_held = True
        except ProcessLookupError:
            pass

    @property
    def launcher_held(self) -> bool:
        return self._launcher_held

    def command_exited(self) -> None:
        """CMD has exited: note the run's processes still alive (the ending counts them: the
        kernel kills them as soon as bwrap is released), then release bwrap."""
        from .algorithm import RunTarget, members_before

        init = self.record.init if self.record is not None else None
        self.seen_alive |= members_before(RunTarget(self.run_id, self.namespace, init, self.cgroup),
                                          self.procfs)
        self.release_launcher()

    def watch_cgroup(self) -> int | None:
        """An fd on the run's ``cgroup.events`` that polls POLLPRI when the file changes
        (kernfs), or None without a v2 leaf. Nothing of no-docker freezes a run's cgroup while
        it runs; if it becomes frozen (once possible from a user namespace made inside, now
        denied: P9), bwrap and CMD would wait forever, so the run is ended instead."""
        if self.cgroup is None or self.cgroup.path is None:
            return None
        try:
            fd = os.open(f"{self.cgroup.path}/cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
            os.read(fd, 256)  # a read arms the notification
        except OSError:
            return None
        return fd

    @staticmethod
    def cgroup_frozen(events_fd: int) -> bool:
        """Read the run's ``cgroup.events`` again (re-arming it): is the cgroup frozen?"""
        try:
            return parse_events(os.pread(events_fd, 256, 0).decode("ascii", "replace")).get("frozen") == 1
        except OSError:
            return False

    def release_launcher(self) -> None:
        """Let bwrap run again (idempotent; see ``watch_command``)."""
        if self._launcher_held and self.launcher_pid is not None and self.launcher_status is None:
            # not reaped yet: the pid is still our child's
            self._launcher_held = False
            try:
                os.kill(self.launcher_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def _init_gone(self, pid: int, start: int) -> None:
        rec = self.record
        assert rec is not None
        rec.init = Identity(pid, start)
        rec.state = markers.RUNNING
        rec.detail = "namespace init exited before it was taken"
        self._save()

    # -- after the run

    def reap(self, block: bool = False) -> int | None:
        """Reap the outer bwrap if it has exited (or wait for it); its exit code, or None."""
        if self.launcher_pid is None or self.launcher_status is not None:
            return self.launcher_status
        try:
            pid, status, rusage = os.wait4(self.launcher_pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: the status is lost
            self.launcher_status = -1
            return self.launcher_status
        if pid == 0:
            return None
        self.launcher_status = os.waitstatus_to_exitcode(status)
        # bwrap's and its waited-for descendants' CPU and largest RSS: the run's usage where
        # it has no cgroup that counts (algorithm.usage_of).
        self.launcher_rusage = (rusage.ru_utime, rusage.ru_stime, rusage.ru_maxrss)
        return self.launcher_status

    def end(self) -> EndReport:
        """Kill and prove; idempotent. Removes marker + cgroup only when proven."""
        if self.report is not None:
            return self.report
        from . import algorithm
        from .algorithm import EndReport, RunTarget

        self._ending = True  # from here on a marker that cannot be written never stops the ending
        self.release_launcher()
        if self.namespace is not None and self.namespace.uid is None:
            self.note_user_namespace()  # ended before the verdict (a signal): read it if set up
        try:
            self._leave_cgroup()  # never kill the cgroup we are in
            cgroup = self.cgroup
        except OSError:
            cgroup = None  # still inside it: the pid namespace alone suffices (cgroup.py)
        if self.record is not None and self.record.state != markers.CREATED and (
                self.launcher_status is None or self.launcher_status < 0):
            # Said only when there may be something to end: bwrap that exited with a status
            # did so after its init (and with it the whole pid namespace) was gone, and the
            # ending only proves; a run.json rewrite costs 0.3-0.6 ms on a journaled /run.
            # bwrap killed by a signal says nothing of its init.
            self._set_state(markers.ENDING)
        target = RunTarget(self.run_id, self.namespace, self.record.init if self.record else None,
                           cgroup)
        if self.record is not None and self.record.state == markers.CREATED:
            report = EndReport(self.run_id, clean=True, reason="nothing was started")
        elif target.init is None and target.cgroup is None and self.is_subreaper:
            report = self._end_by_subreaper()
        else:
            report = algorithm.end_run(target, procfs=self.procfs, timeout=self.end_timeout,
                                       init_pidfd=self.init_pidfd, reap=self._reap_while_ending,
                                       seen_before=self.seen_alive)
        self._reap_launcher(time.monotonic() + max(0.5, self.end_timeout / 4))
        if report.clean:
            # Every process is gone: what they used is final; read before the cgroup goes.
            # Reaped figures only as a subreaper: otherwise the init, which waited for CMD, is
            # reaped by the host's init and bwrap's own rusage holds nothing of the run.
            init = self.record.init if self.record is not None else None
            reaped = (_add_rusage(self.launcher_rusage, _reap_init(init.pid if init is not None else None))
                      if self.is_subreaper else None)
            report.usage = algorithm.usage_of(self.cgroup.usage() if self.cgroup is not None else None,
                                              reaped)
        if report.clean and self.cgroup is not None:
            cgroups_removed(self.cgroup, report)
        if report.clean:
            self._discard()
        else:
            if self.record is not None:
                self.record.state = markers.NOT_PROVEN
                self.record.detail = report.reason
                self._save()
        self._close()
        self.report = report
        return report

    def _reap_while_ending(self) -> None:
        """bwrap, and, as a subreaper, the run's members that were left to us: zombie children
        of ours in a nested pid namespace that are not its init. Inside a pid namespace an
        orphan goes to the namespace's init, but a process whose parent is outside it (what
        the prover forks after its setns into the run's pid namespace) goes to the nearest
        subreaper outside when that parent dies (find_new_reaper, kernel/exit.c): us, when a
        signal ends the run mid-proof and the prover is killed. The init cannot exit before
        it is reaped (zap_pid_ns_processes), and no one inside can reap it. Only zombies: a
        pid of ours that is not reaped cannot be reused, and no other child is touched."""
        self.reap()
        if not self.is_subreaper:
            return
        init = self.record.init.pid if self.record is not None and self.record.init is not None else None
        for pid in _own_children():
            if pid in (self.launcher_pid, init):
                continue
            try:
                if self.procfs.stat(pid).state != "Z":
                    continue
                nspid = self.procfs.nspid(pid)
            except ProcfsError:
                continue
            if len(nspid) < 2 or nspid[-1] == 1:
                continue  # not in a nested namespace, or an init (its figures are _reap_init's)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def _end_by_subreaper(self) -> EndReport:
        """bwrap never told us its init and there is no cgroup (bwrap failed early, or a signal
        came first). We are a child subreaper, so a namespace init bwrap may have made is our
        descendant: orphaned, it becomes our child. Once bwrap is reaped, ECHILD from waitid
        shows that no descendant is left (PR_SET_CHILD_SUBREAPER, prctl(2)). Any child still
        there is ours and unreaped, so its pid cannot be reused: it is SIGKILLed and reaped."""
        from .algorithm import EndReport

        t0 = time.monotonic()
        deadline = t0 + self.end_timeout
        report = EndReport(self.run_id, clean=False)
        self._reap_launcher(time.monotonic() + max(0.5, self.end_timeout / 4))
        while time.monotonic() < deadline:
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                report.clean = True
                report.reason = "bwrap ended before it reported a namespace; no descendant is left"
                break
            if found is not None:
                try:
                    os.kill(found.si_pid, 9)  # our unreaped child: its pid is still ours
                except ProcessLookupError:
                    pass
                os.waitpid(found.si_pid, 0)  # bwrap or its init: not counted as the run's
            else:
                time.sleep(0.005)  # a live child that has not exited yet: it was killed above
                for pid in _own_children():
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
        if not report.clean:
            report.reason = "descendants of bwrap are still alive"
        report.elapsed_ms = (time.monotonic() - t0) * 1000
        return report

    def _reap_launcher(self, deadline: float) -> None:
        """bwrap exits once its init is gone; it is outside the namespace, so if it lingers
        (stopped, say) it is killed through a pidfd: it is our child, its pid cannot be reused."""
        delay = 0.0005
        while self.reap() is None and self.launcher_pid is not None:
            if time.monotonic() >= deadline:
                try:
                    os.kill(self.launcher_pid, 9)  # our unreaped child: the pid is still ours
                except ProcessLookupError:
                    pass
                self.reap(block=True)
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    def end_command(self) -> str:
        return f"no-docker end {self.run_id}"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.record is not None and self.report is None:
            self.end()

    # -- internals

    def _set_state(self, state: str) -> None:
        if self.record is not None:
            self.record.state = state
            self._save()

    def _save(self) -> None:
        if self.directory is not None and self.record is not None:
            try:
                markers.write_record(self.directory, self.record)
            except markers.NotProven as err:
                # Before the ending: the run must not go on unrecorded (125, the ending follows);
                # during it: noted, and the ending goes on.
                if not self._ending:
                    raise
                self.marker_failure = self.marker_failure or err
            except FileNotFoundError:
                if os.path.isdir(self.directory):
                    raise
                # `no-docker end --force` ended this run and removed its marker: nothing to
                # record any more; the ending below still proves every process gone.
                self.directory = None

    def _close(self) -> None:
        if self.init_pidfd is not None:
            os.close(self.init_pidfd)
            self.init_pidfd = None
        if self.cgroup is not None:
            self.cgroup.close_hook()

    def _discard(self) -> None:
        if self.cgroup is not None:
            try:
                self._leave_cgroup()
            except OSError:
                pass  # then rmdir fails (EBUSY) and the cgroup is left, empty but for us
            self.cgroup.remove()
        if self.directory is not None:
            try:
                markers.remove_marker(self.directory)
            except markers.NotProven as err:
                if not self._ending:
                    raise
                self.marker_failure = self.marker_failure or err
            self.directory = None
        self.record = None


def _become_subreaper() -> bool:
    try:
        import ctypes  # only where there is no cgroup: ctypes costs milliseconds to import

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_init(pid: int | None) -> tuple[float, float, int] | None:
    """As a child subreaper, once the ending has shown every process of the run gone: reap the
    sandbox's init if it was left to us (bwrap exits once its init reports CMD's status, without
    waiting for it), and what it used (user s, sys s, maxrss KiB). Its figures hold CMD's and
    every other process of the run's: inside a pid namespace an orphan goes to the namespace's
    init, never to a subreaper outside, and the init's exit reaps whatever the kernel killed
    (zap_pid_ns_processes). Only that pid: no other child of ours is touched. Never blocks."""
    if pid is None:
        return None
    try:
        found, _status, rusage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return None  # bwrap reaped it (its figures are in bwrap's), or it was never ours
    if found == 0:
        return None
    return rusage.ru_utime, rusage.ru_stime, rusage.ru_maxrss


def _add_rusage(a: tuple[float, float, int] | None, b: tuple[float, float, int] | None
                ) -> tuple[float, float, int] | None:
    if a is None or b is None:
        return a or b
    return a[0] + b[0], a[1] + b[1], max(a[2], b[2])


def _own_children() -> list[int]:
    """Our children, zombies included (a zombie leaves its parent's list only when reaped:
    release_task), from /proc/self/task/*/children (needs CONFIG_PROC_CHILDREN). A thread
    that exits while the lists are read loses only its own list for this round."""
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as fh:
                pids += [int(p) for p in fh.read().split()]
        except OSError:
            continue
    return pids


# --- stale runs ---------------------------------------------------------------------------


def cgroups_removed(cgroup: RunCgroup, report: EndReport) -> bool:
    """Remove the run's cgroups and every cgroup below them; where any is left, the ending is
    not proven (REPORT says which), so the marker stays and ``no-docker end`` tries again."""
    if cgroup.remove():
        return True
    left = cgroup.left()
    report.clean = False
    report.reason = (f"{len(left)} cgroups of the run could not be removed: {', '.join(left[:3])}"
                     f"{' ...' if len(left) > 3 else ''}")
    return False


def target_of(record: markers.RunRecord) -> RunTarget:
    """The RunTarget a marker describes (for `end`, and the stale check)."""
    from .algorithm import RunTarget
    from .membership import RunNamespace

    ns = None
    if record.ns_inode is not None and record.ns_depth is not None:
        from .procfs import NsIdentity
        # A marker written before no-docker recorded the uid: every marker in our state dir
        # (verified ours, 0700: markers.ensure_state_dir) was made by a supervisor of our uid,
        # and bwrap maps the real uid of whoever runs it (bwrap(1): --uid defaults to it).
        uid = record.member_uid if record.member_uid is not None else os.getuid()
        ns = RunNamespace(NsIdentity(record.ns_id, record.ns_inode), record.ns_depth, uid)
    return RunTarget(record.run_id, ns, record.init, RunCgroup.from_record(record.cgroup))


# How long a new run waits for the run of a supervisor that has just died to finish dying:
# cosmic-ray's timeout SIGKILLs the test command's process group, and the next run starts at
# once, while the kernel still delivers the parent-death signals (supervisor -> bwrap -> its
# init, --die-with-parent) and tears the namespace down (zap_pid_ns_processes waits for every
# member). Measured: refused in 1 and 4 of 12 tries without the wait. A run that does not end
# within it (bwrap #633: an init left alive) is what `no-docker end` is for.
DYING_RUN_WAIT = 5.0


def stale_is_empty(record: markers.RunRecord, procfs: ProcFS, wait: float = 0.0) -> EndReport:
    """Look (without killing) whether anything of a run whose owner is gone is left; with
    ``wait``, give its init up to that long to finish dying (``DYING_RUN_WAIT``)."""
    from . import algorithm
    from .algorithm import EndReport

    if record.state == markers.CREATED:
        return EndReport(record.run_id, clean=True, reason="nothing was started")
    target = target_of(record)
    if wait > 0:
        algorithm.wait_for_dying_init(target, record.launcher, procfs, time.monotonic() + wait)
    return algorithm.end_run(target, procfs=procfs, timeout=0.5, kill=False)


def refuse_if_stale(state: str | os.PathLike[str], procfs: ProcFS) -> None:
    """Before every run: stale markers are removed if shown empty, else the run refuses."""
    boot = procfs.boot_id()
    ours: tuple[int | None, int | None] | None = None
    for directory in markers.list_markers(state):
        if ours is None:
            ours = markers.own_pid_namespace()  # only when there are markers at all
        try:
            record = markers.read_record(directory)
        except markers.CorruptMarker as err:
            if not os.path.lexists(directory):
                # Its owner removed it between our listing and our read (remove_marker renames
                # the directory away first): a run that ended cleanly, not a corrupt marker.
                continue
            raise NotProven("earlier runs ended", str(err),
                            f"inspect it, then remove {directory}") from err
        if markers.owner_alive(record, procfs, boot):
            continue  # a concurrent run: never touched
        if markers.owner_elsewhere(record, ours):
            continue  # another pid namespace's run (a shared state dir): not ours to judge
        if markers.live_twin(state, directory, record, procfs, boot):
            # A copy of a live run's marker (it names that run's sandbox): that run is not
            # stale, and this marker is removed once that run's namespace has ended.
            continue
        if record.boot_id != boot:
            markers.remove_marker(directory)  # a reboot ended every process of it
            continue
        report = stale_is_empty(record, procfs, wait=DYING_RUN_WAIT)
        cg = RunCgroup.from_record(record.cgroup)
        if report.clean and cg is not None:
            cgroups_removed(cg, report)
        if report.clean:
            markers.remove_marker(directory)
            continue
        raise NotProven("earlier runs ended",
                        f"run {record.run_id} (owner {record.owner.pid} gone) may have processes left: "
                        f"{report.reason}", f"run: no-docker end {record.run_id}")


class _IntoCgroup:
    """What ``RunLifecycle.into_cgroup`` returns: a context manager without contextlib."""

    __slots__ = ("life", "fd")

    def __init__(self, life: RunLifecycle) -> None:
        self.life = life
        self.fd: int | None = None

    def __enter__(self) -> _IntoCgroup:
        life = self.life
        life.spawning()
        if life.cgroup is None:
            return self
        if not life._must_move():
            try:
                self.fd = os.open(life.cgroup.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # type: ignore[arg-type]
                return self
            except OSError:
                pass  # moved as before; the move reports what is wrong with the leaf
        life._enter_cgroup()
        return self

    def enter(self) -> None:
        """The kernel refused to start the child in the leaf: move ourselves in after all."""
        self.life._enter_cgroup()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.life._leave_cgroup()


class _CgroupEntered:
    """What ``RunLifecycle.cgroup_entered`` returns: a context manager without contextlib."""

    __slots__ = ("life",)

    def __init__(self, life: RunLifecycle) -> None:
        self.life = life

    def __enter__(self) -> None:
        self.life._enter_cgroup()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.life._leave_cgroup()
