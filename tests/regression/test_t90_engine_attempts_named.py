"""T-90: every attempt to reach an engine that is there when the run starts is named, per run.

In the outer guard the canary answers on every real engine path (``/run/docker.sock`` ...,
``127.0.0.1:2375``, an abstract name) before the run starts; the mount plan hides them all, so
inside ``no-docker run --quiet`` the kernel itself refuses each connect (ENOENT, ECONNREFUSED)
and no refusal of the mediation is involved. Each attempt must still be named: one status line
(printed with ``--quiet`` too) and ``--report``'s ``engine_attempts``, each target with its
count and the command and pid that tried, and the canary recorded nothing. The same connects
without isolation reach the canary (the targets are live), and the proof's own tries of the
same paths are not among the command's attempts.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import no_docker_argv
from test_t04_engine_paths_refuse_inside import CONNECT, engine_targets

COMMAND = "python3"  # what /proc/PID/comm says of sys.executable's process (cut at 15)


@pytest.fixture(scope="module")
def named(module_guard):
    targets = engine_targets(module_guard.layout)
    code = [sys.executable, "-I", "-c", CONNECT, json.dumps(targets)]
    start = len(module_guard.settled_records())
    control = module_guard.run(code, timeout=120)
    assert control.returncode == 0, control.stderr.decode()
    connected = sum(result == "connected" for result in json.loads(control.stdout).values())
    before = len(module_guard.settled_records(start + connected))
    report = module_guard.base / "t90-report.json"
    isolated = module_guard.run(no_docker_argv("run", "--quiet", "--report", str(report),
                                               "--work", str(module_guard.work), "--", *code), timeout=120)
    stderr = isolated.stderr.decode(errors="replace")
    # A run that did not start names nothing: a set-up error, not a T-90 result.
    assert isolated.returncode == 0, f"no-docker run exited {isolated.returncode}: {stderr.strip()[-600:]}"
    return {"targets": targets, "control": json.loads(control.stdout),
            "isolated": json.loads(isolated.stdout), "stderr": stderr,
            "report": json.loads(report.read_text()), "records": module_guard.records()[before:]}


def _address(kind: str, address: str) -> str:
    """A target as the report names it: a path, ``@name``, ``host:port`` / ``[::1]:port``."""
    return "@" + address if kind == "abstract" else address


def test_every_engine_attempt_is_named_in_the_report(named):
    attempts = {a["target"]: a for a in named["report"]["engine_attempts"]}
    missing = []
    for label, kind, address in named["targets"]:
        assert named["control"][label] == "connected", f"control: {label} is not a live canary path"
        assert named["isolated"][label] != "connected", f"{label} connected from inside no-docker run"
        entry = attempts.get(_address(kind, address))
        if entry is None:
            missing.append(label)
            continue
        assert entry["count"] == 1, entry
        assert entry["reason"], entry
        [caller] = entry["callers"]
        assert caller["pid"] > 0 and caller["command"].startswith(COMMAND[:6]), entry
    assert not missing, f"{len(missing)} of {len(named['targets'])} attempts not named: {missing}"
    # The proof tried the same paths before CMD started: none of its tries is counted.
    assert sum(a["count"] for a in attempts.values()) == len(named["targets"]), attempts


def test_the_attempts_are_in_one_status_line_even_with_quiet(named):
    lines = [line for line in named["stderr"].splitlines() if "to reach an engine" in line]
    assert len(lines) == 1, named["stderr"]
    assert lines[0].startswith(f"no-docker: {len(named['targets'])} attempts to reach an engine: "), lines
    assert "/run/docker.sock x1 (python" in lines[0] and "127.0.0.1:2375 x1 (python" in lines[0], lines
    assert ", pid " in lines[0]


def test_the_canary_recorded_nothing_from_the_run(named):
    assert named["records"] == [], f"the canary recorded {len(named['records'])} records from the run"
