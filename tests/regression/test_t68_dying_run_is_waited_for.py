"""T-68: a run that is still dying when the next one starts is waited for, not refused.

cosmic-ray's timeout SIGKILLs the test command's process group and starts the next job at once,
while the kernel is still tearing the old run down (the parent-death signals supervisor ->
bwrap -> init, then ``zap_pid_ns_processes``). The next run's stale check used to see the init
alive and refuse (125: "the namespace init is not shown dead") in 1 and 4 of 12 tries: to a
mutation tool, a killed mutant. It now waits, bounded (``lifecycle.DYING_RUN_WAIT``), while the
init is dying; a leftover nobody kills (bwrap #633: its bwrap lives on) is still refused at once
(T-26).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ending_cases import (
    cli,
    daemon,
    end_all,
    kill_token,
    orphaned_run,
    require_bwrap,
    run_to_end,
    runs_json,
    settled_without,
    token,
)
from no_docker.supervisor.ending.lifecycle import DYING_RUN_WAIT


def _launcher_of(run_id: str) -> int:
    record = json.loads((Path(os.environ["NO_DOCKER_STATE_DIR"]) / run_id / "run.json").read_text())
    return int(record["launcher"]["pid"])


def test_a_run_whose_bwrap_died_and_whose_init_is_ending_is_waited_for(tmp_path):
    """Deterministic: the leftover's bwrap is SIGKILLed (as the parent-death chain does) and
    its init ends 1.5 s later on its own; a run started meanwhile waits for it and runs."""
    require_bwrap()
    tok = token()
    try:
        run_id = orphaned_run(f": {tok}; sleep 1.5")
        os.kill(_launcher_of(run_id), signal.SIGKILL)
        started = time.monotonic()
        result = run_to_end(["--", "true"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < DYING_RUN_WAIT + 5
        assert runs_json() == []
    finally:
        kill_token(tok)
        end_all()


def test_runs_started_right_after_a_sigkilled_supervisor_run(tmp_path):
    """As cosmic-ray does it: the supervisor's process group SIGKILLed while its command and
    eight children run, the next run started at once; 12 of 12 must run."""
    require_bwrap()
    tok = token()
    outcomes = []
    try:
        for _ in range(12):
            sup = subprocess.Popen(
                cli("run", "--", "sh", "-c", f"for i in 1 2 3 4 5 6 7 8; do sleep {tok} & done; echo up; "
                    f"sleep {tok}"),
                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                assert sup.stdout.readline() == b"up\n"  # type: ignore[union-attr]
            finally:
                os.killpg(sup.pid, signal.SIGKILL)
                sup.wait(timeout=30)
                sup.stdout.close()  # type: ignore[union-attr]
            after = subprocess.run(cli("run", "--quiet", "--", "true"), cwd=tmp_path, capture_output=True,
                                   text=True, timeout=60)
            outcomes.append((after.returncode, after.stderr.strip()))
        assert [code for code, _ in outcomes] == [0] * 12, outcomes
        assert settled_without(tok) == []
        assert runs_json() == []
    finally:
        kill_token(tok)
        end_all()


def test_a_leftover_whose_bwrap_lives_on_is_refused_without_waiting(tmp_path):
    require_bwrap()
    tok = token()
    try:
        run_id = orphaned_run(f"{daemon(tok)}; sleep {tok}")
        started = time.monotonic()
        refused = run_to_end(["--", "true"], cwd=tmp_path)
        assert refused.returncode == 125, refused.stderr
        assert f"no-docker end {run_id}" in refused.stderr
        assert time.monotonic() - started < DYING_RUN_WAIT, "a leftover nobody kills was waited for"
    finally:
        kill_token(tok)
        end_all()

