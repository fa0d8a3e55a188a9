"""T-70: a run without a cgroup whose member has a parent outside it is still ended and proven.

Found as an ordinary user (issue 28, T-34 as uid 1001): SIGTERM while the prover was checking
the held sandbox ended 2 runs of 8 with 125 after the whole end timeout ("the namespace init is
not shown dead") and kept their markers. The prover joins the run's pid namespace (setns) and
its checks fork: such a child is in the run but its parent is outside. Killed with the prover,
it is left to the nearest subreaper outside (find_new_reaper, kernel/exit.c): the supervisor,
which is one where there is no cgroup. The namespace init cannot exit before that zombie is
reaped (zap_pid_ns_processes), and nothing inside can reap it; root's runs have a cgroup whose
``populated 0`` ended the wait, so only ordinary users met it.

Here, deterministically, in a child interpreter (it becomes a subreaper, as such a supervisor
does): a run without a cgroup, a process forked after ``prover.join`` into the run's
namespaces, its parent gone, so that it is the supervisor's child; then the ending. Expected:
proven, within a second, nothing left in the run's pid namespace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ending_cases import require_bwrap

TESTS = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from supervisor_trees import READY, Tree
from no_docker.supervisor.isolation import prover

def field(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return [int(x) for x in line.split()[1:]]

out = {"me": os.getpid()}
with Tree(f"{READY}; sleep 1000", max_pids=None, use_cgroup=False, subreaper=True,
          end_timeout=3.0) as tree:
    out["subreaper"] = tree.life.is_subreaper
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:  # the prover's part: join the run, fork, die
        try:
            os.close(r)
            prover.join(tree.life.record.init.pid)
            child = os.fork()
            if child == 0:
                os.close(w)
                time.sleep(1000)
                os._exit(0)
            os.write(w, b"%d\n" % child)
        finally:
            os._exit(0)
    os.close(w)
    member = int(os.read(r, 64) or b"0")
    os.close(r)
    os.waitpid(middle, 0)
    time.sleep(0.05)
    out["member_ppid"] = field(member, "PPid")[0]
    out["member_nspid"] = field(member, "NSpid")
    t0 = time.monotonic()
    report = tree.life.end()
    out["seconds"] = round(time.monotonic() - t0, 3)
    out["clean"], out["reason"] = report.clean, report.reason
    out["left"] = tree.members_left()
    out["member_left"] = os.path.exists(f"/proc/{member}")
print(json.dumps(out))
"""


def test_a_member_left_to_the_supervisor_is_reaped_and_the_ending_proven():
    require_bwrap()
    done = subprocess.run([sys.executable, "-c", CHILD, str(TESTS)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-1500:]
    out = json.loads(done.stdout)
    assert out["subreaper"] is True, out
    # the set-up holds: a member of the run (not its init) whose parent is the supervisor
    assert out["member_ppid"] == out["me"] and len(out["member_nspid"]) == 2, out
    assert out["member_nspid"][-1] != 1, out
    assert out["clean"] is True, out["reason"]
    assert out["seconds"] < 1.0, out
    assert out["left"] == [] and out["member_left"] is False, out
