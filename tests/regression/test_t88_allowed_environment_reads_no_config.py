"""T-88: no variable the guard lets a step outside a run set makes pip, git or bash read a
config or code file: measured with the real tools, not argued (issue 27: ``XDG_CONFIG_DIRS``).

A directory D holds what a repository could plant: ``pip/pip.conf`` and ``pip.conf`` (a
find-links to ``./dist``), ``git/config`` and ``gitconfig`` (a ``core.fsmonitor`` command), and
``bash_env`` (a script that leaves a mark). For every name on the guard's short list
(``environment.ALLOWED``), with D, ``D/pip.conf``... wherever its value pattern accepts them, and
with values hypothesis draws from that pattern, ``pip config list``, ``git config --list`` and
``bash -c true`` must behave exactly as without the variable. The refused names that read D
(``XDG_CONFIG_DIRS``, ``PIP_CONFIG_FILE``, ``GIT_CONFIG_GLOBAL``, ``BASH_ENV``) are the control:
each of them changes what a tool does, so the comparison can see a change. Weakened build:
``weakened/t88-*.patch``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from no_docker.ci.environment import ALLOWED, before_no_docker_problem, outside_problem

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                                reason="git and bash are needed to measure what they read")
TIMEOUT = 60


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("planted")
    for conf in (d / "pip" / "pip.conf", d / "pip.conf"):
        conf.parent.mkdir(exist_ok=True)
        conf.write_text("[global]\nfind-links = ./dist\n")
    for conf in (d / "git" / "config", d / "gitconfig"):
        conf.parent.mkdir(exist_ok=True)
        conf.write_text("[core]\n\tfsmonitor = ./planted-hook\n")
    (d / "bash_env").write_text(f"echo sourced > {d}/mark\n")
    (d / "home").mkdir()
    return d


def behaviour(planted: Path, extra: dict[str, str]) -> tuple[str, str, bool]:
    """(pip's config, git's config, whether bash sourced anything), with only ``extra`` set
    beside a minimal environment; run from D, so relative values point into it too."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(planted / "home"), **extra}
    (planted / "mark").unlink(missing_ok=True)
    pip = subprocess.run([sys.executable, "-I", "-m", "pip", "config", "list"], cwd=planted, env=env,
                         capture_output=True, text=True, timeout=TIMEOUT, check=False)
    git = subprocess.run(["git", "config", "--list", "--includes"], cwd=planted, env=env,
                         capture_output=True, text=True, timeout=TIMEOUT, check=False)
    subprocess.run(["bash", "-c", "true"], cwd=planted, env=env, capture_output=True, timeout=TIMEOUT,
                   check=False)
    return pip.stdout, git.stdout, (planted / "mark").exists()


@pytest.fixture(scope="module")
def baseline(planted: Path) -> tuple[str, str, bool]:
    return behaviour(planted, {})


def candidates(planted: Path) -> list[str]:
    return [str(planted), f"{planted}/pip.conf", f"{planted}/pip/pip.conf", f"{planted}/gitconfig",
            f"{planted}/bash_env", "pip.conf", "gitconfig", "bash_env", "."]


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_t88_an_allowed_name_pointed_at_planted_files_changes_nothing(
        planted: Path, baseline: tuple[str, str, bool], name: str) -> None:
    tried = [v for v in candidates(planted) if outside_problem(name, v) is None]
    for value in tried:
        assert behaviour(planted, {name: value}) == baseline, f"{name}={value} changed what a tool read"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_t88_allowed_values_change_nothing(planted: Path, baseline: tuple[str, str, bool],
                                           data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(ALLOWED)), label="name")
    value = data.draw(st.from_regex(ALLOWED[name], fullmatch=True).filter(lambda v: "\0" not in v),
                      label="value")
    if outside_problem(name, value) is None:
        assert behaviour(planted, {name: value}) == baseline, f"{name}={value!r} changed what a tool read"


@pytest.mark.parametrize(("name", "value"), [
    ("XDG_CONFIG_DIRS", "{d}"), ("PIP_CONFIG_FILE", "{d}/pip.conf"), ("GIT_CONFIG_GLOBAL", "{d}/gitconfig"),
    ("BASH_ENV", "{d}/bash_env"),
])
def test_t88_control_a_refused_name_is_seen_to_change_a_tool(planted: Path, baseline: tuple[str, str, bool],
                                                             name: str, value: str) -> None:
    assert outside_problem(name, value) is not None and before_no_docker_problem(name) is not None
    assert behaviour(planted, {name: value.format(d=planted)}) != baseline, \
        f"{name} did not change what pip, git or bash read: the comparison would see nothing"
