"""Is this process a member of the run? The marker a member carries and cannot shed.

The marker is the pid namespace: a process is a member when its pid namespace is the run's,
or one nested in it (``unshare -Urpf`` inside the run only goes deeper; ``setns`` back to a
parent namespace gives EINVAL, measured). Environment variables, process groups, sessions and
PDEATHSIG are all shed without privilege, so none of them is used.

Cost matters (a pass reads every process on the machine): the hot path is one ``readlink`` of
/proc/PID/ns/pid and a dict lookup, and for an outsider it is the whole cost of a pass: the
pass reads the marker first and opens /proc/PID/stat only where it is not OUTSIDER
(``snapshot.marker_settles``). The namespace behind an inode seen for the first time in a
pass is identified with NS_GET_ID and walked up with NS_GET_PARENT once; the answer is cached
per inode for the rest of that pass. Caching by inode is sound within one pass because an inode
is only reused after its namespace is freed, and a namespace created during the pass cannot be
the run's or nested in it: the run cannot create anything once its init is dead.

``LiveTable`` implements ``snapshot.ProcessTable`` over a ``ProcFS``.
"""

from __future__ import annotations

import os

from ..record import record
from .procfs import (
    NsIdentity,
    ProcessGone,
    ProcFS,
    ProcfsError,
    Unreadable,
    ns_fd_ancestry,
    parse_nspid,
    parse_uids,
)
from .snapshot import Marker, Seen


@record(slots=True)
class RunNamespace:
    """The run's pid namespace as seen through one procfs root.

    ``depth``: how many levels the namespace lies below the procfs mount's own namespace
    (len(NSpid of its init) - 1, so >= 1). A process whose NSpid is not longer than ``depth``
    lives in a shallower namespace and cannot be a member: this is how pid 1, whose ns links
    give EACCES even to root here, is still shown to be an outsider.

    ``uid``: the one outside uid the run's user namespace maps (read from its init's
    ``uid_map``), or None when that was not shown. Every member holds it as its real,
    effective, saved and file-system uid, so a process holding any other is not a member:
    that is how an ordinary user's ending settles root's and other users' processes in pid
    namespaces of their own, whose ns links it may not read (docs/supervision.md, "Processes
    of other users").
    """

    ns: NsIdentity
    depth: int
    uid: int | None = None

    def is_run_ns(self, other: NsIdentity) -> bool:
        if self.ns.ns_id is not None and other.ns_id is not None:
            return self.ns.ns_id == other.ns_id
        # No NS_GET_ID: the inode may be a reused one. Saying "member" is the safe side for a
        # verdict; killing re-checks identity and depth first.
        return self.ns.inode == other.inode


class Membership:
    """Marker reader for one pass (its cache must not outlive the pass)."""

    def __init__(self, procfs: ProcFS, run: RunNamespace) -> None:
        self.procfs = procfs
        self.run = run
        self._by_link: dict[bytes, str] = {}
        self._link_fmt = os.fsencode(procfs.root) + b"/%d/ns/pid"

    def marker(self, pid: int) -> str:
        # Hot path: one readlink; its text ("pid:[<inode>]") is the cache key as it is.
        try:
            link = os.readlink(self._link_fmt % pid)
        except (FileNotFoundError, ProcessLookupError):
            return Marker.GONE
        except OSError:
            return self._by_depth(pid)
        cached = self._by_link.get(link)
        if cached is not None:
            return cached
        if not link.startswith(b"pid:["):
            return self._by_depth(pid)  # not a namespace link: a root that is not procfs
        return self._walk(pid)

    def _walk(self, pid: int) -> str:
        try:
            fd = self.procfs.open_pidns(pid)
        except ProcessGone:
            return Marker.GONE
        except Unreadable:
            return self._by_depth(pid)
        try:
            chain = ns_fd_ancestry(fd)
        except ProcfsError:
            return Marker.UNREADABLE
        finally:
            os.close(fd)
        found = Marker.MEMBER if any(self.run.is_run_ns(ns) for ns in chain) else Marker.OUTSIDER
        self._by_link[b"pid:[%d]" % chain[0].inode] = found
        return found

    def _by_depth(self, pid: int) -> str:
        """The ns link cannot be read: settle the process from /proc/PID/status (readable by
        anyone) where it shows that the process cannot be a member, else it stays unknown."""
        try:
            status = self.procfs.status(pid)
        except ProcessGone:
            return Marker.GONE
        except Unreadable:
            return Marker.UNREADABLE
        return marker_from_status(status, self.run)


