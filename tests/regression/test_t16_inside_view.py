"""T-16: the inside view: only the run's pids, no outside unix sockets in /proc/net/unix, no
host mounts beyond the policy's, no outside System V IPC, no writable cgroup filesystem."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from isolation_cases import inside_python, require_bwrap, run

INSIDE = r"""
import json, os
def read(p):
    try:
        return open(p).read()
    except OSError as e:
        return "ERR %d" % e.errno
mounts = [line.split()[4] for line in read("/proc/self/mountinfo").splitlines()]
cg = "/sys/fs/cgroup"
print(json.dumps({
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "unix": read("/proc/net/unix").splitlines()[1:],
    "mounts": mounts,
    "shm": read("/proc/sysvipc/shm").splitlines()[1:],
    "cgroup_writable": os.path.isdir(cg) and os.access(cg, os.W_OK),
}))
"""


def test_inside_view(tmp_path):
    require_bwrap()
    if shutil.which("ipcmk") is None:
        pytest.skip("ipcmk (util-linux) is not installed")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "outside.sock"))
    listener.listen(1)
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True,
                          timeout=120).stdout
    shm_id = made.split()[-1]
    work = tmp_path / "work"
    work.mkdir()
    try:
        outside_shm = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        assert any(line.strip() for line in outside_shm)  # the segment is there, outside
        result = run(["--quiet", "--", *inside_python(INSIDE)], cwd=work)
        assert result.returncode == 0, result.stderr
        view = json.loads(result.stdout)
    finally:
        subprocess.run(["ipcrm", "-m", shm_id], capture_output=True, timeout=120)
        listener.close()
    assert len(view["pids"]) <= 3 and 1 in view["pids"], view["pids"]  # init, the command
    assert view["unix"] == [], view["unix"]
    assert view["shm"] == [], "System V shared memory of the host is visible"
    assert view["cgroup_writable"] is False
    home = os.path.realpath(os.environ["HOME"])
    allowed_roots = ("/", "/usr", "/etc", "/var", "/opt", "/srv", "/proc", "/dev", "/run", "/tmp", home,
                     str(work))
    for point in view["mounts"]:
        assert any(point == r or point.startswith(r.rstrip("/") + "/") for r in allowed_roots), point
    assert "/home" not in view["mounts"] and "/sys" not in view["mounts"]
