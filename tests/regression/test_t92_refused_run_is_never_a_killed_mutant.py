"""T-92: a refused run is never scored as a killed mutant, in every shape docs/mutation-testing.md
shows (issue 26 item 1).

The refusal is forced: ``NO_DOCKER_BWRAP`` names a "bubblewrap" that isolates nothing, so every
``no-docker run`` exits 125 before its command starts (T-02). Each shape is then run on a copy of
its example project and judged by the TOOL'S OWN REPORT:

* control, the shape the docs showed before (cosmic-ray's local distributor, test command
  ``no-docker run -- pytest``): every refused run is scored killed, ``cr-report`` says 100%
  complete and 0 surviving, exit 0 (the issue's measurement, reproduced);
* cosmic-ray through the ``no-docker`` distributor: ``cosmic-ray exec`` (and ``baseline``) exits
  125 with one line, no job has a result, ``cr-report``: "no jobs completed";
* cosmic-ray, the whole tool under one run: 125, no job has a result;
* mutmut, the whole tool under one run: 125, mutmut never started (no ``mutants/``), ``mutmut
  results`` (in a real run afterwards) lists no mutant;
* a shell loop (the docs' loop for any other tool): it stops at the first refusal with 125 and
  has scored nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_cases import FAKE_BWRAP, require_bwrap

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BIN = Path(sys.executable).parent
PYTEST = f"{sys.executable} -B -m pytest -x -q -p no:cacheprovider"
ND = [sys.executable, "-m", "no_docker.supervisor.cli"]

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap,
              pytest.mark.skipif(not (BIN / "cosmic-ray").exists() or not (BIN / "mutmut").exists(),
                                 reason="cosmic-ray or mutmut is not installed (the test extra has them)")]

CONFIG = """[cosmic-ray]
module-path = "engine.py"
timeout = 60.0
excluded-modules = []
test-command = "{test}"

[cosmic-ray.distributor]
name = "{name}"
"""

# The loop docs/mutation-testing.md shows for a tool of one's own (keep the two the same).
SHELL_LOOP = r"""
for m in 'dry_run: bool = True)/dry_run: bool = False)' 'if dry_run:/if not dry_run:' 'returncode/pid'; do
  cp containers.py containers.py.orig && sed -i "s/$m/" containers.py
  no-docker run --quiet -- "$PYTHON" -B -m pytest -x -q -p no:cacheprovider; status=$?
  mv containers.py.orig containers.py
  if [ "$status" -eq 125 ]; then
    echo "no-docker refused the run of mutant $m: stopping, it has no result" >&2; exit 125
  fi
  if [ "$status" -eq 0 ]; then echo "mutant $m survived"; else echo "mutant $m killed"; fi
