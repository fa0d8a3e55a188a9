"""The per-mutant engine-attempt summary on a real project, end to end (issue 26 item 2).

A project nobody here wrote that wraps Docker: **pytest-docker 3.2.6** (its sdist, ``pip download
--no-binary :all:``; ``--sdist FILE`` takes a copy already on disk). Chosen because its code
drives the engine (``execute()`` shells out to ``docker compose``) while its unit tests mock
``subprocess.check_output`` and so run without one (``tests/test_integration.py`` needs a real
engine and is left out), and it is small: 24 tests, ~7 s a suite run. No mutant cosmic-ray or
mutmut makes of it reaches an engine (the mock catches every call), so the payload-bearing
mutants come from ``payload_operator.py``'s ``nd-payload/ReachEngine`` (a cosmic-ray operator
plugin, registered for the cosmic-ray processes only through ``PYTHONPATH``): read-only tries of
the engine sockets, port 2375 and the docker CLI inserted at the start of each ``execute``.

What it runs, as a user would:

1. ``cosmic-ray init`` (the project's operators plus the payload's), bounded to the payload
   mutants and ``--mutants K`` ordinary ones (every n-th by operator and occurrence: the same ones
   every time); ``cosmic-ray exec`` through the ``no-docker`` distributor; ``cr-report``;
   ``no-docker mutation-summary`` (text and ``--json``);
2. the same session, the whole tool in one run (``no-docker run --report F -- cosmic-ray exec``,
   the local distributor): cosmic-ray's own scoring, the reference for every mutant's outcome,
   and what that run's status line and ``engine_attempts`` say (the session as a whole);
3. ``mutmut run`` (the project's own mutants of ``plugin.py``) as the whole tool in one run: its
   results and that run's status line and ``engine_attempts``;
4. positive control, when the outer guard can start (root): the payload mutant's tests without
   isolation, inside the guard, reach the canary (never anything else: DESIGN §8).

No mutant runs outside a ``no-docker run`` but the positive control (inside the guard). stdout:
one JSON document; stderr: progress and the transcript pasted into docs/mutation-testing.md ("On a
real project"). When the index cannot be reached: ``{"skipped": REASON}``, exit 77 (not a pass).
Exit 1 when a check fails (the summary does not name the payload mutants, an outcome differs).

usage: python tests/bench/bench_real_attempts.py [--mutants K] [--sdist FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import payload_operator  # noqa: E402 - the bench directory is not a package

PROJECT, VERSION = "pytest-docker", "3.2.6"
EXIT_SKIPPED = 77  # the sdist could not be had: nothing was shown (automake's "skipped"; not 0)
SDIST = "pytest_docker-3.2.6.tar.gz"
MODULE = "src/pytest_docker/plugin.py"
PY = sys.executable
BIN = Path(PY).parent
ND = [PY, "-m", "no_docker.supervisor.cli"]
# The project's unit tests; setup.cfg's addopts (--mypy --pylint --pycodestyle: plugins it does not
# need to run) off; src/ on the path, where the sdist's egg-info registers the plugin's entry point.
PYTEST = [PY, "-B", "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "pytester", "-o", "addopts=",
          "-o", "pythonpath=src", "--ignore", "tests/test_integration.py", "tests"]
CR_CFG = """[cosmic-ray]
module-path = "{module}"
timeout = 120.0
excluded-modules = []
test-command = "{test}"

[cosmic-ray.operators]
"{operator}" = [{{function = "execute"}}]

[cosmic-ray.distributor]
name = "{name}"
"""
# mutmut: the same tests. Without the sdist's egg-info in mutants/ (an entry_points.txt the run
# writes is code that runs later: no-docker refuses it, P4), so the plugin comes from
# PYTEST_PLUGINS and the three tests that ask for it under its entry-point name are left out.
MUTMUT_CFG = """
[mutmut]
source_paths = src/pytest_docker
only_mutate = src/pytest_docker/plugin.py
pytest_add_cli_args =
    -p
    pytester
    -o
    pythonpath=src
    --ignore
    tests/test_integration.py
    -k
    not test_general_container_scope
