"""cosmic-ray end to end under ``no-docker``, with the canary on the real engine paths (issue 15
item 4).

Inside an outer guard (only the canary answers on ``/run/docker.sock``, ``127.0.0.1:2375``...),
on copies of ``tests/fixtures/cosmic-ray-example`` (code that calls Docker through docker-py):

0. positive control, no isolation: the example's read-only listing reaches the canary;
1. the local distributor, its test command ``no-docker run -- python -m pytest``: every mutant
   has a result, none lost, none errored by the isolation (worker outcome "normal"); killed and
   survived both occur; the canary records nothing;
2. the HTTP distributor with two workers, each ``no-docker run --publish 127.0.0.1:PORT --
   cosmic-ray http-worker --port PORT`` in its own copy, and ``cosmic-ray exec`` (outside the
   runs) reaching them by URL: the same result for every mutant as (1), nothing recorded by the
   canary; the workers end with their runs and leave their ports free.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "cosmic-ray-example"
ROUTE = "cosmic-ray-example"
BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare: install util-linux"),
    pytest.mark.skipif(not (BIN / "cosmic-ray").exists(),
                       reason="cosmic-ray is not installed (the test extra has it)"),
]


# Tests run with `python -B`: cosmic-ray rewrites engine.py in place for each mutant, and a
# bytecode cache written for one mutant can be taken for the next one of the same size within
# the same second (the cache is keyed on mtime and size), which made one mutant's outcome differ
# between two sessions here.


def no_docker(*args: str) -> str:
    return " ".join([sys.executable, "-m", "no_docker.supervisor.cli", *args])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def guard(tmp_path: Path):
    from no_docker.supervisor.proving.outer_guard import OuterGuard

    with OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path]) as g:
        yield g


def text(done: subprocess.CompletedProcess) -> str:
    return (done.stdout + done.stderr).decode(errors="replace")


def outcomes(guard, work: Path, session: str) -> dict[str, tuple[str, str]]:
    """{mutation: (worker outcome, test outcome)} of a session; a mutant without result maps to
    ("lost", "")."""
    dump = guard.run([str(BIN / "cosmic-ray"), "dump", session], cwd=work)
    assert dump.returncode == 0, text(dump)
    found = {}
    for line in dump.stdout.decode().splitlines():
        item, result = json.loads(line)
        key = json.dumps([[m["module_path"], m["operator_name"], m["occurrence"]] for m in item["mutations"]])
        found[key] = ("lost", "") if result is None else (result["worker_outcome"], result["test_outcome"])
    return found


def config(work: Path, body: str) -> str:
    path = work / "session.toml"
    path.write_text(body)
    return str(path)


COMMON = """[cosmic-ray]
module-path = "engine.py"
timeout = 60.0
excluded-modules = []
test-command = "{test}"
"""


def test_cosmic_ray_local_and_http_workers_reach_no_engine(tmp_path: Path, guard, spawn) -> None:
    from no_docker.canary.records import route_of
    from no_docker.supervisor.proving.outer_guard import nsenter_argv

    work = tmp_path / "local"
    shutil.copytree(EXAMPLE, work)
    # 0. positive control: without isolation, the example's docker-py listing reaches the canary
    control = guard.run([sys.executable, "-c", "import engine; print(engine.tidy())"], cwd=work)
    assert control.returncode == 0 and control.stdout.strip() == b"listed", text(control)
    assert ROUTE in [route_of(r) for r in guard.records()], "the canary did not see the example"
    seen = len(guard.settled_records())

    # 1. the local distributor: each mutant's tests under no-docker run
    test = no_docker("run", "--quiet", "--", sys.executable, "-B", "-m", "pytest", "-x", "-q",
                     "-p", "no:cacheprovider")
    local = config(work, COMMON.format(test=test) + '[cosmic-ray.distributor]\nname = "local"\n')
    for step in (["init", local, "local.sqlite"], ["exec", local, "local.sqlite"]):
        done = guard.run([str(BIN / "cosmic-ray"), *step], cwd=work, timeout=600)
        assert done.returncode == 0, text(done)[-3000:]
    first = outcomes(guard, work, "local.sqlite")
    assert len(first) >= 10, first
    assert {w for w, _ in first.values()} == {"normal"}, first  # none lost, none errored
    assert {t for _, t in first.values()} == {"killed", "survived"}, first
    assert guard.records()[seen:] == [], "a request from an isolated mutant reached the canary"

    # 2. the HTTP distributor: two workers, each in its own run, reached through --publish
    ports = [free_port(), free_port()]
    workers = []
    for i, port in enumerate(ports):
        copy = tmp_path / f"worker{i}"
        shutil.copytree(EXAMPLE, copy)
        argv = [sys.executable, "-m", "no_docker.supervisor.cli", "run", "--publish", f"127.0.0.1:{port}",
                "--", str(BIN / "cosmic-ray"), "http-worker", "--port", str(port)]
        inside = ["sh", "-c", '"$@"; exit $?', "worker", *argv]
        workers.append(spawn(nsenter_argv(guard.holder_pid, inside, userns=guard.userns, cwd=str(copy)),
                             env=dict(guard.env), stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    urls = ", ".join(f'"http://127.0.0.1:{p}"' for p in ports)
    http = config(work, COMMON.format(test=f"{sys.executable} -B -m pytest -x -q -p no:cacheprovider")
                  + f'[cosmic-ray.distributor]\nname = "http"\n\n[cosmic-ray.distributor.http]\n'
                  f"worker-urls = [{urls}]\n")
    ready = ("import socket, sys\nfor p in sys.argv[1:]:\n"
             "    socket.create_connection(('127.0.0.1', int(p)), 2).close()\n")
    deadline = time.monotonic() + 60
    while guard.run([sys.executable, "-c", ready, *map(str, ports)], cwd=work).returncode != 0:
        assert time.monotonic() < deadline, "the http workers never listened"
        assert all(w.poll() is None for w in workers), [w.communicate(timeout=30) for w in workers]
        time.sleep(0.3)
    for step in (["init", http, "http.sqlite"], ["exec", http, "http.sqlite"]):
        done = guard.run([str(BIN / "cosmic-ray"), *step], cwd=work, timeout=600)
        assert done.returncode == 0, text(done)[-3000:]
    second = outcomes(guard, work, "http.sqlite")
    assert second == first, {k: (first.get(k), second.get(k)) for k in first.keys() | second.keys()
                             if first.get(k) != second.get(k)}
    for w in workers:
        os.killpg(w.pid, signal.SIGTERM)  # the supervisor ends the worker's run and proves it
    for w in workers:
        _, err = w.communicate(timeout=60)
        assert b"isolation proven" in err and b"0 left" in err, err.decode(errors="replace")[-2000:]
    assert guard.records()[seen:] == [], "a request from a worker reached the canary"
    # no listener left (SO_REUSEADDR: relayed connections may linger in TIME_WAIT)
    gone = ("import socket, sys\nfor p in sys.argv[1:]:\n    s = socket.socket()\n"
            "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "    s.bind(('127.0.0.1', int(p)))\n    s.listen()\n")
    assert guard.run([sys.executable, "-c", gone, *map(str, ports)], cwd=work).returncode == 0
