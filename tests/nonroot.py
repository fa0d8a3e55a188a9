"""Running no-docker as an ordinary user in tests: when it can be done here, and with what.

Tests switch to an unprivileged uid with setpriv (util-linux) and run /usr/bin/python3 on a
copy of the package: the venv's python lives under /root (0700), unreadable to that uid.
"""

from __future__ import annotations

import os
import shutil
import subprocess

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
