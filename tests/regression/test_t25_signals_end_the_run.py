"""T-25: SIGINT/TERM/HUP/QUIT to the supervisor while CMD runs end the run completely.

The supervisor (only it: not its session) gets the signal while CMD and a daemon that ignores
every catchable signal run; it exits 128+N, nothing of the run is left, its marker is removed.
A second signal during the ending does not abort it.
"""

from __future__ import annotations

import signal
import time

import pytest
from ending_cases import (
    Supervisor,
    daemon,
    end_all,
    kill_token,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]


def _start(tmp_path, tok):
    ignorer = f"sh -c 'trap \"\" INT TERM HUP QUIT; exec sleep {tok}' </dev/null >/dev/null 2>&1 &"
    return Supervisor(["--", "sh", "-c", f"{daemon(tok)}; {ignorer} sleep 0.2; echo ready; sleep {tok}"],
                      cwd=tmp_path)


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_signal_ends_the_run(tmp_path, signum):
    require_bwrap()
    tok = token()
    sup = _start(tmp_path, tok)
    try:
        sup.wait_line("ready")
        sup.signal(signum)
        code, err = sup.finish()
        assert code == 128 + signum, err
        assert settled_without(tok) == [], "a process of the run outlived the signal"
        assert runs_json() == []
    finally:
        sup.kill()
        kill_token(tok)
        end_all()


def test_a_second_signal_does_not_abort_the_ending(tmp_path):
    require_bwrap()
    tok = token()
    sup = _start(tmp_path, tok)
    try:
        sup.wait_line("ready")
        sup.signal(signal.SIGTERM)
        time.sleep(0.002)
        sup.signal(signal.SIGINT)
        sup.signal(signal.SIGTERM)
        code, err = sup.finish()
        assert code == 128 + signal.SIGTERM, err
        assert settled_without(tok) == []
        assert runs_json() == []
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
