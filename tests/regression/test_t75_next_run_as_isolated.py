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


ADDOPTION = "def pytest_addoption(parser):\n    parser.addoption('--no-docker', action='store_true')\n"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PYTEST_ND = [*PYTEST, "--no-docker"]


def _cases() -> dict[str, tuple[dict[str, str], dict[str, str], list[str], str]]:
    """case -> (the project's own files besides the usual, what the run writes, the next
    command outside, the directory it starts in). A content "PYC:..." is compiled."""
    def reach(case: str) -> str:
        return REACH.format(case=case)

    return {
        # `python -m pytest --no-docker`: the current directory is sys.path[0].
        "pytest-py": ({}, {"pytest.py": reach("pytest-py") + "raise SystemExit(0)\n"}, PYTEST_ND, ""),
        # a new pytest.ini beats pyproject.toml's `no_docker = true`; the conftest.py (the run's
        # output, imported by the next session) runs outside then.
        "pytest-ini": ({}, {"pytest.ini": "[pytest]\naddopts = -p no:no_docker\n",
                            "conftest.py": reach("pytest-ini")}, PYTEST, ""),
        # even with --no-docker typed: the plugin blocked, the option defined by a conftest.
        "dot-pytest-ini": ({}, {".pytest.ini": "[pytest]\naddopts = -p no:no_docker\n",
                                "conftest.py": reach("dot-pytest-ini") + ADDOPTION}, PYTEST_ND, ""),
        # the project's own pyproject.toml turned off (read-only inside: the write fails).
        "pyproject-off": ({}, {"pyproject.toml": "[tool.pytest.ini_options]\nno_docker = false\n",
                               "conftest.py": reach("pyproject-off")}, PYTEST, ""),
        # --- the red-team review of the first build (each got through it) ---
        # a02: `cd tests && python -m pytest`: tests/ is sys.path[0] then.
        "tests-pytest-py": ({"tests/test_t.py": "def test_t():\n    pass\n"},
                            {"tests/pytest.py": reach("tests-pytest-py") + "raise SystemExit(0)\n"},
                            PYTEST_ND, "tests"),
        # a03: a distribution in the current directory: importlib.metadata reads its pytest11.
        "dist-info-plugin": ({}, {"e-1.0.dist-info/METADATA":
                                  "Metadata-Version: 2.1\nName: e\nVersion: 1.0\n",
                                  "e-1.0.dist-info/entry_points.txt": "[pytest11]\ne = t75evil\n",
                                  "t75evil.py": reach("dist-info-plugin")}, PYTEST_ND, ""),
        # a05: pickle tries org.python.core at pytest's start-up.
        "org-package": ({}, {"org/__init__.py": reach("org-package")}, PYTEST_ND, ""),
        # a21: pytest 9 reads pytest.toml first.
        "pytest-toml": ({}, {"pytest.toml": '[pytest]\naddopts = ["-p", "no:no_docker"]\n',
                             "conftest.py": reach("pytest-toml") + ADDOPTION}, PYTEST_ND, ""),
        # a22: .pytest.toml, an empty [pytest] table is enough.
        "dot-pytest-toml": ({}, {".pytest.toml": "[pytest]\n", "conftest.py": reach("dot-pytest-toml")},
                            PYTEST, ""),
        # a25: a -p plugin of the project's own config is imported before the plugin re-executes.
        "p-plugin-edited": ({"pyproject.toml":
                             '[tool.pytest.ini_options]\nno_docker = true\naddopts = "-p t75plug"\n',
                             "t75plug.py": "\n"},
                            {"t75plug.py": reach("p-plugin-edited")}, PYTEST_ND, ""),
        # a30: a sourceless package of a name pytest imports.
        "sourceless-package": ({}, {"pluggy/__init__.pyc": "PYC:" + reach("sourceless-package")},
                               PYTEST_ND, ""),
        # a39: a distribution that takes no_docker's own plugin name (required_plugins still met).
        "dist-info-hides-plugin": ({}, {
            "no_docker-0.1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: no-docker\nVersion: 0.1.0\n",
            "no_docker-0.1.0.dist-info/entry_points.txt": "[pytest11]\nno_docker = json\n",
            "conftest.py": reach("dist-info-hides-plugin") + ADDOPTION.replace(
                "\n", "\n    parser.addini('no_docker', 'x', type='bool')\n", 1).rstrip() + "\n"},
            PYTEST_ND, ""),
        # --- the second red-team review ---
        # rt25b #6: names pytest's plugins import that no tool list had (platformdirs).
        "tests-platformdirs": ({"tests/test_t.py": "def test_t():\n    pass\n"},
                               {"tests/platformdirs.py": reach("tests-platformdirs")}, PYTEST, "tests"),
        # rt25b #10: a link named like a package, at the root, to a package deeper down.
        "linked-package": ({}, {"tests/data/pkg/__init__.py":
                                reach("linked-package") + "raise SystemExit(0)\n",
                                "pytest": "LINK:tests/data/pkg"}, PYTEST_ND, ""),
        # rt25b #12: a linked distribution whose pytest11 names a module deeper down.
        "linked-dist-info": ({}, {"tests/data/di/entry_points.txt": "[pytest11]\nrt = tests.data.rtplug\n",
                                  "tests/data/di/METADATA":
                                  "Metadata-Version: 2.1\nName: rtevil\nVersion: 1.0\n",
                                  "tests/data/rtplug.py": reach("linked-dist-info"),
                                  "rtevil-1.0.dist-info": "LINK:tests/data/di"}, PYTEST_ND, ""),
        # a40: a byte copy of another config of the project, to the root.
        "copied-config": ({"examples/pytest.ini": "[pytest]\n"},
                          {"pytest.ini": "[pytest]\n", "conftest.py": reach("copied-config")}, PYTEST, ""),
    }


