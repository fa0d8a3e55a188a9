"""A newcomer without a login session (``su``, a CI container, a ``docker exec``-style shell: no
``XDG_RUNTIME_DIR``, no ``NO_DOCKER_STATE_DIR``): every command works, from a fresh shell of an
unprivileged user made with ``setpriv``, and the state dir is the private per-user fallback
``/tmp/no-docker-<uid>``, made 0700 and verified (issue 15 item 1). A squatter's dir or link
in its place is refused with 125 naming it.

The uid is one no other test uses (no passwd entry is needed), so runs of other sessions in
``/tmp/no-docker-65534`` can neither disturb nor be disturbed by this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from isolation_helpers import BWRAP, REPO

SYSTEM_PYTHON = "/usr/bin/python3"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to switch to an unprivileged uid (setpriv)"
    if not shutil.which("setpriv"):
        return "setpriv (util-linux) is not installed"
    if BWRAP is None:
        return "bubblewrap is not installed"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (the venv's python lives under /root)"
    check = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            BWRAP, "--ro-bind", "/", "/", "--unshare-all", "true"],
                           capture_output=True, text=True, timeout=120)
    if check.returncode != 0:
        return f"unprivileged user namespaces unavailable: {check.stderr.strip()}"
    return None


_why = _skip_reason()
if _why:
    pytest.skip(_why, allow_module_level=True)


@pytest.fixture
def user():
    """(uid, base): a fresh uid, a readable copy of the package, its own home and work dir."""
    uid = 61000 + int.from_bytes(os.urandom(2), "big") % 4000
    fallback = Path(f"/tmp/no-docker-{uid}")
    shutil.rmtree(fallback, ignore_errors=True)
    base = Path(tempfile.mkdtemp(prefix="no-docker-newcomer-"))
    try:
        for part in ("supervisor", "ci"):
            shutil.copytree(REPO / part, base / "pkg" / "no_docker" / part,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("home", "work"):
            (base / name).mkdir()
            os.chown(base / name, uid, uid)
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o755)
        yield uid, base
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if fallback.is_symlink():
            fallback.unlink()
        shutil.rmtree(fallback, ignore_errors=True)


def as_user(uid: int, base: Path, command: str) -> subprocess.CompletedProcess:
    """COMMAND (no-docker's arguments) in a fresh shell of UID: a login-less environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(base / "pkg")}
    script = f"cd {base / 'work'} && exec {SYSTEM_PYTHON} -m no_docker.supervisor.cli {command}"
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           "env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c", script],
                          capture_output=True, text=True, timeout=120)


def test_every_command_works_without_a_login_session(user):
    uid, base = user
    expected = {  # command -> exit status
        "--version": 0, "--help": 0, "run -- id -u": 0, "run --quiet -- sh -c 'echo made > f'": 0,
        "runs": 0, "runs --json": 0, "end --all": 0, "stanza": 0,
        "check": 125,  # outside a run: "not proven" is the right answer, not a state-dir error
    }
    for command, status in expected.items():
        result = as_user(uid, base, command)
        assert result.returncode == status, f"{command}: {result.stdout}{result.stderr}"
        assert "state dir" not in result.stderr, f"{command}: {result.stderr}"
    assert as_user(uid, base, "run --quiet -- id -u").stdout.split() == [str(uid)]
    assert (base / "work" / "f").read_text() == "made\n"
    fallback = os.lstat(f"/tmp/no-docker-{uid}")
    assert fallback.st_uid == uid and fallback.st_mode & 0o7777 == 0o700
    assert os.listdir(f"/tmp/no-docker-{uid}") == []  # every run ended and removed its marker


def test_a_squatted_fallback_is_refused_naming_it(user):
    uid, base = user
    fallback = Path(f"/tmp/no-docker-{uid}")
    fallback.mkdir(mode=0o700)  # made by someone else first (root here)
    result = as_user(uid, base, "run -- true")
    assert result.returncode == 125, result.stderr
    assert f"state dir: {fallback} belongs to uid 0, not to us" in result.stderr
    fallback.rmdir()
    fallback.symlink_to(base / "home")  # a link to a directory the user owns: still refused
    result = as_user(uid, base, "run -- true")
    assert result.returncode == 125, result.stderr
    assert f"state dir: {fallback} is a symbolic link" in result.stderr
    fallback.unlink()
    fallback.mkdir(mode=0o755)
    os.chown(fallback, uid, uid)
    os.chmod(fallback, 0o755)  # the user's own, but others can read it
    result = as_user(uid, base, "runs")
    assert result.returncode == 125, result.stderr
    assert f"state dir: {fallback} is mode 755" in result.stderr and f"chmod 700 {fallback}" in result.stderr
