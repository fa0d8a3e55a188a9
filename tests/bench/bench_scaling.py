"""Scaling and start-up cost of ``no-docker run`` (issue 8). Prints one JSON document.

``import_time``  ``python -X importtime`` of ``no-docker run --quiet -- true``: total of the
                 self times, and the costliest modules, next to a bare interpreter's.
``startup_breakdown``  where the start-up time of ``no-docker run -- true`` goes, alternated
                 round by round: interpreter start with the editable venv's site (setuptools'
                 finder) and with a regular install's, ``python -I -S``, bare bwrap with
                 no-docker's flags running ``true`` and ``python -I -S`` (the first design's
                 floor), ``no-docker run`` from the editable venv (a regular install's, bare
                 bwrap's and firejail's side by side are the start-up part's, bench_run.py).
``sequential``   N runs one after another (default 1000, ``--sequential N``), each a fresh
                 ``no-docker run --quiet -- true`` with a private state dir: is run k slower than
                 run 1 (first vs last tenth, least-squares slope)? After them: marker directories
                 left in the state dir, run cgroups (``*/no-docker/<id>``) left under
                 /sys/fs/cgroup, processes of the runs still alive (the bench is a child
                 subreaper: whatever a run leaves behind becomes its child; ``orphans_reaped``
                 counts the dead ones, bwrap's namespace init among them, one per run).
``in_process``   ``run.main()`` called M times in one interpreter: open fds and RSS before and after
                 (a leak there is a leak per run, invisible to fresh processes).
``concurrent``   8 runs at once pinned to 2 CPUs, each CMD leaving 20 sleepers behind: all must
                 exit 0 with nothing of them left (no sleeper, marker, cgroup or other process);
                 wall time of the batch next to one run alone.

``sequential`` and ``concurrent`` start the regular (non-editable) install of this tree
(tests/bench/regular_install.py), as ``bench_run.py`` does; the import figures show both installs.

usage: bench_scaling.py [--quick] [--sequential N] [--in-process M] [--concurrent K] [--only ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_run  # noqa: E402  (the bare bwrap argv no-docker builds; orphan reaping)
import regular_install  # noqa: E402

NO_DOCKER = Path(sys.executable).with_name("no-docker")
REPO = Path(__file__).resolve().parents[2]
CGROUP_ROOT = Path("/sys/fs/cgroup")
# A duration no one else uses: the sleepers of the concurrent runs are counted by it.
SLEEPER_ARG = "987653"
PARTS = ("import_time", "startup_breakdown", "sequential", "in_process", "concurrent")


def _round(x: float) -> float:
    return round(x, 3)


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"median": _round(statistics.median(values)), "min": _round(min(values)),
            "max": _round(max(values)), "n": len(values)}


def parse_importtime(stderr: str) -> list[tuple[int, int, int, str]]:
    """``-X importtime`` lines -> (self_us, cumulative_us, depth, module); other lines skipped."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            self_us, cumulative, name = line[len("import time:"):].split("|", 2)
            depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
            rows.append((int(self_us), int(cumulative), depth, name.strip()))
        except ValueError:
            continue
    return rows


def linear_slope(ys: list[float]) -> float:
    """Least-squares slope of ys against 0..n-1 (0 for fewer than 2 points)."""
    n = len(ys)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, statistics.fmean(ys)
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(ys))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def run_cgroups() -> set[str]:
    """Every ``<...>/no-docker/<run id>`` cgroup directory, all hierarchies."""
    found: set[str] = set()
    if not CGROUP_ROOT.is_dir():
        return found
    for top, dirs, _ in os.walk(CGROUP_ROOT):
        depth = top.count("/") - str(CGROUP_ROOT).count("/")
        if os.path.basename(top) == "no-docker":
            found.update(os.path.join(top, d) for d in dirs)
            dirs[:] = []
        elif depth >= 4:
            dirs[:] = []
    return found


def markers_in(state: Path) -> int:
    return sum(1 for p in state.iterdir() if p.is_dir()) if state.is_dir() else 0


def sleepers_alive() -> int:
    """Processes running ``sleep SLEEPER_ARG`` anywhere on the machine (zombies excluded)."""
    wanted = f"sleep\0{SLEEPER_ARG}\0".encode()
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if f.read().endswith(wanted):
                    count += 1
        except OSError:
            continue
    return count


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "NO_DOCKER_STATE_DIR": str(state)}


