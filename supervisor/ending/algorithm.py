"""Ending a run and proving that every process of it is gone (DESIGN §5).

1. SIGKILL the namespace's init through a pidfd, after re-checking its identity (pid + start
   time; a pidfd never hits a reused pid). The kernel then refuses new pids in that namespace
   and SIGKILLs every member, nested namespaces included (``zap_pid_ns_processes``).
2. Where the run has a cgroup: write ``cgroup.kill`` (atomic against concurrent forks).
3. Wait until the run cannot create processes any more (``wait_until_run_cannot_fork``: the
   init has exited, or the killed cgroup is empty). Only from then on is a proof pass
   admissible: a pass taken while members can fork proves nothing (a pid-hopper was invisible
   in 40 of 40 scans).
4. Proof passes (``snapshot``): members found are SIGKILLed through pidfds (identity re-checked)
   and the pass repeats; an unreadable marker makes the pass inconclusive and it repeats.
   With a cgroup, ``populated 0`` must hold as well. All within ``timeout`` seconds, else the
   report says not clean and names what is left.

Zombies count as dead. The supervisor's own children (the outer bwrap) are reaped by the
caller's ``reap`` callback after the kill.
"""

from __future__ import annotations

# _signal, not signal: the wrapper imports enum, a measurable part of every `no-docker run`.
import _signal as signal
import os
import select
import time

from ..record import Factory, record
from .cgroup import CgroupError, RunCgroup
from .membership import LiveTable, Membership, RunNamespace
from .procfs import NsIdentity, ProcessGone, ProcFS, ProcfsError, Unreadable
from .snapshot import Identity, Marker, PassResult, Verdict, take_pass, verdict

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # collections.abc costs milliseconds at import on every `no-docker run`
    from collections.abc import Callable

DEFAULT_TIMEOUT = 10.0


@record
class RunTarget:
    """What is needed to end a run: its namespace, its init, its cgroup (any may be missing)."""

    run_id: str
    ns: RunNamespace | None
    init: Identity | None
    cgroup: RunCgroup | None = None


@record(mutable=True)
class EndReport:
    run_id: str
    clean: bool
    # The run's processes this ending ended: the members alive when it began (the kernel kills
    # most of them, through the namespace or cgroup.kill) and any a pass found later; never
    # the sandbox's init or bwrap, which are no-docker's own.
    killed: int = 0
    passes: int = 0
    left: tuple[Identity, ...] = ()
    unknown: tuple[Identity, ...] = ()
    # processes whose pid namespace could not be read, shown not to be the run's by its
    # empty cgroup (reported, so that a user sees what the /proc pass could not settle)
    settled_by_cgroup: int = 0
    elapsed_ms: float = 0.0
    reason: str = ""
    timings: dict[str, float] = Factory(dict)  # type: ignore[assignment]
    # What the run's processes used (issue 28 item 9): set by the lifecycle once they are gone.
    usage: Usage | None = None

    def line(self) -> str:
        if self.clean:
            spent = f"; {self.usage.words()}" if self.usage is not None else ""
            return (f"run {self.run_id} ended, {plural(self.killed, 'process', 'processes')} killed, "
                    f"0 left, {self.elapsed_ms:.0f} ms{spent}")
        return f"run {self.run_id} not shown ended: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "clean": self.clean, "killed": self.killed,
                "passes": self.passes, "left": [str(i) for i in self.left],
                "unknown": [str(i) for i in self.unknown], "elapsed_ms": round(self.elapsed_ms, 3),
                "settled_by_cgroup": self.settled_by_cgroup, "reason": self.reason,
                "usage": self.usage.to_json() if self.usage is not None else None}


