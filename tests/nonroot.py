"""Running no-docker as an ordinary user in tests: when it can be done here, and with what;
and what such a user cannot ask of a run (a pids limit without a delegated cgroup).

Tests switch to an unprivileged uid with setpriv (util-linux) and run /usr/bin/python3 on a
copy of the package: the venv's python lives under /root (0700), unreadable to that uid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

SYSTEM_PYTHON = "/usr/bin/python3"


def skip_reason(bwrap: str | None, uid: int = 65534) -> str | None:
    """Why an ordinary user's run cannot be tried here, or None."""
    if os.geteuid() != 0:
        return f"needs root to switch to uid {uid} (setpriv)"
    if not shutil.which("setpriv"):
        return "setpriv (util-linux) is not installed"
    if bwrap is None:
        return "bubblewrap is not installed"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (the venv's python is not readable by uid {uid})"
    check = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            bwrap, "--ro-bind", "/", "/", "--unshare-all", "true"],
                           capture_output=True, text=True, timeout=120)
    if check.returncode != 0:
        return f"unprivileged user namespaces unavailable: {check.stderr.strip()}"
    return None


_LIMITS_PROBED: dict[str, str | None] = {}


def limit_unavailable(option: str = "--max-pids") -> str | None:
    """Why this user cannot give a run OPTION's limit (``--max-pids`` or ``--memory-max``), or
    None when it can: a probe cgroup made with that limit and removed again, once per session.
    An ordinary user without a delegated cgroup v2 subtree cannot (``[Errno 13]``)."""
    if option not in _LIMITS_PROBED:
        from no_docker.supervisor.ending.cgroup import CgroupError, create

        limits = {"--max-pids": {"max_pids": 16}, "--memory-max": {"memory_max": 64 << 20}}[option]
        try:
            probe = create(f"limit-probe-{os.getpid()}", **limits)
        except CgroupError as err:
            _LIMITS_PROBED[option] = f"this user cannot make a cgroup with {option}: {err}"
        else:
            if probe is not None:
                probe.remove(deadline=time.monotonic() + 5)
            _LIMITS_PROBED[option] = None
    return _LIMITS_PROBED[option]


def pids_limit_unavailable() -> str | None:
    return limit_unavailable("--max-pids")


def pids_limit_args(limit: int) -> list[str]:
    """``--max-pids LIMIT`` where this user can have it, else nothing: for a test whose CMD
    is no fork storm, the limit is a safety margin, and an ordinary user's run has none."""
    return [] if pids_limit_unavailable() is not None else ["--max-pids", str(limit)]


def require_pids_limit() -> None:
    """Skip (saying why) where a test needs a run's pids limit this user cannot set."""
    import pytest

    reason = pids_limit_unavailable()
    if reason is not None:
        pytest.skip(f"needs --max-pids: {reason} (shown as root in CI)")


def memory_limit_args(size: str) -> list[str]:
    """``--memory-max SIZE`` where this user can have it, else nothing."""
    return [] if limit_unavailable("--memory-max") is not None else ["--memory-max", size]
