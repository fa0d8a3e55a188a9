"""T-94: `no-docker prove` as a user without sudo rights tells the truth: the route the control
cannot take there is "unavailable here" with sudo's reason, never a failure of the proof.

As uid 65534 the sudo route (`sudo -n docker ...`) says the reason sudo gave, the verdict counts
it as unavailable, and every other route is judged as for root (issue 26.4: it said `FAILED -
the control did not reach: sudo`). The real proof runs (outer guard, canary, the pinned mutant
twice) as uid 65534 through setpriv with /usr/bin/python3 on a copy of the package and of the
two compiled modules `mutants apply` needs (tree-sitter): the venv's python may live under
/root (0700), unreadable to that uid."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, declared_route_ids, skip_without_namespaces
from nonroot import SYSTEM_PYTHON, skip_reason

NOBODY = 65534


def _skip_reason() -> str | None:
    why = skip_reason(shutil.which("bwrap"), NOBODY)
    if why:
        return why
    same = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    if same != str(tuple(sys.version_info[:2])):
        return f"{SYSTEM_PYTHON} is Python {same}, not this venv's: tree-sitter's compiled modules differ"
    sudo = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                           "sudo", "-n", "true"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL) if shutil.which("sudo") else None
    if sudo is not None and sudo.returncode == 0:
        return f"uid {NOBODY} has passwordless sudo here: the route is available to it"
    return None


@pytest.fixture(scope="module")
def proved_as_nobody():
    skip_without_namespaces()
    why = _skip_reason()
    if why:
        pytest.skip(why)
    import tree_sitter
    import tree_sitter_bash

    base = Path(tempfile.mkdtemp(prefix="no-docker-t94-"))
    try:
        pkg = base / "pkg"
        for part in ("supervisor", "canary", "mutants", "ci"):
            shutil.copytree(REPO / part, pkg / "no_docker" / part,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for module in (tree_sitter, tree_sitter_bash):
            source = Path(module.__file__).resolve().parent
            shutil.copytree(source, pkg / source.name, ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("home", "work"):
            (base / name).mkdir()
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(base, 0o755)
        for name in ("home", "work"):
            os.chown(base / name, NOBODY, NOBODY)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
               "PYTHONPATH": str(pkg)}
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON, "-m",
                "no_docker.supervisor.cli", "prove", "--json"]
        done = subprocess.run(argv, cwd=base / "work", env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            pytest.fail(f"prove --json as uid {NOBODY} printed no JSON (exit {done.returncode}): "
                        f"{done.stderr[-1500:]}", pytrace=False)
        yield done, report
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_sudo_without_rights_is_unavailable_with_sudos_reason(proved_as_nobody):
    _, report = proved_as_nobody
    rows = {row["route"]: row for row in report["rows"]}
    sudo = rows["sudo"]
    assert sudo["control_ok"] is None and sudo["control"] == "unavailable here", sudo
    assert f"uid {NOBODY}" in sudo["control_why"] and "sudo" in sudo["control_why"], sudo
    assert sudo["isolated_ok"] is True, sudo  # the isolated run is judged as ever
    assert "sudo" in report["figures"]["unavailable_here"]


def test_the_verdict_is_not_failed_and_counts_the_unavailable(proved_as_nobody):
    done, report = proved_as_nobody
    assert report["status"] != "FAILED", report["verdict"]
    assert "the control did not reach: sudo" not in report["verdict"]
    unavailable = sum(row["control_ok"] is None for row in report["rows"] if row["kind"] == "network")
    assert unavailable >= 1 and f"({unavailable} unavailable here, not counted)" in report["verdict"]
    assert (done.returncode == 0) == (report["status"] == "PROVEN")


def test_every_other_route_is_judged_as_for_root(proved_as_nobody):
    """Unavailable only where prove found the precondition missing or the tool absent; every
    route the control can take reached the canary, and none did under no-docker run."""
    _, report = proved_as_nobody
    assert [row["route"] for row in report["rows"]] == (declared_route_ids("network")
                                                         + declared_route_ids("persistence"))
    for row in report["rows"]:
        assert row["isolated_ok"] is True, row
        if row["kind"] == "network" and row["control_ok"] is not None:
            assert row["control_ok"] is True and row["control"] == "reached the canary", row
    assert report["figures"]["isolated_records"] == 0