pytest_add_cli_args_test_selection = tests
"""


def log(text: str) -> None:
    print(f"bench-real-attempts: {text}", file=sys.stderr, flush=True)


def fetch(into: Path, sdist: str | None) -> Path | str:
    """The sdist unpacked under INTO, or why it could not be had."""
    if sdist is None:
        try:
            done = subprocess.run([PY, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                   f"{PROJECT}=={VERSION}", "-d", str(into)], capture_output=True, text=True,
                                  timeout=300)
        except subprocess.TimeoutExpired:
            return "pip download timed out after 300 s (is the package index reachable?)"
        found = into / SDIST
        if done.returncode != 0 or not found.is_file():
            return f"pip download {PROJECT}=={VERSION} failed: {(done.stderr or done.stdout).strip()[-300:]}"
    else:
        found = Path(sdist)
        if found.name != SDIST or not found.is_file():
            return f"--sdist {sdist}: not a file named {SDIST}"
    with tarfile.open(found) as tf:
        tf.extractall(into, filter="data")
    return into / SDIST.removesuffix(".tar.gz")


def run(argv: list[str], cwd: Path, env: dict | None = None,
        timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {})))


def require(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        raise SystemExit(f"bench-real-attempts: {what} failed ({done.returncode}): "
                         f"{(done.stdout + done.stderr)[-2000:]}")


def status_lines(text: str) -> list[str]:
    """no-docker's own status lines of a run's output (pure)."""
    return [line for line in text.splitlines() if line.startswith("no-docker: ")]


# Two of the project's own mutants that its tests miss (seen in a full session of plugin.py's 103,
# the whole tool in one run): kept besides the spread ones, so that both outcomes occur.
SURVIVORS = (("core/AddNot", 5), ("core/ReplaceTrueWithFalse", 2))


def choose(specs: list[tuple[str, str, int]], keep: int,
           pinned: tuple[tuple[str, int], ...] = SURVIVORS) -> list[str]:
    """The job ids to keep (pure): every payload mutant, KEEP ordinary ones spread evenly over
    the others ordered by (operator, occurrence), and the PINNED ones - the same in every session."""
    payload = [j for j, op, _ in specs if op == payload_operator.OPERATOR]
    ordinary = sorted((s for s in specs if s[1] != payload_operator.OPERATOR), key=lambda s: (s[1], s[2]))
    if keep <= 0 or not ordinary:
        return payload
    step = max(1, len(ordinary) // keep)
    spread = [j for j, _, _ in ordinary[::step][:keep]]
    return payload + spread + [j for j, op, n in ordinary if (op, n) in pinned and j not in spread]


def bound_session(db_path: Path, keep: int) -> int:
    """Keep only ``choose``'s jobs in the session; how many were generated in all."""
    with sqlite3.connect(db_path) as db:
        specs = list(db.execute("SELECT job_id, operator_name, occurrence FROM mutation_specs"))
        kept = set(choose(specs, keep))
        drop = [(j,) for j, _, _ in specs if j not in kept]
        db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
        db.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
    return len(specs)


def outcomes(work: Path) -> dict[str, str]:
    """{``operator #occurrence``: test outcome or "none"} of the session in WORK."""
    done = run([str(BIN / "cosmic-ray"), "dump", "s.sqlite"], work, timeout=120)
    require(done, "cosmic-ray dump")
    found = {}
    for line in done.stdout.splitlines():
        item, result = json.loads(line)
        key = " + ".join(f"{m['operator_name']} #{m['occurrence']}" for m in item["mutations"])
        found[key] = (result or {}).get("test_outcome") or "none"
    return found


def report_attempts(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text()).get("engine_attempts") or []
    except (OSError, ValueError):
        return []


