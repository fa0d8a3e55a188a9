"""T-74: against a real engine (a throwaway Podman), destructive docker CLI mutants destroy every
victim without isolation and none under `no-docker run`, and the host is left as it was.

``no-docker prove --real-engine`` (issue 29): a throwaway Podman API service in a root outer
guard (no canary; the host's engine paths hidden and checked empty; ``/var`` an overlay on a
tmpfs; all state on the guard's tmpfs), a victim image, container and volume per route, and
the real docker CLI's destructive commands (``rm -f``, ``rmi -f``, ``volume rm -f``) on every
route Podman serves, among them an engine restarted mid-run and one started after CMD in the
work dir: the control destroys every victim, the run under ``no-docker run`` none, and
Podman's own access log holds no request of it. The host is listed before and after
(``/var/lib/containers``, ``/run/podman``, ``/etc/containers``, Podman's cgroups and
processes): unchanged, and no Podman process left.

Needs Podman (``.ci/run`` installs it) and root; skips with the reason otherwise. The
only-this-engine refusal is shown without Podman: another listener on an engine path.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import no_docker_argv, require, skip_without_namespaces
from isolation_cases import require_bwrap

PROVE_TIMEOUT = 300


def _skip_unless_real_engine_can_run():
    skip_without_namespaces()
    require_bwrap()
    real_engine = require("no_docker.supervisor.proving.real_engine", "supervisor/proving/real_engine.py")
    missing = real_engine.missing_tools()
    if missing:
        pytest.skip("; ".join(missing))
    if os.geteuid() != 0:
        pytest.skip("prove --real-engine runs a rootful throwaway Podman: root only")
    return real_engine


def _run(argv, env=None, timeout=PROVE_TIMEOUT):
    """ARGV in its own session; the whole group is killed when it outlives TIMEOUT."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def proved():
    real_engine = _skip_unless_real_engine_can_run()
    podman_before = real_engine.podman_processes()
    started = time.monotonic()
    try:
        status, out, err = _run(no_docker_argv("prove", "--real-engine", "--json"))
    finally:
        # Whatever happened, no Podman process of the proof may be left (ps after every experiment).
        left = real_engine.wait_podman_gone(podman_before)
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"prove --real-engine --json printed no JSON (exit {status}): {err[-800:]}",
                    pytrace=False)
    return {"status": status, "report": report, "stderr": err, "left": left,
            "seconds": time.monotonic() - started, "module": real_engine}


def test_real_engine_proven(proved):
    report = proved["report"]
    assert report["status"] == "PROVEN", report["verdict"] + "\n" + proved["stderr"][-1500:]
    assert proved["status"] == 0


def test_control_destroyed_every_victim(proved):
    rows = proved["report"]["rows"]
    for row in rows:
        if row["control_ok"] is None:
            continue  # unavailable here (no /srv): said in its cell, the verdict counts it out
        assert row["control_ok"] is True and row["control"] == "yes (3 of 3)", row
        assert int(row["requests"].split(" / ")[0]) >= 3, row  # the engine's own log saw them


def test_isolated_run_destroyed_nothing(proved):
    report = proved["report"]
    rows = [row for row in report["rows"] if row["control_ok"] is not None]
    assert rows
    for row in rows:
        assert row["isolated_ok"] is True and row["isolated"] == "no (0 of 3)", row
        assert row["requests"].endswith(" / 0"), row
    assert report["figures"]["isolated_requests"] == 0
    # The mutant did run inside and tried every route (the docker CLI failed on each).
    exits = report["figures"]["isolated_docker_exits"]
    assert set(exits) == {row["route"] for row in rows}
    assert all(any(code != 0 for code in codes) for codes in exits.values()), exits


def test_every_route_podman_serves_is_in_the_table(proved):
    real_engine = proved["module"]
    rows = {row["route"]: row for row in proved["report"]["rows"]}
    assert list(rows) == [route.id for route in real_engine.ROUTES]
    for route in ("restarted", "late-engine", "tcp-2375", "work-socket", "home-context", "work-context"):
        assert route in rows


def test_host_left_as_it_was(proved):
    figures = proved["report"]["figures"]
    before, after = figures["host_before"], figures["host_after"]
    # A Podman process of someone else's that ended meanwhile is not the proof's doing
    # (it starts its own in its guard's pid namespace, after the listing): named, not failed.
    ended = {f"process {p}" for p in figures["host_ended_elsewhere"]}
    assert {k: v for k, v in before.items() if k not in ended} == after, \
        proved["module"].listing_diff(before, after)
    assert figures["host_changes"] == []
    assert proved["left"] == [], f"Podman processes left behind: {proved['left']}"


def test_within_60_seconds(proved):
    assert proved["report"]["figures"]["total_s"] <= 60, proved["report"]["figures"]["total_s"]


