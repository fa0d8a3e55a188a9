"""T-34: SIGTERM at several moments of start-up ends the run completely.

The signal reaches the supervisor at moments spread over its start. Deterministically, through
``NO_DOCKER_BWRAP`` pointing at a wrapper that signals its parent (the supervisor) and then
execs the real bubblewrap (which the probe then proves like any other): before bwrap exists,
and a few milliseconds into bwrap building the sandbox or the probe checking it. And by delays
from the test's side, spread over the whole start. Whatever the moment: CMD's work never
completes (its marker file is not written), the status is 143 (or, before the supervisor could
install its handlers, it died of the signal: -15), nothing of the run is left, and no marker
stays behind.
"""

from __future__ import annotations

import os
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

DELAYS = [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45]
WRAPPERS = {
    "before-bwrap": 'kill -TERM "$PPID"; sleep 0.3; exec {bwrap} "$@"',
    "bwrap-building": '(sleep 0.005; kill -TERM "$PPID") & exec {bwrap} "$@"',
    "probe-running": '(sleep 0.03; kill -TERM "$PPID") & exec {bwrap} "$@"',
}


def _check(sup: Supervisor, tok: str, done) -> None:
    code, err = sup.finish()
    assert code in (128 + signal.SIGTERM, -signal.SIGTERM), err
    assert not done.exists(), "CMD ran to its end although the run was ended"
    assert settled_without(tok) == []
    assert runs_json() == [], "a marker outlived the run"


def _cmd(tmp_path, tok):
    return ["--work", str(tmp_path), "--", "sh", "-c", f"{daemon(tok)}; sleep 1.5; touch {tmp_path / 'done'}"]


@pytest.mark.parametrize("moment", sorted(WRAPPERS))
def test_sigterm_at_a_chosen_moment(tmp_path, moment):
    bwrap = require_bwrap()
    tok = token()
    wrapper = tmp_path / "bwrap-wrapper"
    wrapper.write_text("#!/bin/sh\n" + WRAPPERS[moment].format(bwrap=bwrap) + "\n")
    wrapper.chmod(0o755)
    sup = Supervisor(_cmd(tmp_path, tok), cwd=tmp_path, env={**os.environ, "NO_DOCKER_BWRAP": str(wrapper)})
    try:
        _check(sup, tok, tmp_path / "done")
    finally:
        sup.kill()
        kill_token(tok)
        end_all()


@pytest.mark.parametrize("delay", DELAYS)
def test_sigterm_after_a_delay(tmp_path, delay):
    require_bwrap()
    tok = token()
    sup = Supervisor(_cmd(tmp_path, tok), cwd=tmp_path)
    try:
        time.sleep(delay)
        sup.signal(signal.SIGTERM)
        _check(sup, tok, tmp_path / "done")
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
