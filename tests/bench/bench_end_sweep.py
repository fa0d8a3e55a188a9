"""Ending against process count (issue 8): no-docker's end-and-prove next to the kernel alone.

Three measurements, each printed in one JSON document:

``sweep``     a run whose namespace holds N sleeping processes (N = 0 ... 3000) is ended by the
              supervisor, three ways on identical trees, alternated round by round:
              ``no_docker`` = ``RunLifecycle.end()`` (SIGKILL of the namespace init through its
              pidfd, ``cgroup.kill``, proof passes, marker and cgroup removed);
              ``init_only`` = SIGKILL of the namespace init alone, until its pidfd is readable
              (the kernel's ``zap_pid_ns_processes``; nothing proven);
              ``cgroup_kill_only`` = ``cgroup.kill`` alone, until ``populated 0``.
``cmd_exit``  CMD exits and leaves processes behind (none; a 100-, 1000-, 3000-process tree;
              a fork bomb grown to ``pids.max``; 4 pid-hoppers). Timed from CMD's own clock
              reading just before it exits (bash ``$EPOCHREALTIME``, no fork) to the proof:
              ``kernel_ms`` until bwrap exited (the kernel emptied the namespace once its init
              lost CMD), ``proven_ms`` until ``RunLifecycle.end()`` returned clean.
``e2e``       the same through the real ``no-docker run`` (probe included): CMD prints its clock
              reading as its last act; timed until ``no-docker run`` has exited.

Trees run under ``bwrap --dev-bind / / --unshare-pid`` in a bounded cgroup (tests/supervisor_trees.py),
the fork bomb only there (``pids.max``); everything is killed at the end, whatever happens.

usage: bench_end_sweep.py [--sizes 0,10,100,...] [--repeat N] [--quick] [--only sweep,cmd_exit,e2e]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: supervisor_trees

from no_docker.supervisor.ending.algorithm import wait_pidfds  # noqa: E402
from nonroot import pids_limit_unavailable  # noqa: E402
from supervisor_trees import READY, Tree  # noqa: E402

SWEEP_SIZES = (0, 10, 100, 300, 1000, 2000, 3000)
QUICK_SIZES = (0, 10, 30)
VARIANTS = ("no_docker", "init_only", "cgroup_kill_only")
# /usr/bin/python3, not whatever python3 is first on PATH (a pyenv shim is a bash script).
HOPPER = ("/usr/bin/python3 -S -c 'import os\nwhile True:\n    if os.fork(): os._exit(0)\n' "
          "</dev/null >/dev/null 2>&1 &")
BOMB = "( b() { b | b & }; b ) 2>/dev/null &"
NO_DOCKER = Path(sys.executable).with_name("no-docker")


def spawn_sleepers(n: int) -> str:
    """bash that leaves ``n`` sleeping children (``sleep`` execs: real processes, tiny RSS)."""
    return f"for ((i=0; i<{n}; i++)); do sleep 1000 & done" if n else ":"


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# --- sweep: the supervisor ends a live run of N processes -----------------------------------


def _members(tree: Tree) -> int:
    return len(tree.life.cgroup.procs()) if tree.life.cgroup is not None else -1


def end_once(variant: str, n: int) -> tuple[float, int, dict]:
    """Build a tree of ``n`` sleepers, end it the ``variant`` way; (ms, processes, details)."""
    tree = Tree(f"{spawn_sleepers(n)}; {READY}; sleep 1000", max_pids=n + 50).__enter__()
    try:
        processes = _members(tree)
        life = tree.life
        t0 = time.perf_counter()
        if variant == "no_docker":
            report = life.end()
            elapsed = time.perf_counter() - t0
            if not report.clean:
                raise RuntimeError(f"no-docker end not clean with {n} processes: {report.reason}")
            return _ms(elapsed), processes, {"passes": report.passes, "killed": report.killed}
        if variant == "init_only":
            signal.pidfd_send_signal(life.init_pidfd, signal.SIGKILL)
            if not wait_pidfds([life.init_pidfd], time.monotonic() + 30):
                raise RuntimeError("namespace init did not exit within 30 s")
        else:
            life.cgroup.kill()
            if not life.cgroup.wait_empty(time.monotonic() + 30):
                raise RuntimeError("cgroup still populated after 30 s")
        return _ms(time.perf_counter() - t0), processes, {}
    finally:
        tree.__exit__(None, None, None)


def bench_sweep(sizes: tuple[int, ...], repeat: int) -> dict:
    rows = []
    errors: list[str] = []
    for n in sizes:
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        counts: list[float] = []
        passes: list[float] = []
        for _ in range(repeat):
            for variant in VARIANTS:  # alternated: load on this machine hits all three alike
                try:
                    ms, processes, details = end_once(variant, n)
                except (RuntimeError, OSError) as err:
                    errors.append(f"{variant} {n}: {err}")
                    continue
                times[variant].append(ms)
                counts.append(float(processes))
                if "passes" in details:
                    passes.append(float(details["passes"]))
        rows.append({"sleepers": n, "processes": summary(counts), "passes": summary(passes),
                     **{f"{v}_ms": summary(times[v]) for v in VARIANTS}})
    return {"what": "supervisor ends a live run of N processes", "repeat": repeat, "rows": rows,
            "errors": errors}


# --- cmd_exit: CMD exits, leaving processes; timed from CMD's own clock ---------------------


def _case_script(case: str, n: int, go: Path, stamp: Path) -> tuple[str, int]:
    """(bash script, pids.max) for one case; CMD waits on the ``go`` fifo, stamps, exits."""
    tail = f'{READY}; read -r _ < {go}; printf %s "$EPOCHREALTIME" > {stamp}; exit 0'
    if case == "bomb":
        return f"{BOMB} {tail}", n
    if case == "hoppers":
        return f"{HOPPER * n} {tail}", 50
    return f"{spawn_sleepers(n)}; {tail}", n + 50


def _grow(tree: Tree, case: str, n: int) -> None:
    """Wait until the bomb fills ``pids.max``, or give hoppers a moment to start hopping."""
    if case == "bomb":
        current = Path(tree.life.cgroup.pids_v1, "pids.current")
        deadline = time.monotonic() + 60
        while int(current.read_text()) < n - 5 and time.monotonic() < deadline:
            time.sleep(0.02)
    elif case == "hoppers":
        time.sleep(0.3)


def cmd_exit_once(case: str, n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-end-") as tmp:
        go, stamp = Path(tmp) / "go", Path(tmp) / "stamp"
        os.mkfifo(go)
        script, max_pids = _case_script(case, n, go, stamp)
        tree = Tree(script, max_pids=max_pids).__enter__()
        try:
            _grow(tree, case, n)
            processes = _members(tree)
            fd = os.open(go, os.O_WRONLY)  # CMD is blocked reading it: this releases it
            os.write(fd, b"\n")
            os.close(fd)
            tree.life.reap(block=True)
            bwrap = time.time()
            # The outer bwrap exits as soon as its init reports CMD's status; the namespace is
            # empty only once the init itself has exited (after zap_pid_ns_processes). Waiting
            # for that here changes nothing for end(), which waits for the same pidfd first.
            wait_pidfds([tree.life.init_pidfd], time.monotonic() + 30)
            init = time.time()
            report = tree.life.end()
            proven = time.time()
            if not report.clean:
                raise RuntimeError(f"{case}: not clean: {report.reason}")
            exited = float(stamp.read_text())
        finally:
            tree.__exit__(None, None, None)
    return {"processes": processes, "bwrap_exit_ms": _ms(bwrap - exited), "kernel_ms": _ms(init - exited),
            "proven_ms": _ms(proven - exited), "passes": report.passes}


CMD_EXIT_CASES = (("plain", 0), ("tree", 100), ("tree", 1000), ("tree", 3000), ("bomb", 1000),
                  ("hoppers", 4))
QUICK_CMD_EXIT_CASES = (("plain", 0), ("tree", 30), ("bomb", 40), ("hoppers", 2))


def _label(case: str, n: int) -> str:
    return {"plain": "plain", "tree": f"tree_{n}", "bomb": f"fork_bomb_{n}", "hoppers": f"hoppers_{n}"}[case]


def bench_cmd_exit(cases: tuple[tuple[str, int], ...], repeat: int) -> dict:
    samples: dict[str, list[dict]] = {_label(c, n): [] for c, n in cases}
    errors: list[str] = []
    for _ in range(repeat):
        for case, n in cases:
            try:
                samples[_label(case, n)].append(cmd_exit_once(case, n))
            except (RuntimeError, OSError, ValueError) as err:
                errors.append(f"{_label(case, n)}: {err}")
    return {"what": "CMD exits leaving processes -> run proven empty (RunLifecycle)", "repeat": repeat,
            "errors": errors,
            "cases": {label: {key: summary([float(s[key]) for s in runs])
                              for key in ("processes", "bwrap_exit_ms", "kernel_ms", "proven_ms", "passes")}
                      for label, runs in samples.items()}}


# --- e2e: the same through the real `no-docker run` -----------------------------------------


def e2e_once(case: str, n: int, cwd: Path) -> dict:
    spawn = HOPPER * n if case == "hoppers" else spawn_sleepers(n) + ";"
    script = f'{spawn} printf "%s\\n" "$EPOCHREALTIME"; exit 0'
    started = time.time()
    done = subprocess.run([str(NO_DOCKER), "run", "--quiet", "--", "/bin/bash", "-c", script], cwd=cwd,
                          capture_output=True, timeout=120)
    finished = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"no-docker run ({case} {n}) exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace')[-300:]}")
    exited = float(done.stdout.split()[-1])
    return {"cmd_exit_to_supervisor_exit_ms": _ms(finished - exited), "total_ms": _ms(finished - started)}


E2E_CASES = (("plain", 0), ("tree", 100), ("tree", 1000), ("tree", 3000), ("hoppers", 4))
QUICK_E2E_CASES = (("plain", 0), ("tree", 30))


def bench_e2e(cases: tuple[tuple[str, int], ...], repeat: int) -> dict:
    if not NO_DOCKER.exists():
        return {"skipped": f"{NO_DOCKER} missing"}
    samples: dict[str, list[dict]] = {_label(c, n): [] for c, n in cases}
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        for _ in range(repeat):
            for case, n in cases:
                try:
                    samples[_label(case, n)].append(e2e_once(case, n, Path(tmp)))
                except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as err:
                    errors.append(f"{_label(case, n)}: {err}")
    return {"errors": errors, "repeat": repeat,
            "what": "no-docker run: CMD's last clock reading -> no-docker run exited (fork bomb: "
                    "only in the bounded harness above, `run` has no pids limit)",
            "cases": {label: {key: summary([float(s[key]) for s in runs])
                              for key in ("cmd_exit_to_supervisor_exit_ms", "total_ms")}
                      for label, runs in samples.items()}}


def collect(*, quick: bool = False, repeat: int | None = None, sizes: tuple[int, ...] | None = None,
            only: tuple[str, ...] = ("sweep", "cmd_exit", "e2e")) -> dict:
    if shutil.which("bwrap") is None:
        return {"bench": "end_sweep", "skipped": "bubblewrap missing"}
    unbounded = pids_limit_unavailable()
    if unbounded is not None:  # members are counted from the run's pids cgroup; bombs need pids.max
        return {"bench": "end_sweep", "skipped": unbounded}
    repeat = repeat or (1 if quick else 5)
    doc: dict = {"bench": "end_sweep", "cpus": os.cpu_count(), "kernel": os.uname().release}
    if "sweep" in only:
        doc["sweep"] = bench_sweep(sizes or (QUICK_SIZES if quick else SWEEP_SIZES), repeat)
    if "cmd_exit" in only:
        doc["cmd_exit"] = bench_cmd_exit(QUICK_CMD_EXIT_CASES if quick else CMD_EXIT_CASES, repeat)
    if "e2e" in only:
        doc["e2e"] = bench_e2e(QUICK_E2E_CASES if quick else E2E_CASES, repeat)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", help="comma-separated sleeper counts for the sweep")
    p.add_argument("--repeat", type=int)
    p.add_argument("--quick", action="store_true", help="tiny sizes, one round (the smoke test)")
    p.add_argument("--only", default="sweep,cmd_exit,e2e")
    args = p.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None
    except ValueError:
        p.error(f"--sizes: not a list of integers: {args.sizes!r}")
    if (args.repeat is not None and args.repeat < 1) or (sizes and min(sizes) < 0):
        p.error("--repeat must be >= 1 and --sizes >= 0")
    only = tuple(args.only.split(","))
    unknown = set(only) - {"sweep", "cmd_exit", "e2e"}
    if unknown:
        p.error(f"--only: unknown part(s) {sorted(unknown)}")
    print(json.dumps(collect(quick=args.quick, repeat=args.repeat, sizes=sizes, only=only), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
