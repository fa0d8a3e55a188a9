"""T-13: no signal from inside a run reaches a process outside (own pid namespace, no
capabilities).

Only the test's own sleeper is ever targeted, by its pid. Never use ``kill(-1)`` here: against
the weakened build (the host's pid namespace) it signals every process of the uid on the
machine.
"""

from __future__ import annotations

from isolation_cases import Sleeper, inside_python, require_bwrap, run

INSIDE = r"""
import os, signal, sys
pid = int(sys.argv[1])
try:
    os.kill(pid, signal.SIGTERM); print("by-pid:sent")
except OSError as e:
    print("by-pid:refused", e.errno)
"""


def test_outside_process_survives_every_signal_from_inside(tmp_path):
    require_bwrap()
    sleeper = Sleeper()
    try:
        result = run(["--quiet", "--", *inside_python(INSIDE), str(sleeper.pid)], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "by-pid:refused" in result.stdout, result.stdout
        assert sleeper.alive(), "a signal from inside the run killed a process outside"
    finally:
        sleeper.close()
