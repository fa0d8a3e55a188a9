"""T-65: a unix socket bound to a relative name, by any local user in any network namespace,
stops no run and is reached by none (P3, P12; issue 24 part 2).

``bind("rel.sock")`` is resolved against the binder's cwd, which nothing records: sock_diag and
``/proc/net/unix`` show ``rel.sock`` and nothing locates it. Such a socket used to refuse every
run of every user (``P3: a unix socket listens at the relative name ...``). It is now left to
the connect mediation, which decides by the inode a connect reaches, not by the listing.

Inside the outer guard (root), four listeners bind relative names and record every accept:
root and uid 65534 in the guard's network namespace, and each of them again in a network
namespace of its own (``unshare --net``, ``unshare -rn``); two in the work dir, two in a dir
the run sees read-only (``--ro``). Then:

* a run of root and a run of uid 65534 are proven (``isolation proven``, no ``P3``) and CMD
  runs; each run's ``--report`` lists the relative names its listing could see;
* inside each run, a connect by every name the run sees each socket by (relative from the
  work dir, ``./``, absolute, a ``..`` walk) is refused (ECONNREFUSED) and no listener records
  an accept;
* the control: the same connects from inside the guard, outside any run, are each accepted.

The second case is the other name the listing of an ordinary user cannot locate: in a network
namespace it may not enter (root's, where a process of the user lives too), the only listing
is ``/proc/PID/net/unix``, and a name holding a newline there once refused every run of that
user (``cannot parse``). Now it is glued back, the run is proven, and the connect is refused.

The third: a socket the listing names but no mask can pin down, in a directory another user
controls (``/srv/t65-churn`` of uid 65534, which binds and unlinks sockets there in a loop):
bwrap failed on a mask target gone, or the prover found a new socket unmasked (13 of 30 runs
refused, measured). Such sockets are the mediation's alone: every run is proven, and the
connect to a socket of that user's there is refused.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, no_docker_argv
from isolation_cases import require_bwrap
from lifetime_cases import lifetime_guard

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

# Binds NAME relative to the cwd it is started in, then records each accept (one line each).
LISTEN = r"""
import os, socket, sys, time
log, ready, name = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX); s.bind(name); s.listen(16); s.setblocking(False)
os.chmod(name, 0o777)  # any uid may connect: the control's connect must be able to reach it
open(ready, "w").close()
deadline = time.monotonic() + 150
while time.monotonic() < deadline:
    try:
        conn, _ = s.accept()
    except BlockingIOError:
        time.sleep(0.01)
        continue
    with open(log, "a") as f:
        f.write("accepted\n")
    conn.close()
"""

TRY = r"""
import json, socket, sys
out = []
for name in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.settimeout(5)
    try:
        s.connect(name); out.append("reached")
    except OSError as err:
        out.append(err.errno)
    s.close()
