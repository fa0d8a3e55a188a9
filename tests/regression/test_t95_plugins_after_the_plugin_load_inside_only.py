"""T-95: `pytest --no-docker` re-executes at the plugin's own registration, before the rest of
pytest's start-up: a plugin pytest loads after it (``PYTEST_PLUGINS``, a pytest11 plugin of the
environment whose distribution comes later on ``sys.path``) is imported inside the run only,
never outside first (issue 26 item 3: the session re-executed from
``pytest_load_initial_conftests``, after every plugin had been imported outside once).

However the option is turned on (the flag, ``no_docker = true``, the ini's ``addopts``,
``PYTEST_ADDOPTS``: the registration reads what pytest reads), each plugin module, the
project's conftest.py and its test record the pid and network namespace they ran in: each ran
once, inside (own pid namespace, loopback only). The re-exec keeps the session (exit 0, the
test ran)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REEXEC_VAR = "NO_DOCKER_PYTEST_REEXEC"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
# Until the pytest11 entry point is installed, the plugin is loaded by module name.
PLUGIN = [] if any(ep.name == "no_docker" for ep in entry_points(group="pytest11")) else [
    "-p", "no_docker.ci.pytest_plugin"]

RECORD = """
import json, os
def record(where):
    view = {"where": where, "pidns": os.readlink("/proc/self/ns/pid"),
            "ifaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "views.jsonl"), "a") as f:
        f.write(json.dumps(view) + "\\n")
"""
PLUG = "from recorder import record\nrecord({name!r})\n"


def make_project(root: Path, ini: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "recorder.py").write_text(RECORD)
    (root / "conftest.py").write_text(
        "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n" + PLUG.format(name="conftest"))
    (root / "test_view.py").write_text("from recorder import record\n\n"
                                       "def test_view():\n    record('test')\n")
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    return root


def session(root: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in (REEXEC_VAR, "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    return subprocess.run([*argv, *PLUGIN, "-q", "-p", "no:cacheprovider"], cwd=root, env={**base, **env},
                          capture_output=True, text=True, timeout=180)


def where_each_ran(root: Path) -> list[str]:
    """The recorded names, each checked to have run inside a run (not this test's pid namespace,
    loopback only)."""
    path = root / "views.jsonl"
    seen = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    outside = os.readlink("/proc/self/ns/pid")
    for view in seen:
        assert view["pidns"] != outside and view["ifaces"] == ["lo"], f"ran outside the run: {view}"
    return [view["where"] for view in seen]


@pytest.mark.parametrize("how", ["flag", "ini", "ini-addopts", "env-addopts"])
def test_a_pytest_plugins_module_is_imported_inside_only(tmp_path: Path, how: str) -> None:
    """PYTEST_PLUGINS is loaded after every entry point: before this point it ran outside, then
    again inside."""
    ini = {"ini": "no_docker = true", "ini-addopts": "addopts = --no-docker"}.get(how, "")
    root = make_project(tmp_path / "p", ini)
    (root / "projplug.py").write_text(PLUG.format(name="projplug"))
    env = {"PYTEST_PLUGINS": "projplug"}
    if how == "env-addopts":
        env["PYTEST_ADDOPTS"] = "--no-docker"
    proc = session(root, [sys.executable, "-m", "pytest", *(["--no-docker"] if how == "flag" else [])], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert where_each_ran(root) == ["projplug", "conftest", "test"]  # once each, inside


def test_an_environment_plugin_found_later_is_imported_inside_only(tmp_path: Path) -> None:
    """A pytest11 plugin whose distribution is on sys.path after no-docker's (here a directory
    appended to sys.path by the `pytest` script that starts the session) is not imported outside
    first: pytest's start-up stops at this plugin's registration."""
    root = make_project(tmp_path / "p")
    site = root / "later-site"
    info = site / "slowplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slowplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nslow = slowplug\n")
    (site / "slowplug.py").write_text(f"import sys\nsys.path.insert(0, {str(root)!r})\n" + PLUG.format(
        name="slowplug"))
    script = root / "pytest"  # its name is what makes it pytest's main program, which can re-exec
    script.write_text(f"import sys\nsys.path.append({str(site)!r})\nfrom pytest import console_main\n"
                      "sys.exit(console_main())\n")
    proc = session(root, [sys.executable, str(script), "--no-docker"], {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert where_each_ran(root) == ["slowplug", "conftest", "test"]  # once each, inside


@pytest.mark.parametrize("flag, imported", [
    ("--help", ["conftest", "tests-conftest"]),
    ("-VV", ["conftest", "tests-conftest"]),
    ("-qV", ["conftest", "test", "tests-conftest"]),
])
def test_help_and_version_import_the_projects_conftest_files_inside_only(
        tmp_path: Path, flag: str, imported: list[str]) -> None:
    """``pytest --help`` imports the initial conftest.py files (``testpaths``' too) to show their
    options, ``-VV`` to list the plugins, and ``-qV`` runs the whole session (pytest's shortcut is
    only a lone ``--version``): with the isolation asked for, each is re-executed as a session is
    (red-team passes 4 and 5: a conftest.py a run left in tests/ ran outside at the next
    ``pytest --help``, ``-VV`` or ``-qV``)."""
    root = make_project(tmp_path / "p", "no_docker = true\ntestpaths = tests")
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(
        "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n"
        + PLUG.format(name="tests-conftest"))
    (root / "tests" / "test_view.py").write_text((root / "test_view.py").read_text())
    proc = session(root, [sys.executable, "-m", "pytest", flag], {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(where_each_ran(root)) == imported
