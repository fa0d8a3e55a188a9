"""T-29: another terminal (a pty opened outside) cannot be opened or read inside a run, and the
run has no controlling terminal."""

from __future__ import annotations

import json
import os

from isolation_cases import inside_python, require_bwrap, run

INSIDE = r"""
import json, os, sys
out = {}
for label, path in (("other", sys.argv[1]), ("tty", "/dev/tty")):
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY); os.close(fd); out[label] = "opened"
    except OSError as e:
        out[label] = e.errno
out["pts"] = sorted(os.listdir("/dev/pts"))
print(json.dumps(out))
"""


def test_outside_pty_is_not_reachable(tmp_path):
    require_bwrap()
    master, slave = os.openpty()
    name = os.ttyname(slave)
    try:
        result = run(["--quiet", "--", *inside_python(INSIDE), name], cwd=tmp_path)
    finally:
        os.close(master)
        os.close(slave)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    assert said["other"] != "opened", said
    assert said["tty"] != "opened", said
    assert said["pts"] == ["ptmx"], said
