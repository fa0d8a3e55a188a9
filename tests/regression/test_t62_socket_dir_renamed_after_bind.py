"""T-62: a socket whose directory was renamed after ``bind`` is not reached (P12).

The kernel keeps the name a socket was bound with: an engine (the canary) binds
``/srv/engine-old/docker.sock`` and the directory is then renamed to ``/srv/engine-new``. The
listing names the old path, which no longer exists, so no mask covers the file where it is now
(issue 16 D.12). A control from inside the outer guard reaches the engine at the new path; a
run's connect there is refused by the mediation (the file is not bound by a socket of the
run's own namespace), the canary records nothing from the run, and the refusal is reported.
"""

from __future__ import annotations

import errno

from isolation_cases import require_bwrap
from lifetime_cases import Engine, control_reaches, lifetime_guard, run_connect

BOUND_AS = "/srv/engine-old/docker.sock"
NOW_AT = "/srv/engine-new/docker.sock"


def test_socket_whose_directory_was_renamed_is_not_reached(tmp_path):
    require_bwrap()
    with lifetime_guard(tmp_path) as guard:
        engine = Engine(guard, tmp_path, "renamed", [BOUND_AS])
        try:
            moved = guard.run(["mv", "/srv/engine-old", "/srv/engine-new"], timeout=30)
            assert moved.returncode == 0, moved.stderr
            work = tmp_path / "work"
            work.mkdir()
            status, said, stderr, report = run_connect(guard, work, NOW_AT, "t62-renamed")
            assert said == errno.ECONNREFUSED, (said, stderr)
            assert engine.records("connection") == [], "a connection from the run reached the engine"
            assert status == 0, stderr
            assert f"no-docker: 1 connect refused: {NOW_AT} x1" in stderr, stderr
            assert [r["target"] for r in report.get("connects_refused", [])] == [NOW_AT], report
            assert control_reaches(guard, NOW_AT).startswith("HTTP/1."), "the control did not reach"
            assert engine.records("request"), "the control's request is not in the engine's log"
        finally:
            engine.stop()
