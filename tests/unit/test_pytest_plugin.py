"""The pytest plugin: inert when off; with ``--no-docker`` (or ``no_docker = true``) the whole
session, conftest.py included, runs under ``no-docker run``; exit codes pass through.

Each case runs a real pytest in a subprocess on a tiny project in ``tmp_path``; its
conftest.py and test record the pid and network namespace they ran in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from no_docker.ci import pytest_plugin
from no_docker.ci.pytest_plugin import REEXEC_VAR, reexec_argv

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

# Until the pytest11 entry point is installed, load the plugin by module name; once it is,
# `-p` of the same module would register it twice.
INSTALLED = any(ep.name == "no_docker" for ep in entry_points(group="pytest11"))
PLUGIN = [] if INSTALLED else ["-p", "no_docker.ci.pytest_plugin"]

RECORD = """
import json, os
def record(where):
    view = {"where": where, "pidns": os.readlink("/proc/self/ns/pid"),
            "netns": os.readlink("/proc/self/ns/net"),
            "ifaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "views.jsonl"), "a") as f:
        f.write(json.dumps(view) + "\\n")
"""


def outside_view() -> dict[str, str]:
    return {"pidns": os.readlink("/proc/self/ns/pid"), "netns": os.readlink("/proc/self/ns/net")}


def make_project(root: Path, test_body: str = "    record('test')", ini: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "recorder.py").write_text(RECORD)
    (root / "conftest.py").write_text(
        "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"
        "from recorder import record\nrecord('conftest')\n"
    )
    (root / "test_view.py").write_text(
        f"import pytest\nfrom recorder import record\n\ndef test_view():\n{test_body}\n"
    )
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    return root


def views(root: Path) -> list[dict]:
    path = root / "views.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pytest_run(
    root: Path, *args: str, env: dict[str, str] | None = None, how: str = "-m"
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in (REEXEC_VAR, "PYTEST_ADDOPTS")}
    command = (
        [sys.executable, "-m", "pytest"] if how == "-m" else [str(Path(sys.executable).parent / "pytest")]
    )
    return subprocess.run(
        [*command, *PLUGIN, "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


# -- pure ---------------------------------------------------------------------------------------


def test_reexec_argv_keeps_interpreter_options_and_arguments() -> None:
    py = "/venv/bin/python"
    assert reexec_argv(
        [py, "-X", "dev", "-m", "pytest", "-q", "a b"], ["/x/pytest/__main__.py", "-q", "a b"], py, []
    ) == [
        py,
        "-I",
        "-m",
        "no_docker.supervisor.cli",
        "run",
        "--keep-env",
        REEXEC_VAR,
        "--",
        py,
        "-X",
        "dev",
        "-m",
        "pytest",
        "-q",
        "a b",
    ]
    assert reexec_argv(
        [py, "/venv/bin/pytest", "-k", "x"], ["/venv/bin/pytest", "-k", "x"], py, ["PYTEST_ADDOPTS"]
    )[4:] == [
        "run",
        "--keep-env",
        REEXEC_VAR,
        "--keep-env",
        "PYTEST_ADDOPTS",
        "--",
        py,
        "/venv/bin/pytest",
        "-k",
        "x",
    ]


# -- off: inert -----------------------------------------------------------------------------------


def test_plugin_import_pulls_in_nothing_of_no_docker() -> None:
    code = (
        "import sys, pytest; before = set(sys.modules); import no_docker.ci.pytest_plugin; "
        "print(sorted(m for m in set(sys.modules) - before\n"
        "             if m != 'no_docker' and not m.startswith('no_docker.ci')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "[]"


def test_off_the_hook_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_check() -> tuple[bool, str]:
        raise AssertionError("no-docker check ran although the option is off")

    monkeypatch.setattr(pytest_plugin, "_check", no_check)

    class Config:
        known_args_namespace = type("NS", (), {"no_docker": False})()

        def getini(self, name: str) -> bool:
            assert name == "no_docker"
            return False

    assert pytest_plugin.pytest_load_initial_conftests(Config()) is None  # type: ignore[arg-type]


def test_off_the_session_runs_where_it_was_started(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")
    proc = pytest_run(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = views(root)
    assert [v["where"] for v in seen] == ["conftest", "test"]
    assert all(v["pidns"] == outside_view()["pidns"] for v in seen)
    assert "no-docker: isolated" not in proc.stdout


def test_help_lists_the_option_and_the_ini_key(tmp_path: Path) -> None:
    proc = pytest_run(make_project(tmp_path / "p"), "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--no-docker" in text and "no_docker (bool)" in text and "exit 125" in text
    assert views(tmp_path / "p") == [] or all(v["where"] == "conftest" for v in views(tmp_path / "p"))


# -- on: the session re-executes under no-docker run ------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("how", ["-m", "script"])
def test_no_docker_flag_runs_conftest_and_tests_isolated(tmp_path: Path, how: str) -> None:
    root = make_project(tmp_path / "p")
    proc = pytest_run(root, "--no-docker", "-v", how=how)  # -v cancels -q: the header is shown
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = views(root)
    # conftest.py was imported inside only: nothing of the project ran outside
    assert [v["where"] for v in seen] == ["conftest", "test"]
    outside = outside_view()
    for view in seen:
        assert view["pidns"] != outside["pidns"] and view["netns"] != outside["netns"]
        assert view["ifaces"] == ["lo"]
    assert "no-docker: isolated (no-docker check passed inside this run)" in proc.stdout


@needs_bwrap
def test_ini_option_turns_it_on(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", ini="no_docker = true")
    proc = pytest_run(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {v["pidns"] for v in views(root)} != {outside_view()["pidns"]}
    assert len(views(root)) == 2


@needs_bwrap
@pytest.mark.parametrize(
    ("body", "status"), [("    assert False", 1), ("    pytest.exit('stop', returncode=3)", 3)]
)
def test_exit_status_passes_through(tmp_path: Path, body: str, status: int) -> None:
    root = make_project(tmp_path / "p", test_body=f"    record('test')\n{body}")
    proc = pytest_run(root, "--no-docker")
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert [v["where"] for v in views(root)] == ["conftest", "test"]


@needs_bwrap
def test_unproven_isolation_is_125_and_nothing_runs(tmp_path: Path) -> None:
    """A bubblewrap that claims success but isolates nothing is refused: no conftest, no test."""
    fake = tmp_path / "fake-bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != -- ] && [ $# -gt 0 ]; do shift; done; shift; exec "$@"\n')
    fake.chmod(0o755)
    root = make_project(tmp_path / "p")
    proc = pytest_run(root, "--no-docker", env={"NO_DOCKER_BWRAP": str(fake)})
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert views(root) == []


def test_the_reexec_variable_proves_nothing(tmp_path: Path) -> None:
    """Outside a run, NO_DOCKER_PYTEST_REEXEC=1 does not skip the check: 125, nothing ran."""
    root = make_project(tmp_path / "p")
    proc = pytest_run(root, "--no-docker", env={REEXEC_VAR: "1"})
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "no-docker: pytest --no-docker: re-executed under no-docker run, but the isolation is not proven"
        )
    )
    assert views(root) == []


def test_in_process_pytest_main_outside_a_run_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")
    args = [*PLUGIN, "-q", "-p", "no:cacheprovider", "--no-docker"]
    code = f"import pytest, sys; sys.exit(pytest.main({args!r}))"
    env = {k: v for k, v in os.environ.items() if k != REEXEC_VAR}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert "started in-process by '-c' outside no-docker run" in proc.stderr
    assert views(root) == []


def test_bad_ini_value_is_a_usage_error_naming_the_key(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", ini="no_docker = maybe")
    proc = pytest_run(root)
    assert proc.returncode == 4
    assert (
        "ini option no_docker: invalid truth value 'maybe' (use true or false)" in proc.stdout + proc.stderr
    )
    assert views(root) == []


def test_work_dir_is_the_rootdir_when_the_session_starts_inside_it() -> None:
    from no_docker.ci.pytest_plugin import work_dir

    assert work_dir("/p", "/p/tests/unit", "/home/u") == "/p"
    assert work_dir("/p", "/p", "/home/u") == "/p"
    assert work_dir("/p", "/elsewhere", "/home/u") is None  # the current directory, as before
    assert work_dir("/p", "/pq", "/home/u") is None
    assert work_dir("/home/u", "/home/u/proj", "/home/u") is None  # a run refuses $HOME
    assert work_dir("/", "/srv", "") is None


@needs_bwrap
def test_from_a_subdirectory_the_session_sees_the_whole_project(tmp_path: Path) -> None:
    """Issue 18.4: started in a subdirectory, the run's work dir was that subdirectory: the
    project's root (pytest's rootdir, with its pytest.ini and .git) was not there inside."""
    root = make_project(tmp_path / "proj", test_body="    assert open('../at-root.txt').read() == 'here'")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=120)
    (root / "at-root.txt").write_text("here")
    sub = root / "sub"
    sub.mkdir()
    (root / "test_view.py").rename(sub / "test_view.py")
    base = {k: v for k, v in os.environ.items() if k not in (REEXEC_VAR, "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", *PLUGIN, "-q", "-p", "no:cacheprovider",
                           "--no-docker"],
                          cwd=sub, env=base, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [v["where"] for v in views(root)] == ["conftest"]  # the root's conftest, inside
    assert views(root)[0]["netns"] != outside_view()["netns"]


def test_a_no_docker_package_left_in_the_project_never_runs_instead(tmp_path) -> None:
    """The plugin runs no-docker with the project dir as cwd, which a previous run wrote: a
    ``no_docker`` package left there must not be what starts (it would run outside, as the
    caller, and could claim to be inside a run; red-team review). Shown to fail without -I."""
    import subprocess

    from no_docker.ci.pytest_plugin import _no_docker

    planted = tmp_path / "no_docker"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(tmp_path / 'PLANTED')!r}, 'w').close()\n")
    result = subprocess.run(_no_docker("--version"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert not (tmp_path / "PLANTED").exists()
    assert result.returncode == 0 and result.stdout.startswith("no-docker "), result


# -- the registration point: before the rest of pytest's start-up (issue 26 item 3) -------------


def test_session_args_are_ini_addopts_then_the_variable_then_the_command_line() -> None:
    from no_docker.ci.pytest_plugin import session_args

    got = session_args(["-x", "--no-docker"], "-k 'a b'", ["t.py"])
    assert got == ["-x", "--no-docker", "-k", "a b", "t.py"]
    assert session_args([], "", []) == []


def test_the_plan_path_is_the_one_check_reads(tmp_path: Path) -> None:
    from no_docker.ci.pytest_plugin import PLAN_PATH, certainly_outside
    from no_docker.supervisor.isolation.policy import PLAN_PATH as SUPERVISORS

    assert PLAN_PATH == SUPERVISORS
    plan = tmp_path / "plan.json"
    assert certainly_outside(str(plan))
    plan.symlink_to(tmp_path / "nowhere")  # check's open() fails: an empty plan
    assert certainly_outside(str(plan))
    (tmp_path / "nowhere").write_text("")  # a mount point a sandbox left on the host
    assert certainly_outside(str(plan))
    (tmp_path / "nowhere").write_text("ns.pid pid:[1]\n")  # a plan: proves nothing, the check runs
    assert not certainly_outside(str(plan))
    assert not certainly_outside(str(tmp_path))  # not a regular file: the check decides


@needs_bwrap
def test_help_with_the_flag_loads_conftest_inside_only(tmp_path: Path) -> None:
    """pytest imports the initial conftest.py files before it prints its help (to show their
    options), so ``--help`` re-executes too (red-team pass 4, B6)."""
    root = make_project(tmp_path / "p")
    proc = pytest_run(root, "--no-docker", "--help")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--no-docker" in proc.stdout
    seen = views(root)
    assert seen, "the conftest was not imported at all: this case tests nothing"
    assert all(v["pidns"] != outside_view()["pidns"] for v in seen), seen


@needs_bwrap
@pytest.mark.parametrize("args, env", [(["--version"], {}), (["-qV"], {}), (["-VV"], {}),
                                       ([], {"PYTEST_ADDOPTS": "--version"})])
def test_version_with_the_flag_imports_nothing_outside(tmp_path: Path, args: list[str], env: dict) -> None:
    """pytest's own shortcut is only a lone ``--version``; ``-qV`` runs the whole session, ``-VV``
    imports the conftest.py files (red-team pass 5): each is re-executed as a session is."""
    root = make_project(tmp_path / "p")
    proc = pytest_run(root, "--no-docker", *args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if args == ["-qV"]:
        assert views(root), "-qV ran no session here: this case tests nothing"
    assert all(v["pidns"] != outside_view()["pidns"] for v in views(root)), views(root)


def test_a_plugin_registered_before_pytest_read_its_ini_is_decided_by_the_late_hook(tmp_path: Path) -> None:
    """``pytest.main(plugins=[module])`` registers it before the ini file is read: the
    registration leaves it to pytest_load_initial_conftests, which refuses as before."""
    root = make_project(tmp_path / "p")
    code = (
        "import pytest, sys; from no_docker.ci import pytest_plugin as p; "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--no-docker'], plugins=[p]))"
    )
    env = {k: v for k, v in os.environ.items() if k != REEXEC_VAR}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert "started in-process by '-c' outside no-docker run" in proc.stderr
    assert views(root) == []