# --- import time ------------------------------------------------------------------------------


def bench_import_time(repeat: int, cwd: Path, installed: Path | None) -> dict:
    """Imports of ``no-docker run -- true``, in the editable venv and in a regular install
    (INSTALLED, its console script; None when it could not be built: no such figure)."""
    totals, regular, walls, refs = [], [], [], []
    last: list[tuple[int, int, int, str]] = []
    for _ in range(repeat):
        argv = [sys.executable, "-X", "importtime", str(NO_DOCKER), "run", "--quiet", "--", "true"]
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            return {"error": f"exit {done.returncode}: {done.stderr[-300:]}"}
        last = parse_importtime(done.stderr)
        totals.append(sum(r[0] for r in last) / 1000)
        if installed is not None:
            python = str(installed.with_name("python3"))
            argv = [python, "-X", "importtime", str(installed), "run", "--quiet", "--", "true"]
            done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
            regular.append(sum(r[0] for r in parse_importtime(done.stderr)) / 1000)
        t0 = time.perf_counter()
        subprocess.run([str(NO_DOCKER), "run", "--quiet", "--", "true"], cwd=cwd, check=True,
                       capture_output=True, timeout=60)
        walls.append((time.perf_counter() - t0) * 1000)
        ref = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True,
                             text=True, timeout=60)
        refs.append(sum(r[0] for r in parse_importtime(ref.stderr)) / 1000)
    top = sorted((r for r in last if r[2] == 0), key=lambda r: -r[1])[:12]
    ours = sorted((r for r in last if "no_docker" in r[3]), key=lambda r: -r[0])[:10]
    return {"imports_ms": summary(totals),
            **({"regular_install_imports_ms": summary(regular)} if regular else {}),
            "python_c_pass_imports_ms": summary(refs),
            "run_true_wall_ms": summary(walls), "modules": len(last),
            "top_level_by_cumulative_us": [{"module": m, "cumulative_us": c, "self_us": s}
                                           for s, c, _, m in top],
            "no_docker_modules_by_self_us": [{"module": m, "self_us": s} for s, _, _, m in ours]}


# --- where the start-up time goes -------------------------------------------------------------


FLOOR_SPAWN = ("import os, sys; argv = sys.argv[1:]; pid = os.posix_spawn(argv[0], argv, os.environ); "
               "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))")


def breakdown_commands(cwd: Path, installed: Path | None) -> dict[str, list[str]]:
    """The pieces of a start-up, alternated. ``no-docker run`` from a regular install, bare bwrap
    and firejail side by side are the start-up part's (bench_run.py), not measured again here.
    INSTALLED None (the regular install could not be built): its rows are left out."""
    bwrap = bench_run.bare_bwrap_argv(cwd)
    probe_python = os.path.realpath(sys.executable)
    cmds = {
        "python_c_pass_editable_venv": [sys.executable, "-c", "pass"],
        "python_I_S_c_pass": [probe_python, "-I", "-S", "-c", "pass"],
        "bwrap_same_flags_true": bwrap,
        "bwrap_same_flags_python_I_S": [*bwrap[:-1], probe_python, "-I", "-S", "-c", "pass"],
        "no_docker_editable_venv": [str(NO_DOCKER), "run", "--quiet", "--", "true"],
    }
    if installed is not None:
        regular_python = str(installed.with_name("python3"))
        cmds["python_c_pass_regular_venv"] = [regular_python, "-c", "pass"]
        # The floor of the first design, nothing but its three programs: a regular install's
        # interpreter (site included) starts bwrap with no-docker's flags, which starts a
        # `python -I -S`; no listing, no cgroup, no marker, no checks.
        cmds["floor_python_bwrap_python_I_S"] = [regular_python, "-c", FLOOR_SPAWN, *bwrap[:-1],
                                                 probe_python, "-I", "-S", "-c", "pass"]
    return cmds


def bench_startup_breakdown(runs: int, warmup: int, cwd: Path, installed: Path | None) -> dict:
    cmds = breakdown_commands(cwd, installed)
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    errors: dict[str, str] = {}
    for round_ in range(warmup + runs):
        for name, argv in cmds.items():  # alternated, one of each per round
            if name in errors:
                continue
            t0 = time.perf_counter()
            done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  timeout=120)
            ms = (time.perf_counter() - t0) * 1000
            if done.returncode != 0:
                errors[name] = f"exit {done.returncode}: {done.stderr.decode(errors='replace')[-200:]}"
            elif round_ >= warmup:
                samples[name].append(ms)
    medians = {name: _round(statistics.median(v)) for name, v in samples.items() if v}
    return {"runs": runs, "warmup": warmup, "median_ms": medians,
            "min_ms": {name: _round(min(v)) for name, v in samples.items() if v}, "errors": errors,
            "load_average": os.getloadavg()[0]}


