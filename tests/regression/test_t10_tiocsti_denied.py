"""T-10: TIOCSTI never pushes input into the caller's terminal. The run is a new session; when
stdio is a terminal it gets a pty of its own (T-52), so TIOCSTI on any terminal it holds (fds
0-2, /dev/tty) can only reach its own pty's input: after the run, nothing waits in the
caller's terminal for the caller's shell to read."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import termios
import time

from isolation_cases import cli, inside_python, require_bwrap

INSIDE = r"""
import errno, fcntl, os, termios
fds = {"0": 0, "1": 1, "2": 2}
try:
    fds["tty"] = os.open("/dev/tty", os.O_RDWR)
except OSError:
    pass
results = []
for name, fd in fds.items():
    for ch in b"zq":
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            results.append(name + ":pushed")
        except OSError as e:
            results.append(name + ":" + errno.errorcode.get(e.errno, str(e.errno)))
print("TIOCSTI:" + ",".join(results))
"""


def test_tiocsti_never_reaches_the_callers_terminal(tmp_path):
    require_bwrap()
    master, slave = os.openpty()
    # The caller's terminal in non-canonical mode with no echo: every byte pushed into its
    # input can be read from the slave at once, and nothing typed shows up there by itself.
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~(termios.ECHO | termios.ICANON)
    attrs[6][termios.VMIN], attrs[6][termios.VTIME] = 0, 0
    termios.tcsetattr(slave, termios.TCSANOW, attrs)

    def controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(1, termios.TIOCSCTTY, 0)

    # stdin is not the terminal: no-docker does not read the caller's keys, so whatever is
    # pushed into the caller's terminal stays there for the caller's shell (and for this test).
    proc = subprocess.Popen(cli("run", "--quiet", "--", *inside_python(INSIDE)), cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            preexec_fn=controlling_terminal)
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
        left = os.read(slave, 4096)  # VMIN=0, VTIME=0: what waits, at once
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        os.close(master)
        os.close(slave)
    text = output.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "TIOCSTI:" in text, text
    assert left == b"", f"input was pushed into the caller's terminal: {left!r} ({text!r})"
