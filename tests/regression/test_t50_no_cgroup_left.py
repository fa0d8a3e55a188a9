"""T-50: no cgroup of a run is left, child cgroups included, after a clean exit and after `end`.

Red-team finding (issue 16 item 10, issue 17 C): after a run that exited 0,
``.../no-docker/<run>/child`` (made from a user namespace inside the run) was left on the host;
the supervisor removed only the leaves it had made, and ``end`` the same.

T-48 takes that power from the run; here root (standing in for it) makes child cgroups below
the run's v2 leaf and v1 pids leaf and moves a process of the run into them. (1) The run exits
0: its cgroups and everything below them are gone, the marker with them. (2) A leftover run
(its supervisor SIGKILLed) with such children: ``no-docker end RUN_ID`` removes them all.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from ending_cases import (
    Supervisor,
    alive_with_token,
    cgroups_left,
    cli,
    end_all,
    kill_token,
    orphaned_run,
    require_bwrap,
    runs_json,
    settled_without,
    token,
)
from no_docker.supervisor.ending import cgroup


def _require_cgroups() -> None:
    require_bwrap()
    if cgroup.v2_parent() is None or not Path(cgroup.V1_PIDS_ROOT, "cgroup.procs").exists():
        pytest.skip("needs a writable cgroup2 hierarchy and the v1 pids controller")


def _sleeper(tok: str) -> int:
    """The one `sleep TOKEN` of the run (the supervisor's and bwrap's argv carry TOKEN too)."""
    found = []
    for pid in alive_with_token(tok):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{tok}\0".encode():
                found.append(pid)
    assert len(found) == 1, found
    return found[0]


def _nest(row: dict, pid: int) -> list[Path]:
    """Child cgroups below each of the run's leaves, PID moved into the deepest of each."""
    made = []
    for leaf in (row["cgroup"]["v2"], row["cgroup"]["pids_v1"]):
        deepest = Path(leaf) / "child" / "grandchild"
        deepest.mkdir(parents=True)
        (Path(leaf) / "empty-child").mkdir()
        (deepest / "cgroup.procs").write_text(str(pid))
        made.append(Path(leaf))
    return made


def _clean(leaves: list[Path]) -> None:
    for leaf in leaves:
        for directory in cgroup.subtree(str(leaf)):
            with contextlib.suppress(OSError):
                Path(directory).rmdir()


def test_child_cgroups_are_gone_after_a_clean_exit(tmp_path):
    _require_cgroups()
    tok = token()
    script = f"sleep {tok} & echo ready; while [ ! -e go ]; do sleep 0.02; done; exit 0"
    sup = Supervisor(["--max-pids", "64", "--", "sh", "-c", script], cwd=tmp_path)
    leaves: list[Path] = []
    try:
        sup.wait_line("ready")
        row = next(r for r in runs_json() if r["owner_pid"] == sup.pid)
        leaves = _nest(row, _sleeper(tok))
        (tmp_path / "go").touch()
        code, err = sup.finish()
        assert code == 0, err
        assert "0 left" in err, err
        assert settled_without(tok) == []
        assert cgroups_left(row["run_id"]) == [], "a cgroup of the run, or one below it, is left"
        assert runs_json() == [], "the run's marker was not removed"
    finally:
        sup.kill()
        kill_token(tok)
        end_all()
        _clean(leaves)


def test_end_removes_child_cgroups_of_a_leftover_run(tmp_path):
    _require_cgroups()
    tok = token()
    leaves: list[Path] = []
    try:
        run_id = orphaned_run(f"sleep {tok}")
        row = next(r for r in runs_json() if r["run_id"] == run_id)
        leaves = _nest(row, _sleeper(tok))
        ended = subprocess.run(cli("end", run_id), capture_output=True, text=True, timeout=60)
        assert ended.returncode == 0, ended.stderr
        assert settled_without(tok) == []
        assert cgroups_left(run_id) == [], "a cgroup of the run, or one below it, is left after end"
        assert runs_json() == []
    finally:
        kill_token(tok)
        end_all()
        _clean(leaves)