done
"""


def run(argv: list[str], cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def refusing(tmp_path: Path) -> dict:
    """The environment of a machine where every run is refused (a fake bwrap)."""
    require_bwrap()
    fake = tmp_path / "fake-bwrap"
    fake.write_text(FAKE_BWRAP)
    fake.chmod(0o755)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "no-docker").write_text(f"#!/bin/sh\nexec {sys.executable} -m no_docker.supervisor.cli \"$@\"\n")
    (shim / "no-docker").chmod(0o755)
    return dict(os.environ, NO_DOCKER_BWRAP=str(fake), PATH=f"{shim}:{BIN}:{os.environ['PATH']}",
                PYTHON=sys.executable)


def cosmic_ray_project(tmp_path: Path, name: str, test: str, env: dict) -> tuple[Path, str]:
    work = tmp_path / name
    shutil.copytree(FIXTURES / "cosmic-ray-example", work)
    (work / "session.toml").write_text(CONFIG.format(test=test, name=name))
    init = run([str(BIN / "cosmic-ray"), "init", "session.toml", "s.sqlite"], work, env)
    assert init.returncode == 0, init.stderr
    return work, "session.toml"


def results(work: Path, env: dict) -> list:
    dump = run([str(BIN / "cosmic-ray"), "dump", "s.sqlite"], work, env)
    assert dump.returncode == 0, dump.stderr
    found = [json.loads(line)[1] for line in dump.stdout.splitlines()]
    assert len(found) >= 10, found
    return found


def report(work: Path, env: dict) -> str:
    done = run([str(BIN / "cr-report"), "s.sqlite"], work, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_old_shape_scores_every_refused_run_as_killed(tmp_path, refusing):
    # The control: the refusal is real, and the shape the docs showed before turns it into a
    # perfect score. What the distributor below must never do.
    work, cfg = cosmic_ray_project(tmp_path, "local", f"no-docker run --quiet -- {PYTEST}", refusing)
    done = run([str(BIN / "cosmic-ray"), "exec", cfg, "s.sqlite"], work, refusing)
    assert done.returncode == 0, done.stderr
    assert {r["test_outcome"] for r in results(work, refusing)} == {"killed"}
    assert "surviving mutants: 0 (0.00%)" in report(work, refusing)


def test_the_no_docker_distributor_ends_the_session_and_scores_nothing(tmp_path, refusing):
    work, cfg = cosmic_ray_project(tmp_path, "no-docker", PYTEST, refusing)
    for step in (["exec", cfg, "s.sqlite"], ["baseline", cfg]):
        done = run([str(BIN / "cosmic-ray"), *step], work, refusing)
        assert done.returncode == 125, (step, done.returncode, done.stderr[-2000:])
        lines = [line for line in done.stderr.splitlines() if line.startswith("no-docker: cosmic-ray")]
        assert len(lines) == 1 and "exited 125: P1 not proven" in lines[0], done.stderr[-2000:]
        assert "Traceback" not in done.stderr
    assert results(work, refusing) == [None] * len(results(work, refusing)), "a refused run has a result"
    assert "no jobs completed" in report(work, refusing)
    summary = run([*ND, "mutation-summary", "s.sqlite"], work, refusing)
    assert summary.returncode == 0 and "without a result" in summary.stdout, summary
    assert (work / "engine.py").read_text() == (FIXTURES / "cosmic-ray-example" / "engine.py").read_text()


def test_cosmic_ray_whole_tool_under_one_run_never_starts(tmp_path, refusing):
    work, cfg = cosmic_ray_project(tmp_path, "local", PYTEST, refusing)
    done = run([*ND, "run", "--", str(BIN / "cosmic-ray"), "exec", cfg, "s.sqlite"], work, refusing)
    assert done.returncode == 125, done.stderr
    assert " not proven: " in done.stderr
    assert results(work, refusing) == [None] * len(results(work, refusing))
    assert "no jobs completed" in report(work, refusing)


def test_mutmut_whole_tool_under_one_run_never_starts(tmp_path, refusing):
    work = tmp_path / "mutmut"
    shutil.copytree(FIXTURES / "mutmut-example", work)
    done = run([*ND, "run", "--", str(BIN / "mutmut"), "run", "--max-children", "2"], work, refusing)
    assert done.returncode == 125, done.stderr
    assert " not proven: " in done.stderr
    assert not (work / "mutants").exists(), "mutmut started under a refused run"
    # mutmut's own report, read in a real run (no fake bwrap): no mutant, none killed
    env = {k: v for k, v in refusing.items() if k != "NO_DOCKER_BWRAP"}
    shown = run([*ND, "run", "--quiet", "--", str(BIN / "mutmut"), "results", "--all", "true"], work, env)
    assert "killed" not in shown.stdout and "survived" not in shown.stdout, shown


def test_a_shell_loop_that_checks_125_stops_at_the_first_refusal(tmp_path, refusing):
    work = tmp_path / "loop"
    shutil.copytree(FIXTURES / "mutmut-example", work)
    done = run(["sh", "-c", SHELL_LOOP], work, refusing)
    assert done.returncode == 125, (done.stdout, done.stderr)
    assert "killed" not in done.stdout and "survived" not in done.stdout, done.stdout
    assert "refused the run of mutant dry_run: bool = True)" in done.stderr
    assert (work / "containers.py").read_text() == (FIXTURES / "mutmut-example" / "containers.py").read_text()