CASES = _cases()


def _project(work: Path, extra: dict[str, str] | None = None) -> None:
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.pytest.ini_options]\nno_docker = true\n")
    (work / "test_ok.py").write_text("def test_ok():\n    pass\n")  # a session to collect
    for name, text in (extra or {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)


def _plant_script(files: dict[str, str]) -> str:
    lines = ["import pathlib, py_compile, tempfile"]
    for name, text in files.items():
        lines.append(f"pathlib.Path({name!r}).parent.mkdir(parents=True, exist_ok=True)")
        if text.startswith("LINK:"):
            lines.append(f"import os; os.symlink({text[5:]!r}, {name!r})")
        elif text.startswith("PYC:"):
            lines.append(f"src = tempfile.mktemp(suffix='.py'); pathlib.Path(src).write_text({text[4:]!r}); "
                         f"py_compile.compile(src, cfile={name!r})")
        else:
            lines.append(f"pathlib.Path({name!r}).write_text({text!r})")
    return "\n".join(lines) + "\n"


def _plant_here(work: Path, files: dict[str, str]) -> None:
    """The control: the same plant, made without a run."""
    subprocess.run([sys.executable, "-c", _plant_script(files)], cwd=work, check=True, timeout=60)


def _env(guard) -> dict[str, str]:
    env = dict(guard.env)
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def _reached(guard, case: str) -> bool:
    return any(f"/t75/{case}" in json.dumps(record) for record in guard.records())


@pytest.fixture(scope="module")
def t75_guard(module_guard):
    return module_guard


@pytest.mark.parametrize("case", list(CASES))
def test_the_next_command_outside_reaches_nothing(t75_guard, case):
    require_bwrap()
    guard = t75_guard
    own, files, following, start = CASES[case]
    base = guard.base / f"t75-{case}"
    base.mkdir()
    env = _env(guard)

    # The control: the same plant, made without a run; the next command reaches the canary.
    control = base / "control"
    _project(control, own)
    _plant_here(control, files)
    done = guard.run(following, cwd=control / start, env=env, timeout=120)
    assert _reached(guard, case), (f"control: the planted code did not reach the canary ({case}): "
                                   f"{(done.stdout + done.stderr).decode(errors='replace')[-1500:]}")
    seen = len(guard.records())

    work = base / "work"
    _project(work, own)
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
    after = guard.run(following, cwd=work / start, env=env, timeout=180)
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
    assert done.stderr.strip().count("\n") == 0, done.stderr  # one line


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


def test_a_path_an_editable_install_adds_is_guarded_like_the_root(t75_guard):
    """a08: the project venv's .pth names W/src (an editable src-layout install); a
    sitecustomize.py the run puts there ran at every later start of that venv's Python.

    The next command imports a module of W/src by name: a system Python (Debian's) has its own
    sitecustomize.py earlier on sys.path, and the planted one is then never the one imported."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-pth"
    _project(work)
    (work / "src").mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")], check=True,
                   timeout=120)
    python = work / ".venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(site, "__editable__.proj-0.1.pth").write_text(f"{work}/src\n")
    env = _env(guard)
    plant = _plant_script({"src/t75_pth_probe.py": REACH.format(case="pth")})
    planted = guard.run([*no_docker_argv("run", "--quiet", "--"), sys.executable, "-c", plant], cwd=work,
                        env=env)
    assert planted.returncode == 125 and b"none of it runs later" in planted.stderr, planted.stderr
    seen = len(guard.records())
    guard.run([str(python), "-c", "import t75_pth_probe"], cwd=guard.base, env=env)
    assert not any("/t75/pth" in json.dumps(r) for r in guard.records()[seen:])
    _plant_here(work, {"src/t75_pth_probe.py": REACH.format(case="pth")})  # the control
    guard.run([str(python), "-c", "import t75_pth_probe"], cwd=guard.base, env=env)
    assert _reached(guard, "pth")


def test_a_planted_quarantine_name_does_not_keep_the_plant(t75_guard):
    """a11/a26: the run first takes .no-docker-quarantine (a link, a file): the undo used to stop
    there ("NOT undone") and the next run took what was left as its baseline."""
    require_bwrap()
    guard = t75_guard
    env = _env(guard)
    for kind in ("link", "file"):
        work = guard.base / f"t75-quarantine-{kind}"
        _project(work)
        first = ("ln -s /nonexistent .no-docker-quarantine" if kind == "link"
                 else "touch .no-docker-quarantine")
        plant = f"{first} && printf '%s' \"$0\" > pytest.py"
        planted = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c", plant,
                             REACH.format(case=f"q-{kind}")], cwd=work, env=env)
        assert planted.returncode == 125 and b"none of it runs later" in planted.stderr, planted.stderr
        assert not (work / "pytest.py").exists()
        seen = len(guard.records())
        guard.run(PYTEST_ND, cwd=work, env=env)
        assert not any(f"/t75/q-{kind}" in json.dumps(r) for r in guard.records()[seen:])


def test_a_directory_the_run_names_like_a_quarantine_is_not_adopted(t75_guard):
    """rt25b #7: the run makes .no-docker-quarantine/ itself, shaped as a repository whose
    config runs core.fsmonitor; the undo used to adopt it, never walked, and say "look at it"."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-quarantine-shaped"
    _project(work)
    env = {**_env(guard), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    reach = guard.base / "t75-reach-q.py"
    reach.write_text(f"#!{sys.executable}\n" + REACH.format(case="qrepo"))
    reach.chmod(0o755)
    plant = ("mkdir -m 700 .no-docker-quarantine && cd .no-docker-quarantine && mkdir objects refs && "
             "echo 'ref: refs/heads/main' > HEAD && printf '[core]\\n\\trepositoryformatversion = 0\\n"
             "\\tbare = false\\n\\tworktree = ..\\n"
             f"\\tfsmonitor = \"{reach}; false\"\\n' > config && cd .. && echo x=1 > pytest.py")
    planted = guard.run([*no_docker_argv("run", "--quiet", "--"), "sh", "-c", plant], cwd=work, env=env)
    assert planted.returncode == 125 and b"none of it runs later" in planted.stderr, planted.stderr
    seen = len(guard.records())
    for where in [work, *work.glob(".no-docker-quarantine*")]:
        guard.run(["git", "status"], cwd=where, env=env)
    assert not any("/t75/qrepo" in json.dumps(r) for r in guard.records()[seen:])
    control = guard.base / "t75-quarantine-shaped-control"  # the route is real
    _project(control)
    guard.run(["sh", "-c", plant], cwd=control, env=env)
    guard.run(["git", "status"], cwd=control / ".no-docker-quarantine", env=env)
    assert _reached(guard, "qrepo")


def test_a_stanza_script_without_a_suffix_is_read_only(t75_guard):
    """a16: tests/run-tests (a bash shebang, no .sh) carrying the stanza line."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-stanza-nosuffix"
    (work / "tests").mkdir(parents=True)
    stanza = subprocess.run(no_docker_argv("stanza"), capture_output=True, text=True, timeout=30,
                            check=True).stdout
    script = work / "tests" / "run-tests"
    reach = REACH.format(case="nosuffix")
    script.write_text(f"#!/bin/bash\n{stanza}{sys.executable} - <<'EOF'\n{reach}EOF\n")
    script.chmod(0o755)
    env = _env(guard)
    removed = guard.run([*no_docker_argv("run", "--quiet", "--"), "sed", "-i", "/re-exec stanza/d",
                         "tests/run-tests"], cwd=work, env=env)
    assert removed.returncode != 0 and "stanza" in script.read_text(), removed.stderr
    seen = len(guard.records())
    guard.run(["bash", "tests/run-tests"], cwd=work, env=env)
    assert not any("/t75/nosuffix" in json.dumps(r) for r in guard.records()[seen:])


def test_a_cache_moved_by_pips_config_is_not_writable(tmp_path):
    """a18: pip's cache-dir set in ~/.config/pip/pip.conf; --rw of it is the same route."""
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    cache = tmp_path / "pipc"
    cache.mkdir()
    (home / ".config" / "pip" / "pip.conf").write_text(f"[global]\ncache-dir = {cache}\n")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(no_docker_argv("run", "--rw", str(cache), "--", "true"), cwd=work,
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "pip's cache" in done.stderr, done.stderr


def test_the_second_reviews_shapes_are_refused_or_undone(t75_guard):
    """rt25b #1 (a forged __pycache__ .pyc for a root -p plugin), #2 (stanza scripts without the
    exec bit, other names, a long header), #3 (.python-version), #9 (a planted git config that
    includes ../.venv made the undo move the venv), #11 (an inline comment in git's include)."""
    require_bwrap()
    guard = t75_guard
    work = guard.base / "t75-second"
    _project(work, {"myplug.py": "\n", "team.gitconfig": "[user]\n\tname = team\n"})
    env = {**_env(guard), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=60, env=env)
    with open(work / ".git" / "config", "a") as config:
        config.write("[include]\n\tpath = ../team.gitconfig ; shared team settings\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")], check=True,
                   timeout=120)
    stanza = subprocess.run(no_docker_argv("stanza"), capture_output=True, text=True, timeout=30,
                            check=True).stdout
    (work / "tests").mkdir()
    (work / "tests" / "run-e2e").write_text(f"#!/bin/bash\n{stanza}true\n")  # not executable
    header = "".join(f"# licence line {i} ..........................................................\n"
                     for i in range(150))
    (work / "t.sh").write_text(f"#!/bin/bash\n{header}{stanza}true\n")
    run = [*no_docker_argv("run", "--quiet", "--"), "sh", "-c"]
    tries = {
        "pyc": "mkdir -p __pycache__ && echo x > __pycache__/myplug.cpython-311-pytest-9.2.0.pyc",
        "stanza": "sed -i '/re-exec stanza/d' tests/run-e2e",
        "long-header": "sed -i '/re-exec stanza/d' t.sh",
        "team-config": "printf '[core]\\n\\tfsmonitor = false\\n' >> team.gitconfig",
    }
    for what, script in tries.items():
        done = guard.run([*run, script], cwd=work, env=env)
        refused = b"Read-only file system" in done.stderr or b"Device or resource busy" in done.stderr
        assert done.returncode != 0 and refused, (what, done.stderr)
    for where in (".python-version", "tests/.python-version"):  # pyenv reads them up the tree
        done = guard.run([*run, f"echo system > {where}"], cwd=work, env=env)
        assert done.returncode == 125 and f"{work}/{where}: absent".encode() in done.stderr, done.stderr
        assert not (work / where).exists()
    # #9: the undo never moves what the run did not touch.
    plant = ("mkdir -p evil/objects evil/refs && echo 'ref: refs/heads/main' > evil/HEAD && "
             "printf '[include]\\n\\tpath = ../.venv\\n' > evil/config")
    done = guard.run([*run, plant], cwd=work, env=env)
    assert done.returncode == 125 and b"none of it runs later" in done.stderr, done.stderr
    assert (work / ".venv" / "pyvenv.cfg").is_file() and not (work / "evil" / "HEAD").exists()
    assert not list(work.glob("team.gitconfig ;*")), "a junk file named after git's comment"


def _git_repo(work: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=60, env=env)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty",
                    "-m", "i"], cwd=work, check=True, timeout=60, env=env)


