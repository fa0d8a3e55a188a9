"""T-79: what a refused run leaves for the next command (red-team round 4, B2, B2b, B3, B4).

Each case plants, from inside ``no-docker run``, something that the next command outside (or
the next run) would act on: the witness is a marker file in the test's own scratch dir that
the planted code writes when it runs; the control makes the same plant without a run and
shows the marker written (the route is real).

- B2: a refusal whose undo fails (``NOT undone``) stops the next run in that work dir, in a
  subdirectory of it, and the next ``pytest`` that re-executes under a run, until ``no-docker
  end RUN_ID``; ``no-docker runs`` lists it; an unrelated work dir runs.
- B2: the run reads its own id (/proc/self/mountinfo) and fills every quarantine name it can
  predict: the undo still moves the plant aside, and the next run does not bind the decoys.
- B2b: ``mv examples/demo sub`` moves a pytest.ini whose files keep their old ctime: it is
  moved aside and the old place is made again.
- B3/B4: a link to a stanza script, or a ``.venv`` link, re-pointed by the run is put back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import no_docker_argv
from isolation_cases import require_bwrap
from no_docker.supervisor.isolation import later_code
from no_docker.supervisor.isolation.tool_sources import STANZA_TAG


def _nd(args: list[str], cwd: Path, state: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_DOCKER_STATE_DIR": str(state)}
    return subprocess.run(no_docker_argv(*args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _project(work: Path) -> Path:
    (work / "tests").mkdir(parents=True)
    (work / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = true\n")
    (work / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    return work


def _demo(work: Path, mark: Path) -> None:
    """examples/demo with a pytest.ini that turns no-docker's plugin off and loads its own."""
    demo = work / "examples" / "demo"
    demo.mkdir(parents=True)
    (demo / "pytest.ini").write_text("[pytest]\naddopts = -p no:no_docker -p demo_plugin\n")
    (demo / "demo_plugin.py").write_text(f"open({str(mark)!r}, 'a').write('plugin')\n")


def _pytest_in(where: Path) -> None:
    env = {**os.environ, "PYTHONPATH": "."}
    # (-p no:no_docker: what decides is whether the moved pytest.ini is read, not a nested run)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:no_docker",
                    "--co"], cwd=where,
                   env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def test_b2_not_undone_stops_the_next_run_there_until_end(tmp_path):
    require_bwrap()
    state, work, other = tmp_path / "state", _project(tmp_path / "w"), _project(tmp_path / "other")
    _demo(work, tmp_path / "mark")
    # The run moves the directory away and puts a file where it was: the old pytest.ini
    # cannot be put back (its directory is now a file), so the undo says NOT undone.
    planted = _nd(["run", "--quiet", "--", "sh", "-c", "mv examples/demo sub && echo x > examples/demo"],
                  work, state)
    assert planted.returncode == 125 and "NOT undone" in planted.stderr, planted.stderr
    assert "new runs there refuse until: no-docker end " in planted.stderr, planted.stderr
    run_id = planted.stderr.rsplit("no-docker end ", 1)[1].split()[0]
    for where in (work, work / "tests"):  # the work dir and a subdirectory of it
        nxt = _nd(["run", "--", "sh", "-c", "echo ran > ran"], where, state)
        assert nxt.returncode == 125 and f"no-docker end {run_id}" in nxt.stderr, nxt.stderr
        assert "examples/demo/pytest.ini" in nxt.stderr and not (where / "ran").exists()
    # The next `pytest` whose plugin re-executes it under a run: refused too, no test ran.
    session = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=work,
                             env={**os.environ, "NO_DOCKER_STATE_DIR": str(state)}, capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert session.returncode == 125 and "passed" not in session.stdout, session.stdout + session.stderr
    # Elsewhere, runs go on (the control: the refusal above is about that work dir).
    assert _nd(["run", "--quiet", "--", "true"], other, state).returncode == 0
    assert _nd(["end", "--all"], work, state).returncode == 0  # names it, never clears it
    listed = json.loads(_nd(["runs", "--json"], work, state).stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "left")]
    ended = _nd(["end", run_id], work, state)
    assert ended.returncode == 0 and "examples/demo/pytest.ini" in ended.stderr, ended.stderr
    assert _nd(["run", "--quiet", "--", "true"], work, state).returncode == 0


def test_b2_the_run_cannot_fill_the_quarantine_names(tmp_path):
    require_bwrap()
    state, work = tmp_path / "state", _project(tmp_path / "w")
    mark = tmp_path / "mark"
    plant = ("id=$(grep -o '[^ /]*/outside.sock' /proc/self/mountinfo | head -1 | cut -d/ -f1); "
             "[ -n \"$id\" ] || exit 3; mkdir .no-docker-quarantine-$id && "
             "mkdir $(seq -f \".no-docker-quarantine-$id.%g\" 1 999) && "
             f"echo \"open({str(mark)!r}, 'a').write('ran')\" > pytest.py")
    planted = _nd(["run", "--quiet", "--", "sh", "-c", plant], work, state)
    assert planted.returncode == 125 and "none of it runs later" in planted.stderr, planted.stderr
    assert not (work / "pytest.py").exists() and "NOT undone" not in planted.stderr
    subprocess.run([sys.executable, "-m", "pytest", "--version"], cwd=work, capture_output=True, timeout=120)
    assert not mark.exists()
    # The 1001 directories it made: walked, but the next run binds only the newest few.
    found = later_code.survey(str(work))
    assert len(found.quarantines) == 1001
    assert sum(1 for p in found.protect() if "quarantine" in p) == later_code.QUARANTINE_BINDS
    # The control: the same plant left in place runs at the next `python -m pytest`.
    (work / "pytest.py").write_text(f"open({str(mark)!r}, 'a').write('ran')\n")
    subprocess.run([sys.executable, "-m", "pytest", "--version"], cwd=work, capture_output=True, timeout=120)
    assert mark.read_text() == "ran"