def cosmic_ray(src: Path, scratch: Path, keep: int, plugin: Path) -> dict:
    # the payload operator, for cosmic-ray's own processes only (added to any PYTHONPATH there is)
    env = {"PYTHONPATH": os.pathsep.join([str(plugin), *filter(None, [os.environ.get("PYTHONPATH")])])}
    test = " ".join(PYTEST)
    per, whole = scratch / "cr-per-mutant", scratch / "cr-whole-tool"
    shutil.copytree(src, per)
    for name, work in (("no-docker", per), ("local", whole)):
        if work is whole:
            shutil.copytree(src, whole)
        (work / "cr.toml").write_text(CR_CFG.format(module=MODULE, test=test, name=name,
                                                    operator=payload_operator.OPERATOR))
    require(run([str(BIN / "cosmic-ray"), "init", "cr.toml", "s.sqlite"], per, env, 300), "cosmic-ray init")
    generated = bound_session(per / "s.sqlite", keep)
    shutil.copy(per / "s.sqlite", whole / "s.sqlite")  # the same jobs in both shapes
    log(f"cosmic-ray: {generated} mutants generated, {len(outcomes(per))} kept; per mutant "
        "(no-docker distributor)")
    start = time.perf_counter()
    exe = run([str(BIN / "cosmic-ray"), "exec", "cr.toml", "s.sqlite"], per, env)
    per_wall = time.perf_counter() - start
    require(exe, "cosmic-ray exec (no-docker distributor)")
    report = run([str(BIN / "cr-report"), "s.sqlite"], per, timeout=120)
    summary = run([*ND, "mutation-summary", "s.sqlite"], per, timeout=120)
    summary_json = run([*ND, "mutation-summary", "--json", "s.sqlite"], per, timeout=120)
    require(summary_json, "no-docker mutation-summary --json")
    log("cosmic-ray: the whole tool in one run (local distributor)")
    whole_report = scratch / "cr-whole-tool.json"
    start = time.perf_counter()
    # a run starts with a clean environment and a /tmp of its own: the payload operator goes in
    # with --ro, PYTHONPATH with env(1) (without them cosmic-ray scores its mutants incompetent)
    whole_exe = run([*ND, "run", "--report", str(whole_report), "--ro", str(plugin), "--", "env",
                     f"PYTHONPATH={plugin}", str(BIN / "cosmic-ray"), "exec", "cr.toml", "s.sqlite"],
                    whole, env)
    whole_wall = time.perf_counter() - start
    require(whole_exe, "no-docker run -- cosmic-ray exec")
    found = json.loads(summary_json.stdout)
    per_outcomes, whole_outcomes = outcomes(per), outcomes(whole)
    tried = [r for r in found["results"] if r["engine_attempts"]]
    return {
        "generated": generated, "kept": len(per_outcomes), "per_mutant_wall_s": round(per_wall, 1),
        "whole_tool_wall_s": round(whole_wall, 1),
        "exec_stderr_tail": [line for line in exe.stderr.splitlines() if line.startswith("no-docker: ")],
        "cr_report": report.stdout.strip().splitlines(),
        "summary": summary.stdout.strip().splitlines(),
        # the summary's names are "MODULE OPERATOR #N"; the outcomes' keys "OPERATOR #N"
        "tried": sorted(r["mutant"].removeprefix(f"{MODULE} ") for r in tried),
        "tried_are_payload": bool(tried) and all(payload_operator.OPERATOR in r["mutant"] for r in tried),
        "payload_mutants": sorted(k for k in per_outcomes if payload_operator.OPERATOR in k),
        "pending": found["pending"],
        "per_mutant_outcomes": per_outcomes, "whole_tool_outcomes": whole_outcomes,
        "outcomes_agree": per_outcomes == whole_outcomes,
        "whole_tool_status": status_lines(whole_exe.stderr),
        "whole_tool_engine_attempts": report_attempts(whole_report),
    }


def mutmut(src: Path, scratch: Path) -> dict:
    work = scratch / "mutmut"
    shutil.copytree(src, work)
    cfg = work / "setup.cfg"
    cfg.write_text("".join(line for line in cfg.read_text().splitlines(keepends=True)
                           if not line.startswith("addopts = ")) + MUTMUT_CFG)
    report = scratch / "mutmut.json"
    log("mutmut: the whole tool in one run")
    start = time.perf_counter()
    done = run([*ND, "run", "--keep-env", "PYTEST_PLUGINS", "--report", str(report), "--",
                str(BIN / "mutmut"), "run", "--max-children", "2"], work, {"PYTEST_PLUGINS": "pytest_docker"})
    wall = time.perf_counter() - start
    require(done, "no-docker run -- mutmut run")
    results = run([*ND, "run", "--quiet", "--", str(BIN / "mutmut"), "results", "--all", "true"], work,
                  timeout=300)
    statuses: dict[str, int] = {}
    for line in results.stdout.splitlines():
        _, _, status = line.strip().partition(": ")
        if status:
            statuses[status] = statuses.get(status, 0) + 1
    return {"wall_s": round(wall, 1), "results": statuses, "status": status_lines(done.stderr),
            "engine_attempts": report_attempts(report)}


