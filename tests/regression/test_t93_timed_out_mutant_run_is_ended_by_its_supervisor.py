"""T-93: a mutant whose tests hang past cosmic-ray's timeout is ended by its run's supervisor,
every process of the run proven gone, and scored killed ("timeout") (issue 26 item 1).

cosmic-ray's own ``run_tests`` SIGKILLs the test command's process group on a timeout: with the
test command ``no-docker run -- pytest`` that kills the supervisor itself, which then can neither
end the run nor prove it ended; its marker stays for ``no-docker end``. The ``no-docker``
distributor sends SIGTERM to the supervisor instead (``run`` ends every process of the run on
SIGTERM, docs/supervision.md) and waits for it. Shown on a real run: a project whose one mutant
sleeps for ten minutes, timeout 5 s; afterwards ``no-docker runs`` (this test's own state dir)
lists no run, no process of the hung test is left, and the job is killed with output "timeout".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from isolation_cases import require_bwrap
from no_docker.supervisor.ending import procfs

BIN = Path(sys.executable).parent
ND = [sys.executable, "-m", "no_docker.supervisor.cli"]
# unique to this session: another suite on a shared machine runs its own T-93, and its hung
# children would look like ours to a scan of every process of the host
MARK = f"t93-hung-mutant-sleeps-{os.getpid()}-{time.time_ns()}"

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap,
              pytest.mark.skipif(not (BIN / "cosmic-ray").exists(),
                                 reason="cosmic-ray is not installed (the test extra has it)")]

CONFIG = f"""[cosmic-ray]
module-path = "pause.py"
timeout = 5.0
excluded-modules = []
test-command = "{sys.executable} -B -m pytest -x -q -p no:cacheprovider"

[cosmic-ray.distributor]
name = "no-docker"
"""
TEST = f"""import subprocess, sys, pause

def test_pause():
    # a child process too: the ending must take it with the rest of the run
    subprocess.run([sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))",
                    str(abs(pause.PAUSE) * 600), "{MARK}"], check=True)
"""


def mark_holders() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if MARK.encode() in f.read().split(b"\0"):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _described(pid: int) -> str:
    """What a failure shows of a process left: its state, parent, pids and uids (the
    supervisor's own /proc parsers)."""
    try:
        stat = procfs.parse_stat(Path(f"/proc/{pid}/stat").read_bytes())
        status = Path(f"/proc/{pid}/status").read_bytes()
    except OSError as error:
        return f"gone ({error.strerror})"
    return (f"{stat.comm.decode(errors='replace')} state={stat.state} ppid={stat.ppid} "
            f"nspid={procfs.parse_nspid(status)} uids={procfs.parse_uids(status)}")


def test_a_hung_mutant_is_ended_by_the_supervisor_and_scored_killed(tmp_path):
    require_bwrap()
    work = tmp_path / "project"
    (work / "tests").mkdir(parents=True)
    (work / "pause.py").write_text("PAUSE = 0\n")
    (work / "tests" / "check_pause.py").write_text(TEST)
    (work / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n'
                                         'python_files = ["check_*.py"]\n')
    (work / "session.toml").write_text(CONFIG)
    env = dict(os.environ)
    try:
        steps = [subprocess.run([str(BIN / "cosmic-ray"), *step], cwd=work, env=env, capture_output=True,
                                text=True, timeout=600)
                 for step in (["init", "session.toml", "s.sqlite"], ["exec", "session.toml", "s.sqlite"])]
        # first what the machine is left with, then what cosmic-ray recorded
        runs = subprocess.run([*ND, "runs", "--json"], env=env, capture_output=True, text=True, timeout=60)
        assert runs.returncode == 0, runs.stderr
        assert json.loads(runs.stdout) == [], f"a run was left behind: {runs.stdout}"
        deadline = time.monotonic() + 5
        while mark_holders() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: _described(pid) for pid in mark_holders()}
        assert not left, f"a process of the hung run is still alive: {left}"
        for done in steps:
            assert done.returncode == 0, done.stderr[-3000:]
    finally:
        # a run left behind (the weakened build) is this test's own (its private state dir): end it
        subprocess.run([*ND, "end", "--all"], env=env, capture_output=True, timeout=120)
    dump = subprocess.run([str(BIN / "cosmic-ray"), "dump", "s.sqlite"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    results = {item["job_id"]:
               result for item, result in map(json.loads, dump.stdout.splitlines())}
    timed_out = [r for r in results.values() if r and r["output"].startswith("timeout")]
    assert timed_out and {r["test_outcome"] for r in timed_out} == {"killed"}, results
