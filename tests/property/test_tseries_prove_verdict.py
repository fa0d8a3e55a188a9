"""Property: ``prove`` says PROVEN exactly when nothing leaked, every available control route
reached, at least one network route exists, and no part was missing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.proving import prove as pv

rows = st.lists(
    st.builds(pv.Row, route=st.from_regex(r"[a-z]{1,8}", fullmatch=True),
              kind=st.sampled_from(["network", "persistence"]), control=st.just("c"), isolated=st.just("i"),
              control_ok=st.sampled_from([True, False, None]),
              isolated_ok=st.sampled_from([True, False, None])),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(rows=rows, incomplete=st.lists(st.text(min_size=1, max_size=5), max_size=2),
       extra=st.integers(min_value=0, max_value=3))
def test_proven_iff_clean(rows, incomplete, extra):
    result = pv.verdict(rows, incomplete, extra_records=extra)
    network = [r for r in rows if r.kind == "network"]
    clean = (all(r.isolated_ok is True for r in rows) and extra == 0 and not incomplete and network
             and all(r.control_ok is not False for r in network))
    assert (result.status == "PROVEN") == bool(clean), (rows, incomplete, extra, result)
    assert (result.exit_status == 0) == (result.status == "PROVEN")
    if any(r.isolated_ok is False for r in rows) or extra:
        assert result.status == "FAILED"  # a leak is never reported as merely incomplete
    if any(r.isolated_ok is None for r in rows) and result.status != "FAILED":
        assert result.status == "INCOMPLETE"  # an untried route is never proven
    if incomplete and not (any(r.isolated_ok is False for r in rows) or extra):
        assert result.status == "INCOMPLETE"  # a part that could not run: never proven, never failed
    assert result.line.startswith(f"no-docker prove: {result.status}")