def positive_control(src: Path, scratch: Path) -> dict:
    """The payload mutant's tests without isolation, inside the outer guard: the canary must see
    them (the mutant really is payload-bearing). Skipped with the reason when the guard cannot start."""
    try:
        from cosmic_ray.mutating import mutate_code
        from no_docker.supervisor.proving.outer_guard import OuterGuard
    except ImportError as err:
        return {"skipped": f"cannot import what it needs: {err}"}
    work = scratch / "control"
    shutil.copytree(src, work)
    module = work / MODULE
    mutated = mutate_code(module.read_text(), payload_operator._operator_class()("execute"), 0)
    if mutated is None:
        return {"failed": "the payload operator made no mutation of execute"}
    module.write_text(mutated)
    try:
        with OuterGuard(scratch / "canary.jsonl", share=[scratch]) as guard:
            done = guard.run([*PYTEST[:-1], "tests/test_docker_services.py"], cwd=work, timeout=300)
            records = guard.records()
    except Exception as err:  # noqa: BLE001 - the guard needs root (namespaces, mounts): say why not
        return {"skipped": f"the outer guard could not start: {type(err).__name__}: {err}"[:300]}
    return {"tests_exit": done.returncode, "canary_records": len(records)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=6, help="ordinary mutants kept besides the payload's")
    parser.add_argument("--sdist", help=f"a copy of {SDIST} on disk (no download)")
    parser.add_argument("--keep", help="copy the work directories here at the end (to look at them)")
    args = parser.parse_args(argv)
    for tool in ("cosmic-ray", "mutmut"):
        if not (BIN / tool).exists():
            print(json.dumps({"skipped": f"{tool} is not installed (the test extra has it)"}))
            return 0
    with tempfile.TemporaryDirectory(prefix="bench-real-attempts-") as scratch_dir:
        scratch = Path(scratch_dir)
        src = fetch(scratch / "sdist", args.sdist)
        if isinstance(src, str):
            log(f"SKIPPED, not a pass: {src}")
            print(json.dumps({"skipped": src}))
            return EXIT_SKIPPED
        plugin = payload_operator.plugin_dir(scratch / "plugin")
        doc: dict = {"project": f"{PROJECT} {VERSION} (sdist)", "module_mutated": MODULE,
                     "load_average_1m_before": round(os.getloadavg()[0], 2)}
        doc["positive_control"] = positive_control(src, scratch)
        doc["cosmic-ray"] = cosmic_ray(src, scratch, args.mutants, plugin)
        doc["mutmut"] = mutmut(src, scratch)
        if args.keep:
            shutil.copytree(scratch, args.keep, dirs_exist_ok=True)
    cr = doc["cosmic-ray"]
    problems = [what for what, bad in (
        ("the summary names no mutant, or a mutant that is not a payload's", not cr["tried_are_payload"]),
        ("a payload mutant is not named by the summary", sorted(cr["tried"]) != cr["payload_mutants"]),
        ("the two shapes disagree on an outcome", not cr["outcomes_agree"]),
        ("a mutant has no result", cr["pending"] != 0),
        ("the positive control did not reach the canary",
         "canary_records" in doc["positive_control"] and not doc["positive_control"]["canary_records"]),
    ) if bad]
    doc["problems"] = problems
    print("\n".join(["$ cosmic-ray exec cr.toml s.sqlite   # the no-docker distributor",
                     *cr["exec_stderr_tail"],
                     "$ cr-report s.sqlite", *cr["cr_report"],
                     "$ no-docker mutation-summary s.sqlite", *cr["summary"],
                     "$ no-docker run -- cosmic-ray exec cr.toml s.sqlite   # local distributor, one run",
                     *cr["whole_tool_status"],
                     "$ no-docker run -- mutmut run --max-children 2", *doc["mutmut"]["status"]]),
          file=sys.stderr)
    print(json.dumps(doc, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
