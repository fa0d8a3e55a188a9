"""Hypothesis: a proof pass never says CLEAN while a member of the run is alive.

The world is a simulated process table in a tiny pid space (so pids are reused all the time).
Between any two reads of a pass, the world moves: processes appear, members hop (fork, then the
parent exits), processes die or turn zombie, markers become unreadable. The pass is the real
``snapshot.take_pass`` and ``snapshot.verdict``; the world is adversarial: a read by pid reads
whatever process has the pid *now* (stricter than the real fd-bound reads).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from no_docker.supervisor.snapshot import Marker, Seen, Verdict, judge, take_pass, verdict

PID_SPACE = 8


@dataclass
class Proc:
    start: int
    member: bool
    dead: bool = False
    unreadable: bool = False


class World:
    def __init__(self) -> None:
        self.procs: dict[int, Proc] = {}
        self.clock = 0
        self.can_fork = True  # the run's init is alive: members may create members

    def live_members(self) -> list[int]:
        return [pid for pid, p in self.procs.items() if p.member and not p.dead]

    def spawn(self, member: bool, tick: int) -> int | None:
        if member and not self.can_fork:
            return None
        free = [pid for pid in range(1, PID_SPACE + 1) if pid not in self.procs]
        if not free:
            return None
        self.clock += tick  # tick 0: same start time as the previous process (same jiffy)
        pid = free[self.clock % len(free)]
        self.procs[pid] = Proc(self.clock, member)
        return pid

    def apply(self, event: tuple[str, int, int]) -> None:
        kind, which, tick = event
        pids = sorted(self.procs)
        target = pids[which % len(pids)] if pids else None
        if kind == "spawn_outsider":
            self.spawn(False, tick)
        elif kind == "spawn_member":
            self.spawn(True, tick)
        elif target is None:
            return
        elif kind == "hop":
            proc = self.procs[target]
            if proc.member and not proc.dead and self.can_fork and self.spawn(True, tick) is not None:
                del self.procs[target]  # the parent exits and is reaped at once
        elif kind == "die":
            del self.procs[target]
        elif kind == "zombify":
            self.procs[target].dead = True
        elif kind == "unreadable":
            self.procs[target].unreadable = True


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["spawn_outsider", "spawn_member", "hop", "die", "zombify", "unreadable"]),
        st.integers(0, PID_SPACE), st.integers(0, 1)),
    max_size=3)


class MovingTable:
    """``ProcessTable`` over the world; before every read the world moves (drawn events)."""

    def __init__(self, world: World, data: st.DataObject) -> None:
        self.world = world
        self.data = data

    def _move(self) -> None:
        for event in self.data.draw(EVENTS):
            self.world.apply(event)

    def list_pids(self) -> list[int]:
        self._move()
        return sorted(self.world.procs)

    def open(self, pid: int) -> int | None:
        self._move()
        return pid if pid in self.world.procs else None

    def read(self, handle: object) -> Seen | None:
        self._move()
        proc = self.world.procs.get(handle)  # type: ignore[call-overload]
        return None if proc is None else Seen(proc.start, proc.dead)

    def marker(self, pid: int) -> str:
        self._move()
        proc = self.world.procs.get(pid)
        if proc is None:
            return Marker.GONE
        if proc.unreadable:
            return Marker.UNREADABLE
        return Marker.MEMBER if proc.member else Marker.OUTSIDER

    def close(self, handle: object) -> None:
        self._move()


class ProofPasses(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.verdicts: list[str] = []

    @rule(event=EVENTS)
    def world_moves(self, event):
        for e in event:
            self.world.apply(e)

    @precondition(lambda self: self.world.can_fork)
    @rule(tick=st.integers(0, 1))
    def member_forks(self, tick):
        self.world.spawn(True, tick)

    @precondition(lambda self: self.world.live_members())
    @rule(which=st.integers(0, PID_SPACE))
    def member_marker_becomes_unreadable(self, which):
        members = self.world.live_members()
        self.world.procs[members[which % len(members)]].unreadable = True

    @precondition(lambda self: self.world.can_fork)
    @rule()
    def kill_namespace_init(self):
        self.world.can_fork = False  # from now on no member can be created

    @rule(data=st.data())
    def proof_pass(self, data):
        result = verdict(take_pass(MovingTable(self.world, data)), run_can_fork=self.world.can_fork)
        self.verdicts.append(result.verdict)
        alive = self.world.live_members()
        if result.verdict == Verdict.CLEAN:
            assert not alive, f"CLEAN while members {alive} live: {self.world.procs}"
            assert not self.world.can_fork, "CLEAN while the run could still fork"
        # the ending's reaction: kill what the pass reported (identity re-checked)
        for ident in result.members:
            proc = self.world.procs.get(ident.pid)
            if proc is not None and proc.start == ident.start_time and proc.member:
                proc.dead = True

    @invariant()
    def unreadable_members_never_pass(self):
        if any(p.unreadable and p.member and not p.dead for p in self.world.procs.values()):
            assert Verdict.CLEAN not in self.verdicts[-1:]


TestProofPasses = ProofPasses.TestCase
TestProofPasses.settings = settings(max_examples=150, stateful_step_count=25, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


def test_judge_attributes_a_marker_only_when_identity_held():
    from no_docker.supervisor.snapshot import Judgement, Observation

    same = Seen(10, False)
    assert judge(Observation(1, same, Marker.MEMBER, same)) == Judgement.MEMBER
    assert judge(Observation(1, same, Marker.MEMBER, Seen(11, False))) == Judgement.DEAD
    assert judge(Observation(1, same, Marker.UNREADABLE, same)) == Judgement.UNKNOWN
    assert judge(Observation(1, same, Marker.GONE, same)) == Judgement.UNKNOWN
    assert judge(Observation(1, Seen(10, True), Marker.GONE, None)) == Judgement.DEAD
    assert judge(Observation(1, None, Marker.GONE, None)) == Judgement.DEAD


def test_a_pass_while_the_run_can_fork_is_never_clean():
    result = verdict([], run_can_fork=True)
    assert result.verdict == Verdict.INADMISSIBLE and not result.clean