@record
class Usage:
    """CPU time and peak memory of a run's processes, and where each figure comes from:
    ``cgroup`` (the kernel's count for the run's cgroup: every process of the run) or
    ``reaped`` (the rusage of bwrap as the supervisor reaped it: bwrap and every descendant
    that was waited for, which in a pid namespace is all of them, its init waiting for
    orphans; for memory only the largest single process's peak RSS, never the sum, and no
    tmpfs page, which is in no process's RSS). ``time no-docker run`` sees neither: the run's
    processes are not the supervisor's children in the sense wait4(2) counts unless it reaps
    them, and the supervisor itself never waits for CMD (docs/supervision.md)."""

    user_ms: float
    sys_ms: float
    cpu_from: str
    peak_bytes: int | None = None
    memory_from: str | None = None

    def words(self) -> str:
        """``CPU 23.41 s (user 22.90 + sys 0.51), peak memory 312.4 MiB`` (pure)."""
        cpu = (f"CPU {(self.user_ms + self.sys_ms) / 1000:.2f} s (user {self.user_ms / 1000:.2f} + sys "
               f"{self.sys_ms / 1000:.2f})")
        if self.peak_bytes is None:
            return cpu
        largest = " (largest process)" if self.memory_from == "reaped" else ""
        return f"{cpu}, peak memory {self.peak_bytes / (1 << 20):.1f} MiB{largest}"

    def to_json(self) -> dict[str, object]:
        return {"cpu_ms": round(self.user_ms + self.sys_ms, 3), "user_ms": round(self.user_ms, 3),
                "sys_ms": round(self.sys_ms, 3), "cpu_from": self.cpu_from,
                "peak_memory_bytes": self.peak_bytes, "memory_from": self.memory_from}


def usage_of(counted: tuple[int | None, int | None, int | None] | None,
             reaped: tuple[float, float, int] | None) -> Usage | None:
    """The run's :class:`Usage` from COUNTED, the cgroup's (user µs, sys µs, peak bytes), and
    REAPED, bwrap's rusage as reaped (user s, sys s, ru_maxrss KiB); the cgroup's figure
    wherever it has one (pure)."""
    user = system = peak = None
    if counted is not None:
        user, system, peak = counted
    cpu_from = memory_from = None
    if user is not None and system is not None:
        user_ms, sys_ms, cpu_from = user / 1000, system / 1000, "cgroup"
    elif reaped is not None:
        user_ms, sys_ms, cpu_from = reaped[0] * 1000, reaped[1] * 1000, "reaped"
    else:
        return None
    if peak is not None:
        memory_from = "cgroup"
    elif reaped is not None and reaped[2] > 0:
        peak, memory_from = reaped[2] * 1024, "reaped"  # ru_maxrss is in KiB (getrusage(2))
    return Usage(user_ms, sys_ms, cpu_from, peak, memory_from)


def plural(n: int, one: str, many: str) -> str:
    """``1 process``, ``3 processes``, ``0 processes``."""
    return f"{n} {one if n == 1 else many}"


# --- signalling one process safely --------------------------------------------------------


def open_checked_pidfd(ident: Identity, procfs: ProcFS,
                       check: Callable[[int], bool] | None = None) -> int | None:
    """A pidfd on exactly ``ident``, or None if that process is gone, exited or not what we
    think. Raises ``Unreadable`` when its identity cannot be read (never guess "gone").

    The pidfd is opened first and the identity read after: if the start time still matches,
    the process the pidfd refers to is the one we meant (psutil's rule: a pid alone is reused).
    """
    try:
        fd = os.pidfd_open(ident.pid)
    except ProcessLookupError:
        return None
    try:
        st = procfs.stat(ident.pid)
        if st.start_time != ident.start_time or st.is_dead or (check is not None and not check(ident.pid)):
            os.close(fd)  # the pid is someone else's now, or the process exited
            return None
    except ProcessGone:
        # /proc says gone: believe it only if the pidfd agrees (polls readable once the process
        # exited). A live process that the procfs view does not show is unknown, not gone.
        exited = bool(select.select([fd], [], [], 0)[0])
        os.close(fd)
        if exited:
            return None
        raise Unreadable(f"process {ident.pid} is alive but {procfs.root} does not show it") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def kill_identity(ident: Identity, procfs: ProcFS, check: Callable[[int], bool] | None = None) -> int | None:
    """SIGKILL ``ident`` through a re-checked pidfd; returns the pidfd (caller closes) or None."""
    fd = open_checked_pidfd(ident, procfs, check)
    if fd is None:
        return None
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        os.close(fd)
        return None
    return fd


