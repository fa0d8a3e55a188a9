"""T-17: no daemon survives the command, nor a SIGKILLed supervisor.

A double-forked ``setsid`` daemon (detached from every pipe) is gone when `no-docker run`
returns; and when the supervisor itself is SIGKILLed mid-run (it can run no ending at all),
bwrap's ``--die-with-parent`` takes the namespace down: nothing is left within 2 s.
"""

from __future__ import annotations

import signal
import time

from ending_cases import (
    Supervisor,
    daemon,
    end_all,
    kill_token,
    require_bwrap,
    run_to_end,
    settled_without,
    token,
)


def test_daemon_does_not_survive_the_command(tmp_path):
    require_bwrap()
    tok = token()
    try:
        result = run_to_end(["--", "sh", "-c", f"{daemon(tok)}; sleep 0.2; exit 0"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert settled_without(tok) == [], "a daemon outlived `no-docker run`"
    finally:
        kill_token(tok)


def test_daemon_does_not_survive_a_sigkilled_supervisor(tmp_path):
    require_bwrap()
    tok = token()
    sup = Supervisor(["--", "sh", "-c", f"{daemon(tok)}; sleep 0.2; echo ready; sleep {tok}"], cwd=tmp_path)
    try:
        sup.wait_line("ready")
        sup.signal(signal.SIGKILL)
        sup.proc.wait(timeout=30)
        deadline = time.monotonic() + 2.0
        left = settled_without(tok, 0.0)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = settled_without(tok, 0.0)
        assert left == [], f"{len(left)} processes of the run outlived its SIGKILLed supervisor by 2 s"
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