def test_b2b_a_renamed_directory_is_undone(tmp_path):
    require_bwrap()
    state = tmp_path / "state"
    mark = tmp_path / "mark"
    work = _project(tmp_path / "w")
    _demo(work, mark)
    planted = _nd(["run", "--quiet", "--", "mv", "examples/demo", "sub"], work, state)
    assert planted.returncode == 125 and "none of it runs later" in planted.stderr, planted.stderr
    assert not (work / "sub" / "pytest.ini").exists()
    assert (work / "examples" / "demo" / "pytest.ini").read_text().startswith("[pytest]\naddopts = -p no:")
    _pytest_in(work / "sub")
    assert not mark.exists()
    control = _project(tmp_path / "control")  # the same move, without a run: the plugin runs
    _demo(control, mark)
    (control / "examples" / "demo").rename(control / "sub")
    _pytest_in(control / "sub")
    assert mark.read_text() == "plugin"


def _stanza_project(work: Path) -> None:
    _project(work)
    (work / "tests" / "real.sh").write_text(f"#!/bin/bash\ntrue {STANZA_TAG}\necho inner\n")
    (work / "tests" / "run.sh").symlink_to("real.sh")


def test_b3_a_repointed_stanza_link_is_put_back(tmp_path):
    require_bwrap()
    state, mark = tmp_path / "state", tmp_path / "mark"
    work = tmp_path / "w"
    _stanza_project(work)
    plant = f"printf 'echo x >> {mark}\\n' > tests/evil.sh; ln -sfn evil.sh tests/run.sh"
    planted = _nd(["run", "--quiet", "--", "sh", "-c", plant], work, state)
    assert planted.returncode == 125 and "tests/run.sh" in planted.stderr, planted.stderr
    assert os.readlink(work / "tests" / "run.sh") == "real.sh"
    subprocess.run(["bash", "tests/run.sh"], cwd=work, capture_output=True, timeout=60)
    assert not mark.exists()
    control = tmp_path / "control"
    _stanza_project(control)
    subprocess.run(["sh", "-c", plant], cwd=control, timeout=60)
    subprocess.run(["bash", "tests/run.sh"], cwd=control, capture_output=True, timeout=60)
    assert mark.read_text() == "x\n"


def _venv_project(work: Path, venv: Path) -> None:
    _project(work)
    (work / ".venv").symlink_to(venv)


def test_b4_a_repointed_venv_link_is_put_back(tmp_path):
    require_bwrap()
    state, mark = tmp_path / "state", tmp_path / "mark"
    venv = tmp_path / "elsewhere" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to("/bin/true")
    work = tmp_path / "w"
    _venv_project(work, venv)
    plant = (f"mkdir -p fake/bin; printf '#!/bin/sh\\necho x >> {mark}\\n' > fake/bin/python; "
             "chmod +x fake/bin/python; ln -sfn fake .venv")
    planted = _nd(["run", "--quiet", "--", "sh", "-c", plant], work, state)
    assert planted.returncode == 125 and "/.venv:" in planted.stderr, planted.stderr
    assert os.readlink(work / ".venv") == str(venv)
    subprocess.run([str(work / ".venv" / "bin" / "python"), "-c", "pass"], cwd=work, timeout=60)
    assert not mark.exists()
    control = tmp_path / "control"
    _venv_project(control, venv)
    subprocess.run(["sh", "-c", plant], cwd=control, timeout=60)
    subprocess.run([str(control / ".venv" / "bin" / "python"), "-c", "pass"], cwd=control, timeout=60)
    assert mark.read_text() == "x\n"


@pytest.mark.parametrize("name", ["run.sh", "run-e2e"])
def test_b3_only_a_link_to_a_start_up_file_is_a_source(tmp_path, name):
    """A link to a plain script or a plain directory is not audited (a tool may make them)."""
    (tmp_path / "plain.sh").write_text("echo plain\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "s.sh").write_text(f"true {STANZA_TAG}\n")
    (tmp_path / "to-plain.sh").symlink_to("plain.sh")
    (tmp_path / "to-dir").symlink_to("d")
    (tmp_path / name).symlink_to("s.sh")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pytest.ini").symlink_to("../plain.sh")  # configs: audited by target already
    sources = later_code.survey(str(tmp_path)).sources
    assert sources.get(name) == "symlink:s.sh" and sources.get("sub/pytest.ini") == "symlink:../plain.sh"
    assert "to-plain.sh" not in sources and "to-dir" not in sources