def wait_pidfds(fds: list[int], deadline: float) -> bool:
    """Wait until every pidfd polls readable (its process exited) or the deadline."""
    pending = set(fds)
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLIN)
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for fd, _ in poller.poll(remaining * 1000):
            pending.discard(fd)
            poller.unregister(fd)
    return True


def close_all(fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())


# --- the ending ---------------------------------------------------------------------------


def namespace_of(init_pid: int, procfs: ProcFS) -> RunNamespace:
    """The run namespace, read from its init: identity + depth below our procfs namespace.
    (Its uid is read once the sandbox is set up: ``RunLifecycle.note_user_namespace``.)"""
    ns = procfs.pidns_identity(init_pid)
    depth = len(procfs.nspid(init_pid)) - 1
    if depth < 1:
        raise ProcfsError(f"process {init_pid} is not in a pid namespace below ours")
    return RunNamespace(ns, depth)


def _member_check(procfs: ProcFS, run: RunNamespace) -> Callable[[int], bool]:
    def still_member(pid: int) -> bool:
        return Membership(procfs, run).marker(pid) == Marker.MEMBER
    return still_member


def end_run(
    target: RunTarget,
    *,
    procfs: ProcFS | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    init_pidfd: int | None = None,
    reap: Callable[[], None] | None = None,
    kill: bool = True,
    seen_before: set[int] | None = None,
) -> EndReport:
    """Kill everything of ``target`` and prove it gone within ``timeout`` seconds.

    ``init_pidfd``: a pidfd on the init the caller opened (and checked) when the run started.
    ``reap``: called after the kill and between passes to wait for the caller's own children.
    ``kill=False`` only looks (the stale-run check before a new run): nothing is signalled,
    and the run counts as ended only if its init is already dead and a pass is clean.
    ``seen_before``: pids of the run's processes the caller saw alive earlier (when CMD
    exited), counted in ``killed`` with the members alive when this ending begins.
    """
    procfs = procfs or ProcFS()
    t0 = time.monotonic()
    deadline = t0 + timeout
    report = EndReport(target.run_id, clean=False)
    fds: list[int] = []
    seen: set[int] = (members_before(target, procfs) | (seen_before or set())) if kill else set()
    try:
        init_dead, init_fd = _stop_init(target, procfs, init_pidfd, report, fds, kill)
        cgroup_killed = False
        if target.cgroup is not None and kill:
            try:
                cgroup_killed = target.cgroup.kill()
            except CgroupError as err:
                report.reason = str(err)
        report.timings["killed_ms"] = (time.monotonic() - t0) * 1000
        if not init_dead and init_fd is not None and kill:
            init_dead = wait_until_run_cannot_fork(init_fd, target.cgroup if cgroup_killed else None,
                                                   deadline, reap)
        if reap is not None:
            reap()
        if target.ns is None:
            _prove_by_cgroup(target, deadline, report, init_dead)
        else:
            _prove_by_passes(target, target.ns, procfs, deadline, report, init_dead, reap, kill, seen)
    finally:
        close_all(fds)
        report.killed = len(seen)
        report.elapsed_ms = (time.monotonic() - t0) * 1000
    return report


def _init_check(target: RunTarget, procfs: ProcFS) -> Callable[[int], bool]:
    """The init named by a marker (``end``, the stale check) is signalled only if it is pid 1 of
    the run's namespace: a run.json is data, and a pid + start time in it must not be enough to
    make the supervisor SIGKILL an unrelated process (red-team round 2, A1)."""
    def is_init(pid: int) -> bool:
        run = target.ns
        if run is None:
            return False
        nspid = procfs.nspid(pid)
        return (len(nspid) - 1 == run.depth and nspid[-1] == 1
                and run.is_run_ns(procfs.pidns_identity(pid)))

    return is_init


