"""T-72: a state dir on a full or read-only file system is one line and 125, never a traceback.

The run marker (run.json under ``NO_DOCKER_STATE_DIR``) is what lets ``no-docker end`` finish a
run whose supervisor died; a run that cannot write it must not start, and one whose marker
cannot be rewritten or removed at its end must still end every process and say so. Before
issue 24 each of these was a Python traceback and exit 1, which a mutation tool reads as "the
tests failed" (issue 24, measured: ENOSPC in ``write_record``, EROFS in ``create_marker``).

Real file systems: a tiny tmpfs mounted in a private mount namespace of the test's own
(``unshare -m``: nothing reaches the host's mount table, and it goes with the namespace), the
state dir in it, and no-docker run inside that namespace:

1. full (no block, or no inode, left): 125, one line naming the state dir, CMD never runs;
2. read-only (an existing, private state dir, the mount remounted read-only): the same;
3. read-only from the middle of the run on (remounted while CMD sleeps): every process of the
   run is still ended (a daemon CMD left is gone), and the 125 line names the marker that could
   not be removed; ``no-docker end`` and the next ``run`` there say one line each too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from ending_cases import daemon, kill_token, require_bwrap, settled_without, token

FILL = {
    "no-space": "mount -t tmpfs -o size=16k,mode=755 tmpfs \"$M\" && mkdir -m 700 \"$M/st\" && "
                "(dd if=/dev/zero of=\"$M/fill\" bs=4k 2>/dev/null; true)",
    "no-inode": "mount -t tmpfs -o nr_inodes=3,mode=755 tmpfs \"$M\" && mkdir -m 700 \"$M/st\" && "
                "(touch \"$M/a\" \"$M/b\" \"$M/c\" 2>/dev/null; true)",
    "read-only": "mount -t tmpfs -o size=64k,mode=755 tmpfs \"$M\" && mkdir -m 700 \"$M/st\" && "
                 "mount -o remount,ro \"$M\"",
}


def _require_mount_namespace() -> str:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the case runs as root in CI)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run([unshare, "-m", "--propagation", "private", "true"], capture_output=True,
                           timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    return unshare


def _in_private_mounts(unshare: str, mount_dir, script: str, *args: str, timeout: float = 90):
    """SCRIPT under sh in a mount namespace of its own, $M the mount point, $ND no-docker."""
    env = {**os.environ, "M": str(mount_dir), "ND": f"{sys.executable} -m no_docker.supervisor.cli"}
    return subprocess.run([unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("kind", sorted(FILL))
def test_a_run_refuses_to_start_on_a_state_dir_it_cannot_write(tmp_path, kind):
    require_bwrap()
    unshare = _require_mount_namespace()
    mount_dir, work = tmp_path / "m", tmp_path / "work"
    mount_dir.mkdir()
    work.mkdir()
    script = (FILL[kind] + ' && NO_DOCKER_STATE_DIR="$M/st" $ND run --quiet --work "$1" -- touch "$1/ran"; '
              'echo "status=$?" >&2')
    result = _in_private_mounts(unshare, mount_dir, script, str(work))
    status_line = result.stderr.strip().splitlines()[-1]
    assert status_line == "status=125", result.stderr
    line = _one_line(result.stderr.replace(status_line, ""))
    assert line.startswith(f"no-docker: state dir: cannot create a run marker in {mount_dir}/st: "), line
    assert "NO_DOCKER_STATE_DIR" in line, line
    assert not (work / "ran").exists(), "CMD ran although its marker could not be written"


def test_a_state_dir_gone_read_only_during_the_run(tmp_path):
    require_bwrap()
    unshare = _require_mount_namespace()
    mount_dir, work = tmp_path / "m", tmp_path / "work"
    mount_dir.mkdir()
    work.mkdir()
    tok = token()
    # CMD leaves a daemon and waits for the test's signal file; the mount goes read-only then.
    cmd = f"{daemon(tok)}; touch {work}/started; while [ ! -e {work}/go ]; do sleep 0.02; done"
    script = ('mount -t tmpfs -o size=64k,mode=755 tmpfs "$M" && mkdir -m 700 "$M/st" || exit 99\n'
              'export NO_DOCKER_STATE_DIR="$M/st"\n'
              '$ND run --quiet --work "$1" -- sh -c "$2" & sup=$!\n'
              'while [ ! -e "$1/started" ] && kill -0 $sup 2>/dev/null; do sleep 0.02; done\n'
              'mount -o remount,ro "$M"; touch "$1/go"\n'
              'wait $sup; echo "run=$?" >&2\n'
              '$ND run --quiet --work "$1" -- touch "$1/ran"; echo "next=$?" >&2\n'
              '$ND end --all; echo "end=$?" >&2\n')
    try:
        result = _in_private_mounts(unshare, mount_dir, script, str(work), cmd)
        survivors = settled_without(tok)
    finally:
        kill_token(tok)
    err = result.stderr
    assert "Traceback" not in err, err
    if not (work / "started").exists():
        pytest.fail(f"the run never started CMD, so the case could not be made: {err}")
    lines = err.strip().splitlines()
    assert lines[1] == "run=125" and lines[3] == "next=125" and lines[5] == "end=125", err
    assert lines[0].startswith(f"no-docker: state dir: cannot remove the run marker {mount_dir}/st/"), err
    assert lines[0].endswith("the run itself was ended (every process gone)"), err
    assert "Read-only file system" in lines[0] and "remount it read-write" in lines[0], err
    # The next run trips on the marker left behind: one line, and it starts nothing.
    assert lines[2].startswith("no-docker: state dir: cannot remove the run marker"), err
    assert not (work / "ran").exists()
    assert lines[4].startswith("no-docker: state dir: cannot write"), err
    assert survivors == [], f"processes of the run outlived it: {survivors}"