# --- sequential -------------------------------------------------------------------------------


def _reaping(on: bool) -> bool:
    """Child subreaper on/off: a process a run leaves behind becomes ours, so it is counted
    (reaped when dead, ``processes_left`` while alive) instead of vanishing into pid 1. False
    when the kernel refused: those counts are then not measured (``subreaper`` in the part)."""
    return bench_run.set_subreaper(on)


def bench_sequential(runs: int, cwd: Path, script: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-state-") as state_dir:
        state = Path(state_dir)
        state.chmod(0o700)
        cgroups_before = run_cgroups()
        times: list[float] = []
        failures: list[str] = []
        failed = orphans = 0
        argv = [str(script), "run", "--quiet", "--", "true"]
        env = _env(state)
        subreaper = _reaping(True)
        try:
            for _ in range(runs):
                t0 = time.perf_counter()
                done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, timeout=120)
                times.append((time.perf_counter() - t0) * 1000)
                orphans += bench_run.reap_orphans(grace_s=0.0)[0]
                if done.returncode != 0:
                    failed += 1
                    if len(failures) < 5:
                        tail = done.stderr.decode(errors="replace")[-200:]
                        failures.append(f"exit {done.returncode}: {tail}")
            reaped, _, left = bench_run.reap_orphans(grace_s=2.0)
        finally:
            _reaping(False)
        left_cgroups = sorted(run_cgroups() - cgroups_before)
        tenth = max(1, runs // 10)
        return {"runs": runs, "no_docker": str(script), "failed": failed, "failures": failures,
                "first_tenth_ms": summary(times[:tenth]), "last_tenth_ms": summary(times[-tenth:]),
                "all_ms": summary(times), "slope_ms_per_1000_runs": _round(linear_slope(times) * 1000),
                "markers_left": markers_in(state), "cgroups_left": len(left_cgroups),
                "cgroups_left_sample": left_cgroups[:5], "subreaper": subreaper,
                # bwrap leaves its namespace init to its caller's reaper (dead by then): one a run
                "orphans_reaped": orphans + reaped, "processes_left": left if subreaper else None}


# --- in process -------------------------------------------------------------------------------

_IN_PROCESS = r"""
import json, os, sys
from no_docker.supervisor import run
def fds(): return len(os.listdir("/proc/self/fd"))
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
n = int(sys.argv[1])
statuses = [run.main(["--quiet", "--", "true"])]  # first run: imports, caches
fd0, rss0 = fds(), rss_kb()
for _ in range(n - 1):
    statuses.append(run.main(["--quiet", "--", "true"]))
print(json.dumps({"runs": n, "nonzero_exits": sum(1 for s in statuses if s != 0),
                  "fds_after_first": fd0, "fds_after_last": fds(),
                  "rss_kb_after_first": rss0, "rss_kb_after_last": rss_kb(),
                  "children_left": len(open("/proc/self/task/%d/children" % os.getpid()).read().split())}))
"""


def bench_in_process(runs: int, cwd: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-state-") as state_dir:
        state = Path(state_dir)
        state.chmod(0o700)
        done = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(runs)], cwd=cwd, env=_env(state),
                              capture_output=True, text=True, timeout=30 + runs)
        if done.returncode != 0:
            return {"error": f"exit {done.returncode}: {done.stderr[-400:]}"}
        doc = json.loads(done.stdout.splitlines()[-1])
        doc["markers_left"] = markers_in(state)
        doc["fds_leaked"] = doc["fds_after_last"] - doc["fds_after_first"]
        return doc


# --- concurrent -------------------------------------------------------------------------------


def _two_cpus() -> set[int]:
    return set(sorted(os.sched_getaffinity(0))[:2])


def _start(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    cpus = _two_cpus()
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.sched_setaffinity(0, cpus))


