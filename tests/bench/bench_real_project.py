"""The cost of no-docker on a real project, in each documented shape (issue 26 item 3).

A project nobody here wrote, fetched as an sdist at a pinned version (toolz 1.0.0: ``pip download
--no-binary :all:``; when the index cannot be reached the bench prints ``{"skipped": REASON}``
and exits 0). Medians over rounds, the commands compared alternated round by round so that the
load of a shared machine hits them alike:

``suite``       the project's test suite plain, under ``no-docker run``, and as ``pytest
                --no-docker`` (the plugin re-executes the session under a run): wall and CPU
                (user+sys of the waited process tree) per suite run
``cosmic-ray``  a bounded session (the first ``--mutants`` jobs of ``toolz/recipes.py``, each
                running the whole suite): plain (the local distributor, no isolation), per
                mutant through the ``no-docker`` distributor, and the whole tool under one run;
                per-mutant wall and CPU, and the overhead against the plain per-mutant time
``mutmut``      ``mutmut run`` over ``toolz/recipes.py`` (mutmut's own test selection), plain
                and the whole tool under one run; wall and CPU per session, and the mutants'
                results compared (they must agree)

stdout: one JSON document; stderr: progress and a Markdown table for docs/performance.md.
Nothing here fails because the machine is slow. Targets (issue 26): per-mutant overhead <= 5%
of the plain per-mutant time; whole-tool <= 2%.

``--suite-only`` runs the suite shapes alone; ``--tiny`` adds them on a one-test project (what a
session costs before any test: pytest's start-up, the run, the plugin's re-exec).

usage: python tests/bench/bench_real_project.py [--rounds N] [--mutants K] [--quick] [--suite-only] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench_run import reap_orphans, set_subreaper

PROJECT, VERSION = "toolz", "1.0.0"
MODULE = "toolz/recipes.py"
PY = sys.executable
BIN = Path(PY).parent
ND = [PY, "-m", "no_docker.supervisor.cli"]
PYTEST = [PY, "-B", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "toolz/tests"]
MUTMUT_CFG = ("\n[mutmut]\nsource_paths = toolz\nonly_mutate = toolz/recipes.py\n"
              "pytest_add_cli_args_test_selection = toolz/tests\nalso_copy = tlz\n")
CR_CFG = """[cosmic-ray]
module-path = "{module}"
timeout = 120.0
excluded-modules = []
test-command = "{test}"

