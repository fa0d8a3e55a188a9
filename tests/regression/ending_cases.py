"""Helpers of the ending T-cases (T-17, 24-27, 30-38): real `no-docker run`s and an oracle for
"is anything of it left" that does not depend on the supervisor's own proof.

Oracles:
- a *token*: a unique number used as the argument of ``sleep`` (``sleep 86400.<nonce>``), so
  a survivor is found by scanning ``/proc/*/cmdline`` for the token;
- a *heartbeat*: pid-hoppers append a byte to a file in the work dir on every hop; the run is
  over when the file stops growing (a scan can miss a hopper, the file cannot).

Everything goes through ``python -m no_docker.supervisor.cli`` of the interpreter running the
tests, so a weakened copy runs its own code. Whatever a test does, every token process it made
is SIGKILLed at the end (``Survivors.reap``), and leftover runs are ended.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounded import readline
from isolation_cases import cli, require_bwrap

__all__ = ["cli", "require_bwrap"]


def token() -> str:
    """A unique sleep duration: ``86400.<6 random digits><pid mod 1000>``."""
    return f"86400.{int.from_bytes(os.urandom(3), 'big') % 1000000:06d}{os.getpid() % 1000:03d}"


def with_token(tok: str) -> list[int]:
    """Pids whose command line carries ``tok`` (outside view, every namespace)."""
    found = []
    needle = tok.encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def alive_with_token(tok: str) -> list[int]:
    """Like ``with_token`` but without zombies (which are dead: they only wait to be reaped)."""
    alive = []
    for pid in with_token(tok):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if data[data.rfind(b")") + 2 : data.rfind(b")") + 3] not in (b"Z", b"X"):
            alive.append(pid)
    return alive


def settled_without(tok: str, seconds: float = 0.3) -> list[int]:
    """Survivors carrying ``tok``, checked now and again after ``seconds``."""
    first = alive_with_token(tok)
    time.sleep(seconds)
    return sorted(set(first) | set(alive_with_token(tok)))


def kill_token(tok: str) -> None:
    """Test clean-up: SIGKILL whatever still carries the token (only processes tests made)."""
    for _ in range(20):
        pids = alive_with_token(tok)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def daemon(tok: str) -> str:
    """A double-forked setsid daemon carrying ``tok``, detached from every pipe."""
    return f"(setsid sh -c 'sleep {tok} & exec sleep {tok}' </dev/null >/dev/null 2>&1 &)"


def hopper(heartbeat: str) -> str:
    """A pid-hopper (fork, parent exits, forever) that appends to ``heartbeat`` on every hop."""
    code = ("import os\nwhile True:\n    if os.fork(): os._exit(0)\n"
            f"    fd = os.open({heartbeat!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
            "    os.write(fd, b'.'); os.close(fd)\n")
    return f"{sys.executable} -I -S -c {_sh_quote(code)} </dev/null >/dev/null 2>&1 &"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def heartbeat_stopped(path: Path, quiet: float = 0.5) -> bool:
    """True when ``path`` does not grow for ``quiet`` seconds (every hopper is gone)."""
    size = path.stat().st_size if path.exists() else 0
    time.sleep(quiet)
    return (path.stat().st_size if path.exists() else 0) == size


class Supervisor:
    """A `no-docker run` in the background (own session), its stdout read line by line."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 argv: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(argv or cli("run", *args), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_line(self, text: str, timeout: float = 60) -> None:
        """Block until CMD prints a line containing ``text`` (CMD is up and ready)."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), True)
        buf = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            if text.encode() in buf:
                return
        assert self.proc.stderr is not None
        os.set_blocking(self.proc.stderr.fileno(), False)
        err = _read_available(self.proc.stderr.fileno())
        pytest.fail(f"CMD never printed {text!r}: stdout {buf!r} stderr {err!r} status {self.proc.poll()}")

    def signal(self, signum: int) -> None:
        os.kill(self.proc.pid, signum)  # the supervisor only, not its session

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Wait for the supervisor to exit; its status and stderr. Processes it left behind may
        hold the pipe open, so stderr is read until the supervisor is gone, not until EOF."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        os.set_blocking(fd, False)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() >= deadline:
                self.kill()
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            select.select([fd], [], [], 0.05)
            chunks.append(_read_available(fd))
        time.sleep(0.05)
        chunks.append(_read_available(fd))
        return self.proc.returncode, b"".join(chunks).decode(errors="replace")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


def _read_available(fd: int) -> bytes:
    out = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        out.append(chunk)
    return b"".join(out)


def run_to_end(args: list[str], *, cwd: Path, timeout: float = 60,
               argv: list[str] | None = None) -> subprocess.CompletedProcess:
    sup = Supervisor(args, cwd=cwd, argv=argv)
    try:
        code, err = sup.finish(timeout)
    finally:
        if sup.proc.poll() is None:
            sup.kill()
    return subprocess.CompletedProcess(sup.proc.args, code, "", err)


def runs_json() -> list[dict]:
    out = subprocess.run(cli("runs", "--json"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def end_all() -> None:
    subprocess.run(cli("end", "--all", "--force"), capture_output=True, timeout=120)


def cgroups_left(run_id: str) -> list[str]:
    """The run's v2 leaf and v1 pids cgroup, if they still exist."""
    roots = (Path("/sys/fs/cgroup/unified/no-docker"), Path("/sys/fs/cgroup/pids/no-docker"))
    return [str(root / run_id) for root in roots if (root / run_id).exists()]


