"""T-12: the run has a private /tmp (TMPDIR=/tmp): the host's /tmp files are not there, and what
the run writes there never appears on the host."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from isolation_cases import require_bwrap, run

REPO = Path(__file__).resolve().parents[2]


def test_tmp_is_private(tmp_path):
    require_bwrap()
    tag = uuid.uuid4().hex[:12]
    host_file = Path(f"/tmp/t12-host-{tag}")
    host_file.write_text("host secret\n")
    inside_file = Path(f"/tmp/t12-inside-{tag}")
    try:
        script = (f'echo "TMPDIR=$TMPDIR"; test -e {host_file} && echo HOST-FILE-VISIBLE; '
                  f'echo x > {inside_file} && echo WROTE-INSIDE; ls -A /tmp')
        result = run(["--quiet", "--", "sh", "-c", script], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "TMPDIR=/tmp"
        assert "HOST-FILE-VISIBLE" not in lines and "WROTE-INSIDE" in lines
        assert not inside_file.exists(), "a file the run wrote to /tmp appeared on the host"
        # /tmp inside holds the run's own file and the mount point chains of the work dir and of
        # the toolchain (a venv or a checkout under /tmp, e.g. a CI clone, is bound read-only).
        toolchain = {Path(p).resolve().parts[2] for p in (sys.prefix, REPO)
                     if Path(p).resolve().parts[1:2] == ("tmp",)}
        assert set(lines[2:]) <= {inside_file.name, tmp_path.parts[2], *toolchain}, lines
    finally:
        host_file.unlink()
        if inside_file.exists():
            inside_file.unlink()
