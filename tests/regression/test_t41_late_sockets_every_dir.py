"""T-41: sockets bound outside *after* the proof, in every kind of directory the run sees, are
not reached (P12), and every refusal is reported.

Once the run's command runs, one engine (the canary) binds a socket in: the work dir, a
``--rw`` dir, a toolchain dir (a PATH entry the run sees read-only), ``/srv`` (for ``/opt``:
a system dir bound read-only), ``/var/lib/misc`` (for ``/var/lib/<engine>``), and a directory
that did not exist when the run started. None existed at the proof, so no mask covers them.
Every connect must be refused, the engine must record nothing from the run, the status line
must count them all and ``--report`` must name each target. A control from outside the run
reaches every one of them.
"""

from __future__ import annotations

import errno
import os

from isolation_cases import require_bwrap
from lifetime_cases import BackgroundRun, Engine, control_reaches, lifetime_guard


def test_late_sockets_in_every_visible_dir_are_not_reached(tmp_path):
    require_bwrap()
    work = tmp_path / "work"
    rw = tmp_path / "shared-cache"
    tool = tmp_path / "toolchain" / "bin"
    for path in (work, rw, tool):
        path.mkdir(parents=True)
    late = {
        "work dir": str(work / "engine.sock"),
        "--rw dir": str(rw / "engine.sock"),
        "toolchain dir": str(tool / "engine.sock"),
        "/opt-like system dir": "/srv/engine/docker.sock",
        "/var/lib": "/var/lib/misc/engine/docker.sock",
        "a dir made during the run": "/srv/new/deeper/docker.sock",
    }
    with lifetime_guard(tmp_path) as guard:
        env = dict(guard.env, PATH=f"{tool}:{guard.env.get('PATH', os.defpath)}")
        guard.env = env  # the run (and its plan) sees the toolchain dir on PATH
        run = BackgroundRun(guard, work, "t41-late", list(late.values()), extra=("--rw", str(rw)))
        run.wait_ready()
        assert not os.path.exists("/srv/new"), "the host's /srv was written"
        engine = Engine(guard, tmp_path, "late-engine", list(late.values()))
        try:
            run.go()
            status, said, stderr, report = run.outcome()
            assert status == 0, stderr
            assert said == {path: errno.ECONNREFUSED for path in late.values()}, said
            assert engine.records("connection") == [], engine.records()
            assert f"no-docker: {len(late)} connects refused: " in stderr, stderr
            targets = {entry["target"]: entry["count"] for entry in report.get("connects_refused", [])}
            assert targets == {path: 1 for path in late.values()}, report.get("connects_refused")
            for kind, path in late.items():
                assert control_reaches(guard, path).startswith("HTTP/1."), f"control did not reach the {kind}"
        finally:
            engine.stop()
