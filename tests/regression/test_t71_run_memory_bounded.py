"""T-71: a run's memory is bounded and charged to the run, never to the supervisor.

Measured (issue 24): a run that filled its /tmp under memory pressure had the OOM killer take
the *supervisor* (killed by SIGKILL, the run's marker left), never CMD: each tmpfs of the run
was the kernel's default size (half the RAM), and tmpfs pages are in no process's RSS, so by
size alone the biggest process was the supervisor's Python.

The pressure is made local, never the machine's: each case runs the supervisor inside a v1
memory cgroup of its own with a 512 MiB limit (RAM + swap), below ours, and CMD writes 1 GiB
to /tmp. What must hold there:

1. ``--tmp-size 64M``: the write fails with ENOSPC, CMD's status (1) is the run's, nothing was
   OOM-killed and the cgroup's limit was never reached (``memory.failcnt`` 0).
2. No option at all (each tmpfs a quarter of the RAM, more than the 512 MiB): the OOM killer
   works inside the test's cgroup and takes the run's processes (``oom_score_adj`` 1000), not
   the supervisor (-900 where it has CAP_SYS_RESOURCE, else as inherited): the supervisor
   ends the run, removes its marker and exits itself, with a status of the run's (137: CMD
   was SIGKILLed).
3. ``--memory-max 128M``: the run's own memory cgroup (below the supervisor's) takes the OOM:
   the test's cgroup never came near its limit (its peak usage stays under 400 MiB) and the
   supervisor ends the run as in 2.
4. ``/dev`` (bwrap's tmpfs, which ``--size`` cannot reach) is read-only: 1 GiB to ``/dev/fill``
   fails at once (EROFS), nothing OOM-killed.

Root only (a v1 memory cgroup is made and the supervisor put in it); every process left in the
test's cgroup is SIGKILLed by pid and the cgroup removed, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ending_cases import cli, require_bwrap, runs_json
from no_docker.supervisor.ending import cgroup

LIMIT = 512 << 20
FILL = "head -c 1G /dev/zero > /tmp/fill"


@pytest.fixture
def pressure() -> Iterator[Path]:
    """A v1 memory cgroup with a 512 MiB limit, below ours; removed with all in it at the end."""
    require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("needs root: the case makes a v1 memory cgroup and puts the supervisor in it")
    parent = cgroup.v1_memory_parent()
    if parent is None or not Path(parent, "cgroup.procs").exists():
        pytest.skip("no v1 memory hierarchy here (/sys/fs/cgroup/memory)")
    box = Path(parent, f"nd-t71-{os.getpid()}-{time.monotonic_ns()}")
    box.mkdir()
    try:
        (box / "memory.limit_in_bytes").write_text(str(LIMIT))
        if (box / "memory.memsw.limit_in_bytes").exists():
            (box / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))
        yield box
    finally:
        _empty_and_remove(box)


def _empty_and_remove(box: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pids = [int(p) for d in cgroup.subtree(str(box)) for p in Path(d, "cgroup.procs").read_text().split()]
        if not pids:
            break
        for pid in pids:  # only what this test started is in it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for directory in cgroup.subtree(str(box)):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
    assert not box.exists(), f"{box} is left"


def _run_in(box: Path, args: list[str], cwd: Path) -> tuple[int, str, list[dict]]:
    """`no-docker run ARGS` born in BOX; (its status, stderr, the markers it left)."""
    procs = os.open(box / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    def enter() -> None:
        os.write(procs, b"0")

    proc = subprocess.Popen(cli("run", *args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, preexec_fn=enter)
    os.close(procs)
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    left = [r for r in runs_json() if r.get("owner_pid") == proc.pid]
    for row in left:  # a supervisor that was killed left its run: end it (this run only)
        subprocess.run(cli("end", row["run_id"]), capture_output=True, timeout=60)
    return proc.returncode, err.decode(errors="replace"), left


def _oom_kills(box: Path) -> int:
    for line in (box / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def _survived(code: int, err: str, left: list[dict]) -> None:
    assert code >= 0, f"the supervisor was killed by signal {-code}: {err}"
    assert "isolation proven" in err, f"the run did not start, CMD never ran: {err}"
    assert left == [], f"the run's marker was left: {left}"
    assert "ending not proven" not in err, err
    assert "0 left" in err, err


def test_a_bounded_tmp_fills_up_and_the_command_fails(pressure, tmp_path):
    code, err, left = _run_in(pressure, ["--tmp-size", "64M", "--", "sh", "-c", FILL], tmp_path)
    _survived(code, err, left)
    assert code == 1, err
    assert "No space left on device" in err, err
    assert _oom_kills(pressure) == 0, "something was OOM-killed"
    assert int((pressure / "memory.failcnt").read_text()) == 0, "the test's limit was reached"


def test_under_pressure_the_oom_killer_takes_the_run_not_the_supervisor(pressure, tmp_path):
    code, err, left = _run_in(pressure, ["--", "sh", "-c", FILL], tmp_path)
    _survived(code, err, left)
    assert _oom_kills(pressure) >= 1, "no OOM: the case did not make the pressure it is about"
    assert code == 128 + signal.SIGKILL, err


def test_memory_max_charges_the_run_to_its_own_cgroup(pressure, tmp_path):
    code, err, left = _run_in(pressure, ["--memory-max", "128M", "--", "sh", "-c", FILL], tmp_path)
    _survived(code, err, left)
    assert code == 128 + signal.SIGKILL, err
    peak = int((pressure / "memory.max_usage_in_bytes").read_text())
    assert peak < 400 << 20, f"the run's pages were charged beyond its own limit: peak {peak >> 20} MiB"
    assert not any(Path(d).name != "no-docker" for d in cgroup.subtree(str(pressure))[:-1]), \
        "the run's memory cgroup is left"


def test_dev_is_no_place_to_fill(pressure, tmp_path):
    script = "head -c 1G /dev/zero > /dev/fill"
    code, err, left = _run_in(pressure, ["--", "sh", "-c", script], tmp_path)
    _survived(code, err, left)
    assert code == 2, err  # sh: cannot create
    assert "Read-only file system" in err, err
    assert _oom_kills(pressure) == 0, "something was OOM-killed"