def _batch(k: int, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, list[tuple[int, str]]]:
    t0 = time.perf_counter()
    procs = [_start(argv, cwd, env) for _ in range(k)]
    results = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            results.append((proc.returncode, err.decode(errors="replace")[-200:]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    return (time.perf_counter() - t0) * 1000, results


def bench_concurrent(k: int, repeat: int, sleepers: int, cwd: Path, no_docker: Path) -> dict:
    script = f"for ((i=0; i<{sleepers}; i++)); do sleep {SLEEPER_ARG} & done; sleep 0.05; exit 0"
    argv = [str(no_docker), "run", "--quiet", "--", "/bin/bash", "-c", script]
    with tempfile.TemporaryDirectory(prefix="bench-state-") as state_dir:
        state = Path(state_dir)
        state.chmod(0o700)
        env = _env(state)
        cgroups_before = run_cgroups()
        sleepers_before = sleepers_alive()
        alone, batch, bad = [], [], []
        orphans = 0
        subreaper = _reaping(True)
        try:
            for _ in range(repeat):  # alternated: one alone, then k at once
                ms, results = _batch(1, argv, cwd, env)
                alone.append(ms)
                bad += [r for r in results if r[0] != 0]
                ms, results = _batch(k, argv, cwd, env)
                batch.append(ms)
                bad += [r for r in results if r[0] != 0]
                orphans += bench_run.reap_orphans(grace_s=0.0)[0]
            reaped, _, left = bench_run.reap_orphans(grace_s=2.0)
        finally:
            _reaping(False)
        return {"concurrent_runs": k, "no_docker": str(no_docker), "orphans_reaped": orphans + reaped,
                "subreaper": subreaper, "processes_left": left if subreaper else None,
                "cpus_used": len(_two_cpus()), "sleepers_per_run": sleepers,
                "repeat": repeat, "one_run_alone_wall_ms": summary(alone),
                "all_concurrent_wall_ms": summary(batch),
                "runs_not_exit_0": len(bad), "failures": [f"exit {c}: {e}" for c, e in bad[:5]],
                "sleepers_left": sleepers_alive() - sleepers_before, "markers_left": markers_in(state),
                "cgroups_left": len(run_cgroups() - cgroups_before)}


def collect(*, quick: bool = False, sequential: int | None = None, in_process: int | None = None,
            concurrent: int = 8, only: tuple[str, ...] = PARTS) -> dict:
    if not NO_DOCKER.exists():
        return {"bench": "scaling", "skipped": f"{NO_DOCKER} missing"}
    doc: dict = {"bench": "scaling", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        cwd = Path(tmp) / "work"
        cwd.mkdir()
        installed: Path | None = None  # no regular-install figure; sequential and concurrent: the .venv
        if set(only) - {"in_process"}:  # the one part that runs in-process needs no install
            try:  # the wheel of this tree in a venv of its own, as users get it (cached by content)
                built = regular_install.ensure(REPO)
                installed = Path(built["script"])
                doc["regular_install"] = {k: built[k] for k in ("venv", "key", "cached") if k in built}
            except (RuntimeError, OSError, StopIteration) as err:
                doc["regular_install"] = {"error": str(err)}
        if "import_time" in only:
            doc["import_time"] = bench_import_time(2 if quick else 7, cwd, installed)
        if "startup_breakdown" in only:
            doc["startup_breakdown"] = bench_startup_breakdown(2 if quick else 30, 0 if quick else 3, cwd,
                                                               installed)
        if "sequential" in only:
            doc["sequential"] = bench_sequential(sequential or (10 if quick else 1000), cwd,
                                                 installed or NO_DOCKER)
        if "in_process" in only:
            doc["in_process"] = bench_in_process(in_process or (5 if quick else 300), cwd)
        if "concurrent" in only:
            doc["concurrent"] = bench_concurrent(concurrent, 1 if quick else 3, 5 if quick else 20, cwd,
                                                 installed or NO_DOCKER)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few runs of each (the smoke test)")
    p.add_argument("--sequential", type=int)
    p.add_argument("--in-process", type=int)
    p.add_argument("--concurrent", type=int, default=8)
    p.add_argument("--only", default=",".join(PARTS))
    args = p.parse_args(argv)
    only = tuple(args.only.split(","))
    if set(only) - set(PARTS):
        p.error(f"--only: unknown part(s) {sorted(set(only) - set(PARTS))}; known: {', '.join(PARTS)}")
    for name in ("sequential", "in_process", "concurrent"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    print(json.dumps(collect(quick=args.quick, sequential=args.sequential, in_process=args.in_process,
                             concurrent=args.concurrent, only=only), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
