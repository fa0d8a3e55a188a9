"""Proof passes: is any process of the run still alive? Pure logic over a process-table model.

A *pass* lists the pids, then for each pid reads its identity (start time + state), its
*marker* (is it in the run's pid namespace or one nested in it?) and its identity again.
Each process is thereby shown to be dead, or to be an outsider, or to be a member, or it
stays unknown. A marker that says "outsider" settles a pid on its own (``marker_settles``):
the pass reads every pid's marker first and reads identities only where it does not say so,
so the thousands of outsiders on a machine cost one ``readlink`` each. The pass is:

- CLEAN        every process was shown dead or an outsider, and the run could not create
               processes while the pass ran;
- MEMBERS      members were seen (the caller kills them and repeats the pass);
- INCONCLUSIVE some process's marker could not be read (never "not a member");
- INADMISSIBLE no member seen, but the run could still fork during the pass.

Why a pass before the run is stopped proves nothing: a process that keeps forking and
exiting (a pid-hopper) always lives under a pid the listing did not contain; it was invisible
in 40 of 40 such scans (notes/process-ending.md §0). Once the namespace's init is dead the
kernel refuses new pids in it (``disable_pid_allocation`` in ``zap_pid_ns_processes``), so a
member alive at the end of a pass was alive, under the same pid, when the pass listed the
pids: the pass must see it, and this module makes sure seeing it is never judged "clean".

Nothing here touches the OS; ``ProcessTable`` is implemented over /proc by
``membership.LiveTable`` and by a simulated world in the hypothesis tests.
"""

from __future__ import annotations

from ..record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # collections.abc costs milliseconds at import on every `no-docker run`
    from collections.abc import Collection, Sequence


@record(order=True, slots=True)
class Identity:
    """A process: pid + start time (clock ticks since boot). A pid alone is reused."""

    pid: int
    start_time: int

    def __str__(self) -> str:
        return f"{self.pid}@{self.start_time}"


# Plain string constants rather than enum.Enum: `enum` costs milliseconds to import on the path
# of every `no-docker run`, and these values are only compared.


class Marker:
    """What reading a process's pid-namespace link showed."""

    MEMBER = "member"  # in the run's pid namespace or one nested in it
    OUTSIDER = "outsider"  # shown not to be
    UNREADABLE = "unreadable"  # could not be read: unknown
    GONE = "gone"  # the entry vanished while it was read


class Seen:
    """One read of a process's identity: its start time and whether it has exited (Z/X)."""

    # Written out rather than a @record: two are made per process a pass sees, and a plain
    # positional __init__ costs a fraction of a generic one. Mutable, compared by value.
    __slots__ = ("start_time", "dead")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, start_time: int, dead: bool) -> None:
        self.start_time = start_time
        self.dead = dead

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.start_time, self.dead) == (other.start_time, other.dead)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"Seen(start_time={self.start_time!r}, dead={self.dead!r})"


class Observation:
    """One process as a pass saw it (written out for the same reason as ``Seen``)."""

    __slots__ = ("pid", "before", "marker", "after")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, pid: int, before: Seen | None, marker: str, after: Seen | None) -> None:
        self.pid = pid
        self.before = before  # None: no such process when we looked
        self.marker = marker
        self.after = after

    def _values(self) -> tuple[object, ...]:
        return (self.pid, self.before, self.marker, self.after)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return (f"Observation(pid={self.pid!r}, before={self.before!r}, marker={self.marker!r}, "
                f"after={self.after!r})")

    @property
    def identity(self) -> Identity | None:
        return None if self.before is None else Identity(self.pid, self.before.start_time)


class Judgement:
    DEAD = "dead"
    OUTSIDER = "outsider"
    MEMBER = "member"
    UNKNOWN = "unknown"


def judge(obs: Observation) -> str:
    """What one observation shows about the process that had the pid when the pass looked."""
    before, after = obs.before, obs.after
    if before is None or before.dead:
        return Judgement.DEAD  # gone, or a zombie: zombies count as dead
    if after is None or after.start_time != before.start_time or after.dead:
        # It exited while we read it. If the pid now belongs to a newer process, that one
        # was born during the pass; it cannot be a member once the run cannot fork.
        return Judgement.DEAD
    # The same process was alive before and after the marker read, so the marker is its own.
    if obs.marker == Marker.MEMBER:
        return Judgement.MEMBER
    if obs.marker == Marker.OUTSIDER:
        return Judgement.OUTSIDER
    # UNREADABLE, or GONE although the process was alive afterwards: unknown, never clean.
    return Judgement.UNKNOWN


class Verdict:
    CLEAN = "clean"
    MEMBERS = "members"
    INCONCLUSIVE = "inconclusive"
    INADMISSIBLE = "inadmissible"


@record(slots=True)
class PassResult:
    verdict: str
    members: tuple[Identity, ...]
    unknown: tuple[Identity, ...]
    seen: int  # processes observed

    @property
    def clean(self) -> bool:
        return self.verdict == Verdict.CLEAN