def marker_from_status(status: bytes, run: RunNamespace) -> str:
    """OUTSIDER when /proc/PID/status shows a process that cannot be a member of ``run``,
    else UNREADABLE (unknown: never "not a member" by default).

    - Its NSpid is not longer than the run's depth: it lives in a shallower pid namespace,
      and nobody leaves a pid namespace for a shallower one.
    - Any of its four uids differs from the one uid the run's user namespace maps: every
      task of the run lives in that user namespace or one nested in it, whose maps can only
      be subsets of it, and a task can hold no uid its namespace does not map (setresuid(2)
      and setfsuid(2) refuse unmapped ids; exec of a set-user-ID file whose owner is not
      mapped gains nothing, and no_new_privs holds anyway). So a member's real, effective,
      saved and fs uids are all that one uid, all its life.
    """
    try:
        nspid = parse_nspid(status)
    except ValueError:
        return Marker.UNREADABLE
    if len(nspid) <= run.depth:
        return Marker.OUTSIDER
    if run.uid is None:
        return Marker.UNREADABLE
    try:
        uids = parse_uids(status)
    except ValueError:
        return Marker.UNREADABLE
    return Marker.UNREADABLE if uids == (run.uid,) * 4 else Marker.OUTSIDER


_UNKNOWN_STAT = -1  # a handle whose stat could not be read: alive, identity unknown
_O_RDONLY_CLOEXEC = os.O_RDONLY | os.O_CLOEXEC


class LiveTable:
    """``snapshot.ProcessTable`` over /proc (or an injected root)."""

    def __init__(self, procfs: ProcFS, run: RunNamespace) -> None:
        self.procfs = procfs
        self.membership = Membership(procfs, run)
        self.marker = self.membership.marker  # type: ignore[method-assign]
        self._stat_fmt = os.fsencode(procfs.root) + b"/%d/stat"

    def list_pids(self) -> list[int]:
        return self.procfs.pids()

    def open(self, pid: int) -> int | None:
        # The fd is bound to the process, not to the number: once that process is reaped,
        # pread gives ESRCH even if the pid has been reused meanwhile (fs/proc/base.c).
        try:
            return os.open(self._stat_fmt % pid, _O_RDONLY_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            return None
        except OSError:
            return _UNKNOWN_STAT

    def read(self, handle: int) -> Seen | None:  # type: ignore[override]
        """Start time (field 22) and state (field 3) of the process behind ``handle``."""
        if handle == _UNKNOWN_STAT:
            return Seen(-1, False)
        try:
            data = os.pread(handle, 512, 0)
        except ProcessLookupError:  # ESRCH: the process behind this fd was reaped
            return None
        except OSError:
            return Seen(-1, False)
        rpar = data.rfind(b")")  # comm may contain ")" and spaces: the last one ends it
        if rpar < 0:
            return None if not data else Seen(-1, False)
        fields = data[rpar + 2 :].split(b" ", 20)
        # Dead: a zombie (Z/X), or exiting (PF_EXITING in the flags, field 9): a task in do_exit
        # never returns to user space, so it runs no code and forks nothing.
        return Seen(int(fields[19]), fields[0] in _DEAD_STATES or bool(int(fields[6]) & _PF_EXITING))

    def marker(self, pid: int) -> str:  # replaced per instance by the bound Membership.marker
        return self.membership.marker(pid)

    def close(self, handle: int) -> None:  # type: ignore[override]
        if handle != _UNKNOWN_STAT:
            os.close(handle)


_DEAD_STATES = (b"Z", b"X", b"x")
_PF_EXITING = 0x00000004  # include/linux/sched.h