def report_of(path: Path) -> dict:
    return json.loads(path.read_text())


# A supervisor that starts a run with the library exactly as `no-docker run` does (marker,
# cgroup, bwrap with --unshare-pid), but WITHOUT --die-with-parent: SIGKILLed, it leaves its
# processes behind, as the bwrap races (#633, #692) can. Prints the run id when up.
ORPHANING_OWNER = r"""
import json, os, subprocess, sys, time
from no_docker.supervisor.ending.lifecycle import RunLifecycle
life = RunLifecycle(["orphan"], max_pids=int(sys.argv[2]) or None, check_stale=False).__enter__()
r, w = os.pipe()
script = sys.argv[1]
with life.cgroup_entered():
    proc = subprocess.Popen(["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--info-fd", str(w), "--",
                             "sh", "-c", script], pass_fds=[w], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.close(w)
life.launched(proc.pid)
buf = b""
while b"}" not in buf:
    buf += os.read(r, 4096)
life.set_init(json.loads(buf)["child-pid"])
time.sleep(0.3)
print(life.run_id, flush=True)
time.sleep(3600)
"""


def orphaned_run(script: str) -> str:
    """A run whose supervisor was SIGKILLed while its processes live on; its run id."""
    from nonroot import pids_limit_unavailable

    # Bounded where this user can have a pids limit; an ordinary user's run has none (SCRIPT
    # is never a fork storm, and its processes are killed by token whatever happens).
    limit = "0" if pids_limit_unavailable() else "64"
    owner = subprocess.Popen([sys.executable, "-c", ORPHANING_OWNER, script, limit], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        run_id = readline(owner.stdout, 60, "run id from the orphaning owner").strip()  # type: ignore[arg-type]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    assert run_id, "the orphaning owner did not start its run"
    return run_id


# `no-docker run` with one seam of the supervisor replaced, in a child interpreter: the only
# way to make the kernel's answers unreadable or its kills ineffective on purpose.
PATCHED_RUN = r"""
import os, sys
from pathlib import Path
import no_docker.supervisor.ending.algorithm as ending
from no_docker.supervisor.ending.procfs import ProcFS
mode, fake = sys.argv[1], Path(sys.argv[2])
real_end_run = ending.end_run

def fake_root(member):
    # /proc as symlinks, except the member: a frozen copy of its stat (it looks alive forever)
    # and a namespace link that cannot be read (as /proc/1/ns/* gives EACCES here even to root)
    fake.mkdir()
    for pid in ProcFS().pids():
        if pid != member:
            (fake / str(pid)).symlink_to(f"/proc/{pid}")
    entry = fake / str(member)
    (entry / "ns").mkdir(parents=True)
    (entry / "stat").write_bytes(Path(f"/proc/{member}/stat").read_bytes())
    (entry / "status").write_bytes(Path(f"/proc/{member}/status").read_bytes())
    (entry / "ns" / "pid").symlink_to("unreadable")
    (fake / "sys").symlink_to("/proc/sys")
    return ProcFS(fake)

if mode in ("unreadable", "nocgroup"):
    # No cgroup: where the run has a v2 leaf, its emptiness settles what /proc cannot
    # (docs/supervision.md, "When the cgroup is the proof"); here the pass is the whole proof,
    # as for an ordinary user without a delegated cgroup.
    import no_docker.supervisor.ending.cgroup as cgroup
    cgroup.v2_parent = lambda *a, **k: None

def end_run(target, **kw):
    if mode == "unreadable" and target.init is not None and kw.get("kill", True):
        kw["procfs"] = fake_root(target.init.pid)
    return real_end_run(target, **kw)

if mode == "unkillable":
    # signals to the run are not delivered (as for tasks stuck in the kernel)
    ending.signal.pidfd_send_signal = lambda fd, sig, *a: None
    import no_docker.supervisor.ending.cgroup as cgroup
    cgroup.RunCgroup.kill = lambda self: False
ending.end_run = end_run  # the lifecycle calls it through the module, at the ending
from no_docker.supervisor.cli import main
sys.exit(main(["run", *sys.argv[3:]]))
"""


def patched_run_argv(mode: str, fake: Path, *run_args: str) -> list[str]:
    return [sys.executable, "-c", PATCHED_RUN, mode, str(fake), *run_args]


def ending_not_proven_then_end(tmp_path: Path, mode: str, fake: Path, script: str) -> str:
    """T-27/T-33 shape: a run whose ending ``patched_run_argv(mode)`` makes unprovable is sent
    SIGTERM once CMD printed "ready"; it must exit 125 naming `no-docker end RUN_ID`, keep its
    marker as ``not-proven``, and that exact command must then finish the job. Returns the
    supervisor's stderr for the case's own checks. The caller reaps by token."""
    argv = patched_run_argv(mode, fake, "--end-timeout", "1", "--", "sh", "-c", script)
    sup = Supervisor([], cwd=tmp_path, argv=argv)
    try:
        sup.wait_line("ready")
        sup.signal(signal.SIGTERM)  # the ending starts while the run's processes are alive
        code, err = sup.finish()
    finally:
        sup.kill()
    assert code == 125, err
    found = re.search(r"no-docker end (\S+)", err)
    assert found, err
    rows = runs_json()
    assert [(r["run_id"], r["state"]) for r in rows] == [(found.group(1), "not-proven")], rows
    ended = subprocess.run(cli("end", found.group(1)), capture_output=True, text=True, timeout=60)
    assert ended.returncode == 0, ended.stderr
    assert runs_json() == []
    return err
