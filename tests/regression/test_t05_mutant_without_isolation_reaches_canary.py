"""T-05: the positive control. The same pinned mutant, without isolation, in the outer guard,
reaches the canary on every network route - shown by the route id the canary recorded (or,
for a route whose protocol cannot carry it, a record on the listener it names) - or says
why the route is unavailable here. Without this, T-03's zero would prove nothing. The
lifetime routes reach the engines the lifetime harness moves during the run (restarted, in a
directory made during the run, in ``/srv``); for them "unavailable" never passes.
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
    parse_route_log,
    route_of,
)
from no_docker.supervisor.proving.prove import (
    control_cannot_take,
    evidence,
    record_route,
    warm_engine_clients,
)

NETWORK = declared_route_ids("network")


@pytest.fixture(scope="module")
def control(module_guard):
    work = module_guard.base / "work"
    mutant = make_mutant(work)
    # What prove itself tries before it judges a route: a control that cannot take a route on
    # this machine (sudo without rights for this user) shows nothing about it.
    cannot = control_cannot_take(module_guard, NETWORK)
    warm_engine_clients()  # as prove does: a cold page cache is not a missed route
    with module_guard.lifetime.phase(work, "control") as phase:
        done = module_guard.run(mutant_argv(mutant), cwd=work, timeout=300)
    log = work / "no-docker-routes.log"
    return {
        "done": done,
        "log": parse_route_log(log.read_text()) if log.exists() else {},
        "records": module_guard.records() + phase.records(),
        "phase": phase,
        "routes": {r.id: r for r in declared_routes()},
        "cannot": cannot,
    }


def test_control_ran_to_its_end(control):
    assert control["done"].returncode == 0, control["done"].stderr.decode(errors="replace")[-600:]
    assert control["log"], "the mutant wrote no route log"


def _route(record: dict) -> str | None:
    from no_docker.canary.sniff import client_hello_sni

    return record_route(record, route_of, client_hello_sni)


@pytest.mark.parametrize("route", NETWORK)
def test_network_route_reaches_canary_without_isolation(control, route, record_property):
    assert route in control["routes"], f"{route} is not declared by the payload"
    outcome, detail = control["log"].get(route, ("not attempted", ""))
    seen = evidence(route, control["routes"][route].description, control["records"], _route)
    if seen.by_id:
        return
    if seen.by_listener:
        # A TLS hello from the docker CLI or an HTTP/2 preface carries no id: the record on the
        # listener the route names is the evidence, whatever the client made of the answer.
        record_property("evidence", f"{seen.by_listener} records on its listener (no route id)")
        return
    if route in lifetime_route_ids():
        phase = control["phase"]
        if route in phase.unarmed:  # a machine without /srv: incomplete, never passed
            pytest.skip(lifetime_gap(phase, route))
        pytest.fail(f"{route}: the control did not reach the engine the lifetime harness moved "
                    f"({outcome}: {detail}){'; ' + lifetime_gap(phase, route) if phase.problems else ''}")
    if shutil.which("docker") is None:
        # Without the main client most routes cannot be tried: the case is incomplete, not passed.
        pytest.skip(f"no docker CLI on this machine (install docker-ce-cli); {route}: {outcome} {detail}")
    if outcome == "unavailable":
        assert detail.strip(), f"{route} is unavailable without a reason"
        record_property("unavailable", detail)
        return
    if route in control["cannot"]:  # incomplete here, never passed (root's CI takes it)
        pytest.skip(f"{route}: the control cannot take it on this machine: {control['cannot'][route]} "
                    f"(the mutant's log: {outcome}: {detail})")
    pytest.fail(f"{route}: the control did not reach the canary ({outcome}: {detail})")


def test_every_record_belongs_to_a_declared_route(control):
    ids = {_route(r) for r in control["records"]} - {None}
    unknown = sorted(ids - set(control["routes"]))
    assert not unknown, f"the canary recorded route ids the payload does not declare: {unknown}"
