"""T-63: an engine in its own mount namespace, whose ``/run`` is a host directory, is not reached (P12).

The engine (the canary) runs under ``unshare --mount`` with ``/srv/engine-run`` bound over its
``/run`` and listens on ``/run/engine.sock``: the kernel (and so the listing) knows the socket
by that name, but the file is ``/srv/engine-run/engine.sock`` for everyone else, which no mask
covers (issue 16 D.12). A control from inside the outer guard reaches it at the host path; a
run's connect there is refused by the mediation, the canary records nothing from the run, and
the refusal is reported.
"""

from __future__ import annotations

import errno
import shlex
import time

from conftest import no_docker_argv
from isolation_cases import require_bwrap
from lifetime_cases import control_reaches, lifetime_guard, run_connect

HOST_DIR = "/srv/engine-run"
NAME_INSIDE = "/run/engine.sock"
HOST_PATH = f"{HOST_DIR}/engine.sock"


def test_engine_with_its_own_run_dir_is_not_reached(tmp_path):
    require_bwrap()
    from no_docker.supervisor.proving.outer_guard import read_records

    log, ready = tmp_path / "engine.jsonl", tmp_path / "engine.ready"
    with lifetime_guard(tmp_path) as guard:
        made = guard.run(["mkdir", "-p", HOST_DIR], timeout=30)
        assert made.returncode == 0, made.stderr
        canary = shlex.join(no_docker_argv("canary", "serve", "--log", str(log), "--ready", str(ready),
                                         "--unix", NAME_INSIDE))
        engine = guard.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                              f"mount --bind {HOST_DIR} /run && exec {canary}"],
                             output=tmp_path / "engine.out")
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                started = engine.poll() is None and time.monotonic() < deadline
                assert started, f"the engine did not start: {(tmp_path / 'engine.out').read_text()}"
                time.sleep(0.02)
            work = tmp_path / "work"
            work.mkdir()
            status, said, stderr, report = run_connect(guard, work, HOST_PATH, "t63-own-mount-ns")
            assert said == errno.ECONNREFUSED, (said, stderr)
            connections = [r for r in read_records(log) if r.get("kind") == "connection"]
            assert connections == [], "a connection from the run reached the engine"
            assert status == 0, stderr
            assert f"no-docker: 1 connect refused: {HOST_PATH} x1" in stderr, stderr
            assert [r["target"] for r in report.get("connects_refused", [])] == [HOST_PATH], report
            assert control_reaches(guard, HOST_PATH).startswith("HTTP/1."), "the control did not reach"
        finally:
            guard.stop(engine)