def test_missing_podman_is_125_naming_the_package(tmp_path):
    """No Podman on PATH: one line naming the package, exit 125, nothing started."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "LANG": "C.UTF-8"}
    status, out, err = _run(no_docker_argv("prove", "--real-engine"), env=env, timeout=60)
    assert status == 125, (out, err)
    lines = out.strip().splitlines()
    assert len(lines) == 1 and "INCOMPLETE" in lines[0], out
    assert "podman is missing (apt-get install podman)" in lines[0]
    assert "nothing was installed" in lines[0]
    assert "Traceback" not in err


def test_refuses_when_another_engine_answers(tmp_path):
    """The only-this-engine check inside a real-engine guard: a listener on an engine path
    that is not our Podman (here a plain socket on /run/docker.sock), and our Podman's socket
    empty: both are named, and the proof would not start."""
    skip_without_namespaces()
    if os.geteuid() != 0:
        pytest.skip("the real-engine guard is root only")
    outer_guard = require("no_docker.supervisor.proving.outer_guard", "supervisor/proving/outer_guard.py")
    real_engine = require("no_docker.supervisor.proving.real_engine", "supervisor/proving/real_engine.py")
    listener = ("import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind('/run/docker.sock'); "
                "s.listen(); open(sys.argv[1],'w').close(); time.sleep(120)")
    ready = tmp_path / "listening"
    host_had = os.path.lexists("/run/docker.sock")
    with outer_guard.OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path], real_engine=True) as guard:
        other = guard.spawn([sys.executable, "-c", listener, str(ready)])
        try:
            deadline = time.monotonic() + 30
            while not ready.exists() and time.monotonic() < deadline and other.poll() is None:
                time.sleep(0.05)
            assert ready.exists(), "the stand-in engine did not listen"
            engine = real_engine.Engine(guard, tmp_path, "podman")
            problems = real_engine._only_engine(engine, [real_engine.MAIN_SOCKET])
        finally:
            guard.stop(other)
    assert any(p.startswith("/run/docker.sock: another engine answers there") for p in problems), problems
    assert any(p.startswith(f"{real_engine.MAIN_SOCKET}: our Podman does not answer there") for p in problems)
    assert os.path.lexists("/run/docker.sock") is host_had  # the stand-in bound it inside only


def test_real_engine_guard_keeps_var_and_etc_containers_writes_inside(tmp_path):
    """What Podman writes under /var and /etc/containers whatever its flags (the cache, the
    netavark lock) lands in the guard's tmpfs overlays: seen inside, absent outside."""
    skip_without_namespaces()
    if os.geteuid() != 0:
        pytest.skip("the real-engine guard is root only")
    outer_guard = require("no_docker.supervisor.proving.outer_guard", "supervisor/proving/outer_guard.py")
    probe = f"no-docker-t74-{os.getpid()}"
    dirs = [d for d in ("/var/lib/containers", "/etc/containers") if os.path.isdir(os.path.dirname(d))]
    outside = {d: os.path.lexists(f"{d}/{probe}") for d in dirs}
    with outer_guard.OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path], real_engine=True) as guard:
        script = " && ".join(f"mkdir -p {d} && : > {d}/{probe} && test -e {d}/{probe}" for d in dirs)
        done = guard.run(["sh", "-c", script], timeout=60)
        assert done.returncode == 0, done.stderr
        for d in dirs:
            assert not os.path.lexists(f"{d}/{probe}"), f"{d}/{probe} written through to the host"
        mounts = guard.run(["sh", "-c", "cat /proc/self/mountinfo"], timeout=60).stdout.decode()
    overlaid = {line.split()[4] for line in mounts.splitlines() if " - overlay " in line}
    assert "/var" in overlaid, mounts
    assert "/etc/containers" in overlaid or not os.path.isdir("/etc/containers"), mounts
    assert all(not os.path.lexists(f"{d}/{probe}") for d in dirs) and not any(outside.values())


def test_sigterm_mid_proof_leaves_no_podman_and_no_scratch_dir(tmp_path):
    """SIGTERM once the throwaway Podman is up: the proof ends through its finally blocks
    (128+15), no Podman process is left and its scratch dir is gone."""
    real_engine = _skip_unless_real_engine_can_run()
    podman_before = real_engine.podman_processes()
    # A short TMPDIR of its own (the guard's socket paths under it must fit sun_path, 108 bytes).
    tmpdir = Path(tempfile.mkdtemp(prefix="nd-t74-"))
    err_path = tmp_path / "stderr"
    env = dict(os.environ, TMPDIR=str(tmpdir))
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(no_docker_argv("prove", "--real-engine"), stdout=err,
                                stderr=err, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "throwaway Podman up" not in err_path.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, err_path.read_text()
            time.sleep(0.05)
        assert "throwaway Podman up" in err_path.read_text(), err_path.read_text()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        left_in_tmp = list(tmpdir.iterdir())
        shutil.rmtree(tmpdir, ignore_errors=True)
    assert status == 128 + signal.SIGTERM, err_path.read_text()
    assert real_engine.wait_podman_gone(podman_before) == []
    assert left_in_tmp == [], left_in_tmp
