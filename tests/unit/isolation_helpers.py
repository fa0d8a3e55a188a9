"""Shared by the isolation tests (tests/unit/test_isolation_*.py, tests/regression/test_t*.py).

Runs ``no-docker run`` as a real subprocess, optionally against a *weakened* build: the
weakening is applied in the child only (a monkeypatch before ``run.main``, and a modified copy
of the probe), never by a switch in production code. Each negative test runs once weakened to
show that it can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "supervisor" / "isolation" / "probe.py"
BWRAP = shutil.which("bwrap")


def bwrap_works() -> str | None:
    """None when bwrap can build a sandbox here, else the reason (for pytest.skip)."""
    if BWRAP is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run([BWRAP, "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True,
                           timeout=120)
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.decode(errors='replace').strip()}"
    return None


# Probe weakenings: (property check to disable) -> the method whose body becomes `return`.
PROBE_CHECKS = {"P1": "p1", "P2": "p2", "P3": "p3", "P4w": "p4_writes", "P4m": "p4_mounts",
                "P5": "p5", "P5f": "p5_filter", "P6": "p6", "P7": "p7", "P8": "p8",
                "P9": "p9", "P10": "p10", "P11": "p11", "P12": "p12", "P13": "p13"}


def weakened_probe(tmp: Path, disable: tuple[str, ...]) -> Path:
    """A copy of the probe with the named checks turned into no-ops."""
    source = PROBE.read_text()
    for key in disable:
        name = PROBE_CHECKS[key]
        marker = f"    def {name}(self"
        start = source.index(marker)
        body = source.index(":\n", start) + 2
        source = source[:body] + "        return\n" + source[body:]
    out = tmp / "weak-probe" / "supervisor" / "isolation" / "probe.py"  # laid out as installed
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(source)
    return out


# Policy weakenings: code run in the child before run.main, against `plan` and `policy` modules.
POLICY_WEAKENINGS = {
    "no-mask": "plan.sockets_to_mask = lambda policy, sockets: ()",
    "no-tmpfs-tmp": "_wrap_policy(lambda p: _strip_hidden(p, '/tmp'))",
    "no-tmpfs-home": "_wrap_policy(lambda p: _strip_hidden(p, os.path.realpath(os.environ['HOME'])))",
    "no-protect": "_wrap_policy(lambda p: _replace(p, protected=(), pinned=()))",
    # PATH entries inside the work dir left writable (the work dir is the only writable root there)
    # (and no venv found by the later-code walk: it would protect and audit the venv too)
    "path-not-protected": ("later_code._VENV_MARK = '/'; "
                           "_wrap_policy(lambda p: _replace(p, protected=tuple(x for x in p.protected if not "
                           "any(x == os.path.realpath(e) or os.path.isfile(os.path.join(x, 'pyvenv.cfg')) "
                           "for e in os.environ['PATH'].split(':') if e))))"),
    "proc-sys-writable": "_wrap_policy(lambda p: _replace(p, proc_readonly=()))",
    "init-mem-writable": "_wrap_policy(lambda p: _replace(p, proc_masked=()))",
    # git_layout back to trusting any gitdir a .git file names
    "gitdir-trusted": "later_code.gitdir_may_be_writable = lambda gitdir, common, work: True",
    "keep-all-env": "_wrap_policy(lambda p: _replace(p, env=tuple(sorted(os.environ.items()))))",
    "expose-tmp": "_wrap_policy(lambda p: _replace(p, ro=p.ro + ('/tmp',)))",
    "pass-fds": ("_spawn = mediation.spawn_filtered; "
                 "mediation.spawn_filtered = lambda argv, env, pass_fds, **kw: _spawn(argv, env, "
                 "tuple(pass_fds) + tuple(int(x) for x in os.environ['NO_DOCKER_TEST_FDS'].split()), **kw)"),
    # P7's relay (isolation/stdio.py) gone: every stdio socket crosses into the run as it is.
    "no-stdio-relay": ("import no_docker.supervisor.isolation.stdio as stdio; "
                       "stdio.plan = lambda facts: [stdio.PASS] * len(facts)"),
    # The connect mediation (P12) installed but answering nothing: a filter that allows every
    # syscall gets the listener (so that each other layer can be shown alone).
    "no-mediation": "mediation.program = lambda arch: bytes((6, 0, 0, 0, 0, 0, 0xFF, 0x7F))",
    # The gate's last look at the descriptors crossing into CMD (policy.GATE_SCRIPT) gone.
    "gate-keeps-fds": ("import no_docker.supervisor.isolation.policy as _policy; "
                       "_policy.GATE_SCRIPT = _policy.GATE_SCRIPT.replace(_policy.GATE_FD_CHECK, '')"),
    "share-net": "_wrap_argv(lambda a: _insert_after(a, '--unshare-all', ['--share-net']))",
    "no-cap-drop": "_wrap_argv(lambda a: _drop_flag(a, '--cap-drop', 2))",
    "no-new-session": "_wrap_argv(lambda a: _drop_flag(a, '--new-session', 1))",
    # The syscall filter (supervisor/isolation/syscall_filter.py): not handed to bwrap at all, or another one.
    "no-seccomp": "_without_seccomp()",
    # RET ALLOW
    "allow-all-seccomp": "seccomp.program = lambda arch, **kw: bytes((6, 0, 0, 0, 0, 0, 0xFF, 0x7F))",
    "setuid-only-seccomp": "seccomp.SETID_BITS = 0o4000",
    "io-uring-allowed-seccomp": ("seccomp.DENIED_SYSCALLS = {a: {n: e for n, e in d.items() if n not in "
                                 "(425, 426, 427)} for a, d in seccomp.DENIED_SYSCALLS.items()}"),
    # Not a weakening: an architecture the filter has no table for (the run must refuse).
    "unknown-arch": ("_u = os.uname(); os.uname = lambda: type(_u)((*_u[:4], 'sparc64'))"),
}

_PRELUDE = """
import os, sys
import no_docker.supervisor.isolation.plan as plan
import no_docker.supervisor.isolation.later_code as later_code
import no_docker.supervisor.run as run
import no_docker.supervisor.isolation.syscall_filter as seccomp
import no_docker.supervisor.isolation.mediation as mediation
def _replace(p, **kw):
    return p.replace(**kw)
