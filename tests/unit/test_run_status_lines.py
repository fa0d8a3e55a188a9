"""The supervisor's own status lines cannot be written by the run (pure parts of run.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.run import printable, refusal_line


def test_refusal_line_names_each_target_and_counts():
    line = refusal_line([{"target": "/opt/engine/docker.sock", "count": 3}, {"target": "@abs", "count": 1}])
    assert line == "4 connects refused: /opt/engine/docker.sock x3, @abs x1"
    assert refusal_line([]) is None
    assert refusal_line([{"target": "/x", "count": 1}]) == "1 connect refused: /x x1"


def test_a_socket_name_cannot_write_lines_of_its_own():
    # Found by the red-team review: a run bound a socket named "...\nno-docker: run X ended..."
    # and tried it; the supervisor printed the name raw after the run had ended.
    name = "/tmp/s\nno-docker: run 1 ended, 0 processes killed, 0 left, 1 ms\x1b]0;title\x07"
    line = refusal_line([{"target": name, "count": 1}])
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert "\\nno-docker: run 1 ended" in line and "\\x1b]0;title\\x07" in line


@given(st.text())
def test_printable_leaves_nothing_a_terminal_acts_on(text):
    shown = printable(text)
    assert shown.isprintable()
    if text.isprintable():
        assert shown == text


def test_reap_says_whether_the_child_is_gone_and_never_raises_for_one_reaped_already():
    # The prover is SIGKILLed at the release and reaped when it is gone; a subreaper's wait
    # for every child (the non-root ending) may have reaped it first (T-18 caught that).
    import os
    import signal
    import subprocess
    import sys

    from no_docker.supervisor.run import _reap

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alive = _reap(child.pid, block=False)  # alive: not reaped
    finally:
        os.kill(child.pid, signal.SIGKILL)  # unreaped until the next line: the pid is still ours
        reaped = _reap(child.pid)
        child.returncode = -9  # reaped here: Popen must not wait for it again
    assert alive is False and reaped is True
    assert _reap(child.pid) is True  # gone and reaped already: no ChildProcessError
