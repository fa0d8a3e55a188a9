"""T-32: unrelated processes starting and ending outside during an ending are never signalled
and do not stop the proof.

Outside the run, five loops start and reap short-lived processes as fast as they can (their pids
vanish between a pass's listing and its reads, get reused...), and a watcher records every
catchable signal it receives. Runs with daemons end and are proven ("0 left", status 0) while
the churn goes on; the watcher received nothing and the churners are still running.
"""

from __future__ import annotations

import subprocess
import sys
import time

from ending_cases import daemon, kill_token, require_bwrap, run_to_end, settled_without, token

CHURN = "import subprocess\nwhile True:\n    subprocess.run(['/bin/true'])\n"
SHELL_CHURN = "while :; do /bin/true; done"
WATCHER = r"""
import signal, sys, time
got = []
for s in range(1, signal.NSIG):
    try:
        signal.signal(s, lambda n, f: got.append(n))
    except (OSError, ValueError, RuntimeError):
        pass
print("ready", flush=True)
while True:
    time.sleep(0.05)
    if got:
        print("got", got, flush=True)
        got.clear()
"""


def test_churn_outside_is_untouched_and_does_not_stop_the_proof(tmp_path):
    require_bwrap()
    churners = [subprocess.Popen([sys.executable, "-c", CHURN], start_new_session=True) for _ in range(2)]
    churners += [subprocess.Popen(["sh", "-c", SHELL_CHURN], start_new_session=True) for _ in range(3)]
    watcher = subprocess.Popen([sys.executable, "-u", "-c", WATCHER], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    tok = token()
    try:
        assert watcher.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        for _ in range(3):
            result = run_to_end(["--end-timeout", "3", "--", "sh", "-c", f"{daemon(tok)}; sleep 0.1; exit 0"],
                                cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            assert "0 left" in result.stderr, result.stderr
        assert settled_without(tok) == []
        assert all(c.poll() is None for c in churners), "an outside churner was ended"
        assert watcher.poll() is None, "the outside watcher was ended"
    finally:
        for proc in (*churners, watcher):
            proc.kill()
            proc.wait(timeout=30)
        kill_token(tok)
    out = watcher.stdout.read()
    assert "got" not in out, f"an outside process received signals: {out}"
