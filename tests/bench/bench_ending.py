"""Benchmark of the ending (DESIGN §10, issue 4). Prints one JSON document on stdout.

- ``plain``: CMD exits -> the run is proven empty (time of ``RunLifecycle.end()`` after bwrap
  exited), target <= 10 ms;
- ``bomb``: a fork bomb bounded by ``pids.max`` grown to N processes, ended and proven, target
  <= 250 ms for 1000; side by side with the kernel mechanisms alone on identical bombs:
  SIGKILL of the namespace init until its pidfd is readable, and ``cgroup.kill`` until
  ``populated 0``;
- ``pass``: cost of one proof pass per process with ``--extra`` more processes on the machine,
  target <= 15 us/process (psutil measured 35-45 us).

Everything runs in bounded cgroups and is killed at the end, whatever happens; where this user
cannot make a pids cgroup (an ordinary user without a delegated one) ``bomb`` and ``pass`` say
``skipped`` with the reason.
usage: bench_ending.py [--bomb N] [--extra N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: supervisor_trees

from no_docker.supervisor.ending import cgroup as cgroups  # noqa: E402
from no_docker.supervisor.ending.algorithm import wait_pidfds  # noqa: E402
from no_docker.supervisor.ending.membership import LiveTable  # noqa: E402
from no_docker.supervisor.ending.procfs import ProcFS  # noqa: E402
from no_docker.supervisor.ending.snapshot import take_pass, verdict  # noqa: E402
from nonroot import pids_limit_unavailable  # noqa: E402
from supervisor_trees import READY, Tree  # noqa: E402


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def bench_plain(repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        with Tree(f"{READY}; exit 0", max_pids=50) as tree:
            tree.life.reap(block=True)  # CMD (and with it bwrap's pid 2) exited
            t0 = time.perf_counter()
            report = tree.life.end()
            times.append(_ms(time.perf_counter() - t0))
            assert report.clean, report.reason
    return {"ms": _summary(times), "target_ms": 10}


def _grown_bomb(size: int) -> Tree:
    """A bash fork bomb grown until ``size`` processes live (pids.max leaves room for the
    zombies the v1 pids controller also counts)."""
    tree = Tree(f"( b() {{ b | b & }}; b ) 2>/dev/null & {READY}; sleep 1000",
                max_pids=size * 13 // 10).__enter__()
    deadline = time.monotonic() + 60
    while len(tree.life.cgroup.procs()) < size and time.monotonic() < deadline:
        time.sleep(0.01)
    return tree


def bench_bomb(size: int, repeat: int) -> dict:
    unbounded = pids_limit_unavailable()
    if unbounded is not None:  # a fork bomb is never lit without pids.max
        return {"skipped": unbounded}
    full, init_only, cg_only, sizes, passes = [], [], [], [], []
    for _ in range(repeat):
        tree = _grown_bomb(size)
        try:
            sizes.append(len(tree.life.cgroup.procs()))
            t0 = time.perf_counter()
            report = tree.life.end()
            full.append(_ms(time.perf_counter() - t0))
            passes.append(report.passes)
            assert report.clean, report.reason
        finally:
            tree.__exit__(None, None, None)
        tree = _grown_bomb(size)  # the kernel alone: SIGKILL of the namespace init
        try:
            t0 = time.perf_counter()
            signal.pidfd_send_signal(tree.life.init_pidfd, signal.SIGKILL)
            wait_pidfds([tree.life.init_pidfd], time.monotonic() + 30)
            init_only.append(_ms(time.perf_counter() - t0))
        finally:
            tree.__exit__(None, None, None)
        tree = _grown_bomb(size)  # the kernel alone: cgroup.kill
        try:
            t0 = time.perf_counter()
            tree.life.cgroup.kill()
            tree.life.cgroup.wait_empty(time.monotonic() + 30)
            cg_only.append(_ms(time.perf_counter() - t0))
        finally:
            tree.__exit__(None, None, None)
    return {"processes": _summary([float(s) for s in sizes]), "ended_and_proven_ms": _summary(full),
            "passes": _summary([float(p) for p in passes]),
            "compare_kill_namespace_init_only_ms": _summary(init_only),
            "compare_cgroup_kill_only_ms": _summary(cg_only), "target_ms": 250}


# "ok" only once every sleeper is asleep (not R in /proc/PID/stat): right after the fork loop,
# thousands of children are still running their way into pause() and compete with the timed
# pass for the two CPUs (measured: 2000 sleepers made the first rounds 2-3x slower).
EXTRA = ("import os, signal, time\nkids = []\nfor _ in range({n}):\n    pid = os.fork()\n"
         "    if pid == 0:\n        signal.pause()\n        os._exit(0)\n    kids.append(pid)\n"
         "for pid in kids:\n    with open('/proc/%d/stat' % pid, 'rb') as f:\n"
         "        while os.pread(f.fileno(), 512, 0).rsplit(b')', 1)[1].split()[0] == b'R':\n"
         "            time.sleep(0.001)\n"
         "print('ok', flush=True)\nsignal.pause()\n")


def bench_pass(extra: int, repeat: int) -> dict:
    run_id = f"bench-extra-{os.getpid()}"
    unbounded = pids_limit_unavailable()
    if unbounded is not None:  # thousands of sleepers only in a bounded cgroup of ours
        return {"skipped": unbounded}
    cg = cgroups.create(run_id, max_pids=extra + 20)
    if cg is None or cg.path is None:
        return {"skipped": "no writable cgroup for the extra processes"}
    r, w = os.pipe()
    try:
        cg.enter_self()  # the sleepers are born in a bounded cgroup of ours
        try:
            pid = os.posix_spawn(sys.executable, [sys.executable, "-c", EXTRA.format(n=extra)], os.environ,
                                 file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
        finally:
            cg.leave_self()
        os.close(w)
        w = -1
        assert os.read(r, 10).startswith(b"ok")
        with Tree(f"{READY}; sleep 1000", max_pids=20) as tree:
            fs = ProcFS()
            per_process, totals, seen, raw = [], [], [], []
            for _ in range(repeat):
                raw.append(_raw_syscalls_us())  # same syscalls, no logic: the machine's load now
                t0 = time.perf_counter()
                result = verdict(take_pass(LiveTable(fs, tree.life.namespace)), run_can_fork=True)
                elapsed = time.perf_counter() - t0
                totals.append(_ms(elapsed))
                seen.append(float(result.seen))
                per_process.append(round(elapsed / result.seen * 1e6, 3))
                assert result.members, "the run's own members must be seen"
            psutil_us = _psutil_per_process()
        return {"processes_seen": _summary(seen), "pass_ms": _summary(totals),
                "us_per_process": _summary(per_process),
                "raw_syscalls_only_us_per_process": _summary(raw),
                "psutil_process_iter_us_per_process": psutil_us,
                "target_us_per_process": 15}
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)
        sleepers = cg.procs()
        cg.kill()
        cg.wait_empty(time.monotonic() + 30)
        try:
            os.waitpid(pid, 0)
        except (ChildProcessError, UnboundLocalError):
            pass
        _wait_reaped(sleepers, time.monotonic() + 60)
        cg.remove(time.monotonic() + 10)


def _wait_reaped(pids: list[int], deadline: float) -> None:
    """Wait until the killed sleepers are reaped, not only dead. Orphaned by the kill, they are
    left to pid 1, which took over 2 s to reap 8000 zombies here: the next measurement would
    list them and run alongside the reaping."""
    pending = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [pid for pid in pending if os.path.exists(f"/proc/{pid}")]


def _raw_syscalls_us() -> float:
    """open + pread + readlink + pread + close of every process, nothing else."""
    n = 0
    t0 = time.perf_counter()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        n += 1
        try:
            fd = os.open(f"/proc/{entry.name}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            os.pread(fd, 512, 0)
            try:
                os.readlink(f"/proc/{entry.name}/ns/pid")
            except OSError:
                pass
            os.pread(fd, 512, 0)
        except OSError:
            pass
        finally:
            os.close(fd)
    return round((time.perf_counter() - t0) / n * 1e6, 3)


def _psutil_per_process() -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    t0 = time.perf_counter()
    n = sum(1 for _ in psutil.process_iter(["pid", "ppid", "status", "create_time"]))
    return round((time.perf_counter() - t0) / n * 1e6, 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bomb", type=int, default=1000)
    p.add_argument("--extra", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    if shutil.which("bwrap") is None:
        print(json.dumps({"skipped": "bubblewrap missing"}))
        return 0
    doc = {
        "bench": "ending", "kernel": os.uname().release, "cpus": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "plain_cmd_exit_to_proven": bench_plain(args.repeat),
        "fork_bomb": bench_bomb(args.bomb, max(1, args.repeat // 2)),
        "proof_pass": bench_pass(args.extra, args.repeat),
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
