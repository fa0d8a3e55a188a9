"""T-18: clear refusals, one line each, exit 125: bubblewrap missing (says how to install it),
NO_DOCKER_BWRAP not executable, bubblewrap unable to create namespaces (says which setting)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from isolation_cases import cli, require_bwrap

REPO = Path(__file__).resolve().parents[2]


def test_missing_bwrap_says_apt_get_install(tmp_path):
    code = ("import sys, no_docker.supervisor.run as r, no_docker.supervisor.cli as c; "
            "r.BWRAP_FALLBACK_DIRS = (); sys.exit(c.main(['run', '--', 'true']))")
    env = dict(os.environ, PATH=str(tmp_path))
    env.pop("NO_DOCKER_BWRAP", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 125
    assert result.stderr.splitlines() == [
        "no-docker: isolation: bubblewrap (bwrap) is not installed (install it: apt-get install bubblewrap)"]


def test_no_docker_bwrap_not_executable(tmp_path):
    env = dict(os.environ, NO_DOCKER_BWRAP=str(tmp_path / "no-such-bwrap"))
    result = subprocess.run(cli("run", "--", "true"), cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 125
    assert len(result.stderr.splitlines()) == 1 and "is not executable" in result.stderr


def test_no_user_namespaces_refuses_naming_the_setting():
    bwrap = require_bwrap()
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run as uid 65534")
    base = Path(tempfile.mkdtemp(prefix="t18-"))
    # The run markers live outside every root the run could write (T-47), and are the user's.
    state = Path(tempfile.mkdtemp(prefix="t18-state-"))
    os.chown(state, 65534, 65534)
    try:
        pkg = base / "pkg" / "no_docker" / "supervisor"
        pkg.mkdir(parents=True)
        # The whole package, its rooms included (isolation/, ending/, proving/).
        shutil.copytree(REPO / "supervisor", pkg, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o777)
        marker = base / "cmd-ran"
        # An outer sandbox where no further user namespace can be made (bwrap --disable-userns):
        # what an ordinary user meets where unprivileged user namespaces are off.
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bwrap, "--ro-bind", "/", "/",
                "--dev", "/dev", "--proc", "/proc", "--bind", str(base), str(base),
                "--bind", str(state), str(state), "--unshare-user",
                "--disable-userns", "--unshare-pid", "--chdir", str(base), "--setenv", "PYTHONPATH",
                str(base / "pkg"), "--setenv", "NO_DOCKER_STATE_DIR", str(state),
                "--", "/usr/bin/python3", "-m", "no_docker.supervisor.cli", "run", "--",
                "touch", str(marker)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert result.returncode == 125, result.stderr
        ours = [line for line in result.stderr.splitlines() if line.startswith("no-docker:")]
        assert len(ours) == 1, result.stderr
        assert "could not create the sandbox" in ours[0] and "user.max_user_namespaces" in ours[0]
        assert not marker.exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
