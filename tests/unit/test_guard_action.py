"""The composite action and the workflow users copy: well-formed, ShellCheck-clean, no input
expanded inside a script, and recognised by the guard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from no_docker.ci.repo import ACTION_NAME

REPO = Path(__file__).resolve().parents[2]
ACTION = REPO / "ci" / "action.yml"
WORKFLOW = REPO / "ci" / "workflows" / "guard.yml"
SHELLCHECK = str(Path(sys.executable).parent / "shellcheck")
ACTIONLINT = str(Path(sys.executable).parent / "actionlint")


def action() -> dict:
    return yaml.safe_load(ACTION.read_text())


def test_action_is_a_composite_named_for_the_guard() -> None:
    doc = action()
    assert doc["name"] == ACTION_NAME
    assert doc["runs"]["using"] == "composite"
    assert doc["inputs"]["run"]["required"] is True
    for name, spec in doc["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"


@pytest.mark.parametrize("index", [0, 1])
def test_action_scripts_are_shellcheck_clean_and_take_inputs_from_the_environment(
    tmp_path: Path, index: int
) -> None:
    step = action()["runs"]["steps"][index]
    assert step["shell"] == "bash"
    assert "${{" not in step["run"], "an input expanded inside a script could inject shell code"
    script = tmp_path / "step.sh"
    script.write_text("#!/usr/bin/env bash\n" + step["run"])
    done = subprocess.run([SHELLCHECK, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_action_runs_the_command_under_no_docker_run() -> None:
    last = action()["runs"]["steps"][-1]["run"]
    assert 'exec no-docker run "${options[@]}" -- bash -c "$ND_RUN"' in last
    assert action()["runs"]["steps"][-1]["env"]["ND_RUN"] == "${{ inputs.run }}"


@pytest.mark.parametrize("path", [WORKFLOW, REPO / ".github" / "workflows" / "ci.yml"])
def test_workflows_are_actionlint_clean(path: Path) -> None:
    done = subprocess.run(
        [ACTIONLINT, "-shellcheck", SHELLCHECK, "-pyflakes=", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_copied_workflow_ends_with_isolated_steps_only() -> None:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["guard"]["steps"]
    names = [s.get("name", s.get("uses")) for s in steps]
    guard_at = next(i for i, s in enumerate(steps) if s.get("run") == "no-docker guard")
    assert names[0] == "actions/checkout@v4" and steps[0]["with"]["persist-credentials"] is False
    assert guard_at == len(steps) - 2 and steps[-1]["run"].startswith("no-docker run -- ")
