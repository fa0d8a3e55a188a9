"""T-10: TIOCSTI into the caller's terminal is refused inside a run (the run is a new session
without a controlling terminal), and nothing is pushed into the terminal's input."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import termios
import time

from isolation_cases import cli, require_bwrap

INSIDE = r"""
import errno, fcntl, termios
results = []
for ch in b"zq":
    try:
        fcntl.ioctl(0, termios.TIOCSTI, bytes([ch]))
        results.append("pushed")
    except OSError as e:
        results.append(errno.errorcode.get(e.errno, str(e.errno)))
print("TIOCSTI:" + ",".join(results))
"""


def test_tiocsti_into_the_callers_terminal_is_refused(tmp_path):
    require_bwrap()
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # no echo: whatever shows up on the master was read, not typed
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    # After the attempts, read the terminal for a second: pushed input would be read here.
    script = f'{sys.executable} -I -S -c "$1"; read -r -t 1 line && echo "READ:$line" || echo READ:nothing'
    proc = subprocess.Popen(cli("run", "--quiet", "--", "bash", "-c", script, "bash", INSIDE),
                            cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=controlling_terminal)
    os.close(slave)
    output = b""
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    output += os.read(master, 4096)
                except OSError:
                    break
        proc.wait(timeout=10)
        while select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = output.decode(errors="replace")
    assert "TIOCSTI:" in text, text
    verdict = text.split("TIOCSTI:", 1)[1].split()[0]
    assert "pushed" not in verdict, text
    assert "READ:nothing" in text, f"input was pushed into the terminal: {text!r}"
