"""The shell re-exec stanza: what ``no-docker stanza`` prints, its control flow (with a
recording stand-in for no-docker), and the real thing under ``no-docker run``."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.ci.stanza import STANZA, example_script

NO_DOCKER = str(Path(sys.executable).parent / "no-docker")
SHELLCHECK = str(Path(sys.executable).parent / "shellcheck")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def write_script(path: Path, body: str) -> Path:
    path.write_text(f"#!/usr/bin/env bash\n{STANZA}\nset -euo pipefail\n{body}\n")
    path.chmod(0o755)
    return path


def test_stanza_command_prints_the_line() -> None:
    proc = subprocess.run([NO_DOCKER, "stanza"], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, STANZA + "\n", "")
    assert "\n" not in STANZA


def test_stanza_script_and_help() -> None:
    proc = subprocess.run([NO_DOCKER, "stanza", "--script"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == example_script()
    assert proc.stdout.splitlines()[:2] == ["#!/usr/bin/env bash", STANZA]
    helptext = subprocess.run(
        [NO_DOCKER, "stanza", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    helptext = " ".join(helptext.split())
    assert "--script" in helptext and "no-docker check" in helptext and "no-docker run" in helptext
    bad = subprocess.run([NO_DOCKER, "stanza", "--bogus"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--bogus" in bad.stderr


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_example_script_is_shellcheck_clean(tmp_path: Path, shell: str) -> None:
    script = tmp_path / "suite.sh"
    # the line itself is POSIX sh too: a suite started with `sh` re-executes under bash
    script.write_text(f"#!/bin/{shell}\n{STANZA}\necho body\n")
    if shell == "bash":
        script.write_text(example_script())
    proc = subprocess.run([SHELLCHECK, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


# -- control flow, with a stand-in that records how it was called --------------------------

FAKE = """#!/usr/bin/env bash
printf '%s\\n' "$(printf '%q ' "$@")" >> "$FAKE_LOG"
case "$1" in
  check) exit "$FAKE_CHECK" ;;
  run) while [ "$1" != -- ]; do shift; done; shift; FAKE_CHECK=0 exec "$@" ;;
esac
exit 99
"""


@pytest.fixture
def fake_no_docker(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "no-docker"
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k != "NO_DOCKER_REEXEC"}
    env.update(PATH=f"{bindir}:{os.environ['PATH']}", FAKE_LOG=str(tmp_path / "calls.log"), FAKE_CHECK="125")
    return env


def calls(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def test_outside_the_script_reexecutes_itself_with_its_arguments(
    tmp_path: Path, fake_no_docker: dict
) -> None:
    script = write_script(tmp_path / "suite.sh", 'printf "%s|" "$@"; exit 7')
    proc = subprocess.run(
        [str(script), "a b", "", "c*"], cwd=tmp_path, env=fake_no_docker, capture_output=True, text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (7, "a b||c*|")
    first, run, second = calls(fake_no_docker)
    assert first.split() == ["check"]
    assert run.startswith(f"run --work {tmp_path} --keep-env NO_DOCKER_REEXEC -- ")  # not a repository
    assert run.endswith(f"{script} a\\ b '' c\\* ")
    assert second.split() == ["check"]  # the re-executed script checked again, and passed


def test_inside_the_script_runs_on_without_a_new_run(tmp_path: Path, fake_no_docker: dict) -> None:
    script = write_script(tmp_path / "suite.sh", "echo body")
    proc = subprocess.run(
        ["bash", str(script)],
        env={**fake_no_docker, "FAKE_CHECK": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, "body\n")
    assert calls(fake_no_docker) == ["check "]


def test_the_reexec_variable_never_skips_the_check(tmp_path: Path, fake_no_docker: dict) -> None:
    """NO_DOCKER_REEXEC=1 only stops nesting: the check still runs, fails, and the body never runs."""
    script = write_script(tmp_path / "suite.sh", "echo body")
    proc = subprocess.run(
        [str(script)],
        env={**fake_no_docker, "NO_DOCKER_REEXEC": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (125, "")
    assert "not isolated" in proc.stderr
    assert [c.split()[0] for c in calls(fake_no_docker)] == ["check"]


def test_without_no_docker_the_script_never_runs(tmp_path: Path) -> None:
    script = write_script(tmp_path / "suite.sh", "echo body")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (127, "")


# -- the real thing ---------------------------------------------------------------------------

VIEW = """python3 - "$@" <<'EOF'
import json, os, sys
view = {"pidns": os.readlink("/proc/self/ns/pid"), "netns": os.readlink("/proc/self/ns/net"),
        "ifaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
        "args": sys.argv[1:]}
open("view.json", "w").write(json.dumps(view))
EOF
exit 3"""


@needs_bwrap
def test_real_stanza_runs_the_script_isolated(tmp_path: Path) -> None:
    script = write_script(tmp_path / "suite.sh", VIEW)
    env = {**os.environ, "PATH": f"{Path(NO_DOCKER).parent}:{os.environ['PATH']}"}
    env.pop("NO_DOCKER_REEXEC", None)
    proc = subprocess.run(
        [str(script), "x y", "z"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr
    view = json.loads((tmp_path / "view.json").read_text())
    assert view["pidns"] != os.readlink("/proc/self/ns/pid")
    assert view["netns"] != os.readlink("/proc/self/ns/net")
    assert view["ifaces"] == ["lo"]
    assert view["args"] == ["x y", "z"]


@pytest.mark.parametrize("where", ["root", "subdirectory"])
def test_the_work_dir_is_the_scripts_repository_root(
    tmp_path: Path, fake_no_docker: dict, where: str
) -> None:
    """Issue 18.4: from a subdirectory of a repository the stanza ran with the subdirectory as
    work dir; it takes the repository's root (when the current directory is inside it)."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=120)
    script = write_script(repo / "tests" / "suite.sh", "echo body")
    cwd = repo if where == "root" else repo / "tests"
    proc = subprocess.run(["bash", str(script)], cwd=cwd, env=fake_no_docker, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert calls(fake_no_docker)[1].startswith(f"run --work {repo.resolve()} ")


def test_outside_the_scripts_repository_the_work_dir_stays_the_current_one(
    tmp_path: Path, fake_no_docker: dict
) -> None:
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    elsewhere.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=120)
    script = write_script(repo / "suite.sh", "echo body")
    proc = subprocess.run(["bash", str(script)], cwd=elsewhere, env=fake_no_docker, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert calls(fake_no_docker)[1].startswith(f"run --work {elsewhere} ")


@needs_bwrap
def test_real_stanza_from_a_subdirectory_sees_its_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=120)
    write_script(repo / "tests" / "suite.sh", "git status --short >/dev/null && echo git-ok; "
                 "touch ../.git/hooks/x 2>/dev/null || echo hooks-read-only")
    env = {**os.environ, "PATH": f"{Path(NO_DOCKER).parent}:{os.environ['PATH']}"}
    env.pop("NO_DOCKER_REEXEC", None)
    proc = subprocess.run(["bash", "suite.sh"], cwd=repo / "tests", env=env, capture_output=True, text=True,
                          timeout=120)
    assert (proc.returncode, proc.stdout) == (0, "git-ok\nhooks-read-only\n"), proc.stderr
