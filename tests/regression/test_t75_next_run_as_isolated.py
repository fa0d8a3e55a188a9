"""T-75: the next command outside is as isolated as this run (issue 25).

A mutation tool starts thousands of runs in one work dir: whatever one run leaves there, the
next command outside reads. Each case plants, from inside a ``no-docker run`` (inside an outer
guard, whose canary answers on the real engine paths), something that would make the *next*
command outside run code or lose its isolation; then runs that next command outside the run, as
the user would. The witness is the canary: the planted code, run outside, reaches it (shown by
the control, the same plant made without a run). Under ``run`` the plant is refused by a
read-only mount, or found after the run (exit 125) and moved aside, so that the next command
runs isolated and reaches nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import no_docker_argv
from isolation_cases import require_bwrap

REACH = ("import socket as _s\n"
         "_c = _s.socket(_s.AF_UNIX)\n"
         "_c.settimeout(5)\n"
         "_c.connect('/run/docker.sock')\n"
         "_c.sendall(b'GET /t75/{case} HTTP/1.1\\r\\nHost: d\\r\\n\\r\\n')\n"
         "_c.recv(100)\n")


def _plant_files(case: str) -> dict[str, str]:
    """What the run writes, per case (relative path -> content)."""
    reach = REACH.format(case=case)
    return {
        # 1. `python -m pytest --no-docker`: the current directory is sys.path[0].
        "pytest-py": {"pytest.py": reach + "raise SystemExit(0)\n"},
        # 2. a new pytest.ini beats pyproject.toml's `no_docker = true`; the conftest.py (the
        #    run's output, imported by the next session) runs outside then.
        "pytest-ini": {"pytest.ini": "[pytest]\naddopts = -p no:no_docker\n", "conftest.py": reach},
        # 3. even with --no-docker typed: the plugin blocked, the option defined by a conftest.
        "dot-pytest-ini": {".pytest.ini": "[pytest]\naddopts = -p no:no_docker\n",
                           "conftest.py": reach + "def pytest_addoption(parser):\n"
                           "    parser.addoption('--no-docker', action='store_true')\n"},
        # 4. the project's own pyproject.toml turned off (read-only inside: the write fails).
        "pyproject-off": {"pyproject.toml": "[tool.pytest.ini_options]\nno_docker = false\n",
                          "conftest.py": reach},
    }[case]


NEXT = {
    "pytest-py": [sys.executable, "-m", "pytest", "--no-docker", "-q", "-p", "no:cacheprovider"],
    "pytest-ini": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    "dot-pytest-ini": [sys.executable, "-m", "pytest", "--no-docker", "-q", "-p", "no:cacheprovider"],
    "pyproject-off": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
}


def _project(work: Path) -> None:
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = true\n")
    (work / "test_ok.py").write_text("def test_ok():\n    assert True\n")


def _plant_script(files: dict[str, str]) -> str:
    return "import pathlib\n" + "".join(
        f"pathlib.Path({name!r}).write_text({text!r})\n" for name, text in files.items())


def _env(guard) -> dict[str, str]:
    env = dict(guard.env)
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def _reached(guard, case: str) -> bool:
    return any(f"/t75/{case}" in json.dumps(record) for record in guard.records())


@pytest.fixture(scope="module")
def t75_guard(module_guard):
    return module_guard


@pytest.mark.parametrize("case", list(NEXT))
def test_the_next_command_outside_reaches_nothing(t75_guard, case):
    require_bwrap()
    guard = t75_guard
    base = guard.base / f"t75-{case}"
    base.mkdir()
    env = _env(guard)
    files = _plant_files(case)

    # The control: the same plant, made without a run; the next command reaches the canary.
    control = base / "control"
    _project(control)
    for name, text in files.items():
        (control / name).write_text(text)
    guard.run(NEXT[case], cwd=control, env=env, timeout=120)
    assert _reached(guard, case), f"control: the planted code did not reach the canary ({case})"
    seen = len(guard.records())

    work = base / "work"
    _project(work)
    planted = guard.run([*no_docker_argv("run", "--quiet", "--"), sys.executable, "-c", _plant_script(files)],
                        cwd=work, env=env, timeout=120)
    stderr = planted.stderr.decode(errors="replace")
    if case == "pyproject-off":
        assert b"Read-only file system" in planted.stderr, stderr
        assert "no_docker = true" in (work / "pyproject.toml").read_text()
    else:
        assert planted.returncode == 125, stderr
        assert "P4 not proven: the run left code that runs later, outside" in stderr, stderr
        assert "moved aside to" in stderr and "none of it runs later" in stderr, stderr
        for name in files:
            if name != "conftest.py":  # the project's test code: it runs inside the next run
                assert not (work / name).exists(), (name, stderr)
    after = guard.run(NEXT[case], cwd=work, env=env, timeout=180)
    out = (after.stdout + after.stderr).decode(errors="replace")
    assert not any(f"/t75/{case}" in json.dumps(r) for r in guard.records()[seen:]), (
        f"the next command outside reached the canary ({case}): {out[-1500:]}")
    assert "no-docker: isolation proven" in out, out[-1500:]  # it ran, inside a run


def test_a_stanza_line_cannot_be_removed_by_a_run(t75_guard):
    """The stanza script is read-only inside: the next `bash t.sh` still re-executes isolated."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-stanza"
    work.mkdir()
    stanza = subprocess.run(no_docker_argv("stanza"), capture_output=True, text=True, timeout=30,
                            check=True).stdout
    script = work / "t.sh"
    script.write_text(f"#!/bin/bash\n{stanza}{sys.executable} - <<'EOF'\n{REACH.format(case='stanza')}EOF\n")
    env = _env(guard)
    removed = guard.run([*no_docker_argv("run", "--quiet", "--"), "sed", "-i", "/re-exec stanza/d", "t.sh"],
                        cwd=work, env=env, timeout=60)
    assert removed.returncode != 0 and "stanza" in script.read_text(), removed.stderr
    seen = len(guard.records())
    after = guard.run(["bash", "t.sh"], cwd=work, env=env, timeout=120)
    assert not any("/t75/stanza" in json.dumps(r) for r in guard.records()[seen:]), after.stderr
    # The control: without the line, the same script reaches the canary outside.
    script.write_text(script.read_text().replace(stanza, ""))
    guard.run(["bash", "t.sh"], cwd=work, env=env, timeout=120)
    assert _reached(guard, "stanza")


