"""The dispatcher: usage errors are exit 2 with a message, never a traceback."""

from __future__ import annotations

import subprocess
import sys

from no_docker.supervisor import cli


def no_docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", *args],
                          capture_output=True, text=True, timeout=60)


def test_help_lists_every_command():
    out = no_docker("--help")
    assert out.returncode == 0
    for name in cli.COMMANDS:
        assert f"  {name}" in out.stdout


def test_no_arguments_is_a_usage_error():
    out = no_docker()
    assert out.returncode == 2
    assert "usage: no-docker" in out.stderr


def test_unknown_command_names_it():
    out = no_docker("frobnicate")
    assert out.returncode == 2
    assert "'frobnicate'" in out.stderr
    assert "Traceback" not in out.stderr


def test_version():
    out = no_docker("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("no-docker ")


FAST_EXIT = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("teardown ran\\n"))
sys.argv = ["no-docker", *sys.argv[1:]]
from no_docker.supervisor.cli import console_main
console_main()
"""


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", FAST_EXIT, *args], capture_output=True, text=True,
                          timeout=60)


def test_run_leaves_without_the_interpreter_teardown_but_flushes_its_output():
    # `run --help` prints to stdout through Python's buffer: os._exit must come after a flush.
    out = _console("run", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: no-docker run"), out.stdout
    assert "teardown ran" not in out.stderr  # atexit handlers are the teardown os._exit skips
    refused = _console("run", "--no-such-flag")
    assert refused.returncode == 2 and "--no-such-flag" in refused.stderr
    assert "teardown ran" not in refused.stderr


def test_other_commands_exit_normally():
    out = _console("--version")
    assert out.returncode == 0 and out.stdout.startswith("no-docker ")
    assert "teardown ran" in out.stderr
