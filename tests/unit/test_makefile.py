"""`make prove` on a fresh clone (issue 18.11): quiet until the table, pip's output in a log.

A stand-in venv (a `python` that prints pip-like noise, a `no-docker` that prints a table)
runs the real Makefile's recipes without installing anything."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _stand_in_venv(venv: Path, pip_status: int) -> None:
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\necho 'Collecting aiohttp (pip noise)'\necho 'WARNING: noise' >&2\n"
                      f"exit {pip_status}\n")
    tool = venv / "bin" / "no-docker"
    tool.write_text("#!/bin/sh\necho \"table: $*\"\n")
    python.chmod(0o755)
    tool.chmod(0o755)


def _make(venv: Path) -> subprocess.CompletedProcess:
    # --assume-old=system: never the apt-get step (it installs system packages as root).
    return subprocess.run(["make", "--no-print-directory", "--assume-old=system", "-C", str(REPO), "prove",
                           f"VENV={venv}"],
                          capture_output=True, text=True, timeout=120)


def test_make_prove_is_quiet_until_the_table(tmp_path):
    venv = tmp_path / "venv"
    _stand_in_venv(venv, 0)
    done = _make(venv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"make: installing no-docker into {venv} (pip's output: {venv}/setup.log)", "table: prove"]
    assert "noise" not in done.stdout + done.stderr
    assert "pip noise" in (venv / "setup.log").read_text()


def test_a_pip_failure_shows_the_logs_tail(tmp_path):
    venv = tmp_path / "venv"
    _stand_in_venv(venv, 1)
    done = _make(venv)
    assert done.returncode != 0
    assert "pip failed" in done.stderr and "pip noise" in done.stderr
    assert "table" not in done.stdout and not (venv / ".installed").exists()