def marker_settles(marker: str) -> bool:
    """Does this marker alone settle the process, whatever identity reads surround it?

    An OUTSIDER marker does: ``judge`` gives OUTSIDER or DEAD for it whatever ``before`` and
    ``after`` are (None, a zombie, another start time, the same process), and ``verdict``
    counts neither. So a pass drops a pid whose marker reads OUTSIDER, with no identity read
    at all (tests/property/test_snapshot_stateful.py checks judge over every before/after).
    Every other marker is judged from a full observation: MEMBER and UNREADABLE count only
    if the process held the pid across the marker read; GONE on a process alive afterwards
    is UNKNOWN.

    Why dropping such pids cannot hide a member (DESIGN §5; docs/supervision.md): let M be a
    member alive at the end of a pass taken once the run cannot fork (before that, a pass is
    never CLEAN). M existed when the pids were listed and held its pid p throughout: a pid is
    not reused while its process lives, and the kernel refuses new pids in the namespace once
    its init is dead (``disable_pid_allocation`` in ``zap_pid_ns_processes``). Every marker
    read by p is therefore M's own, MEMBER or UNREADABLE (or GONE), never OUTSIDER, so p is
    not dropped; its identity reads are M's, alive and equal (exiting is irreversible), and
    ``judge`` gives MEMBER or UNKNOWN: the verdict is MEMBERS or INCONCLUSIVE, not CLEAN. An
    OUTSIDER marker read by a pid whose process changed during the pass is a newer process's,
    and the earlier one is dead: DEAD, ignored like OUTSIDER.
    """
    return marker == Marker.OUTSIDER


def verdict(observations: Sequence[Observation], *, run_can_fork: bool) -> PassResult:
    """Turn one pass into a verdict. ``run_can_fork`` must be True unless the caller knows the
    run can no longer create processes (its namespace init is dead, DESIGN §5 step 1).

    ``observations``: what ``take_pass`` kept (pids settled by their marker are counted in
    its ``seen``, not kept), or any list of observations."""
    members: list[Identity] = []
    unknown: list[Identity] = []
    for obs in observations:
        j = judge(obs)
        if j == Judgement.MEMBER:
            members.append(Identity(obs.pid, obs.before.start_time))  # type: ignore[union-attr]
        elif j == Judgement.UNKNOWN:
            unknown.append(Identity(obs.pid, obs.before.start_time))  # type: ignore[union-attr]
    if members:
        kind = Verdict.MEMBERS
    elif run_can_fork:
        kind = Verdict.INADMISSIBLE
    elif unknown:
        kind = Verdict.INCONCLUSIVE
    else:
        kind = Verdict.CLEAN
    seen = observations.seen if isinstance(observations, Observations) else len(observations)
    return PassResult(kind, tuple(members), tuple(unknown), seen)


# --- taking a pass over any process table -------------------------------------------------


if TYPE_CHECKING:  # typing costs milliseconds at import; `no-docker run` must not pay them
    from typing import Protocol

    class ProcessTable(Protocol):
        """What a pass needs from the world; /proc in production, a model in tests."""

        def list_pids(self) -> Collection[int]: ...

        def open(self, pid: int) -> object | None:
            """A handle for reading the identity of ``pid`` twice; None if there is no process."""

        def read(self, handle: object) -> Seen | None:
            """The identity behind ``handle`` now; None if that process is gone."""

        def marker(self, pid: int) -> str: ...

        def close(self, handle: object) -> None: ...


class Observations(list):  # type: ignore[type-arg]
    """The observations one pass kept, and ``seen``: how many pids it looked at.

    A pid whose marker says OUTSIDER is counted, not kept (``marker_settles``): on a machine
    with thousands of processes nearly all are outsiders, and neither their identity reads nor
    their ``Observation`` is paid for (DESIGN §10: <= 15 us per process).
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0


def take_pass(table: ProcessTable) -> Observations:
    """Observe every pid the table lists and keep what ``verdict`` must judge.

    Per pid: its marker; if that settles it (an outsider), nothing more. Otherwise a full
    observation: identity, marker again, identity again (the marker is attributed only if
    both identity reads agree; the first marker read is not between two identity reads, so it
    only decides whether to look closer).

    This one loop serves /proc (``membership.LiveTable``) and the simulated worlds of the
    hypothesis tests alike. It is the hot loop of every ending: the table's methods are bound
    once and the body is written out (no call per pid beyond the table's own and
    ``marker_settles``).
    """
    open_, read, marker, close = table.open, table.read, table.marker, table.close
    settles = marker_settles
    kept = Observations()
    keep = kept.append
    pids = table.list_pids()
    for pid in pids:
        if settles(marker(pid)):
            continue  # OUTSIDER or DEAD whatever its identity reads would show; verdict ignores both
        handle = open_(pid)
        if handle is None:
            keep(Observation(pid, None, Marker.GONE, None))
            continue
        try:
            before = read(handle)
            if before is None or before.dead:
                keep(Observation(pid, before, Marker.GONE, before))
                continue
            found = marker(pid)
            if not settles(found):
                keep(Observation(pid, before, found, read(handle)))
        finally:
            close(handle)
    kept.seen = len(pids)
    return kept
