"""T-42: ``AF_VSOCK`` cannot be opened inside a run (P13).

vsock belongs to no network namespace: from any namespace it reaches the hypervisor host and
its VMs (Docker Desktop runs its engine in one). The same program is run once outside, as the
positive control (this machine's kernel has vsock: the control must open one), and once under
``no-docker run``, where the run's syscall filter refuses ``socket`` and ``socketpair`` with
EAFNOSUPPORT, and the probe proved P13 by trying before the command started.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys

import pytest
from isolation_cases import inside_python, require_bwrap, run

TRY_VSOCK = r"""
import json, socket
out = {}
for label in ("socket", "socketpair"):
    try:
        made = socket.socket(40, socket.SOCK_STREAM) if label == "socket" else socket.socketpair(40)
    except OSError as err:
        out[label] = err.errno
    else:
        out[label] = "opened"
        for s in made if isinstance(made, tuple) else (made,):
            s.close()
print(json.dumps(out))
"""


def control() -> dict:
    done = subprocess.run([sys.executable, "-c", TRY_VSOCK], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_vsock_cannot_be_opened_inside_a_run(tmp_path):
    require_bwrap()
    outside = control()
    if outside["socket"] != "opened":
        pytest.skip(f"this kernel has no vsock (socket(AF_VSOCK) outside: errno {outside['socket']}): "
                    "nothing for the run to be kept from")
    result = run(["--", *inside_python(TRY_VSOCK)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(13 properties)" in result.stderr, result.stderr  # P13 among them
    inside = json.loads(result.stdout)
    assert inside == {"socket": errno.EAFNOSUPPORT, "socketpair": errno.EAFNOSUPPORT}, inside


def test_check_inside_a_run_proves_p13(tmp_path):
    require_bwrap()
    result = run(["--quiet", "--", sys.executable, "-m", "no_docker.supervisor.cli", "check", "--json"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["id"]: row["state"] for row in json.loads(result.stdout)["properties"]}
    assert rows.get("P13") == "proven", rows
