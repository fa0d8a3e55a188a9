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


@pytest.mark.parametrize(("install", "installed"), [
    ("no-docker", True), ("no-docker==0.1.0", True), ("no-docker[x]>=0.1", True),
    ("no-docker-99.0.tar.gz", False), ("NO-DOCKER-99.0-PY3-NONE-ANY.WHL", False), ("./dist/no-docker", False),
    ("no-docker @ file:///tmp/x.tar.gz", False), ("--find-links=./dist", False), ("", False),
])
def test_action_installs_only_a_requirement_by_name(tmp_path: Path, install: str, installed: bool) -> None:
    """Issue 27: the action's own install step refuses an archive, a path or a URL (exit 125,
    pip never started), as the guard does; run by bash with stand-ins for bwrap and python3."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "pip.log"
    (bin_dir / "bwrap").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "python3").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\nexit 0\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    script = action()["runs"]["steps"][0]["run"]
    done = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "ND_INSTALL": install, "ND_ALLOW_USERNS": "false"})
    if installed:
        assert log.read_text().split("\n")[-2] == install, done.stderr
        assert done.returncode == 127  # `no-docker --version`: the stand-in installed nothing
    else:
        assert done.returncode == 125 and not log.exists(), done.stderr
        assert "is not a requirement NAME[==VERSION] from the index" in done.stderr
