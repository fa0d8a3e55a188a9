"""mutmut end to end under ``no-docker run``, with the canary on the real engine paths.

Inside an outer guard (a mount + pid + network namespace where only the canary answers on
``/run/docker.sock``, ``127.0.0.1:2375``...), on a copy of ``tests/fixtures/mutmut-example``:

1. positive control, no isolation: the example's read-only ``docker ps`` reaches the canary,
   so the canary would see what the example does;
2. ``no-docker run -- mutmut run`` completes, mutmut's results are intact (every mutant has a
   final status, ``mutmut results`` lists exactly the generated mutants), and the canary
   records nothing;
3. one of mutmut's destructive mutants (it flips ``dry_run`` and runs ``docker container prune
   --force``) run directly under ``no-docker run``: the docker CLI runs and fails, the canary
   records nothing. The destructive mutants never run outside the isolation.

And the safety net: with the pytest plugin on (``no_docker = true``), a ``mutmut run`` started
by mistake *outside* a run stops with 125 at its first pytest session, before any mutant (or
the unmutated code) runs; the canary records nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "mutmut-example"
ROUTE = "mutmut-example"
BIN = Path(sys.executable).parent
FINAL = {"killed", "survived"}
# A mutant of cleanup() that, called with its defaults, takes the prune branch.
DESTRUCTIVE = re.compile(
    r"^def (x_cleanup__mutmut_\d+)\(dry_run: bool = False\)|^def (x_cleanup__mutmut_\d+)\(.*\n(?:.*\n){0,3}"
    r".*cleanup_command\(None\)",
    re.M,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare: install util-linux"),
    pytest.mark.skipif(
        not (BIN / "mutmut").exists(), reason="mutmut is not installed (the test extra has it)"
    ),
]


def no_docker(*args: str) -> list[str]:
    return [sys.executable, "-m", "no_docker.supervisor.cli", *args]


@pytest.fixture
def guard(tmp_path: Path):
    from no_docker.supervisor.proving.outer_guard import OuterGuard

    with OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path]) as g:
        yield g


def route_of(record: dict) -> str | None:
    from no_docker.canary.records import route_of as canary_route_of

    return canary_route_of(record)


def text(done) -> str:
    return (done.stdout + done.stderr).decode(errors="replace")


def test_mutmut_under_no_docker_run_reaches_no_engine(tmp_path: Path, guard) -> None:
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work)

    # 1. positive control: without isolation, the example's docker ps reaches the canary
    control = guard.run([sys.executable, "-c", "import containers; print(containers.cleanup())"], cwd=work)
    assert control.returncode == 0 and control.stdout.strip() == b"0", text(control)
    routes = [route_of(r) for r in guard.records() if r.get("kind") == "request"]
    assert ROUTE in routes, f"the canary did not see the example's docker ps: {routes}"
    seen = len(guard.settled_records())

    # 2. mutmut run, isolated
    run = guard.run(
        no_docker("run", "--", str(BIN / "mutmut"), "run", "--max-children", "2"), cwd=work, timeout=300
    )
    assert run.returncode == 0, text(run)[-2000:]
    assert guard.records()[seen:] == [], "a request from the isolated mutmut run reached the canary"

    results = guard.run(
        no_docker("run", "--quiet", "--", str(BIN / "mutmut"), "results", "--all", "true"), cwd=work
    )
    assert results.returncode == 0, text(results)
    listed = dict(re.findall(r"^\s*(\S+): (.+)$", results.stdout.decode(), re.M))
    # mutmut's own record of each mutant's test exit code agrees with what it reports
    exit_codes = json.loads((work / "mutants" / "containers.py.meta").read_text())["exit_code_by_key"]
    assert set(listed) == set(exit_codes), (sorted(listed), sorted(exit_codes))
    assert set(listed.values()) <= FINAL, listed
    assert {"killed", "survived"} <= set(listed.values()), listed
    assert all((listed[key] == "survived") == (code == 0) for key, code in exit_codes.items()), (
        listed,
        exit_codes,
    )

    # 3. a destructive mutant, run directly and isolated: the docker CLI fails, nothing arrives
    source = (work / "mutants" / "containers.py").read_text()
    destructive = sorted({a or b for a, b in DESTRUCTIVE.findall(source)})
    assert destructive, "mutmut generated no mutant that takes the prune branch"
    assert all(listed.get(f"containers.{name}") in FINAL for name in destructive), listed
    seen = len(guard.settled_records())
    # record the argv the mutant hands to subprocess.run, then let it run for real
    probe = (
        "import subprocess, containers\n"
        "real = subprocess.run\n"
        "def spy(argv, **kw):\n"
        "    print('ARGV', ' '.join(argv), flush=True)\n"
        "    return real(argv, **kw)\n"
        "subprocess.run = spy\n"
        "print('STATUS', containers.cleanup())\n"
    )
    env = {**guard.env, "MUTANT_UNDER_TEST": f"containers.{destructive[0]}"}
    mutant = guard.run(
        no_docker("run", "--quiet", "--keep-env", "MUTANT_UNDER_TEST", "--", sys.executable, "-c", probe),
        cwd=work / "mutants",
        env=env,
    )
    assert mutant.returncode == 0, text(mutant)
    out = mutant.stdout.decode()
    assert "ARGV docker container prune --force --filter label=no-docker-route=mutmut-example" in out, out
    # the docker CLI ran (not None/127: missing) and failed (not 0): no engine answered
    status = re.search(r"^STATUS (\S+)$", out, re.M)
    assert status is not None and status.group(1) not in ("0", "None", "127"), out
    assert guard.records()[seen:] == [], "the destructive mutant reached the canary"


def test_mutmut_outside_a_run_with_the_plugin_on_stops_before_any_mutant(tmp_path: Path, guard) -> None:
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work)
    installed = any(ep.name == "no_docker" for ep in entry_points(group="pytest11"))
    plugin = "" if installed else 'addopts = "-p no_docker.ci.pytest_plugin"\n'
    config = work / "pyproject.toml"
    config.write_text(
        config.read_text().replace(
            "[tool.pytest.ini_options]\n", f"[tool.pytest.ini_options]\nno_docker = true\n{plugin}"
        )
    )
    seen = len(guard.settled_records())
    run = guard.run([str(BIN / "mutmut"), "run", "--max-children", "2"], cwd=work, timeout=300)
    assert run.returncode == 125, text(run)[-2000:]
    assert guard.records()[seen:] == [], (
        "code of the example ran outside the isolation and reached the canary"
    )
    meta = json.loads((work / "mutants" / "containers.py.meta").read_text())
    assert set(meta["exit_code_by_key"].values()) == {None}, "a mutant ran"
