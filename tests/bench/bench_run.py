"""Start-up cost of ``no-docker run -- true``, side by side with the alternatives (DESIGN §10).

Prints one JSON document: the median wall time (ms) of each command over ``--runs`` rounds,
interleaved (one of each per round, so load on this shared machine hits all alike), and the
ratios the design asks for. Commands:

* ``no_docker``            the installed console script, ``no-docker run --quiet -- true``
                           (proof included; with an editable install this pays setuptools'
                           import finder at interpreter start-up);
* ``no_docker_direct``     the same run started with ``python -I -S`` and the package on
                           sys.path (what a regular, non-editable install costs);
* ``bwrap_same_flags``     bare bwrap with the argv no-docker builds, ``true`` instead of the
                           probe (the floor);
* ``unshare``              ``unshare -n -p -f true``;
* ``firejail``             ``firejail --quiet --noprofile --net=none true``.

Usage: python tests/bench/bench_run.py [--runs N] [--warmup N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAMES = ("no_docker", "no_docker_direct", "bwrap_same_flags", "unshare", "firejail")


def package_farm(into: Path) -> Path:
    """A directory with ``no_docker/`` -> the repo's parts, for ``python -I -S`` runs."""
    pkg = into / "no_docker"
    pkg.mkdir(parents=True)
    for part in ("supervisor", "canary", "mutants", "ci"):
        if (REPO / part).is_dir():
            (pkg / part).symlink_to(REPO / part)
    return into


def bare_bwrap_argv(work: Path) -> list[str]:
    """The argv no-docker would run, with ``true`` in place of the gate and no extra fds."""
    from no_docker.supervisor.isolation import listing, plan, policy

    request = plan.Request(command=("true",), work=str(work))
    built = plan.build_policy(request, listing.collect(), dict(os.environ),
                              probe_source=plan.probe_source_path())
    argv = policy.bwrap_argv(built, ["true"], bwrap=shutil.which("bwrap") or "bwrap", data_fd=0, block_fd=0)
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--ro-bind-data":  # needs a data fd; the plan file is no-docker's own cost
            i += 3
            continue
        if argv[i] == "--block-fd":  # the hold for the proof is no-docker's own cost too
            i += 2
            continue
        if argv[i] == "--":
            break
        out.append(argv[i])
        i += 1
    return [*out, "--", "true"]


def commands(work: Path, farm: Path) -> dict[str, list[str] | None]:
    script = Path(sys.executable).with_name("no-docker")
    direct = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
              "from no_docker.supervisor.cli import console_main; console_main()")
    return {
        "no_docker": [str(script), "run", "--quiet", "--", "true"] if script.exists() else None,
        "no_docker_direct": [sys.executable, "-I", "-S", "-c", direct, str(farm), "run", "--quiet", "--",
                             "true"],
        "bwrap_same_flags": bare_bwrap_argv(work) if shutil.which("bwrap") else None,
        "unshare": ["unshare", "-n", "-p", "-f", "true"] if shutil.which("unshare") else None,
        "firejail": (["firejail", "--quiet", "--noprofile", "--net=none", "true"]
                     if shutil.which("firejail") else None),
    }


def time_once(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-300:]
        raise RuntimeError(f"{argv[:3]}... exited {done.returncode}: {tail}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error(f"--runs must be >= 1 and --warmup >= 0, got --runs {args.runs} --warmup {args.warmup}")
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        farm = package_farm(Path(tmp) / "farm")
        cmds = {name: argv for name, argv in commands(work, farm).items() if argv}
        samples: dict[str, list[float]] = {name: [] for name in cmds}
        errors: dict[str, str] = {}
        for round_ in range(args.warmup + args.runs):
            for name, argv in cmds.items():
                if name in errors:
                    continue
                try:
                    ms = time_once(argv, work)
                except RuntimeError as err:
                    errors[name] = str(err)
                    continue
                if round_ >= args.warmup:
                    samples[name].append(ms)
    medians = {name: round(statistics.median(v), 2) for name, v in samples.items() if v}
    doc = {
        "runs": args.runs,
        "median_ms": medians,
        "min_ms": {name: round(min(v), 2) for name, v in samples.items() if v},
        "missing": sorted(set(NAMES) - set(cmds)),
        "errors": errors,
        "ratios": {},
        "load_average": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    for ours in ("no_docker", "no_docker_direct"):
        for other in ("bwrap_same_flags", "firejail", "unshare"):
            if ours in medians and other in medians:
                doc["ratios"][f"{ours}/{other}"] = round(medians[ours] / medians[other], 2)
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