def test_a_subdirectory_config_and_a_symlinked_one_are_refused(t75_guard):
    """`[tool.no-docker]` in a subdirectory (the next run started there reads it) and a
    pyproject.toml turned into a link to a FIFO outside (never opened by the supervisor)."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-config"
    work.mkdir()
    (work / "sub").mkdir()
    other = guard.base / "t75-other"
    other.mkdir()
    fifo = guard.base / "t75-fifo"
    os.mkfifo(fifo)
    env = _env(guard)
    plant = (f"printf '[tool.no-docker]\\nrw = [\"{other}\"]\\nquiet = true\\n' > sub/pyproject.toml"
             f" && ln -s {fifo} pyproject.toml")
    writer = subprocess.Popen(["sh", "-c", f"exec 3>{fifo}; echo woken >&3"], stdout=subprocess.DEVNULL)
    try:
        planted = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c", plant], cwd=work, env=env)
        stderr = planted.stderr.decode(errors="replace")
        assert planted.returncode == 125, stderr
        assert not (work / "sub" / "pyproject.toml").exists() and not os.path.lexists(work / "pyproject.toml")
        nxt = guard.run([*no_docker_argv("run", "--"), "sh", "-c", f"echo x > {other}/f"], cwd=work / "sub",
                        env=env)
        assert not (other / "f").exists(), nxt.stderr
        assert b"ended" in nxt.stderr  # the status lines are back (quiet = true was moved aside)
        with pytest.raises(subprocess.TimeoutExpired):
            writer.wait(0.5)  # nobody opened the FIFO's read end
    finally:
        writer.kill()
        writer.wait()


def test_a_code_cache_is_not_writable(tmp_path):
    """--rw ~/.cache/pip (once the docs' advice): refused with the safe alternative."""
    home = tmp_path / "home"
    (home / ".cache" / "pip").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(no_docker_argv("run", "--rw", str(home / ".cache" / "pip"), "--", "true"), cwd=work,
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip's cache" in done.stderr and "--ro ~/.cache/pip" in done.stderr, done.stderr
    assert textwrap.shorten(done.stderr, 400).count("\n") <= 1


def test_a_project_venv_is_read_only_and_a_new_one_is_moved_aside(t75_guard):
    """pip reads pip.conf in a venv's root (sys.prefix): a planted one made the next `pip
    install` outside take a planted wheel. The whole venv is read-only inside; a venv the run
    creates is code for later: refused and moved aside."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-venv"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(work / ".venv")], check=True, timeout=120)
    env = _env(guard)
    conf = "[global]\nindex-url = http://t75.invalid/simple\n"
    planted = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c",
                         f"printf '{conf}' > .venv/pip.conf"], cwd=work, env=env)
    assert planted.returncode != 0 and b"Read-only file system" in planted.stderr, planted.stderr
    assert not (work / ".venv" / "pip.conf").exists()
    made = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c",
                      "mkdir -p v2/bin && echo 'home = /usr/bin' > v2/pyvenv.cfg && "
                      f"printf '{conf}' > v2/pip.conf"],
                     cwd=work, env=env)
    assert made.returncode == 125 and b"moved aside to" in made.stderr, made.stderr
    assert not (work / "v2" / "pip.conf").exists() and not (work / "v2" / "pyvenv.cfg").exists()
    # The route is real: pip outside reads a pip.conf in the venv's root.
    (work / ".venv" / "pip.conf").write_text(conf)
    shown = subprocess.run([str(work / ".venv" / "bin" / "python"), "-m", "pip", "config", "list"],
                           capture_output=True, text=True, timeout=120)
    assert "t75.invalid" in shown.stdout, (shown.stdout, shown.stderr)


def test_git_outside_after_a_refused_run_runs_nothing(t75_guard):
    """A new .git/commondir was refused (125) but stayed in place: the next `git status` outside
    ran the planted core.fsmonitor (3 of 3). Now it is moved aside."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-git"
    work.mkdir()
    env = {**_env(guard), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    subprocess.run([*git, "init", "-q", str(work)], check=True, timeout=60, env=env)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "i"], cwd=work, check=True, timeout=60,
                   env=env)
    reach = guard.base / "t75-reach.py"
    reach.write_text(f"#!{sys.executable}\n" + REACH.format(case="git"))
    reach.chmod(0o755)
    plant = ("mkdir -p evil/hooks && cp -r .git/objects .git/refs .git/HEAD evil/ && "
             "printf '[core]\\n\\trepositoryformatversion = 0\\n"
             f"\\tfsmonitor = \"{reach}; false\"\\n' > evil/config"
             ' && echo "$PWD/evil" > .git/commondir')
    planted = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c", plant], cwd=work, env=env)
    assert planted.returncode == 125 and b"moved aside to" in planted.stderr, planted.stderr
    seen = len(guard.records())
    guard.run(["git", "status"], cwd=work, env=env)
    assert not any("/t75/git" in json.dumps(r) for r in guard.records()[seen:])
    # The control: the same plant outside; git status reaches the canary.
    guard.run(["sh", "-c", "rm -rf evil; " + plant], cwd=work, env=env)
    guard.run(["git", "status"], cwd=work, env=env)
    assert _reached(guard, "git")
