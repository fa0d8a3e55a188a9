"""T-66: an ordinary user's run on a machine where root and another user hold pid namespaces.

On every machine that runs containers, root (dockerd's containers) and other users (rootless
engines, browser sandboxes) have processes in pid namespaces of their own, whose ns links an
ordinary user may not read. Every run of such a user used to end 125 after the whole
``--end-timeout`` ("N processes whose pid namespace cannot be read"), keep its marker and lock
the user out: ``end --all`` could not clear it. A process holding another uid than the one the
run's user namespace maps cannot be a member (docs/supervision.md, "Processes of other
users"), so the ending is shown, at once. A process of the caller's own uid whose namespace
cannot be read stays unknown (T-27): the run is 125, the message says which process blocks it,
whose and where, and ``no-docker end`` finishes the run once that process is gone.

Runs as uid 65534 (setpriv) with /usr/bin/python3 and a copy of the package, like
tests/unit/test_isolation_nonroot.py; the blockers are made here, as root, and reaped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ending_cases import kill_token, settled_without, token
from nonroot import SYSTEM_PYTHON, skip_reason

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
OTHER = 65533
BWRAP = shutil.which("bwrap")


_why = skip_reason(BWRAP) or (None if shutil.which("unshare") else "unshare (util-linux) is not installed")
if _why:
    pytest.skip(_why, allow_module_level=True)


@pytest.fixture
def world() -> Iterator[Path]:
    """The package, a work dir and a state dir that uid 65534 can use (pytest's tmp is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="no-docker-t66-"))
    try:
        pkg = base / "pkg" / "no_docker"
        pkg.mkdir(parents=True)
        for part in ("supervisor", "canary", "mutants", "ci"):
            shutil.copytree(REPO / part, pkg / part, ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("work", "home", "state"):
            (base / name).mkdir()
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        for path in (base, base / "work", base / "home", base / "state"):
            os.chown(path, NOBODY, NOBODY)
        os.chmod(base, 0o755)
        os.chmod(base / "state", 0o700)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_nobody(world: Path, args: list[str], timeout: float = 60,
              cgroup: Path | None = None) -> subprocess.CompletedProcess:
    """`no-docker ARGS` as uid 65534; in CGROUP (a v2 cgroup delegated to it) when given."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(world / "home"), "LANG": "C.UTF-8",
           "PYTHONPATH": str(world / "pkg"), "NO_DOCKER_STATE_DIR": str(world / "state")}
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON, "-m",
            "no_docker.supervisor.cli", *args]
    if cgroup is not None:  # as a login session's manager would start the user's shell
        argv = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *argv]
    return subprocess.run(argv, cwd=world / "work", env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class Held:
    """Processes in pid namespaces of their own, each in a session of its own: SIGKILLed and
    reaped (the whole session) whatever happens."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs:
            self.stop(proc)


@pytest.fixture
def held() -> Iterator[Held]:
    h = Held()
    try:
        yield h
    finally:
        h.close()


def _in_own_namespace(tok: str, timeout: float = 10) -> int:
    """The pid of the process carrying TOK once it runs in a pid namespace below ours."""
    deadline = time.monotonic() + timeout
    needle = tok.encode()
    while time.monotonic() < deadline:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if needle not in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    continue
                status = Path(f"/proc/{entry.name}/status").read_text()
            except OSError:
                continue
            nspid = next(line for line in status.splitlines() if line.startswith("NSpid:")).split()
            if len(nspid) > 2:
                return int(entry.name)
        time.sleep(0.02)
    raise AssertionError(f"no process carrying {tok} came up in a pid namespace of its own")


def _hold_other_users(held: Held, tok: str) -> list[int]:
    """Root's process in a pid namespace of its own, and another user's in its own user + pid
    namespace: neither's ns link is readable to uid 65534."""
    held.start(["unshare", "--pid", "--fork", "--mount-proc", "sleep", tok])
    held.start(["setpriv", f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups",
                "unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "sleep", tok])
    pids = []
    deadline = time.monotonic() + 10
    while len(pids) < 2 and time.monotonic() < deadline:
        pids = [p for p in _pids_with(tok) if _depth(p) >= 1]
        time.sleep(0.02)
    assert len(pids) == 2, f"the other users' namespaces did not come up: {pids}"
    for pid in pids:  # the premise: uid 65534 cannot read them
        probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                "readlink", f"/proc/{pid}/ns/pid"], capture_output=True, timeout=10)
        assert probe.returncode != 0, f"uid {NOBODY} can read /proc/{pid}/ns/pid: no premise"
    return pids


def _pids_with(tok: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if tok.encode() in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _depth(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return len(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()) - 2


def _runs(world: Path) -> list[dict]:
    result = as_nobody(world, ["runs", "--json"])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_other_users_namespaces_do_not_stop_an_ordinary_users_runs(world, held):
    tok_them, tok_mine = token(), token()
    try:
        _hold_other_users(held, tok_them)
        for _ in range(3):
            started = time.monotonic()
            result = as_nobody(world, ["run", "--", "sh", "-c", f"sleep {tok_mine} & echo ran"])
            elapsed = time.monotonic() - started
            assert result.returncode == 0, result.stderr
            assert result.stdout == "ran\n"
            assert re.search(r"ended, 1 process killed, 0 left", result.stderr), result.stderr
            assert elapsed < 8, f"the ending waited ({elapsed:.1f} s): {result.stderr}"
            assert settled_without(tok_mine) == []
        assert _runs(world) == []
        ended = as_nobody(world, ["end", "--all"])
        assert ended.returncode == 0, ended.stderr
        # the other users' processes were not touched
        assert len([p for p in _pids_with(tok_them) if _depth(p) >= 1]) == 2
    finally:
        kill_token(tok_mine)


def _same_uid_unreadable(held: Held, tok: str) -> int:
    """A process of uid 65534 in a pid namespace root made, that has made itself non-dumpable:
    uid 65534 may not read its ns link (ptrace_may_access), and its uids are the run's."""
    code = ("import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "  # PR_SET_DUMPABLE 0
            f"time.sleep({tok})")
    held.start(["unshare", "--pid", "--fork", "--mount-proc", "setpriv", f"--reuid={NOBODY}",
                f"--regid={NOBODY}", "--clear-groups", SYSTEM_PYTHON, "-c", code])
    pid = _in_own_namespace(tok)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the prctl has run
        probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                "readlink", f"/proc/{pid}/ns/pid"], capture_output=True, timeout=10)
        if probe.returncode != 0:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"uid {NOBODY} can still read /proc/{pid}/ns/pid")


def test_a_same_uid_process_that_cannot_be_read_blocks_with_a_line_and_end_finishes(world, held):
    tok_them, tok_blocker, tok_mine = token(), token(), token()
    try:
        _hold_other_users(held, tok_them)
        blocker = _same_uid_unreadable(held, tok_blocker)
        result = as_nobody(world, ["run", "--end-timeout", "1", "--", "sh", "-c",
                                   f"sleep {tok_mine} & echo ran"])
        assert result.returncode == 125, result.stderr
        assert result.stdout == "ran\n"
        # which process, whose, where; and the command that finishes the job
        assert f"pid {blocker} 'python3' of uid {NOBODY}" in result.stderr, result.stderr
        assert "in a pid namespace 1 level below yours" in result.stderr, result.stderr
        assert "cannot be read" in result.stderr
        run_id = re.search(r"no-docker end (\S+)", result.stderr).group(1)
        assert settled_without(tok_mine) == []  # the run's own process is gone all the same
        assert [(r["run_id"], r["state"]) for r in _runs(world)] == [(run_id, "not-proven")]
        # while the blocker lives: end says the same, runs refuse and name it
        again = as_nobody(world, ["end", "--timeout", "1", run_id])
        assert again.returncode == 125 and f"pid {blocker} " in again.stderr, again.stderr
        refused = as_nobody(world, ["run", "--", "true"])
        assert refused.returncode == 125 and run_id in refused.stderr, refused.stderr
        # once it is gone, `end` finishes the run, and runs are proven again
        held.close()
        ended = as_nobody(world, ["end", run_id])
        assert ended.returncode == 0, ended.stderr
        assert _runs(world) == []
        after = as_nobody(world, ["run", "--", "true"])
        assert after.returncode == 0, after.stderr
    finally:
        kill_token(tok_mine)
        kill_token(tok_blocker)


@pytest.fixture
def delegated() -> Iterator[Path]:
    """A cgroup v2 subtree delegated to uid 65534, as systemd gives a user session one
    (cgroup-v2.rst, "Delegation Containment": the directory, cgroup.procs, cgroup.threads and
    cgroup.subtree_control chowned to the user)."""
    from no_docker.supervisor.ending.cgroup import cgroup2_mounts

    mounts = cgroup2_mounts(Path("/proc/self/mountinfo").read_text())
    if not mounts:
        pytest.skip("no cgroup v2 hierarchy is mounted here")
    own = Path("/proc/self/cgroup").read_text().split("0::", 1)[1].split("\n", 1)[0].lstrip("/")
    base = Path(mounts[0], own, f"no-docker-t66-{os.getpid()}")
    base.mkdir()
    try:
        for name in ("", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
            os.chown(base / name if name else base, NOBODY, NOBODY)
        if os.path.isdir("/run/systemd/system"):
            os.setxattr(base, "trusted.delegate", b"1")
        yield base
    finally:
        for directory in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            directory.rmdir()
        base.rmdir()


def test_with_a_delegated_cgroup_its_emptiness_settles_what_proc_cannot(world, held, delegated):
    """Where the run has a v2 leaf of its own (a delegated subtree), cgroup.kill + populated 0
    on a leaf no member can leave is the proof: even a same-uid process whose namespace
    cannot be read does not stop the run (without the cgroup it does: the case above)."""
    tok_them, tok_blocker, tok_mine = token(), token(), token()
    try:
        _hold_other_users(held, tok_them)
        _same_uid_unreadable(held, tok_blocker)
        report = world / "work" / "report.json"
        for _ in range(2):
            result = as_nobody(world, ["run", "--end-timeout", "2", "--report", str(report), "--", "sh", "-c",
                                       f"sleep {tok_mine} & echo ran"], cgroup=delegated)
            assert result.returncode == 0, result.stderr
            assert result.stdout == "ran\n"
            assert ", 1 process killed, 0 left," in result.stderr, result.stderr
            assert settled_without(tok_mine) == []
            # the cgroup settled the blocker (and what else /proc could not read)
            assert json.loads(report.read_text())["ending"]["settled_by_cgroup"] >= 1
        # the runs had their leaf in the delegated subtree, and removed it
        group = delegated / "no-docker"
        assert group.is_dir() and not [p for p in group.iterdir() if p.is_dir()]
        assert _runs(world) == []
    finally:
        kill_token(tok_mine)
        kill_token(tok_blocker)