def test_the_third_reviews_shapes_are_undone(tmp_path):
    """rt25c: B1 (a forged pytest .pyc for a root package's plugin), B3 (a distribution in
    tests/), B4 (a planted include.path = ../../.git made the undo move the user's .git), B5/B6
    (git's include of an include; a hooksPath set in an included file), B7 (a continued include
    line), B8 (a directory made to look like a repository hides a pytest.py below it), B9 (a '('
    in a linked distribution's name). The witness: a marker outside the work dir (hidden inside
    a run), written only by code that runs outside."""
    require_bwrap()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    marker = tmp_path / "ran-outside"
    work = tmp_path / "work"
    _project(work, {"mypkg/__init__.py": "X = 1\n", ".gitconfig": "[include]\n\tpath = .gitconfig.local\n",
                    "team.gitconfig": "[core]\n\thooksPath = tools/hooks\n", "shared.gitconfig": "\n",
                    "tools/hooks/.keep": ""})
    _git_repo(work, env)
    with open(work / ".git" / "config", "a") as config:
        config.write("[include]\n\tpath = ../.gitconfig\n\tpath = ../team.gitconfig\n"
                     "\tpath = ../shared\\\n.gitconfig\n")
    run = [*no_docker_argv("run", "--quiet", "--"), "sh", "-c"]
    fsmonitor = f"printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n'"
    tries = {
        "B1": "mkdir -p mypkg/__pycache__ && echo x > mypkg/__pycache__/__init__.cpython-311.pyc",
        "B5": f"{fsmonitor} > .gitconfig.local",
        "B6": f"printf '#!/bin/sh\\ntouch {marker}\\n' > tools/hooks/pre-commit && "
              "chmod +x tools/hooks/pre-commit",
        "B7": f"{fsmonitor} >> shared.gitconfig",
    }
    for what, script in tries.items():
        done = subprocess.run([*run, script], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        refused = ("Read-only file system" in done.stderr or "busy" in done.stderr
                   or "none of it runs later" in done.stderr)
        assert done.returncode != 0 and refused, (what, done.stderr)
    subprocess.run(["git", "status"], cwd=work, env=env, capture_output=True, timeout=60)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty",
                    "-m", "x"], cwd=work, env=env, capture_output=True, timeout=60)
    assert not marker.exists(), "git outside ran what a run left in an included config or hooks dir"
    moved = {
        "B3": ("mkdir -p tests/e-1.0.dist-info && printf '[pytest11]\\ne = eplug\\n' > "
               "tests/e-1.0.dist-info/entry_points.txt", "tests/e-1.0.dist-info/entry_points.txt"),
        "B8": ("mkdir -p tests/objects tests/refs && echo 'ref: refs/heads/main' > tests/HEAD && "
               "echo x=1 > tests/pytest.py", "tests/pytest.py"),
        "B9": ("mkdir -p x/d && printf '[pytest11]\\nep = nsx.evil\\n' > x/d/entry_points.txt && "
               "ln -s x/d 'evil(.dist-info'", "evil(.dist-info"),
    }
    for what, (script, gone) in moved.items():
        done = subprocess.run([*run, script], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 125 and "none of it runs later" in done.stderr, (what, done.stderr)
        assert not os.path.lexists(work / gone), (what, done.stderr)
    plant = ("mkdir -p sub/.git/objects sub/.git/refs && echo 'ref: refs/heads/main' > sub/.git/HEAD && "
             "printf '[include]\\n\\tpath = ../../.git\\n' > sub/.git/config && touch .git/x; rm -f .git/x")
    done = subprocess.run([*run, plant], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 125, done.stderr
    assert (work / ".git" / "HEAD").is_file(), f"the undo moved the user's .git: {done.stderr}"  # B4
    status = subprocess.run(["git", "status"], cwd=work, env=env, capture_output=True, timeout=60)
    assert status.returncode == 0, status.stderr