def wait_for_dying_init(target: RunTarget, launcher: Identity | None, procfs: ProcFS,
                        deadline: float) -> bool:
    """Wait, signalling nothing, while the run's init is dying, until it has exited or the
    deadline; True if it has (or was gone already). The init is only watched once shown to
    be pid 1 of the run's namespace (``_init_check``): a run.json is data.

    Dying: the init is exiting or has SIGKILL pending, or its bwrap (the launcher) is no longer
    alive and well, so that ``--die-with-parent`` is about to kill it (PR_SET_PDEATHSIG: the
    kernel signals a child when its parent exits). A leftover whose bwrap lives on and whose
    init nobody kills (bwrap #633) is not waited for: refusing it at once is right."""
    if target.init is None:
        return False
    try:
        fd = open_checked_pidfd(target.init, procfs, _init_check(target, procfs))
    except ProcfsError:
        return False
    if fd is None:
        return True
    try:
        delay = 0.001
        while True:
            if select.select([fd], [], [], 0)[0]:
                return True  # pidfd_open(2): readable once the process has exited
            left = deadline - time.monotonic()
            if left <= 0 or not (_dying(target.init, procfs) or not _alive_and_well(launcher, procfs)):
                return False
            # The init of a pid namespace exits only after every other member is gone
            # (zap_pid_ns_processes), so its exit is the whole run's.
            select.select([fd], [], [], min(delay, left))
            delay = min(delay * 2, 0.05)
    finally:
        os.close(fd)


def _dying(ident: Identity, procfs: ProcFS) -> bool:
    from .procfs import SIGKILL_BIT, parse_pending, parse_stat

    try:
        data = procfs.read(ident.pid, b"stat", 1024)
        st = parse_stat(data)
        if st.start_time != ident.start_time or st.is_dead:
            return True
        flags = int(data[data.rfind(b")") + 2 :].split()[6])  # field 9; comm may hold ")"
        return bool(flags & _PF_EXITING) or bool(parse_pending(procfs.status(ident.pid)) & SIGKILL_BIT)
    except ProcessGone:
        return True
    except (ProcfsError, ValueError, IndexError):
        return False  # cannot tell: not waited for (the refusal names `no-docker end`)


_PF_EXITING = 0x00000004  # include/linux/sched.h


def _alive_and_well(ident: Identity | None, procfs: ProcFS) -> bool:
    """Is this process alive and not about to die (not exiting, no SIGKILL pending)?"""
    return ident is not None and not _dying(ident, procfs)


def _stop_init(target: RunTarget, procfs: ProcFS, init_pidfd: int | None, report: EndReport,
               fds: list[int], kill: bool) -> tuple[bool, int | None]:
    """SIGKILL the namespace init. (has it exited already?, a pidfd to wait on)."""
    if target.init is None:
        return False, None
    fd = init_pidfd
    if fd is None:
        try:
            fd = open_checked_pidfd(target.init, procfs, _init_check(target, procfs))
        except ProcfsError:
            return False, None  # cannot tell: passes stay inadmissible until it is shown dead
        if fd is None:
            return True, None  # gone, exited, or the pid is someone else's now: it is dead
        fds.append(fd)
    if not kill:
        return bool(select.select([fd], [], [], 0)[0]), None
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        return True, None
    return False, fd


