"""T-19: the CI guard's workflow checks (DESIGN §8), through ``no-docker guard`` on real git
repositories.

In every job, code under test runs isolated only in the last steps: a plain step after an
isolated one fails (``isolation-order``), so does a step that mixes isolated and plain
commands (``mixed-step``); no job or step may carry ``continue-on-error``. Each finding names
the file, the line and the rule. The project's own workflows and the workflow users copy pass.
Weakened builds: ``weakened/t19-*.patch``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, no_docker_argv

FIXTURES = REPO / "tests" / "fixtures" / "workflows"
FINDING = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+): (?P<rule>[a-zA-Z0-9/_-]+): (?P<message>.+)$")

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def repo_with(tmp_path: Path, workflows: dict[str, str], files: dict[str, str] | None = None) -> Path:
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=120)
    for name, text in workflows.items():
        (repo / ".github" / "workflows" / name).write_text(text)
    for rel, text in (files or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, timeout=120)
    return repo


def guard(repo: Path, *options: str) -> tuple[int, set[tuple[str, int, str]], str]:
    done = subprocess.run(no_docker_argv("guard", *options, str(repo)), capture_output=True, text=True,
                          timeout=120)
    lines = done.stdout.splitlines()
    matches = [FINDING.match(line) for line in lines]
    assert all(matches), f"not file:line: rule: message: {lines}"
    return done.returncode, {(m["file"], int(m["line"]), m["rule"]) for m in matches if m}, done.stderr


def expected(name: str, rule: str) -> set[tuple[str, int, str]]:
    text = (FIXTURES / name).read_text()
    return {
        (f".github/workflows/{name}", n, rule)
        for n, line in enumerate(text.splitlines(), 1)
        if re.search(rf"#\s*expect:\s*{re.escape(rule)}\b", line)
    }


def check_fixture(tmp_path: Path, name: str, rule: str) -> None:
    want = expected(name, rule)
    assert want, f"{name} marks no {rule} line"
    status, found, err = guard(repo_with(tmp_path, {name: (FIXTURES / name).read_text()}))
    assert status == 1, err
    assert found == want


def test_t19_plain_step_after_an_isolated_one_fails(tmp_path: Path) -> None:
    check_fixture(tmp_path, "bad-unisolated-after-isolated.yml", "isolation-order")


def test_t19_step_mixing_isolated_and_plain_commands_fails(tmp_path: Path) -> None:
    check_fixture(tmp_path, "bad-mixed-step.yml", "mixed-step")


def test_t19_continue_on_error_on_a_job_fails(tmp_path: Path) -> None:
    check_fixture(tmp_path, "bad-continue-on-error-job.yml", "continue-on-error")


def test_t19_continue_on_error_on_a_step_fails(tmp_path: Path) -> None:
    check_fixture(tmp_path, "bad-continue-on-error-step.yml", "continue-on-error")


def test_t19_isolated_steps_last_pass(tmp_path: Path) -> None:
    workflows = {p.name: p.read_text() for p in FIXTURES.glob("good-*.yml")}
    workflows["copied-guard.yml"] = (REPO / "ci" / "workflows" / "guard.yml").read_text()
    workflows.update({p.name: p.read_text() for p in (REPO / ".github" / "workflows").glob("*.y*ml")})
    stanza = subprocess.run(no_docker_argv("stanza", "--script"), capture_output=True, text=True, check=True,
                            timeout=120)
    # the project's workflow uses the local action `./ci`; the good fixture runs a stanza script
    files = {"ci/action.yml": (REPO / "ci" / "action.yml").read_text(), "tests/suite.sh": stanza.stdout}
    # Reviewed declarations (`# no-docker: unisolated: REASON`) are accepted only on request.
    status, found, err = guard(repo_with(tmp_path, workflows, files), "--allow-declared")
    assert (status, found) == (0, set()), err


def test_t19_broken_yaml_is_a_clear_error(tmp_path: Path) -> None:
    status, found, err = guard(
        repo_with(tmp_path, {"broken.yml": (FIXTURES / "broken-yaml.yml").read_text()})
    )
    assert (status, found) == (2, set())
    assert re.fullmatch(r"no-docker: guard: \.github/workflows/broken\.yml:9: invalid YAML: .+\n", err), err