print(json.dumps(out))
"""

# (who, own network namespace?, where, name)
LISTENERS = (("root", False, "work", "t65-root.sock"),
             ("nobody", False, "shared", "t65-nobody.sock"),
             ("root", True, "shared", "t65-root-netns.sock"),
             ("nobody", True, "work", "t65-nobody-netns.sock"))


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to hold listeners of two uids and to run as uid 65534 (setpriv)"
    for tool in ("setpriv", "unshare"):
        if not shutil.which(tool):
            return f"{tool} (util-linux) is not installed"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing (uid {NOBODY} cannot run the venv's python)"
    return None


def names_inside(work: Path, shared: Path) -> list[str]:
    """Every name a process in WORK reaches each listener by: relative, ./, absolute, a .. walk."""
    out = []
    for _, _, where, name in LISTENERS:
        if where == "work":
            out += [name, f"./{name}", str(work / name), f"../{work.name}/{name}"]
        else:
            out += [str(shared / name), f"{shared}/../{shared.name}/{name}", f"../{shared.name}/{name}",
                    f"{work}/../{shared.name}/{name}"]
    return out


def as_nobody(*argv: str) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


@pytest.fixture
def scene(tmp_path):
    """Dirs uid 65534 can use (pytest's tmp is 0700), and a copy of the package it can read."""
    why = _skip_reason()
    if why:
        pytest.skip(why)
    require_bwrap()
    os.chmod(tmp_path, 0o755)
    work, shared, home, state, logs = (tmp_path / n for n in ("work", "shared", "home", "state", "logs"))
    for path in (work, shared, home, state, logs):
        path.mkdir()
        os.chown(path, NOBODY, NOBODY)
    os.chmod(state, 0o700)
    pkg = tmp_path / "pkg" / "no_docker"
    for part in ("supervisor", "ci"):
        shutil.copytree(REPO / part, pkg / part, ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(tmp_path / "pkg"):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(tmp_path / "pkg", 0o755)
    return tmp_path


def start_listeners(guard, base: Path) -> list:
    procs, logs = [], base / "logs"
    for who, own_netns, where, name in LISTENERS:
        argv = [SYSTEM_PYTHON, "-I", "-c", LISTEN, str(logs / f"{name}.log"), str(logs / f"{name}.ready"),
                name]
        if own_netns:
            argv = (["unshare", "-rn"] if who == "nobody" else ["unshare", "--net"]) + argv
        if who == "nobody":
            argv = as_nobody(*argv)
        procs.append(guard.spawn(argv, cwd=base / where, output=logs / f"{name}.out"))
    deadline = time.monotonic() + 30
    for (_, _, _, name), proc in zip(LISTENERS, procs, strict=True):
        while not (base / "logs" / f"{name}.ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, \
                (base / "logs" / f"{name}.out").read_text(errors="replace")
            time.sleep(0.02)
    return procs


def accepts(base: Path) -> dict[str, int]:
    out = {}
    for _, _, _, name in LISTENERS:
        log = base / "logs" / f"{name}.log"
        out[name] = len(log.read_text().splitlines()) if log.exists() else 0
    return out


def check_run(done, base: Path, report: Path, tries: list[str], expect_listed: set[str]) -> None:
    stderr = done.stderr.decode(errors="replace")
    assert "isolation proven" in stderr, stderr
    assert "P3" not in stderr, stderr
    lines = done.stdout.decode().splitlines()
    assert lines[:1] == ["CMD RAN"], (lines, stderr)
    assert json.loads(lines[1]) == [errno.ECONNREFUSED] * len(tries), (tries, lines[1])
    assert accepts(base) == {name: 0 for _, _, _, name in LISTENERS}, "a run reached a listener"
    listed = set(json.loads(report.read_text())["listing"]["relative_paths"])
    assert expect_listed <= listed, (sorted(expect_listed - listed), sorted(listed))


def nobody_run(guard, base: Path, report: Path, *argv: str):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(base / "pkg"), "NO_DOCKER_STATE_DIR": str(base / "state")}
    return guard.run(as_nobody("env", "-i", *(f"{k}={v}" for k, v in env.items()), SYSTEM_PYTHON,
                               "-m", "no_docker.supervisor.cli", "run",
                               "--report", str(report), *argv), cwd=base / "work")


def test_relative_names_stop_no_run_and_are_reached_by_none(scene):
    base = scene
    work, shared = base / "work", base / "shared"
    tries = names_inside(work, shared)
    inside = ["sh", "-c", 'echo "CMD RAN"; exec "$0" "$@"', SYSTEM_PYTHON, "-I", "-c", TRY, *tries]
    every = {name for _, _, _, name in LISTENERS}
    with lifetime_guard(base) as guard:
        procs = start_listeners(guard, base)
        try:
            # Root's run: its listing reads every network namespace of the guard (setns).
            report = base / "logs" / "root-report.json"
            done = guard.run(no_docker_argv("run", "--report", str(report), "--ro", str(shared), "--",
                                            *inside), cwd=work)
            check_run(done, base, report, tries, every)
            assert done.returncode == 0, done.stderr.decode(errors="replace")

            # uid 65534's run: its own namespaces are read (sock_diag here, /proc/PID/net/unix of
            # its `unshare -rn` listener); root's other namespace it may not read.
            report = base / "logs" / "nobody-report.json"
            done = nobody_run(guard, base, report, "--ro", str(shared), "--", *inside)
            check_run(done, base, report, tries, every - {"t65-root-netns.sock"})
            assert done.returncode == 0, done.stderr.decode(errors="replace")

            # The control: outside any run, from the same dir, every name reaches its listener.
            control = guard.run([sys.executable, "-I", "-c", TRY, *tries], cwd=work)
            assert json.loads(control.stdout) == ["reached"] * len(tries), control.stdout
            # Each listener logs its accepts as it polls (every 10 ms): wait for them, bounded.
            expected = {name: len(tries) // len(LISTENERS) for _, _, _, name in LISTENERS}
            deadline = time.monotonic() + 10
            while accepts(base) != expected and time.monotonic() < deadline:
                time.sleep(0.02)
            assert accepts(base) == expected
        finally:
            for proc in procs:
                guard.stop(proc)


def test_a_newline_name_in_a_namespace_the_user_cannot_enter_stops_no_run(scene):
    base = scene
    shared = base / "shared"
    name = str(shared / "engine\nnewline.sock")
    logs = base / "logs"
    # Root's own network namespace, with a process of uid 65534 in it (as in a container whose
    # process runs with the user's uid): the user's listing finds it and may only read /proc.
    holder = ["unshare", "--net", "sh", "-c",
              f'"$0" -I -c "$1" "$2" "$3" "$4" & exec {" ".join(as_nobody("sleep", "150"))}',
              SYSTEM_PYTHON, LISTEN, str(logs / "nl.log"), str(logs / "nl.ready"), name]
    with lifetime_guard(base) as guard:
        proc = guard.spawn(holder, cwd=shared, output=logs / "nl.out")
        try:
            deadline = time.monotonic() + 30
            while not (logs / "nl.ready").exists():
                assert proc.poll() is None and time.monotonic() < deadline, (logs / "nl.out").read_text()
                time.sleep(0.02)
            report = logs / "nl-report.json"
            done = nobody_run(guard, base, report, "--ro", str(shared), "--", "sh", "-c",
                              'echo "CMD RAN"; exec "$0" "$@"', SYSTEM_PYTHON, "-I", "-c", TRY, name)
            stderr = done.stderr.decode(errors="replace")
            assert "isolation proven" in stderr and "P3" not in stderr, stderr
            assert done.stdout.decode().splitlines() == ["CMD RAN", json.dumps([errno.ECONNREFUSED])], stderr
            assert done.returncode == 0, stderr
            listing = json.loads(report.read_text())["listing"]
            assert name in listing["unix_paths"], listing["unix_paths"]  # read, and glued back exactly
            assert not (logs / "nl.log").exists(), "the run reached the listener"
            control = guard.run([sys.executable, "-I", "-c", TRY, name], cwd=shared)
            assert json.loads(control.stdout) == ["reached"], control.stdout
        finally:
            guard.stop(proc)


CHURN = r"""
import os, socket, sys, time
d, ready = sys.argv[1:3]
stable = socket.socket(socket.AF_UNIX); stable.bind(f"{d}/stable.sock"); stable.listen(8)
stable.setblocking(False)
os.chmod(f"{d}/stable.sock", 0o777)
open(ready, "w").close()
deadline, i = time.monotonic() + 150, 0
while time.monotonic() < deadline:
    p = f"{d}/churn{i % 4}.sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(p); s.listen(1); time.sleep(0.002)
    except OSError:
        pass
    s.close()
    try:
        os.unlink(p)
    except OSError:
        pass
    try:
        stable.accept()[0].close()
        with open(ready + ".accepted", "a") as f:
            f.write("accepted\n")
    except BlockingIOError:
        pass
    i += 1
"""

RUNS = 12


def test_sockets_another_user_churns_where_the_run_sees_them_stop_no_run(scene):
    base = scene
    logs = base / "logs"
    with lifetime_guard(base) as guard:
        guard.run(["sh", "-c", f"mkdir /srv/t65-churn && chown {NOBODY}:{NOBODY} /srv/t65-churn"], check=True)
        churn = as_nobody(SYSTEM_PYTHON, "-I", "-c", CHURN, "/srv/t65-churn", str(logs / "churn.ready"))
        proc = guard.spawn(churn, output=logs / "churn.out")
        try:
            deadline = time.monotonic() + 30
            while not (logs / "churn.ready").exists():
                assert proc.poll() is None and time.monotonic() < deadline, (logs / "churn.out").read_text()
                time.sleep(0.02)
            refused, documents = [], []
            for i in range(RUNS):
                report = logs / f"churn-{i}.json"
                argv = no_docker_argv("run", "--report", str(report), "--", SYSTEM_PYTHON, "-I", "-c", TRY,
                                      "/srv/t65-churn/stable.sock")
                done = guard.run(argv, cwd=base / "work")
                if done.returncode != 0:
                    refused.append(done.stderr.decode(errors="replace").strip())
                    continue
                assert json.loads(done.stdout) == [errno.ECONNREFUSED], done.stdout
                documents.append(json.loads(report.read_text()))
            assert not refused, f"{len(refused)} of {RUNS} runs refused: {refused[:3]}"
            for document in documents:
                # Listed, and left to the mediation: no mask would hold in that user's directory.
                stable = "/srv/t65-churn/stable.sock"
                assert stable in document["listing"]["unix_paths"], document["listing"]
                assert stable not in document["masked_sockets"], document["masked_sockets"]
            assert not (logs / "churn.ready.accepted").exists(), "a run reached the socket"
            control = guard.run([sys.executable, "-I", "-c", TRY, "/srv/t65-churn/stable.sock"])
            assert json.loads(control.stdout) == ["reached"], control.stdout
        finally:
            guard.stop(proc)
