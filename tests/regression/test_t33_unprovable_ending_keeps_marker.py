"""T-33: an ending that cannot be shown gives 125, keeps the marker, prints `no-docker end`.

In a child interpreter the supervisor's kills are made ineffective (signals not delivered,
``cgroup.kill`` refused: what a task stuck in the kernel looks like). Members stay visible to
every proof pass until ``--end-timeout``; the run must not be called ended: 125, the marker
kept with state ``not-proven``, and the exact command that finishes the job, which then works.
"""

from __future__ import annotations

from ending_cases import (
    daemon,
    end_all,
    ending_not_proven_then_end,
    kill_token,
    require_bwrap,
    settled_without,
    token,
)


def test_members_that_cannot_be_ended_give_125_and_keep_the_marker(tmp_path):
    require_bwrap()
    tok = token()
    try:
        ending_not_proven_then_end(tmp_path, "unkillable", tmp_path / "unused",
                                   f"{daemon(tok)}; sleep 0.2; echo ready; sleep {tok}")
        assert settled_without(tok) == []
    finally:
        kill_token(tok)
        end_all()
