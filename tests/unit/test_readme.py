"""The README's "Using it in a project" section: every snippet is run by a test (issue 15 item 7).

install, config, pytest: tests/unit/test_packaging.py (with the wheel, in a clean venv);
the GitHub Action step and the mutation one-liners: here. The one-liners run mutants of code
that calls Docker, so they run inside an outer guard where only a canary answers on the
engine paths, and the canary must record nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import readme_snippets
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests" / "fixtures"


def test_every_snippet_of_the_section_is_marked_and_known():
    found = readme_snippets.snippets()
    assert set(found) == readme_snippets.EXPECTED
    with pytest.raises(ValueError, match="without a readme-test marker"):
        readme_snippets.snippets(f"{readme_snippets.SECTION}\n\n```sh\nrm -rf /\n```\n")


def test_action_snippet_uses_the_actions_inputs_and_its_command_runs_isolated(tmp_path):
    (step,) = yaml.safe_load(readme_snippets.snippets()["action"])
    assert step["uses"].endswith("/no-docker/ci@REF")
    action = yaml.safe_load((REPO / "ci" / "action.yml").read_text())
    assert set(step["with"]) <= set(action["inputs"]), step["with"]
    workflow = tmp_path / ".github" / "workflows" / "test.yml"
    workflow.parent.mkdir(parents=True)
    local = {**step, "uses": "./ci"}  # actionlint checks a local action's inputs against its action.yml
    shutil.copytree(REPO / "ci", tmp_path / "ci")
    workflow.write_text(yaml.safe_dump({"on": "push", "jobs": {"test": {"runs-on": "ubuntu-latest", "steps": [
        {"uses": "actions/checkout@v4"}, local]}}}, sort_keys=False))
    lint = subprocess.run([str(BIN / "actionlint"), str(workflow)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # what the action runs: `bash -c "$RUN"` under no-docker run, in the working directory
    project = tmp_path / "project"
    project.mkdir()
    # A test that fails unless it runs in the project dir the action was given.
    (project / "test_ok.py").write_text("import os\n\ndef test_ok():\n"
                                        "    assert os.path.basename(os.getcwd()) == 'project'\n")
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--", "bash", "-c",
                           step["with"]["run"]], cwd=project, capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "isolation proven" in done.stderr


@pytest.fixture
def guard(tmp_path: Path):
    from no_docker.supervisor.proving.outer_guard import OuterGuard

    with OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path]) as g:
        yield g


@pytest.mark.slow
@pytest.mark.needs_bwrap
@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("unshare") is None,
                    reason="needs bubblewrap and unshare (util-linux)")
@pytest.mark.skipif(not (BIN / "mutmut").exists() or not (BIN / "cosmic-ray").exists(),
                    reason="mutmut and cosmic-ray are in the test extra")
def test_mutation_one_liners_run_as_written_and_reach_no_engine(tmp_path, guard):
    mutmut_line, cosmic_line = readme_snippets.lines("mutation")
    env = {**guard.env, "PATH": f"{BIN}:{guard.env['PATH']}"}
    work = tmp_path / "mutmut-example"
    shutil.copytree(FIXTURES / "mutmut-example", work)
    seen = len(guard.settled_records())
    done = guard.run(["bash", "-c", mutmut_line], cwd=work, env=env, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")[-3000:]
    assert (work / "mutants" / "containers.py.meta").exists()
    work = tmp_path / "cosmic-ray-example"
    shutil.copytree(FIXTURES / "cosmic-ray-example", work)
    done = guard.run(["bash", "-c", cosmic_line], cwd=work, env=env, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr).decode(errors="replace")[-3000:]
    report = guard.run([str(BIN / "cr-report"), "session.sqlite"], cwd=work, env=env)
    assert b"complete: 18 (100.00%)" in report.stdout or b"(100.00%)" in report.stdout, report.stdout
    assert guard.records()[seen:] == [], "a mutant reached the canary"
