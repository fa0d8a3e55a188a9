"""The lifetime harness's pure parts, its contract with the pinned payload, and that a harness
which could not play its part makes `prove` INCOMPLETE, never PROVEN (issue 13 item 6)."""

from __future__ import annotations

from pathlib import Path

from no_docker.mutants.routes import declared_routes
from no_docker.supervisor.proving import lifetime as lt
from no_docker.supervisor.proving import prove as pv

PAYLOAD = Path(__file__).resolve().parents[2] / "mutants" / "payloads" / "reach-engine.sh"


def test_payload_declares_the_harness_routes_and_uses_its_names():
    text = PAYLOAD.read_text()
    network = [r.id for r in declared_routes(PAYLOAD) if r.kind == "network"]
    assert [r for r in network if r.startswith("lifetime-")] == list(lt.ROUTES)
    for name in [lt.armed_file(r) for r in lt.ROUTES] + [lt.WAITING, lt.GO, lt.LATE_SOCKET]:
        assert name.startswith("no-docker-"), name  # the lint's run-dir prefix
        assert f"./{name}" in text, f"the payload does not use ./{name}"
    for path in (lt.RESTART_SOCKET, lt.SYSTEM_SOCKET):
        assert f"--unix {path} " in text, path


def test_unarmed_without_srv_names_both_srv_routes_and_why():
    assert lt.unarmed(["/srv"]) == {}
    missing = lt.unarmed([])
    assert sorted(missing) == ["lifetime-restart", "lifetime-system-dir"]
    assert all("/srv" in why for why in missing.values())


def _proven_rows() -> list[pv.Row]:
    return [pv.Row(r, "network", "yes (1 records)", "no (failed)", True, True) for r in lt.ROUTES]


def test_unarmed_or_troubled_harness_makes_prove_incomplete_never_proven():
    declared = [r for r in declared_routes(PAYLOAD) if r.id in lt.ROUTES]
    assert pv.verdict(_proven_rows(), pv.lifetime_incomplete(declared, {}, [])).status == "PROVEN"
    # The payload says `unavailable` for an unarmed route: the row does not count either way,
    # so only the harness's word keeps the verdict from PROVEN.
    rows = _proven_rows()
    rows[0] = pv.Row("lifetime-restart", "network", "unavailable: no lifetime harness", "no (unavailable)",
                     None, True)
    why = pv.lifetime_incomplete(declared, lt.unarmed([]), [])
    result = pv.verdict(rows, why)
    assert result.status == "INCOMPLETE" and result.exit_status == 125, result.line
    assert "could not arm lifetime-restart" in result.line and "/srv" in result.line
    troubled = pv.verdict(_proven_rows(), pv.lifetime_incomplete(declared, {}, ["the payload never reached"]))
    assert troubled.status == "INCOMPLETE", troubled.line


class _NoEngines:
    """A guard stand-in for a phase that never starts an engine (no /srv here)."""

    canary: list[str] = []

    def __init__(self, root: Path) -> None:
        self.root = root

    def inside(self, path: str) -> Path:
        return self.root / path.lstrip("/")


def test_phase_whose_payload_never_waits_reports_a_problem(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / lt.GO).touch()  # a stale go of an earlier phase is cleared at the start
    with lt.Phase(_NoEngines(tmp_path / "inside"), tmp_path, work, "control", scratch=[]) as phase:
        assert phase.armed == ["lifetime-late-dir"]
        assert (work / lt.armed_file("lifetime-late-dir")).exists()
        assert not (work / lt.armed_file("lifetime-restart")).exists()
        assert not (work / lt.GO).exists()
    assert phase.problems == ["the payload never reached its lifetime routes (control)"]
    assert phase.records() == []
