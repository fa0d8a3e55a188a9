"""T-73: a run cannot make `end` or the stale check act on another, live run.

Red-team review (issue 24): a run whose writable area held *another* state dir of the same
user planted there a copy of a live run's marker with a dead owner. New runs with that state
dir refused, naming `no-docker end FORGED`, and that command, as advised, SIGKILLed the live
run's init (it is pid 1 of the namespace the copy names, so the init check passed). Now:
- a run is refused when any of our well-known state dirs that exists lies in what it can
  write, not only its own;
- a marker naming the sandbox of a run whose supervisor is alive is never acted on: the stale
  check passes it by (it is removed once that run's namespace is gone), `end` refuses it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

from ending_cases import Supervisor, cli, kill_token, require_bwrap, run_to_end, runs_json, token


def test_a_run_that_could_write_another_of_our_state_dirs_is_refused(tmp_path, monkeypatch):
    require_bwrap()
    runtime = tmp_path / "xdg"
    (runtime / "no-docker").mkdir(parents=True)
    runtime.chmod(0o700)
    (runtime / "no-docker").chmod(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # its no-docker/ is a state dir of ours
    result = run_to_end(["--work", str(runtime), "--", "true"], cwd=tmp_path)
    assert result.returncode == 125, result.stderr
    assert f"{runtime}/no-docker is inside {runtime}, which the run can write" in result.stderr
    # the control: the same run with that dir out of its reach
    shutil.rmtree(runtime / "no-docker")
    assert run_to_end(["--work", str(runtime), "--", "true"], cwd=tmp_path).returncode == 0


def test_a_copy_of_a_live_runs_marker_is_never_acted_on(tmp_path):
    require_bwrap()
    tok = token()
    live = Supervisor(["--", "sh", "-c", f"echo ready; sleep {tok}"], cwd=tmp_path)
    try:
        live.wait_line("ready")
        [row] = runs_json()
        state = os.environ["NO_DOCKER_STATE_DIR"]
        with open(os.path.join(state, row["run_id"], "run.json")) as f:
            record = json.load(f)
        forged_id = "20261201T000001-0badc0de"
        # (no cgroup: a copy naming the live run's cgroups is corrupt, they must be named for its id)
        record.update(run_id=forged_id, owner={"pid": 999999, "start_time": 1}, cgroup=None)
        os.mkdir(os.path.join(state, forged_id), 0o700)
        with open(os.path.join(state, forged_id, "run.json"), "w") as f:
            json.dump(record, f)
        # new runs are not refused by the copy, and `end` does not act on it
        assert run_to_end(["--", "true"], cwd=tmp_path).returncode == 0
        for args in (["end", forged_id], ["end", "--force", forged_id]):
            ended = subprocess.run(cli(*args), capture_output=True, text=True, timeout=60)
            assert ended.returncode == 1, ended.stderr
            assert f"names the sandbox of run {row['run_id']}" in ended.stderr
        assert live.proc.poll() is None, "the live run was ended through the copy of its marker"
        # once the live run is over, the copy is an empty stale marker: removed by the next run
        live.signal(signal.SIGTERM)
        code, err = live.finish()
        assert code == 143, err
        assert run_to_end(["--", "true"], cwd=tmp_path).returncode == 0
        assert runs_json() == []
    finally:
        live.kill()
        kill_token(tok)
