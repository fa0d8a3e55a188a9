"""T-96: a mutant whose code tries to reach a container engine is named, on its own result, and
no other mutant is (issue 26 item 2, the per-mutant summary).

Inside the outer guard (only the canary answers on the engine paths), on a copy of
``tests/fixtures/compose-wrapper-example`` (the shape of pytest-docker's ``execute()``: it shells
out to ``docker compose``; its tests mock ``subprocess.check_output``, so no mutant of the
project's own reaches an engine). The payload-bearing mutant comes from the bench tree's
cosmic-ray operator (``tests/bench/payload_operator.py``, ``nd-payload/ReachEngine``: read-only
tries of the engine sockets, port 2375 and ``docker version`` at the start of ``execute``):

* control: that mutant's tests without isolation reach the canary (it is payload-bearing);
* a session of it and three of the project's own mutants through the ``no-docker``
  distributor: ``no-docker mutation-summary --json`` names exactly the payload mutant, with
  ``/var/run/docker.sock``, its count and the ``docker`` CLI among its callers; every other
  result carries an empty list (no attempt: known, not unknown); every mutant has a result; the
  text summary says "1 of 4 mutants tried to reach a container engine"; the canary records
  nothing from the session.

The whole demonstration on the real project (pytest-docker 3.2.6's sdist) is
``tests/bench/bench_real_attempts.py``; it needs the package index, this case does not.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from isolation_cases import require_bwrap

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "fixtures" / "compose-wrapper-example"
BENCH = REPO / "tests" / "bench"
BIN = Path(sys.executable).parent
ND = [sys.executable, "-m", "no_docker.supervisor.cli"]
PYTEST = f"{sys.executable} -B -m pytest -x -q -p no:cacheprovider"

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap,
              pytest.mark.skipif(not (BIN / "cosmic-ray").exists(),
                                 reason="cosmic-ray is not installed (the test extra has it)")]

CONFIG = """[cosmic-ray]
module-path = "wrapper.py"
timeout = 60.0
excluded-modules = []
test-command = "{test}"

[cosmic-ray.operators]
"{operator}" = [{{function = "execute"}}]

[cosmic-ray.distributor]
name = "no-docker"
"""


def text(done) -> str:
    return (done.stdout + done.stderr).decode(errors="replace")[-3000:]


def test_t96_only_the_payload_mutant_is_named_and_on_its_own_result(tmp_path: Path, guard) -> None:
    require_bwrap()
    sys.path.insert(0, str(BENCH))
    try:
        import bench_real_attempts
        import payload_operator
        from cosmic_ray.mutating import mutate_code
    finally:
        sys.path.remove(str(BENCH))
    plugin = payload_operator.plugin_dir(tmp_path / "plugin")
    # the operator, for cosmic-ray's own processes; added to PYTHONPATH, not instead of it: the
    # weakened-build harness puts the copy's no_docker (its distributor) there
    path = [str(plugin), *filter(None, [guard.env.get("PYTHONPATH") or os.environ.get("PYTHONPATH")])]
    env = dict(guard.env, PYTHONPATH=os.pathsep.join(path))

    # control: the payload mutant's tests without isolation reach the canary
    control = tmp_path / "control"
    shutil.copytree(EXAMPLE, control)
    module = control / "wrapper.py"
    module.write_text(mutate_code(module.read_text(), payload_operator._operator_class()("execute"), 0))
    done = guard.run([*PYTEST.split(), "tests"], cwd=control, timeout=300)
    assert done.returncode == 0, text(done)
    assert guard.settled_records(at_least=1), "the payload mutant reached nothing: it is no control"
    seen = len(guard.settled_records())

    work = tmp_path / "work"
    shutil.copytree(EXAMPLE, work)
    (work / "cr.toml").write_text(CONFIG.format(test=PYTEST, operator=payload_operator.OPERATOR))
    done = guard.run([str(BIN / "cosmic-ray"), "init", "cr.toml", "s.sqlite"], cwd=work, env=env, timeout=300)
    assert done.returncode == 0, text(done)
    bench_real_attempts.bound_session(work / "s.sqlite", 3)  # the payload mutant and 3 of the project's
    done = guard.run([str(BIN / "cosmic-ray"), "exec", "cr.toml", "s.sqlite"], cwd=work, env=env, timeout=900)
    assert done.returncode == 0, text(done)

    summary = guard.run([*ND, "mutation-summary", "--json", "s.sqlite"], cwd=work)
    assert summary.returncode == 0, text(summary)
    found = json.loads(summary.stdout)
    assert found["pending"] == 0 and len(found["results"]) == 4, found
    named = [r for r in found["results"] if r["engine_attempts"]]
    assert [r["mutant"] for r in named] == [f"wrapper.py {payload_operator.OPERATOR} #0"], found
    others = [r for r in found["results"] if r not in named]
    assert all(r["engine_attempts"] == [] for r in others), others  # no attempt, and known to be none
    targets = {a["target"]: a for a in named[0]["engine_attempts"]}
    assert "/var/run/docker.sock" in targets, targets
    sock = targets["/var/run/docker.sock"]
    assert sock["count"] >= 2, sock  # execute() runs in two tests, one raw connect each at least
    assert "docker" in {c["command"] for c in sock["callers"]}, sock  # the CLI's own tries, named
    shown = guard.run([*ND, "mutation-summary", "s.sqlite"], cwd=work)
    lines = shown.stdout.decode().splitlines()
    assert lines[0] == "1 of 4 mutants tried to reach a container engine:", lines
    assert lines[1].startswith(f"  wrapper.py {payload_operator.OPERATOR} #0 (survived): "), lines
    assert guard.records()[seen:] == [], "a request from an isolated mutant reached the canary"