[cosmic-ray.distributor]
name = "{name}"
"""


def log(text: str) -> None:
    print(f"bench-real-project: {text}", file=sys.stderr, flush=True)


def fetch(into: Path) -> Path | str:
    """The sdist unpacked under INTO, or why it could not be fetched."""
    try:
        done = subprocess.run([PY, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                               f"{PROJECT}=={VERSION}", "-d", str(into)], capture_output=True, text=True,
                              timeout=300)
    except subprocess.TimeoutExpired:
        return "pip download timed out after 300 s (is the package index reachable?)"
    sdists = list(into.glob(f"{PROJECT}-{VERSION}.tar.gz"))
    if done.returncode != 0 or not sdists:
        return f"pip download {PROJECT}=={VERSION} failed: {(done.stderr or done.stdout).strip()[-300:]}"
    with tarfile.open(sdists[0]) as tf:
        tf.extractall(into, filter="data")
    return into / f"{PROJECT}-{VERSION}"


def timed(argv: list[str], cwd: Path, timeout: float = 1800
          ) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the whole process tree, the result). The bench is a child subreaper
    (bench_run.py's method): a descendant whose parent did not reap it (a sandbox's processes)
    is reaped here, and its CPU counted in RUSAGE_CHILDREN with the rest."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    wall = time.perf_counter() - start
    reap_orphans(grace_s=2.0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else float("nan")


def require(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        raise SystemExit(f"bench-real-project: {what} failed ({done.returncode}): "
                         f"{(done.stdout + done.stderr)[-1500:]}")


def bench_suite(src: Path, rounds: int, pytest: list[str] = PYTEST) -> dict:
    shapes = {"plain": pytest, "no-docker run": [*ND, "run", "--quiet", "--", *pytest],
              "pytest --no-docker": [*pytest[:3], "pytest", "--no-docker", *pytest[4:]]}
    samples: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in shapes}
    for r in range(rounds + 1):  # round 0 warms the caches up and is not counted
        for name, argv in shapes.items():
            wall, cpu, done = timed(argv, src)
            require(done, f"the suite ({name})")
            if r:
                samples[name]["wall"].append(wall)
                samples[name]["cpu"].append(cpu)
        log(f"suite round {r}/{rounds}")
    out = {name: {"wall_s": median(s["wall"]), "cpu_s": median(s["cpu"])} for name, s in samples.items()}
    plain = out["plain"]
    for name in ("no-docker run", "pytest --no-docker"):
        out[name]["added_wall_s"] = round(out[name]["wall_s"] - plain["wall_s"], 3)
        out[name]["added_cpu_s"] = round(out[name]["cpu_s"] - plain["cpu_s"], 3)
    return out


def tiny_project(into: Path) -> Path:
    into.mkdir()
    (into / "pytest.ini").write_text("[pytest]\n")
    (into / "test_tiny.py").write_text("def test_tiny():\n    pass\n")
    return into


def suite_markdown(label: str, s: dict) -> str:
    rows = [f"| {label}: shape | plain | isolated | added | overhead |", "|---|---|---|---|---|"]
    for name in ("no-docker run", "pytest --no-docker"):
        rows.append(f"| suite, `{name}` (wall / CPU s) | {s['plain']['wall_s']} / {s['plain']['cpu_s']} | "
                    f"{s[name]['wall_s']} / {s[name]['cpu_s']} | {s[name]['added_wall_s']} / "
                    f"{s[name]['added_cpu_s']} | "
                    f"{round(100 * s[name]['added_wall_s'] / s['plain']['wall_s'], 1)}% wall |")
    return "\n".join(rows)


def bounded_session(work: Path, keep: int) -> None:
    """Keep the first KEEP mutants of the session in WORK/s.sqlite (by operator and occurrence:
    the same mutants in every session; job ids are random), drop the rest."""
    with sqlite3.connect(work / "s.sqlite") as db:
        order = "SELECT job_id FROM mutation_specs ORDER BY operator_name, occurrence"
        ids = [j for (j,) in db.execute(order)]
        drop = ids[keep:]
        db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", [(j,) for j in drop])
        db.executemany("DELETE FROM work_items WHERE job_id = ?", [(j,) for j in drop])


def outcomes(work: Path) -> dict[str, str]:
    done = subprocess.run([str(BIN / "cosmic-ray"), "dump", "s.sqlite"], cwd=work, capture_output=True,
                          text=True, timeout=120)
    found = {}
    for line in done.stdout.splitlines():
        item, result = json.loads(line)
        key = " ".join(f"{m['operator_name']}#{m['occurrence']}" for m in item["mutations"])
        found[key] = result["test_outcome"] if result else "none"
    return found


def bench_cosmic_ray(src: Path, rounds: int, mutants: int, scratch: Path) -> dict:
    test = " ".join(PYTEST)
    shapes = {"plain": ("local", None), "per mutant (no-docker distributor)": ("no-docker", None),
              "whole tool in one run": ("local", [*ND, "run", "--quiet", "--"])}
    samples: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in shapes}
    results: dict[str, dict[str, str]] = {}
    for r in range(rounds):
        for i, (name, (distributor, prefix)) in enumerate(shapes.items()):
            work = scratch / f"cr-{r}-{i}"
            shutil.copytree(src, work)
            (work / "cr.toml").write_text(CR_CFG.format(module=MODULE, test=test, name=distributor))
            require(subprocess.run([str(BIN / "cosmic-ray"), "init", "cr.toml", "s.sqlite"], cwd=work,
                                   capture_output=True, text=True, timeout=300), "cosmic-ray init")
            bounded_session(work, mutants)
            wall, cpu, done = timed([*(prefix or []), str(BIN / "cosmic-ray"), "exec", "cr.toml", "s.sqlite"],
                                    work)
            require(done, f"cosmic-ray exec ({name})")
            results.setdefault(name, outcomes(work))
            samples[name]["wall"].append(wall / mutants)
            samples[name]["cpu"].append(cpu / mutants)
            shutil.rmtree(work)
        log(f"cosmic-ray round {r + 1}/{rounds}")
    out: dict = {name: {"per_mutant_wall_s": median(s["wall"]), "per_mutant_cpu_s": median(s["cpu"])}
                 for name, s in samples.items()}
    plain = out["plain"]
    for name in list(shapes)[1:]:
        out[name]["added_wall_s"] = round(out[name]["per_mutant_wall_s"] - plain["per_mutant_wall_s"], 3)
        out[name]["overhead_wall_pct"] = round(
            100 * out[name]["added_wall_s"] / plain["per_mutant_wall_s"], 1)
        out[name]["overhead_cpu_pct"] = round(
            100 * (out[name]["per_mutant_cpu_s"] - plain["per_mutant_cpu_s"]) / plain["per_mutant_cpu_s"], 1)
    out["mutants"] = mutants
    out["results_agree"] = len({json.dumps(v, sort_keys=True) for v in results.values()}) == 1
    out["outcomes"] = {k: sorted(v.values()).count("killed") for k, v in results.items()}
    return out


def mutmut_results(work: Path, prefix: list[str]) -> dict[str, str]:
    done = subprocess.run([*prefix, str(BIN / "mutmut"), "results", "--all", "true"], cwd=work,
                          capture_output=True, text=True, timeout=300)
    found = {}
    for line in done.stdout.splitlines():
        name, _, status = line.strip().partition(": ")
        if status:
            found[name] = status
    return found


def bench_mutmut(src: Path, rounds: int, scratch: Path) -> dict:
    shapes = {"plain": [], "whole tool in one run": [*ND, "run", "--quiet", "--"]}
    samples: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in shapes}
    results: dict[str, dict[str, str]] = {}
    for r in range(rounds):
        for i, (name, prefix) in enumerate(shapes.items()):
            work = scratch / f"mm-{r}-{i}"
            shutil.copytree(src, work)
            with open(work / "setup.cfg", "a") as cfg:
                cfg.write(MUTMUT_CFG)
            wall, cpu, done = timed([*prefix, str(BIN / "mutmut"), "run", "--max-children", "2"], work)
            require(done, f"mutmut run ({name})")
            results.setdefault(name, mutmut_results(work, prefix))
            samples[name]["wall"].append(wall)
            samples[name]["cpu"].append(cpu)
            shutil.rmtree(work)
        log(f"mutmut round {r + 1}/{rounds}")
    out: dict = {name: {"wall_s": median(s["wall"]), "cpu_s": median(s["cpu"])}
                 for name, s in samples.items()}
    iso, plain = out["whole tool in one run"], out["plain"]
    iso["overhead_wall_pct"] = round(100 * (iso["wall_s"] - plain["wall_s"]) / plain["wall_s"], 1)
    iso["overhead_cpu_pct"] = round(100 * (iso["cpu_s"] - plain["cpu_s"]) / plain["cpu_s"], 1)
    out["mutants"] = len(results.get("plain", {}))
    out["results_agree"] = len({json.dumps(v, sort_keys=True) for v in results.values()}) == 1
    return out


def markdown(doc: dict) -> str:
    s, c, m = doc["suite"], doc["cosmic-ray"], doc["mutmut"]
    rows = suite_markdown(f"{PROJECT} {VERSION}", s).split("\n")
    p = c["plain"]
    for name in ("per mutant (no-docker distributor)", "whole tool in one run"):
        rows.append(f"| cosmic-ray {name}, per mutant (wall / CPU s, {c['mutants']} mutants) | "
                    f"{p['per_mutant_wall_s']} / {p['per_mutant_cpu_s']} | {c[name]['per_mutant_wall_s']} / "
                    f"{c[name]['per_mutant_cpu_s']} | {c[name]['added_wall_s']} | "
                    f"{c[name]['overhead_wall_pct']}% wall, {c[name]['overhead_cpu_pct']}% CPU |")
    w = m["whole tool in one run"]
    rows.append(f"| mutmut whole tool in one run, session (wall / CPU s, {m['mutants']} mutants) | "
                f"{m['plain']['wall_s']} / {m['plain']['cpu_s']} | {w['wall_s']} / {w['cpu_s']} | "
                f"{round(w['wall_s'] - m['plain']['wall_s'], 3)} | {w['overhead_wall_pct']}% wall, "
                f"{w['overhead_cpu_pct']}% CPU |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mutants", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="1 round, 2 mutants")
    parser.add_argument("--suite-only", action="store_true", help="the suite shapes alone")
    parser.add_argument("--tiny", action="store_true", help="the suite shapes on a one-test project too")
    args = parser.parse_args(argv)
    rounds, mutants = (1, 2) if args.quick else (max(1, args.rounds), max(1, args.mutants))
    subreaper = set_subreaper()
    for tool in ("cosmic-ray", "mutmut"):
        if not (BIN / tool).exists():
            print(json.dumps({"skipped": f"{tool} is not installed (the test extra has it)"}))
            return 0
    with tempfile.TemporaryDirectory(prefix="bench-real-project-") as scratch_dir:
        scratch = Path(scratch_dir)
        src = fetch(scratch / "sdist")
        if isinstance(src, str):
            print(json.dumps({"skipped": src}))
            return 0
        doc: dict = {"project": f"{PROJECT} {VERSION} (sdist)", "module_mutated": MODULE, "rounds": rounds,
                     "load_average_1m_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
                     "cpu_counts_orphans": subreaper}
        if args.tiny:
            tiny = tiny_project(scratch / "tiny")
            doc["suite_tiny"] = bench_suite(tiny, rounds, [*PYTEST[:-1], "test_tiny.py"])
        doc["suite"] = bench_suite(src, rounds)
        if args.suite_only:
            doc["load_average_1m_after"] = round(os.getloadavg()[0], 2)
            doc["markdown"] = "\n\n".join(suite_markdown(label, doc[key]) for key, label in (
                ("suite_tiny", "one test"), ("suite", f"{PROJECT} {VERSION}")) if key in doc)
            print(doc["markdown"], file=sys.stderr)
            print(json.dumps(doc, indent=1))
            return 0
        doc["cosmic-ray"] = bench_cosmic_ray(src, rounds, mutants, scratch)
        doc["mutmut"] = bench_mutmut(src, rounds, scratch)
        doc["load_average_1m_after"] = round(os.getloadavg()[0], 2)
        doc["markdown"] = markdown(doc)
    print(doc["markdown"], file=sys.stderr)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
