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
        f"make: installing no-docker into {venv}, only what prove needs: about 15 s "
        f"(pip's output: {venv}/setup.log)", "table: prove"]
    assert "noise" not in done.stdout + done.stderr
    assert "pip noise" in (venv / "setup.log").read_text()


def test_a_pip_failure_shows_the_logs_tail(tmp_path):
    venv = tmp_path / "venv"
    _stand_in_venv(venv, 1)
    done = _make(venv)
    assert done.returncode != 0
    assert "pip failed" in done.stderr and "pip noise" in done.stderr
    assert "table" not in done.stdout and not (venv / ".installed").exists()


def _pip_specs(venv: Path) -> list[str]:
    return [line.split()[-1] for line in (venv / "pip.args").read_text().splitlines() if "-e" in line.split()]


def _recording_venv(venv: Path) -> None:
    """A stand-in venv whose python records its pip arguments."""
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {venv}/pip.args\n')
    tool = venv / "bin" / "no-docker"
    tool.write_text("#!/bin/sh\necho table\n")
    python.chmod(0o755)
    tool.chmod(0o755)


def test_make_prove_installs_only_what_prove_needs_and_make_test_everything(tmp_path):
    """Issue 28.1: `make prove` waited ~45 s for the whole [test] extra it does not use."""
    venv = tmp_path / "venv"
    _recording_venv(venv)
    assert _make(venv).returncode == 0
    assert _pip_specs(venv) == ["."]
    (venv / "pip.args").unlink()
    done = subprocess.run(["make", "--no-print-directory", "--assume-old=system", "-C", str(REPO),
                           f"VENV={venv}", "venv"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _pip_specs(venv) == [".[test]"]
    (venv / "pip.args").unlink()
    assert _make(venv).returncode == 0  # the test install has what prove needs: no second install
    assert not (venv / "pip.args").exists()


def _fake_apt(bin_dir: Path) -> Path:
    """dpkg says every package is missing; apt-get records its arguments and talks like debconf."""
    bin_dir.mkdir()
    calls = bin_dir / "apt-get.calls"
    (bin_dir / "dpkg").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> {calls}\n'
        "echo 'debconf: unable to initialize frontend: Dialog' >&2\n"
        'case "$*" in *install*) [ -n "$FAIL" ] && { echo "E: Unable to locate package x" >&2; exit 100; }'
        " ;; esac\n"
        "exit 0\n")
    for name in ("dpkg", "apt-get"):
        (bin_dir / name).chmod(0o755)
    return calls


def _make_system(bin_dir: Path, lock: Path, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "system", f"DPKG_LOCKS={lock}",
                           "APT_LOCK_TIMEOUT=7"],
                          env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", **env),
                          capture_output=True, text=True, timeout=120)


needs_root = pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the apt-get step runs only as root")


@needs_root
def test_apt_get_waits_for_the_dpkg_lock_and_says_so(tmp_path):
    """Issue 28.3: another apt holding the lock failed `make` at once (Error 100, no hint)."""
    import fcntl
    import os

    calls = _fake_apt(tmp_path / "bin")
    lock = tmp_path / "lock-frontend"
    free = _make_system(tmp_path / "bin", lock)
    assert free.returncode == 0, free.stderr
    assert "waiting for the dpkg lock" not in free.stdout
    assert "debconf" not in free.stdout + free.stderr  # apt's noise is in the log, not on screen
    with open(lock, "w") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)  # as apt does (fcntl F_SETLK); make's python asks with F_GETLK
        done = _make_system(tmp_path / "bin", lock)
    assert done.returncode == 0, done.stderr
    assert f"make: waiting for the dpkg lock (held by pid {os.getpid()} (" in done.stdout
    lines = calls.read_text().splitlines()
    assert all("-o DPkg::Lock::Timeout=7" in line and "-qq" in line for line in lines), lines
    assert any("install -y" in line or "-y" in line.split() for line in lines)
    assert all(line.endswith("DEBIAN_FRONTEND=noninteractive") for line in lines if "install" in line)


@needs_root
def test_an_apt_get_failure_shows_its_logs_tail(tmp_path):
    _fake_apt(tmp_path / "bin")
    done = _make_system(tmp_path / "bin", tmp_path / "lock", FAIL="1")
    assert done.returncode != 0
    assert "E: Unable to locate package x" in done.stderr
    said = next(line for line in done.stderr.splitlines() if line.startswith("make: apt-get failed"))
    log = Path(said.removeprefix("make: apt-get failed; its whole output: "))
    assert "debconf" in log.read_text()  # kept for the user on a failure
    log.unlink()  # this test's own