def wait_until_run_cannot_fork(init_fd: int, killed_cgroup: RunCgroup | None, deadline: float,
                               reap: Callable[[], None] | None = None) -> bool:
    """Wait until the run cannot create processes any more; False at the deadline.

    REAP is called on every round: the init exits only once every member is reaped, and a
    member whose parent is outside the namespace (a child of the prover, forked after its
    setns: it becomes ours, a subreaper's, when the prover is killed) is reaped by no one
    inside (zap_pid_ns_processes waits for it): the caller must, or the init never exits.

    Either the init has exited (its pidfd polls readable): it exits only after
    ``zap_pid_ns_processes()`` disabled pid allocation in the namespace and reaped every other
    member (kernel/pid_namespace.c). Or, sooner under a storm, ``cgroup.kill`` was written and
    ``cgroup.events`` says ``populated 0``: every process of the cgroup has exited, and a fork
    racing the kill was killed too (cgroup-v2.rst). That covers every member because none can
    leave the cgroup: the cgroup file system is not writable inside a run (P9, proven before
    CMD starts; before that only bwrap and the probe run).
    """
    delay = 0.0002
    while True:
        if select.select([init_fd], [], [], 0)[0]:
            return True
        if killed_cgroup is not None and killed_cgroup.path is not None and not killed_cgroup.populated():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        select.select([init_fd], [], [], min(delay, remaining))  # wakes at once if the init exits
        delay = min(delay * 2, 0.01)
        if reap is not None:
            reap()


def _prove_by_cgroup(target: RunTarget, deadline: float, report: EndReport, init_dead: bool) -> None:
    """No namespace is known (the run died before bwrap told us its init): the cgroup's own
    count is the only evidence. Without a v2 cgroup nothing can be shown."""
    cg = target.cgroup
    if cg is None or cg.path is None:
        if init_dead:
            # The init exited before its namespace could be identified: the kernel reaps every
            # member of a pid namespace before its init finishes exiting (zap_pid_ns_processes).
            report.clean = True
            report.reason = "namespace init exited; its namespace ended with it"
        else:
            report.reason = "neither the run's pid namespace nor a cgroup is known"
        return
    if cg.wait_empty(deadline if init_dead or target.init is None else time.monotonic()):
        report.clean = True
    else:
        report.left = tuple(Identity(pid, -1) for pid in cg.procs())
        report.reason = f"cgroup {cg.path} still populated"


def members_before(target: RunTarget, procfs: ProcFS) -> set[int]:
    """The pids of the run's processes alive now, before the kill, but its init (for the count
    of what the ending killed; the kernel's kills leave no trace to count afterwards).

    From the run's cgroups (every cgroup below its leaves: a few small reads) where it has
    any, keeping only members of its namespace (bwrap, outside it, is in the cgroup too);
    else from one pass over /proc. Best effort: a process that cannot be read is not counted.
    """
    init = target.init.pid if target.init is not None else None
    run = target.ns
    try:
        if target.cgroup is not None and target.cgroup.dirs():
            pids = target.cgroup.tree_procs()
            if run is None:
                return set(pids) - {init}
            membership = Membership(procfs, run)
            return {pid for pid in pids if pid != init and membership.marker(pid) == Marker.MEMBER}
        if run is None:
            return set()
        result = verdict(take_pass(LiveTable(procfs, run)), run_can_fork=True)
        return {ident.pid for ident in result.members} - {init}
    except (OSError, ProcfsError, CgroupError):
        return set()


