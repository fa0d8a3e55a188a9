"""T-52: when stdio is the caller's terminal, the run gets a pty of its own, relayed: a resize
or `stty` inside never reaches the caller (no SIGWINCH to its process group, its modes exactly
as before), keys and output pass, Ctrl-C ends the command with 130, Ctrl-Z and `fg` work.

The caller's terminal here is a real pty: a stand-in for the caller's shell leads a session
with the pty's slave as its controlling terminal and runs ``no-docker run`` as its foreground
job (same process group, as ``sh -c`` does), counting every SIGWINCH and SIGINT it gets and
comparing ``termios.tcgetattr`` of its terminal before and after. The test is the terminal
emulator: it reads the master and types into it.

A resize (TIOCSWINSZ) or a mode change (``stty -echo raw``) inside acts on the run's own pty: no
SIGWINCH reaches the caller's process group, the caller's modes are exactly as before; output
and typed input pass through; a resize outside reaches the run; Ctrl-C typed by the user ends
the command with 130, and the supervisor (whose terminal is raw meanwhile) does not die of it;
SIGTERM to the supervisor ends the run (143) and leaves the caller's modes as they were. Under
an interactive bash (job control), Ctrl-Z gives the shell its prompt back and `fg` resumes the
relay; a run started in the background gets the keys once it is brought to the foreground.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from isolation_cases import cli, inside_python, require_bwrap

# The caller's shell: its terminal is fd 0; it runs no-docker in its own process group.
CALLER = r"""
import json, os, signal, subprocess, sys, termios
got = {"winch": 0, "int": 0}
def count(name):
    def handler(*_):
        got[name] += 1
    return handler
signal.signal(signal.SIGWINCH, count("winch"))
signal.signal(signal.SIGINT, count("int"))  # a handler, not SIG_IGN: no-docker gets the default
before = termios.tcgetattr(0)
proc = subprocess.Popen(sys.argv[2:])
with open(sys.argv[1] + ".pid", "w") as f:
    f.write(str(proc.pid))
