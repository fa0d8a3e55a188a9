"""T-27: 125 when a process of the run cannot be identified.

The supervisor's procfs root is replaced (in a child interpreter: the injectable root of
``supervisor/ending/procfs.py``) by one where a member looks alive forever and its pid-namespace link
cannot be read — as ``/proc/1/ns/*`` gives EACCES even to root on this machine kind. An
unreadable marker is *unknown*, never "not a member": the run exits 125, prints the exact
`no-docker end RUN_ID`, and keeps its marker; that command then finishes the job.
"""

from __future__ import annotations

from ending_cases import (
    end_all,
    ending_not_proven_then_end,
    kill_token,
    require_bwrap,
    settled_without,
    token,
)


def test_unreadable_member_gives_125_and_the_end_command(tmp_path):
    require_bwrap()
    tok = token()
    try:
        err = ending_not_proven_then_end(tmp_path, "unreadable", tmp_path / "fakeproc",
                                         f"sleep {tok} & sleep 0.2; echo ready; sleep {tok}")
        assert "cannot be read" in err
        assert settled_without(tok) == []
    finally:
        kill_token(tok)
        end_all()