def _strip_hidden(p, path):
    return p.replace(hidden=tuple(h for h in p.hidden if h != path))
def _insert_after(argv, flag, extra):
    i = argv.index(flag)
    return argv[:i + 1] + extra + argv[i + 1:]
def _drop_flag(argv, flag, n):
    i = argv.index(flag)
    return argv[:i] + argv[i + n:]
def _wrap_policy(change):
    orig = run.build_policy
    run.build_policy = lambda *a, **k: change(orig(*a, **k))
def _wrap_argv(change):
    orig = run.bwrap_argv
    run.bwrap_argv = lambda *a, **k: change(orig(*a, **k))
def _without_seccomp():
    # No `--seccomp FD`, and FD not passed either (else it would cross into the run: P7).
    orig_argv, orig_spawn, dropped = run.bwrap_argv, mediation.spawn_filtered, []
    def argv(*a, seccomp_fd=None, **k):
        dropped.append(seccomp_fd)
        return orig_argv(*a, **k)
    run.bwrap_argv = argv
    # Nor the same filter installed on bwrap before it starts (what the prover tries).
    mediation.spawn_filtered = lambda argv, env, pass_fds, **kw: orig_spawn(
        argv, env, tuple(fd for fd in pass_fds if fd not in dropped), **{**kw, "deny_filter": None})
"""


def no_docker_argv(args: list[str], *, weaken: tuple[str, ...] = (), probe: Path | None = None) -> list[str]:
    """argv of ``no-docker run ARGS`` (or of a weakened build of it)."""
    if not weaken and probe is None:
        return [sys.executable, "-m", "no_docker.supervisor.cli", "run", *args]
    code = _PRELUDE
    for name in weaken:
        code += POLICY_WEAKENINGS[name] + "\n"
    if probe is not None:
        # The prover runs the package's probe module in a fork of the supervisor: the weakened
        # copy replaces its functions and classes there.
        code += (f"run.probe_source_path = lambda: {str(probe)!r}\n"
                 "import no_docker.supervisor.isolation.probe as _probe\n"
                 f"exec(compile(open({str(probe)!r}).read(), {str(probe)!r}, 'exec'), _probe.__dict__)\n")
    code += ("import no_docker.supervisor.cli as cli\n"
             f"sys.exit(cli.main(['run', *{args!r}]))\n")
    return [sys.executable, "-c", code]


def run_no_docker(args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60,
                  weaken: tuple[str, ...] = (), probe: Path | None = None, **kwargs: object
                  ) -> subprocess.CompletedProcess:
    full_env = dict(os.environ if env is None else env)
    proc = subprocess.Popen(no_docker_argv(args, weaken=weaken, probe=probe), cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            **kwargs)  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=30)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


class UnixListener:
    """A listening unix socket that stands in for an engine; ``reached()`` says if anyone connected."""

    def __init__(self, path: str | bytes) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.sock.setblocking(False)

    def reached(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.sock.close()
        if isinstance(self.path, str) and not self.path.startswith("\0"):
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class TcpListener:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def reached(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.sock.close()


def connect_script(target: str) -> list[str]:
    """A command for inside the run: try to connect to TARGET, print REACHED or REFUSED <errno>."""
    code = (
        "import socket, sys\n"
        f"t = {target!r}\n"
        "if t.startswith('tcp:'):\n"
        "    s = socket.socket(socket.AF_INET); a = ('127.0.0.1', int(t[4:]))\n"
        "elif t.startswith('@'):\n"
        "    s = socket.socket(socket.AF_UNIX); a = '\\0' + t[1:]\n"
        "elif t.startswith('fd:'):\n"
        "    import os\n"
        "    try:\n"
        "        s = socket.socket(fileno=os.dup(int(t[3:]))); s.send(b'x'); print('REACHED')\n"
        "    except OSError as e:\n"
        "        print('REFUSED', e.errno)\n"
        "    sys.exit(0)\n"
        "else:\n"
        "    s = socket.socket(socket.AF_UNIX); a = t\n"
        "s.settimeout(2)\n"
        "try:\n"
        "    s.connect(a); print('REACHED')\n"
        "except OSError as e:\n"
        "    print('REFUSED', e.errno)\n"
    )
    return [sys.executable, "-I", "-S", "-c", code]


def read_report(path: Path) -> dict:
    return json.loads(path.read_text())
