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
