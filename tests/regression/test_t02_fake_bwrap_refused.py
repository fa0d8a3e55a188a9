"""T-02: a claimed but unproven isolation is refused and CMD never runs.

``NO_DOCKER_BWRAP`` points at a "bubblewrap" that just execs its command (so the probe runs on
the host), or at one that builds a weaker sandbox (``bwrap --ro-bind / /`` with a pid
namespace). The probe refuses either (125, a line naming the property) and the command's
marker file never appears.
"""

from __future__ import annotations

import os

import pytest
from isolation_cases import FAKE_BWRAP, require_bwrap, run


def weak_bwrap(real: str) -> str:
    return ("#!/bin/sh\n# Real bubblewrap, weak flags: the host's file system, network, capabilities.\n"
            'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\n'
            f'exec {real} --ro-bind / / --dev /dev --proc /proc --unshare-pid --die-with-parent -- "$@"\n')


@pytest.mark.parametrize("kind", ["execs-its-command", "ro-bind-root"])
def test_fake_bwrap_is_refused_and_cmd_never_runs(tmp_path, kind):
    real = require_bwrap()
    fake = tmp_path / "bwrap"
    fake.write_text(FAKE_BWRAP if kind == "execs-its-command" else weak_bwrap(real))
    fake.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    marker = work / "cmd-ran"
    env = dict(os.environ, NO_DOCKER_BWRAP=str(fake))
    result = run(["--", "sh", "-c", f"touch {marker}; echo CMD RAN"], cwd=work, env=env)
    assert result.returncode == 125, (result.stdout, result.stderr)
    assert "CMD RAN" not in result.stdout
    assert not marker.exists(), "the command ran under an unproven isolation"
    assert " not proven: " in result.stderr, result.stderr
