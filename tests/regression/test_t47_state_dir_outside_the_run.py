"""T-47: the supervisor never acts, as root, on a run marker a run could write (red-team round 2, A1).

The attack: ``NO_DOCKER_STATE_DIR=$PWD/.state no-docker run -- sh -c '<write a run.json for a
made-up run id whose cgroup is a victim's>'``; the next run refuses and names ``no-docker end
<id>``; the user runs it and root writes ``cgroup.kill`` into the victim's cgroup. Both halves
are shown closed, with a real victim process in a real cgroup outside every run:

1. a state dir inside the work dir (or a ``--rw`` root) is refused with 125 naming it, before
   CMD runs, so the run cannot plant anything;
2. a marker planted all the same (an older state dir a run could once write) names a cgroup
   that is not no-docker's own: ``end``, the next ``run`` and ``runs`` refuse or flag it and
   touch nothing; the victim lives and its cgroup stays.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ending_cases import alive_with_token, cli, kill_token, require_bwrap, token
from no_docker.supervisor.ending import cgroup as cgroups
from no_docker.supervisor.ending import markers
from no_docker.supervisor.ending.procfs import ProcFS


def _dead_owner() -> dict[str, int]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = ProcFS().stat(child.pid).start_time
    child.wait(timeout=30)
    return {"pid": child.pid, "start_time": start}


def _forged_record(run_id: str, victim_cgroup: str) -> str:
    return json.dumps({
        "run_id": run_id, "owner": _dead_owner(), "boot_id": ProcFS().boot_id(), "command": ["x"],
        "state": "running", "created": 0.0, "ns_id": None, "ns_inode": None, "ns_depth": None,
        "init": None, "launcher": None, "cgroup": {"v2": victim_cgroup, "pids_v1": None},
        "detail": "", "version": 1})


@pytest.fixture
def victim():
    """A process outside every run, alone in a cgroup of its own: (token, cgroup dir)."""
    require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("needs root to make the victim's cgroup (the attack is against a root supervisor)")
    parent = cgroups.v2_parent()
    if parent is None:
        pytest.skip("no writable cgroup v2 here: the attack needs a cgroup to aim at")
    tok = token()
    group = Path(parent) / f"t47-victim-{tok.replace('.', '-')}"
    group.mkdir()
    proc = subprocess.Popen(["sleep", tok], start_new_session=True)
    try:
        (group / "cgroup.procs").write_text(str(proc.pid))
        yield tok, str(group)
    finally:
        kill_token(tok)
        proc.wait(timeout=10)
        try:
            group.rmdir()
        except OSError:
            pass


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "NO_DOCKER_STATE_DIR": str(state)}


def test_state_dir_in_the_work_dir_is_refused_before_cmd(tmp_path, victim):
    tok, victim_cgroup = victim
    work = tmp_path / "work"
    state = work / ".state"
    state.mkdir(parents=True, mode=0o700)
    run_id = markers.new_run_id()
    plant = (f"mkdir -p .state/{run_id} && printf '%s' '{_forged_record(run_id, victim_cgroup)}' "
             f"> .state/{run_id}/run.json")
    result = subprocess.run(cli("run", "--", "sh", "-c", plant), cwd=work, env=_env(state),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 125, result.stderr
    assert f"state dir: {state} is inside {work}" in result.stderr
    assert not (state / run_id).exists(), "CMD ran although the state dir was the run's to write"
    # The same through a --rw root, and through a symlink into the work dir.
    (tmp_path / "link").symlink_to(work)
    other = tmp_path / "other"
    other.mkdir()
    for args, env_state in ((["--rw", str(work)], state),
                            (["--work", str(work)], tmp_path / "link" / ".state")):
        again = subprocess.run(cli("run", *args, "--", "true"), cwd=other, env=_env(env_state),
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 125, again.stderr
        assert "state dir:" in again.stderr and "which the run can write" in again.stderr
    # `end` of the forged run id, as the refusal of a weakened build would have told the user
    subprocess.run(cli("end", "--force", run_id), env=_env(state), capture_output=True, timeout=60)
    assert alive_with_token(tok), "the victim outside every run was killed"
    assert os.path.isdir(victim_cgroup)


def test_planted_marker_naming_a_foreign_cgroup_is_never_acted_on(tmp_path, victim):
    tok, victim_cgroup = victim
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    run_id = markers.new_run_id()
    (state / run_id).mkdir(mode=0o700)
    (state / run_id / "run.json").write_text(_forged_record(run_id, victim_cgroup))
    ended = subprocess.run(cli("end", run_id), env=_env(state), capture_output=True, text=True, timeout=60)
    assert ended.returncode == 125, ended.stderr
    assert "not no-docker's own cgroup" in ended.stderr
    work = tmp_path / "work"
    work.mkdir()
    refused = subprocess.run(cli("run", "--", "true"), cwd=work, env=_env(state), capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 125, refused.stderr
    assert "earlier runs ended" in refused.stderr and "not no-docker's own cgroup" in refused.stderr
    listed = subprocess.run(cli("runs", "--json"), env=_env(state), capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [r["state"] for r in json.loads(listed.stdout)] == ["corrupt"]
    assert alive_with_token(tok), "the victim outside every run was killed"
    assert os.path.isdir(victim_cgroup), "the victim's cgroup was removed"
    assert (state / run_id / "run.json").exists(), "the evidence was removed"