def _prove_by_passes(target: RunTarget, run: RunNamespace, procfs: ProcFS, deadline: float,
                     report: EndReport, init_dead: bool, reap: Callable[[], None] | None,
                     kill: bool, seen: set[int] | None = None) -> None:
    delay = 0.002
    last: PassResult | None = None
    while True:
        result = verdict(take_pass(LiveTable(procfs, run)), run_can_fork=not init_dead)
        report.passes += 1
        last = result
        if result.verdict == Verdict.CLEAN:
            if target.cgroup is None or not target.cgroup.populated():
                report.clean = True
                report.left = report.unknown = ()
                report.reason = ""
                return
            report.reason = f"pass clean but cgroup {target.cgroup.path} still populated"
        elif result.verdict == Verdict.MEMBERS:
            report.left = result.members
            report.reason = f"{len(result.members)} members alive"
            if not kill:
                return
            killed: list[int] = []
            check = _member_check(procfs, run)
            for ident in result.members:
                try:
                    fd = kill_identity(ident, procfs, check)
                except ProcfsError:
                    continue  # identity unreadable now: it stays listed, the next pass decides
                if fd is not None:
                    killed.append(fd)
                    if seen is not None and (target.init is None or ident.pid != target.init.pid):
                        seen.add(ident.pid)
            try:
                wait_pidfds(killed, min(deadline, time.monotonic() + 0.2))
            finally:
                close_all(killed)
        elif result.verdict == Verdict.INCONCLUSIVE:
            if cgroup_shows_empty(target):
                # Every process of the run is in its v2 leaf, which no member can leave (the
                # cgroup file system is not writable inside: P9), and the leaf is empty now
                # that the run cannot fork: the processes the pass could not read are not
                # the run's (docs/supervision.md, "When the cgroup is the proof").
                report.clean = True
                report.left = report.unknown = ()
                report.reason = ""
                report.settled_by_cgroup = len(result.unknown)
                return
            report.unknown = result.unknown
            report.reason = describe_unknown(result.unknown, procfs)
            if not kill:
                return
        else:  # INADMISSIBLE: the init is alive (or could not be shown dead)
            report.reason = "the namespace init is not shown dead: members could still fork"
            if not kill:
                return
            init_dead = _recheck_init(target, procfs)
        if reap is not None:
            reap()
        if time.monotonic() >= deadline:
            if last.verdict != Verdict.MEMBERS:
                report.left = last.members
            return
        if result.verdict != Verdict.MEMBERS:
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def cgroup_shows_empty(target: RunTarget) -> bool:
    """Does the run's v2 leaf show, by the kernel's own count, that no process of it is left?
    Only meaningful once the run cannot fork (its init is dead): callers ask only then."""
    cg = target.cgroup
    if cg is None or cg.path is None:
        return False
    try:
        return not cg.populated()
    except CgroupError:
        return False


def describe_unknown(unknown: tuple[Identity, ...], procfs: ProcFS, limit: int = 3) -> str:
    """Why the ending is not shown, in words a user can act on: which processes, whose, in
    which pid namespace (as far as /proc/PID/status, readable by anyone, tells)."""
    parts = []
    for ident in unknown[:limit]:
        parts.append(_describe_process(ident, procfs))
    more = f" and {len(unknown) - limit} more" if len(unknown) > limit else ""
    return (f"{plural(len(unknown), 'process', 'processes')} whose pid namespace cannot be read "
            f"could be the run's: {'; '.join(parts)}{more}")


def _describe_process(ident: Identity, procfs: ProcFS) -> str:
    from .procfs import parse_nspid, parse_uids

    try:
        status = procfs.status(ident.pid)
    except ProcfsError:
        return f"pid {ident.pid} (gone or unreadable now)"
    name = b""
    for line in status.splitlines():
        if line.startswith(b"Name:"):
            name = line[5:].strip()
            break
    from .runs import shown  # every name a process chose is escaped as `runs` escapes it

    text = f"pid {ident.pid} '{shown(name.decode('utf-8', 'backslashreplace'))}'"
    try:
        uid = parse_uids(status)[0]
        text += f" of uid {uid}{_user_name(uid)}"
    except ValueError:
        pass
    try:
        below = len(parse_nspid(status)) - 1
        text += (f", in a pid namespace {below} {'level' if below == 1 else 'levels'} below yours "
                 f"(its /proc/{ident.pid}/ns/pid is not readable to you)")
    except ValueError:
        pass
    return text


def _user_name(uid: int) -> str:
    try:
        import pwd  # only on this failure path

        return f" ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return ""


def _recheck_init(target: RunTarget, procfs: ProcFS) -> bool:
    """Has the init exited by now? Only when /proc and a pidfd agree (see open_checked_pidfd)."""
    if target.init is None:
        return False
    try:
        fd = open_checked_pidfd(target.init, procfs)
    except ProcfsError:
        return False
    if fd is None:
        return True
    os.close(fd)
    return False


def target_from_namespace(run_id: str, init: Identity, ns: NsIdentity, depth: int,
                          cgroup: RunCgroup | None = None) -> RunTarget:
    return RunTarget(run_id, RunNamespace(ns, depth), init, cgroup)
