"""Fixtures every test shares.

Tests start real processes; each one registers what it starts so it is reaped even when
the test fails (trio's and psutil's discipline).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from detached import start_detached
from hang_guard import pytest_runtest_protocol  # noqa: F401 - a hook: every test is bounded

REPO = Path(__file__).resolve().parent.parent


def python_argv(code: str) -> list[str]:
    """argv of a tiny Python child: ``[sys.executable, "-u", "-c", code]``."""
    return [sys.executable, "-u", "-c", code]


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run markers of a test live in its own directory, never in the machine's state dir."""
    state = tmp_path_factory.mktemp("state")
    state.chmod(0o700)
    monkeypatch.setenv("NO_DOCKER_STATE_DIR", str(state))


@pytest.fixture(scope="session", autouse=True)
def _remove_cgroups_of_kept_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A run whose ending cannot be shown keeps its marker and its cgroup, as the product must
    (T-27, T-33, weakened builds...). Those markers live in this session's private state dirs,
    so the cgroups they name are this session's own: remove the ones that are empty by now."""
    yield
    from no_docker.supervisor.ending import markers
    from no_docker.supervisor.ending.cgroup import RunCgroup

    for record in tmp_path_factory.getbasetemp().rglob("run.json"):
        try:
            # only cgroups a marker names as no-docker's own (T-47 plants ones that are not)
            cgroup = RunCgroup.from_record(markers.read_record(record.parent).cgroup)
        except (OSError, ValueError, AttributeError, markers.CorruptMarker):
            continue
        if cgroup is not None:
            cgroup.remove(deadline=0)  # rmdir: a cgroup with a live member stays (EBUSY)


@pytest.fixture
def spawn() -> Iterator:
    """Start a process (``subprocess.Popen`` args); it is killed and reaped after the test."""
    started: list[subprocess.Popen] = []

    def _spawn(argv: list[str], **kwargs: object) -> subprocess.Popen:
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        return proc

    yield _spawn
    for proc in started:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.kill()
        proc.wait(timeout=10)


# --- the machine state every run must cope with -------------------------------------------

OTHER_UID = 65533  # "another user": no test runs as this uid, so its processes are nobody's here


def _hold_namespaces() -> list[int]:
    """Processes in pid namespaces of their own, as on every machine that runs containers:
    root's (dockerd's containers) and another user's (a rootless engine, a browser's sandbox).
    An ordinary user may not read their ns links; every test of the session runs beside them
    (issue 24: five non-root tests failed on such a machine while they passed on a quiet one).
    Returns pidfds. They are not children of the test process (a test may check that it has
    none), and each dies with its unshare (``--kill-child``) when the session ends."""
    if os.geteuid() != 0:
        return []
    import shutil

    if not (shutil.which("unshare") and shutil.which("setpriv")):
        return []
    holds = [
        ["unshare", "--pid", "--kill-child", "--mount-proc", "sleep", "3600"],
        ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
         "unshare", "--user", "--map-root-user", "--pid", "--kill-child", "--mount-proc", "sleep", "3600"],
    ]
    return [fd for fd in (start_detached(argv) for argv in holds) if fd is not None]


@pytest.fixture(scope="session", autouse=True)
def _other_users_namespaces() -> Iterator[list[int]]:
    held = _hold_namespaces()
    try:
        yield held
    finally:
        for fd in held:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)  # unshare; --kill-child takes its child
            except ProcessLookupError:
                pass
            os.close(fd)
