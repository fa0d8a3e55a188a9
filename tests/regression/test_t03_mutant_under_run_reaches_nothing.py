"""T-03: the pinned mutant runs to its end under ``no-docker run``: every route is attempted
and the canary (on every real engine path, in the outer guard) records nothing; the files
that would run later outside (shell start-up files, git hooks and config) are unchanged.
The lifetime harness moves engines while the mutant runs (one restarted, new ones in a
directory made during the run and in ``/srv``): the lifetime routes must reach none of them.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import (
    declared_route_ids,
    declared_routes,
    lifetime_gap,
    lifetime_route_ids,
    make_mutant,
    mutant_argv,
    no_docker_argv,
    parse_route_log,
)
from no_docker.supervisor.proving.prove import LATER_RUN_FILES, refused_to_start, tree_digest

ROUTES = declared_route_ids("network") + declared_route_ids("persistence")
LIFETIME = lifetime_route_ids()


@pytest.fixture(scope="module")
def isolated(module_guard):
    work = module_guard.base / "work"
    mutant = make_mutant(work)
    home = module_guard.home
    # Persistence targets that exist (appended to) and that do not (created): both must stay.
    (home / ".bashrc").write_text("# the guard developer's bashrc\n")
    (home / ".profile").write_text("# the guard developer's profile\n")
    # .git/hooks/pre-commit does not exist (git init makes only samples): creating it counts.
    roots = [home, work / ".git"]
    before = tree_digest(*roots)
    with module_guard.lifetime.phase(work, "isolated") as phase:
        done = module_guard.run(no_docker_argv("run", "--work", str(work), "--", *mutant_argv(mutant)),
                                cwd=work, timeout=300)
    stderr = done.stderr.decode(errors="replace").strip()
    # A run that never started shows nothing about routes: a set-up error, not a T-03 result.
    assert not refused_to_start(done.returncode, stderr), f"no-docker run refused to start: {stderr[-600:]}"
    # The engines the lifetime harness moved are witnesses too: their records count.
    records = module_guard.records() + phase.records()
    after = tree_digest(*roots)
    log = work / "no-docker-routes.log"
    # The same mutant without isolation, only to tell "the tool is missing on this machine"
    # from "the tool is missing inside the run" (a route not really attempted).
    control_work = module_guard.base / "control"
    control_mutant = make_mutant(control_work)
    with module_guard.lifetime.phase(control_work, "control"):
        module_guard.run(mutant_argv(control_mutant), cwd=control_work, timeout=300)
    control_log = control_work / "no-docker-routes.log"
    return {
        "done": done,
        "log": parse_route_log(log.read_text()) if log.exists() else {},
        "control_log": parse_route_log(control_log.read_text()) if control_log.exists() else {},
        "records": records,
        "phase": phase,
        "before": before,
        "after": after,
    }


def test_mutant_ran_to_its_end_under_run(isolated):
    done = isolated["done"]
    stderr = done.stderr.decode(errors="replace")
    assert not refused_to_start(done.returncode, stderr), f"no-docker run refused: {stderr.strip()[-600:]}"
    # The mutant leaves what the next pytest outside would read (issue 25): found after the run,
    # moved aside, 125 with the line that says so. Otherwise the mutant's own status.
    assert done.returncode == 125, f"the mutant exited {done.returncode}: {stderr.strip()[-600:]}"
    assert isolated["log"], "the mutant wrote no route log inside the run"


def test_collected_routes_are_the_declared_ones():
    declared = [r.id for r in declared_routes()]
    assert sorted(declared) == sorted(ROUTES)
    assert len(declared) >= 40


@pytest.mark.parametrize("route", ROUTES)
def test_route_attempted_under_run(isolated, route):
    assert route in isolated["log"], f"route {route} was never attempted (the mutant did not get there)"
    outcome, detail = isolated["log"][route]
    if route in LIFETIME:
        phase = isolated["phase"]
        if route in phase.unarmed:  # a machine without /srv: the route shows nothing here
            pytest.skip(lifetime_gap(phase, route))
        # Armed, the route waits for engines the harness moves: a harness that could not move
        # them leaves the route untried, which never passes.
        assert not phase.problems, f"{route} was not really tried: {lifetime_gap(phase, route)}"
        assert outcome == "failed", f"{route} under run: {outcome} {detail}"
        return
    control_outcome, _ = isolated["control_log"].get(route, ("not attempted", ""))
    if outcome == "unavailable" and shutil.which("docker") is None:
        pytest.skip(f"no docker CLI on this machine (install docker-ce-cli); {route}: {detail}")
    # `unavailable` inside the run is an attempt only when the tool is missing outside too;
    # otherwise the run broke the tool (a toolchain it hides) and the route was never tried.
    assert outcome != "unavailable" or control_outcome == "unavailable", (
        f"route {route} could not be tried inside the run although it can outside: {detail}")


def test_canary_recorded_nothing(isolated):
    records = isolated["records"]
    listeners = sorted({str(r.get("listener")) for r in records})
    assert records == [], f"{len(records)} canary records from the isolated mutant, on {listeners}"


def test_persistence_files_unchanged(isolated):
    before, after = isolated["before"], isolated["after"]
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert changed == [], f"files that run later outside were changed: {changed}"


def test_what_the_next_pytest_reads_is_moved_aside(isolated, module_guard):
    work = module_guard.base / "work"
    left = [name for name in LATER_RUN_FILES if (work / name).exists()]
    assert left == [], f"left in the work dir for the next command outside: {left}"
    moved = sorted(str(p.relative_to(work)) for q in work.glob(".no-docker-quarantine-*")
                   for p in q.rglob("*") if p.is_file())
    assert all(any(m.endswith("/" + name) for m in moved) for name in LATER_RUN_FILES), moved