rc = proc.wait()
after = termios.tcgetattr(0)
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, **got, "before": repr(before), "after": repr(after)}, f)
"""

ROWS, COLS = 24, 80


def _winsize(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class CallerTerminal:
    """A pty whose slave is the caller's controlling terminal; the test holds the master."""

    def __init__(self, tmp_path: Path, command: list[str], caller: list[str] | None = None,
                 env: dict[str, str] | None = None, controlling: bool = True) -> None:
        self.master, slave = os.openpty()
        _winsize(slave, ROWS, COLS)
        self.result = tmp_path / "caller.json"
        self.output = b""

        def controlling_terminal() -> None:
            os.setsid()
            if controlling:
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        if caller is None:
            caller = [sys.executable, "-I", "-c", CALLER, str(self.result),
                      *cli("run", "--quiet", "--", *command)]
        self.proc = subprocess.Popen(caller, cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     preexec_fn=controlling_terminal)
        os.close(slave)

    def _read(self, timeout: float) -> bool:
        if not select.select([self.master], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, marker: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.output:
            assert time.monotonic() < deadline, f"{marker!r} never showed: {self.output!r}"
            if not self._read(0.1):
                assert marker in self.output, f"terminal closed before {marker!r}: {self.output!r}"

    def mark(self) -> None:
        """Forget what was read so far: the next expect looks at what comes from now on."""
        self.output = b""

    def supervisor_pid(self) -> int:
        path = Path(str(self.result) + ".pid")
        deadline = time.monotonic() + 30
        while not path.exists() or not path.read_text():
            assert time.monotonic() < deadline, "the caller never started no-docker"
            time.sleep(0.05)
        return int(path.read_text())

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"the caller never finished: {self.output!r}"
            self._read(0.1)
        while self._read(0.05) and select.select([self.master], [], [], 0)[0]:
            pass
        assert self.result.exists(), f"the caller wrote no result: {self.output!r}"
        return json.loads(self.result.read_text())

    def close(self) -> None:
        """Everything this case started ends here, also when it failed: the caller, and the
        supervisor it started (SIGTERM: it ends its run), which outlives a killed caller."""
        pid_file = Path(str(self.result) + ".pid")
        supervisor = int(pid_file.read_text()) if pid_file.exists() and pid_file.read_text() else None
        pidfd = None
        if supervisor is not None and self.proc.poll() is None:
            # While the caller runs, that pid is its child's (alive, or a zombie not yet reaped).
            try:
                pidfd = os.pidfd_open(supervisor)
                with open(f"/proc/{supervisor}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) != self.proc.pid:
                        os.close(pidfd)
                        pidfd = None
            except OSError:
                if pidfd is not None:
                    os.close(pidfd)
                pidfd = None
        if self.proc.poll() is None:
            os.write(self.master, b"\x04")  # an interactive bash: EOF at its prompt ends it
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.kill()  # the caller; no-docker ends its run on the terminal's hang-up
        self.proc.wait(timeout=30)
        if pidfd is not None:
            if not select.select([pidfd], [], [], 0)[0]:
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                if not select.select([pidfd], [], [], 20)[0]:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
        os.close(self.master)


def test_resize_and_modes_inside_stay_inside(tmp_path):
    require_bwrap()
    # `stty size` first: the run's pty starts with the caller's window size.
    script = "stty size; stty cols 50 rows 10; stty -echo raw; stty size; echo done"
    term = CallerTerminal(tmp_path, ["sh", "-c", script])
    try:
        result = term.finish()
    finally:
        term.close()
    text = term.output.decode(errors="replace")
    assert result["rc"] == 0, text
    assert f"{ROWS} {COLS}" in text and "10 50" in text and "done" in text, text
    assert result["winch"] == 0, f"SIGWINCH reached the caller's process group: {text}"
    assert result["after"] == result["before"], "the run's stty outlived it on the caller's terminal"


def test_typed_input_and_resize_reach_the_run(tmp_path):
    require_bwrap()
    script = ('read -r line; echo "got:$line"; trap \'echo "size:$(stty size)"; exit 7\' WINCH; '
              'echo waiting; while :; do sleep 0.05; done')
    term = CallerTerminal(tmp_path, ["bash", "-c", script])
    try:
        time.sleep(0.5)  # typed ahead, before the command runs: kept for it
        term.type(b"hello there\r")
        term.expect(b"got:hello there")
        term.expect(b"waiting")
        _winsize(term.master, 30, 100)  # the caller's terminal resized: SIGWINCH outside
        term.expect(b"size:30 100")
        result = term.finish()
    finally:
        term.close()
    text = term.output.decode(errors="replace")
    assert result["rc"] == 7, text
    assert result["after"] == result["before"], text


def test_bulk_output_and_input_pass_without_loss(tmp_path):
    require_bwrap()
    # 1 MB out, right before the command exits (what the pty holds then is read after the
    # ending); 64 KiB typed in, counted inside (echo off inside: only the count comes back).
    script = ("stty -echo; echo 're''ady'; wc -c; head -c 1000000 /dev/zero | tr '\\0' x; echo; echo 'e''nd'")
    term = CallerTerminal(tmp_path, ["sh", "-c", script])
    typed = (b"y" * 63 + b"\r") * 1024
    try:
        term.expect(b"ready")
        for i in range(0, len(typed), 4096):
            term.type(typed[i:i + 4096])
            while select.select([term.master], [], [], 0)[0] and term._read(0):
                pass
        term.type(b"\x04")  # ^D at the start of a line: EOF for wc
        result = term.finish()
    finally:
        term.close()
    text = term.output.decode(errors="replace")
    assert result["rc"] == 0, text[-300:]
    assert f"{len(typed)}\r\n" in text, text[:300]  # wc -c saw every byte (CR -> NL inside)
    assert term.output.count(b"x") == 1000000 and "end" in text, text[-300:]


def test_ctrl_c_ends_the_command_with_130(tmp_path):
    require_bwrap()
    # Python, not sh: dash takes a SIGINT that arrives between `echo` and the fork of `sleep`
    # as its own and waits for `sleep` first (a race of the shell, terminal or not).
    sleeper = ("import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "print('ready', flush=True); time.sleep(30); print('not-interrupted')")
    term = CallerTerminal(tmp_path, inside_python(sleeper))
    try:
        term.expect(b"ready")
        started = time.monotonic()
        term.type(b"\x03")
        result = term.finish(timeout=20)
    finally:
        term.close()
    text = term.output.decode(errors="replace")
    assert result["rc"] == 130, text
    assert time.monotonic() - started < 10, text
    assert "not-interrupted" not in text, text
    assert result["int"] == 0, "Ctrl-C was the caller's terminal's signal, not the run's pty's"
    assert result["after"] == result["before"], text


def test_sigterm_while_relaying_restores_the_callers_terminal(tmp_path):
    require_bwrap()
    term = CallerTerminal(tmp_path, ["sh", "-c", "echo ready; sleep 30"])
    try:
        term.expect(b"ready")  # the caller's terminal is raw from here on
        os.kill(term.supervisor_pid(), signal.SIGTERM)
        result = term.finish(timeout=20)
    finally:
        term.close()
    assert result["rc"] == 143, term.output
    assert result["after"] == result["before"], "the caller's terminal was left in raw mode"


def _bash(tmp_path: Path) -> CallerTerminal:
    env = {**os.environ, "PS1": "PROMPT$ ", "TERM": "dumb"}
    term = CallerTerminal(tmp_path, [], caller=["bash", "--norc", "--noprofile", "-i"], env=env)
    term.expect(b"PROMPT$ ")
    return term


def _no_docker(script: str) -> bytes:
    return shlex.join(cli("run", "--quiet", "--", "sh", "-c", script)).encode()


def test_ctrl_z_gives_the_shell_its_prompt_and_fg_resumes(tmp_path):
    require_bwrap()
    term = _bash(tmp_path)
    try:
        term.mark()
        term.type(_no_docker('echo "re"ady; read -r x; echo "go""t:$x"') + b"\r")
        term.expect(b"ready")
        term.mark()
        term.type(b"\x1a")  # Ctrl-Z: our job stops, the shell prompts
        term.expect(b"Stopped")
        term.expect(b"PROMPT$ ")
        term.mark()
        term.type(b"fg\r")
        term.expect(b"sh -c")  # bash names the job it resumes
        time.sleep(0.3)
        term.type(b"hello\r")
        term.expect(b"got:hello")
        term.expect(b"PROMPT$ ")
        term.mark()
        term.type(b"echo status=$?\r")
        term.expect(b"status=0")
    finally:
        term.close()


def test_started_in_the_background_gets_the_keys_after_fg(tmp_path):
    require_bwrap()
    term = _bash(tmp_path)
    try:
        term.mark()
        term.type(_no_docker('echo "re"ady; read -r x; echo "go""t:$x"') + b" &\r")
        term.expect(b"ready")
        term.mark()
        term.type(b"fg\r")
        term.expect(b"sh -c")
        time.sleep(0.5)  # the relay sees itself in the foreground within 0.2 s
        term.type(b"hello\r")
        term.expect(b"got:hello")
        term.expect(b"PROMPT$ ")
        term.mark()
        term.type(b"echo status=$?\r")
        term.expect(b"status=0")
    finally:
        term.close()


def test_a_terminal_that_is_no_controlling_one_is_relayed_too(tmp_path):
    require_bwrap()
    # A session without a controlling terminal whose stdio is a pty (a program driving a
    # pty, not a shell): no job control applies, the relay reads the keys all the same.
    term = CallerTerminal(tmp_path, ["sh", "-c", 'echo "re"ady; read -r x; echo "go""t:$x"'],
                          controlling=False)
    try:
        term.expect(b"ready")
        term.type(b"hi\r")
        term.expect(b"got:hi")
        result = term.finish()
    finally:
        term.close()
    assert result["rc"] == 0, term.output
    assert result["after"] == result["before"], term.output
