"""``no-docker run`` as an ordinary user (uid 65534 via setpriv), with unprivileged user
namespaces: the same proof, the same refusals. Skipped, with the reason, where that is not
possible (not root to switch users, no setpriv, user namespaces disabled)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from isolation_helpers import BWRAP, REPO
from nonroot import SYSTEM_PYTHON, skip_reason

NOBODY = 65534


_why = skip_reason(BWRAP)
if _why:
    pytest.skip(_why, allow_module_level=True)


@pytest.fixture
def world(tmp_path_factory):
    """A copy of the package and a work dir that uid 65534 can read (pytest's tmp is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="no-docker-nonroot-"))
    try:
        pkg = base / "pkg" / "no_docker" / "supervisor"
        pkg.mkdir(parents=True)
        # The whole package, its rooms included (isolation/, ending/, proving/).
        shutil.copytree(REPO / "supervisor", pkg, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        work = base / "work"
        work.mkdir()
        home = base / "home"
        home.mkdir()
        (base / "state").mkdir()  # run markers (no XDG_RUNTIME_DIR for uid 65534 here)
        for path in (base, work, home, base / "state"):
            os.chown(path, NOBODY, NOBODY)
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o755)
        os.chmod(base / "state", 0o700)  # the supervisor refuses a state dir others can read
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_nobody(world: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(world / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(world / "pkg"), "DOCKER_HOST": "unix:///run/docker.sock",
           "NO_DOCKER_STATE_DIR": str(world / "state")}
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON, "-m",
            "no_docker.supervisor.cli", *args]
    return subprocess.run(argv, cwd=world / "work", env=env, capture_output=True, text=True, timeout=120)


def test_run_as_nobody_is_proven_and_runs_as_nobody(world):
    result = as_nobody(world, ["run", "--", "sh", "-c", "id -u; echo ${DOCKER_HOST:-unset}; touch made"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(NOBODY), "unset"]
    assert "isolation proven" in result.stderr
    assert (world / "work" / "made").exists()


def test_check_as_nobody_inside_a_run(world):
    # PYTHONPATH is not on the allowlist: keep it so the inner `check` finds the copy.
    result = as_nobody(world, ["run", "--quiet", "--keep-env", "PYTHONPATH", "--", SYSTEM_PYTHON, "-m",
                               "no_docker.supervisor.cli", "check"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(line.split()[1] == "proven" for line in result.stdout.splitlines())


def test_socket_in_work_dir_unreachable_as_nobody(world):
    path = world / "work" / "engine.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    os.chmod(path, 0o777)  # reachable by uid 65534 outside: only the sandbox stands in between
    listener.listen(4)
    listener.setblocking(False)
    try:
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('engine.sock')\n"
                "    print('REACHED')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n")
        result = as_nobody(world, ["run", "--quiet", "--", SYSTEM_PYTHON, "-c", code])
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("REFUSED"), result.stdout
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
