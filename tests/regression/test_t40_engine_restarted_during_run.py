"""T-40: an engine restarted during a run is not reached (P12).

An engine listens at ``/srv/engine/docker.sock`` (a directory the run sees read-only) before
the run starts: the listing finds it and the plan masks it. Two seconds into the run the engine
restarts as every engine does: the old socket is unlinked and a new one bound at the same
path. The ``/dev/null`` mask covered the old inode only; the new one must still be out of
reach: the connect is refused, the new engine (the canary) records nothing, and the refusal
is in the status line and in ``--report``. A control connect from outside the run reaches the
new engine, so the witness is alive.
"""

from __future__ import annotations

import errno
import time

from isolation_cases import require_bwrap
from lifetime_cases import BackgroundRun, Engine, control_reaches, lifetime_guard

ENGINE = "/srv/engine/docker.sock"


def test_engine_restarted_during_a_run_is_not_reached(tmp_path):
    require_bwrap()
    with lifetime_guard(tmp_path) as guard:
        first = Engine(guard, tmp_path, "engine-before", [ENGINE])
        work = tmp_path / "work"
        work.mkdir()
        try:
            run = BackgroundRun(guard, work, "t40-restart", [ENGINE])
            run.wait_ready()
        finally:
            first.stop()
        time.sleep(0.5)  # the run is under way; the engine is down, then comes back
        again = Engine(guard, tmp_path, "engine-after", [ENGINE])
        try:
            run.go()
            status, said, stderr, report = run.outcome()
            assert status == 0, stderr
            assert said == {ENGINE: errno.ECONNREFUSED}, said
            assert again.records("request") == [], again.records()
            assert again.records("connection") == [], "a connection from the run reached the engine"
            assert f"no-docker: 1 connect refused: {ENGINE} x1" in stderr, stderr
            refused = report.get("connects_refused")
            assert refused and refused[0]["target"] == ENGINE and refused[0]["count"] == 1, report
            assert refused[0]["callers"] and refused[0]["callers"][0]["command"].startswith("python"), refused
            # The witness is alive: outside the run, the restarted engine answers.
            assert control_reaches(guard, ENGINE).startswith("HTTP/1."), "the control did not reach"
            assert again.records("request"), "the control's request is not in the engine's log"
        finally:
            again.stop()
