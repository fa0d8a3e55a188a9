"""T-49: a sandbox init that was frozen (or moved) does not hang the ending.

Red-team finding (issue 17 C): from a user namespace made inside a run, the sandbox's init was
moved into a child cgroup and frozen; when CMD exited, the init could not reap it, bwrap never
exited, and the supervisor, which watched bwrap alone, waited forever.

T-48 takes that power from the run; this case does the freezing from outside (root, standing
in for the run) and shows the ending no longer depends on the init: once CMD is gone, bwrap
must follow within ``--end-timeout``, else the run is ended all the same. Expected: exit 125
with a line saying why, every process of the run gone, the child cgroup removed with the
run's own, no marker left; within seconds, not never. And the run's whole cgroup frozen
(CMD with it, so CMD never exits): the supervisor sees it in ``cgroup.events`` and ends the
run at once, 125.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from ending_cases import (
    Supervisor,
    cgroups_left,
    end_all,
    kill_token,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)
from no_docker.supervisor.ending import cgroup

# CMD waits for the test's go-ahead, so the init is frozen before CMD exits, never after.
SCRIPT = "sleep {tok} & echo ready; while [ ! -e go ]; do sleep 0.02; done; exit 0"


def test_a_frozen_init_does_not_hang_the_ending(tmp_path):
    require_bwrap()
    if cgroup.v2_parent() is None:
        pytest.skip("needs a writable cgroup2 hierarchy (the run's leaf, where the init is frozen)")
    tok = token()
    sup = Supervisor(["--end-timeout", "1", "--", "sh", "-c", SCRIPT.format(tok=tok)], cwd=tmp_path)
    frozen: Path | None = None
    try:
        sup.wait_line("ready")
        row = next(r for r in runs_json() if r["owner_pid"] == sup.pid)
        frozen = Path(row["cgroup"]["v2"]) / "frozen-by-test"
        frozen.mkdir()
        (frozen / "cgroup.procs").write_text(str(row["init_pid"]))
        (frozen / "cgroup.freeze").write_text("1")
        deadline = time.monotonic() + 5
        while "frozen 1" not in (frozen / "cgroup.events").read_text():
            assert time.monotonic() < deadline, "the init did not freeze"
            time.sleep(0.01)
        (tmp_path / "go").touch()
        # Unfixed, it never returns (killed after 10 s: a failure). Fixed: 1 s + the ending.
        code, err = sup.finish(timeout=10)
        assert code == 125, err
        assert "the sandbox's init did not end within 1 s of the command" in err, err
        assert "0 left" in err, err
        assert settled_without(tok) == [], "a process of the run outlived it"
        assert cgroups_left(row["run_id"]) == [], "the run's cgroups (and the frozen child) are left"
        assert runs_json() == [], "the run's marker was not removed"
    finally:
        if frozen is not None:
            with contextlib.suppress(OSError):
                (frozen / "cgroup.freeze").write_text("0")  # thaw, so that everything can end
        sup.kill()
        kill_token(tok)
        end_all()
        if frozen is not None:
            for directory in cgroup.subtree(str(frozen.parent)):
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()


def test_a_frozen_run_cgroup_does_not_hang_the_run(tmp_path):
    """The run's whole cgroup frozen (bwrap, its init and CMD with it): CMD never exits, so only
    the cgroup tells; the run is ended at once, 125."""
    require_bwrap()
    if cgroup.v2_parent() is None:
        pytest.skip("needs a writable cgroup2 hierarchy (the run's leaf, which is frozen)")
    tok = token()
    sup = Supervisor(["--", "sh", "-c", SCRIPT.format(tok=tok)], cwd=tmp_path)
    leaf: Path | None = None
    try:
        sup.wait_line("ready")
        row = next(r for r in runs_json() if r["owner_pid"] == sup.pid)
        leaf = Path(row["cgroup"]["v2"])
        (leaf / "cgroup.freeze").write_text("1")
        code, err = sup.finish(timeout=10)  # unfixed: CMD is frozen too, and never exits
        assert code == 125, err
        assert "the run's cgroup was frozen while it ran" in err, err
        assert "0 left" in err, err
        assert settled_without(tok) == [], "a process of the run outlived it"
        assert cgroups_left(row["run_id"]) == []
        assert runs_json() == []
    finally:
        if leaf is not None:
            with contextlib.suppress(OSError):
                (leaf / "cgroup.freeze").write_text("0")
        sup.kill()
        kill_token(tok)
        end_all()
        if leaf is not None:
            for directory in cgroup.subtree(str(leaf)):
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()
