"""``no-docker run --quiet -- true`` of two or more builds, interleaved in the same rounds, next
to bare bwrap and firejail: what a change costs or saves, on a shared machine whose load moves
(tests/bench/bench_run.py times one build; its rounds would put each build under other loads).

Each build is a directory holding a ``no_docker/`` package (e.g. ``git archive REV supervisor
canary mutants ci | tar -x -C DIR/no_docker``), started as ``python -I -S`` with DIR first on
``sys.path``, in an empty work dir; CPU is the whole tree's (bench_run.run_once: wait4, orphans
reaped as a subreaper)::

    .venv/bin/python tests/bench/bench_ab.py --runs 60 main=/tmp/ab/main branch=/tmp/ab/branch

stdout: a Markdown table, medians (min).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_run  # noqa: E402

DIRECT = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
          "from no_docker.supervisor.cli import console_main; console_main()")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("builds", nargs="+", help="NAME=DIR, DIR holding no_docker/")
    args = parser.parse_args(argv)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        work = Path(tmp)
        os.chdir(work)  # posix_spawn has no cwd; the runs start in an empty work dir
        try:
            cmds = {}
            for build in args.builds:
                name, _, directory = build.partition("=")
                farm = os.path.abspath(os.path.join(cwd, directory))
                cmds[name] = [sys.executable, "-I", "-S", "-c", DIRECT, farm, "run", "--quiet", "--", "true"]
            cmds["bwrap"] = bench_run.bare_bwrap_argv(work)
            if shutil.which("firejail"):
                cmds["firejail"] = [shutil.which("firejail"), "--quiet", "--noprofile", "--net=none", "true"]
            bench_run.set_subreaper(True)
            load = os.getloadavg()[0]
            errors: dict[str, str] = {}
            samples, _ = bench_run.measure(cmds, args.runs, args.warmup, errors)
        finally:
            os.chdir(cwd)
    print(f"{args.runs} interleaved rounds, load {load:.2f} -> {os.getloadavg()[0]:.2f}"
          f"{f'; errors: {errors}' if errors else ''}")
    med = {n: (statistics.median(s["wall"]), statistics.median(s["cpu"]))
           for n, s in samples.items() if s["wall"]}
    low = {n: (min(s["wall"]), min(s["cpu"])) for n, s in samples.items() if s["wall"]}
    fire = med.get("firejail", (None, None))[1]
    print("| command | wall ms median (min) | CPU ms median (min) | wall / bwrap | CPU / firejail |")
    print("|---|---:|---:|---:|---:|")
    for n, (wall, cpu) in med.items():
        ratio = f"{cpu / fire:.2f}x" if fire else "-"
        print(f"| {n} | {wall:.1f} ({low[n][0]:.1f}) | {cpu:.1f} ({low[n][1]:.1f}) | "
              f"{wall / med['bwrap'][0]:.2f}x | {ratio} |")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
