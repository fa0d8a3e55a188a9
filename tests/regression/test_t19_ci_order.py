"""T-19: the CI guard's workflow checks (DESIGN §8), through ``no-docker guard`` on real git
repositories.

In every job, code under test runs isolated only in the last steps: a plain step after an
isolated one fails (``isolation-order``), so does a step that mixes isolated and plain
commands (``mixed-step``); no job or step may carry ``continue-on-error``. Each finding names
the file, the line and the rule. The project's own workflows and the workflow users copy pass.
Issue 27's five bypasses (each a ``bad-i27-*.yml`` fixture): default-deny on the environment
(``XDG_CONFIG_DIRS``, ``APT_CONFIG``), on install arguments (a local archive named like the
package, also as the action's ``install:``) and on run paths (``--rw`` with ``..`` reaching the
runner's work dir). Issue 28 item 8: the artifact actions pass, a restored cache is a finding.
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


def t19_findings(tmp_path: Path, name: str, files: dict[str, str] | None = None
                 ) -> tuple[int, set[tuple[str, int, str]], str]:
    """The guard over one fixture: its status, its T-19 findings (actionlint's and ShellCheck's
    own are left out: the fixtures' scripts are hostile on purpose), stderr."""
    status, found, err = guard(repo_with(tmp_path, {name: (FIXTURES / name).read_text()}, files))
    return status, {f for f in found if not f[2].startswith(("actionlint/", "shellcheck/"))}, err


def marked(name: str) -> set[tuple[str, int, str]]:
    text = (FIXTURES / name).read_text()
    return {(f".github/workflows/{name}", n, m.group(1)) for n, line in enumerate(text.splitlines(), 1)
            if (m := re.search(r"#\s*expect:\s*([a-z-]+)", line))}


@pytest.mark.parametrize("name", [
    "bad-i27-xdg-config-then-pip.yml",  # 1: XDG_CONFIG_DIRS, then pip read the repository's pip.conf
    "bad-i27-pip-local-archive.yml",  # 2: pip install no-docker-99.0.tar.gz installs the local file
    "bad-i27-action-install-archive.yml",  # 3: the same through the action's install:
    "bad-i27-rw-dotdot-work-dir.yml",  # 4: --rw /home/runner/work/proj/.. is the runner's work dir
    "bad-i27-apt-config-then-apt.yml",  # 5: APT_CONFIG, then apt ran the config's Pre-Invoke hook
])
def test_t19_issue27_bypass_is_refused(tmp_path: Path, name: str) -> None:
    want = marked(name)
    assert want, f"{name} marks nothing"
    status, found, err = t19_findings(tmp_path, name)
    assert status == 1, err
    assert found == want


def test_t19_known_actions_pass_and_a_cache_is_a_finding(tmp_path: Path) -> None:
    """Issue 28 item 8: checkout, setup, download-artifact and upload-artifact (also after the
    isolated steps) pass; every restored cache is a finding that says what to do; a reviewed
    declaration of one is accepted only with --allow-declared."""
    status, found, err = t19_findings(tmp_path / "good", "good-known-actions.yml")
    assert (status, found) == (0, set()), err
    status, found, err = t19_findings(tmp_path / "cache", "bad-restored-cache.yml")
    assert status == 1, err
    assert found == marked("bad-restored-cache.yml")
    repo = tmp_path / "cache" / "repo"
    done = subprocess.run(no_docker_argv("guard", str(repo)), capture_output=True, text=True, timeout=120)
    assert "restored-cache" in done.stdout and "declare the step" in done.stdout, done.stdout


def test_t19_checkout_keeping_its_token_is_a_note_not_a_finding(tmp_path: Path) -> None:
    text = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - uses: actions/checkout@v4\n      - run: no-docker run -- true\n")
    status, found, err = guard(repo_with(tmp_path, {"ci.yml": text}))
    assert (status, found) == (0, set()), err
    assert ("no-docker: guard: note: .github/workflows/ci.yml:6: actions/checkout keeps the job's token "
            "in .git/config") in err


def test_t19_run_config_of_the_repository_is_judged(tmp_path: Path) -> None:
    """``[tool.no-docker] rw`` in the work dir's pyproject.toml widens every run there: the
    guard judges it like ``--rw``; a link the repository holds is not followed."""
    text = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - run: no-docker run -- true\n      - run: no-docker run --rw cache -- true\n")
    config = '[tool.no-docker]\nrw = ["../../_temp"]\n'
    status, found, err = guard(repo_with(tmp_path / "config", {"ci.yml": text}, {"pyproject.toml": config}))
    assert status == 1 and (".github/workflows/ci.yml", 6, "unisolated-step") in found, err
    repo = repo_with(tmp_path / "link", {"ci.yml": text.replace("--rw cache", "--rw /home/runner/x")})
    (repo / "sub").symlink_to("/home/runner")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, timeout=120)
    linked = text.replace("- run: no-docker run -- true\n      ", "").replace("--rw cache", "--rw sub/.x")
    (repo / ".github" / "workflows" / "ci.yml").write_text(linked)
    status, found, err = guard(repo)
    assert status == 1 and (".github/workflows/ci.yml", 6, "unisolated-step") in found, err
