"""T-59: the supervisor never opens what a run left in the work dir through a link (issue 16,
item A2). A previous run replaced `.git/index` (or `.git/commondir`, `.git/config`) with a
symlink to a FIFO outside; the next run's supervisor opened it (following the link) before
checking it was a regular file, and opening a FIFO's read end wakes the writer blocked on it,
outside (a device could act). Every open of a run-writable path: lstat first, no link in any
component, O_NONBLOCK, regular files only, bounded reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, repo


@pytest.mark.parametrize("name", ["commondir", "config"])
def test_a_link_to_a_fifo_outside_is_never_opened(tmp_path, name):
    require_bwrap()
    work = repo(tmp_path / "work")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (work / ".git" / name).unlink(missing_ok=True)
    (work / ".git" / name).symlink_to(fifo)
    # Outside: a writer that blocks in open() until someone opens the FIFO's read end.
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'w').close()"],
                              start_new_session=True)
    try:
        time.sleep(0.2)
        assert writer.poll() is None, "the writer did not block"
        result = run(["--quiet", "--", "true"], cwd=work, env=GIT_ENV)
        assert result.returncode == 0, result.stderr
        time.sleep(0.2)
        assert writer.poll() is None, "the supervisor opened the FIFO outside through the run's link"
    finally:
        if writer.poll() is None:
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # release it
        try:
            writer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait(timeout=30)
