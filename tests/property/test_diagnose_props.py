"""The explanations of supervisor/isolation/diagnose.py: pure parsing and the rule that the
network line never claims an attempt that did not happen."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.isolation.diagnose import (
    looks_like_a_run,
    no_route_counts,
    unexplained_attempts,
)

SNMP = ("Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos "
        "InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout\n"
        "Ip: 1 64 0 0 0 0 0 0 0 0 0 {v4} 0\n"
        "Icmp: InMsgs OutNoRoutes\nIcmp: 0 99\n")
SNMP6 = "Ip6InReceives                   \t0\nIp6OutNoRoutes                  \t{v6}\n"
RUN_STATUS = "Name:\tsh\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"


def test_counters_are_read_by_name():
    assert no_route_counts(SNMP.format(v4=5), SNMP6.format(v6=2)) == (5, 2)
    assert no_route_counts(SNMP.format(v4=5), None) == (5, None)
    assert no_route_counts("garbage", None) is None


def test_the_marks_of_a_run():
    assert looks_like_a_run(RUN_STATUS, "         0          0          1\n", "bwrap\n")
    assert not looks_like_a_run(RUN_STATUS, "0 0 4294967295\n", "bwrap\n")  # the host's map
    assert not looks_like_a_run(RUN_STATUS.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"), "0 0 1", "bwrap")
    assert not looks_like_a_run(RUN_STATUS.replace("0000000000000000", "000001ffffffffff"), "0 0 1", "bwrap")
    assert not looks_like_a_run(RUN_STATUS, "0 0 1", "systemd")
    assert not looks_like_a_run("", "0 0 1", "bwrap")


counts = st.integers(min_value=0, max_value=10_000)


@given(base4=counts, base6=counts, checks=counts, tried4=counts, tried6=counts)
def test_the_line_never_claims_more_than_was_tried(base4, base6, checks, tried4, tried6):
    after = (base4 + checks + tried4, base6 + checks + tried6)
    found = unexplained_attempts((base4, base6), after)
    assert 0 <= found <= tried4 + tried6
    if tried4 == tried6 == 0:
        assert found == 0  # checks alone: nothing is claimed
    if tried4 != tried6:
        assert found > 0  # and something real is not hidden by the pairing


@given(base=counts, more=counts)
def test_without_ipv6_counters_nothing_is_claimed(base, more):
    assert unexplained_attempts((base, None), (base + more, None)) == 0


def test_a_git_refusal_in_a_subdirectory_says_to_run_from_the_repository_root(tmp_path):
    from no_docker.supervisor.isolation.diagnose import repository_above, subdirectory_hint

    root = tmp_path / "repo"
    sub = root / "pkg" / "tests"
    sub.mkdir(parents=True)
    (root / ".git").mkdir()
    failure = f"P4 not proven: {root}/.git/hooks is writable inside the run"
    assert repository_above(str(sub)) == str(root)
    assert subdirectory_hint(str(sub), failure) == (
        f"{sub} is a subdirectory of the git repository {root}: run there, or pass --work {root}")
    assert subdirectory_hint(str(root), failure) is None  # already the root
    assert subdirectory_hint(str(sub), "P3 not proven: connect to /x.sock") is None
    assert repository_above(str(tmp_path)) is None
