"""The outer guard: a mount + pid + network namespace where the canary owns every engine path.

The T-series and ``no-docker prove`` put the canary on the *real* engine paths
(``/run/docker.sock``, ``127.0.0.1:2375``...) so that a payload which finds a way out of the
isolation is seen. They may do that only where a real engine can never be reached (DESIGN §8):

* a new **mount namespace** whose tmpfs hides the host's ``/run``, ``/var/run``, ``/tmp``,
  ``/var/tmp`` and ``/dev/shm`` (and the engine directories of the real ``$HOME``): a socket
  file is reachable through a read-only bind and through a new network namespace alike; only
  hiding it helps (notes/isolation-anchors.md §1);
* a new **network namespace** with only ``lo`` up: the host's loopback ports and abstract
  unix sockets are out of reach;
* a new **pid namespace** with a fresh ``/proc``: ``/proc/1/root/run/docker.sock`` (a route
  the payloads try) then leads into the guard's own mount namespace, not the host's.

A *holder* process (this module run with ``--holder CONFIG``) is started by ``unshare`` as
pid 1 of those namespaces. It sets up the mounts and ``lo``, checks that every engine path is
absent and every port closed, starts the canary, and then checks that the canary, and only
the canary, answers on each of them: the ``SO_PEERCRED`` pid of every unix listener and the
owner of every TCP listener is the canary, and a request carrying a unique marker sent to
every listener is in the canary's log. It then writes a ready file and waits for its stdin
to close; it is pid 1, so its exit takes every process of the guard with it.

:class:`OuterGuard` (the contract) starts the holder, runs commands inside with ``nsenter``,
reads the canary's log, and on exit proves that no process of the guard is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..ending.procfs import parse_stat
from ..errors import NoDockerError

# Directories whose host contents must never be visible inside the guard.
HIDDEN_DIRS = ("/run", "/var/run", "/tmp", "/var/tmp", "/dev/shm", "/var/spool/cron")
# The real-engine guard: directories Podman writes to whatever its flags say, each behind an
# overlay on a tmpfs inside the guard (``_overlay``).
OVERLAID_DIRS = ("/var", "/etc/containers")
# Engine directories under the real $HOME, hidden when $HOME itself cannot be (it holds the
# toolchain or the repository).
HOME_ENGINE_DIRS = (".docker", ".colima", ".rd", ".lima", ".orbstack", ".local/share/containers")

ABSTRACT_NAME = "no-docker-engine"
# 2375 plain API, 2376 TLS API, 4243 the legacy port (notes/docker-wire.md §6).
TCP_LISTENERS = ("127.0.0.1:2375", "[::1]:2375", "127.0.0.1:2376", "127.0.0.1:4243")
CONTEXT_NAME = "no-docker-canary"
DOCKER_HOST = "unix:///run/docker.sock"
CONTAINER_HOST = "unix:///run/podman/podman.sock"
MARKER_PREFIX = "outer-guard-probe-"

READY_TIMEOUT = 30.0

# `DOCKER_HOST=ssh://host` makes the docker CLI run `ssh [opts] host docker system dial-stdio`.
# Inside the guard no sshd exists and no packet may leave, so "the remote host" is this
# stand-in, first on the guard's PATH: it runs the remote command against the canary. It
# lives in the guard's directory, which an isolated run does not see.
SSH_STAND_IN = """#!/bin/sh
# ssh stand-in of the no-docker outer guard: the remote host is the canary.
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
DOCKER_HOST=unix:///run/docker.sock exec sh -c "$*"
"""


class GuardError(NoDockerError):
    """The outer guard could not be set up or proven; nothing may run on the real engine paths."""

    exit_status = 125


# --------------------------------------------------------------------------- pure parts


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where things are inside the guard. Pure data: every path is an inside path."""

    root: str  # the guard's own directory, visible at the same path inside and outside
    uid: int

    @property
    def home(self) -> str:
        return f"{self.root}/home"

    @property
    def work(self) -> str:
        return f"{self.root}/work"

    @property
    def runtime_dir(self) -> str:
        return f"/run/user/{self.uid}"

    @property
    def bin(self) -> str:
        return f"{self.root}/bin"

    def unix_paths(self) -> list[str]:
        """Every pathname socket the canary takes (DESIGN §7, notes/docker-wire.md §6)."""
        return [
            "/run/docker.sock",
            "/var/run/docker.sock",
            "/run/podman/podman.sock",
            "/run/containerd/containerd.sock",
            "/run/buildkit/buildkitd.sock",
            "/run/crio/crio.sock",
            "/run/docker/containerd/containerd.sock",
            "/run/k3s/containerd/containerd.sock",
            "/run/cri-dockerd.sock",
            f"{self.home}/.docker/run/docker.sock",
            f"{self.home}/.docker/desktop/docker.sock",
            f"{self.home}/.colima/default/docker.sock",
            f"{self.home}/.rd/docker.sock",
            f"{self.home}/.orbstack/run/docker.sock",
            f"{self.runtime_dir}/docker.sock",
            f"{self.runtime_dir}/podman/podman.sock",
            f"{self.runtime_dir}/buildkit/buildkitd.sock",
        ]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment a developer inside would have: engine variables point at the canary."""
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "PYTHONPATH", "USER", "LOGNAME", "SHELL")
        env = {name: base[name] for name in keep if name in base}
        env["PATH"] = self.bin + ":" + env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(
            HOME=self.home,
            XDG_RUNTIME_DIR=self.runtime_dir,
            TMPDIR="/tmp",
            DOCKER_HOST=DOCKER_HOST,
            CONTAINER_HOST=CONTAINER_HOST,
        )
        return env

    def docker_files(self) -> dict[str, str]:
        """Files of ``~/.docker``: a context that points at the canary, and it as currentContext."""
        digest = hashlib.sha256(CONTEXT_NAME.encode()).hexdigest()
        meta = {
            "Name": CONTEXT_NAME,
            "Metadata": {"Description": "the no-docker canary (outer guard)"},
            "Endpoints": {"docker": {"Host": "unix:///var/run/docker.sock", "SkipTLSVerify": False}},
        }
        return {
            f"{self.home}/.docker/config.json": json.dumps({"currentContext": CONTEXT_NAME}, indent=1),
            f"{self.home}/.docker/contexts/meta/{digest}/meta.json": json.dumps(meta, indent=1),
            f"{self.bin}/ssh": SSH_STAND_IN,
        }


def dedupe_by_realpath(paths: Iterable[str], realpath: object = os.path.realpath) -> list[str]:
    """Keep the first of each group of paths naming one file (``/var/run`` is often ``/run``)."""
    seen: set[str] = set()
    out = []
    for path in paths:
        real = realpath(path)  # type: ignore[operator]
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out


def canary_argv(prefix: Sequence[str], *, unix: Sequence[str], tcp: Sequence[str], abstract: Sequence[str],
                log: str, mode: str, ready: str) -> list[str]:
    """``<prefix> serve --unix P... --tcp H:P... --abstract N... --log F --mode M --ready R``."""
    argv = [*prefix, "serve"]
    for path in unix:
        argv += ["--unix", path]
    for address in tcp:
        argv += ["--tcp", address]
    for name in abstract:
        argv += ["--abstract", name]
    return argv + ["--log", log, "--mode", mode, "--ready", ready]


def unshare_argv(holder: Sequence[str], *, userns: bool) -> list[str]:
    """The ``unshare`` command that starts the holder as pid 1 of fresh namespaces."""
    argv = ["unshare"]
    if userns:
        argv += ["--user", "--map-root-user"]
    # --kill-child: if unshare itself is killed, the holder (and with it the namespace) dies.
    argv += ["--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
             "--propagation", "private", "--"]
    return argv + list(holder)


def nsenter_argv(target: int, argv: Sequence[str], *, userns: bool, cwd: str | None) -> list[str]:
    """The ``nsenter`` command that runs argv inside the guard (``--wdns``: cwd as seen inside)."""
    out = ["nsenter", f"--target={target}"]
    if userns:
        out += ["--user", "--preserve-credentials"]
    out += ["--mount", "--net", "--pid"]
    if cwd is not None:
        out += [f"--wdns={cwd}"]
    return out + ["--", *argv]


def parse_tcp_listeners(text: str) -> dict[tuple[str, int], int]:
    """``/proc/net/tcp`` or ``tcp6`` text -> {(hex address, port): inode} of LISTEN sockets (proc(5))."""
    out: dict[tuple[str, int], int] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # 0A = TCP_LISTEN
            continue
        address, _, port = fields[1].partition(":")
        with contextlib.suppress(ValueError):
            out[(address, int(port, 16))] = int(fields[9])
    return out


def proc_net_address(host: str) -> str:
    """The hex form /proc/net/tcp{,6} shows for a host address (per 32-bit word, host order)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    packed = socket.inet_pton(family, host)
    words = [packed[i:i + 4] for i in range(0, len(packed), 4)]
    return "".join(struct.pack("<I", struct.unpack(">I", w)[0]).hex().upper() for w in words)


def split_tcp(address: str) -> tuple[str, int]:
    """``127.0.0.1:2375`` / ``[::1]:2375`` -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def marker_problems(listeners: Sequence[str], records: Iterable[Mapping], marker: str) -> list[str]:
    """Listeners whose probe request (carrying ``marker``) is missing from the canary log."""
    seen = set()
    for record in records:
        if record.get("kind") != "request":
            continue
        query = str(record.get("query", ""))
        headers = record.get("headers") or []
        carried = marker in query or any(
            str(name).lower() == "x-no-docker-route" and value == marker for name, value in headers
        )
        if carried:
            seen.add(record.get("listener"))
    return [f"{listener}: the probe request is not in the canary log" for listener in listeners
            if listener not in seen]


def read_records(log: Path, offset: int = 0) -> list[dict]:
    """Canary log records from byte ``offset`` on; a partial last line is left for later."""
    try:
        data = log.read_bytes()[offset:]
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            out.append(json.loads(line))
    return out


# --------------------------------------------------------------------------- the holder (inside)

_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC = 2, 4, 4096, 16384


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)

    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or 'bind'} on {target}: {os.strerror(err)}")


def _lo_up() -> None:
    # struct ifreq: 16-byte name, then a union whose first member is short ifr_flags (40 bytes).
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        got = fcntl.ioctl(sock, siocgifflags, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", got)[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))
        got = fcntl.ioctl(sock, siocgifflags, struct.pack("16sH22x", b"lo", 0))
        if not struct.unpack("16sH22x", got)[1] & iff_up:
            raise OSError("lo is still down after SIOCSIFFLAGS")


def _connect_unix(address: str, timeout: float = 5.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect("\0" + address[1:] if address.startswith("@") else address)
    except BaseException:
        sock.close()
        raise
    return sock


def _connect_any(address: str, kind: str, timeout: float = 5.0) -> socket.socket:
    if kind == "tcp":
        host, port = split_tcp(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect((host, port))
        except BaseException:
            sock.close()
            raise
        return sock
    return _connect_unix("@" + address if kind == "abstract" else address, timeout)


def _nothing_answers(unix: Sequence[str], tcp: Sequence[str], abstract: Sequence[str]) -> list[str]:
    """Before the canary starts: every engine path must be absent and every port closed."""
    problems = []
    for kind, addresses in (("unix", unix), ("tcp", tcp), ("abstract", abstract)):
        for address in addresses:
            try:
                _connect_any(address, kind, timeout=2.0).close()
            except OSError as err:
                expected = {errno.ENOENT, errno.ECONNREFUSED, errno.EADDRNOTAVAIL, errno.ENETUNREACH}
                if err.errno not in expected:
                    problems.append(f"{address}: connect failed oddly before the canary started: {err}")
                continue
            problems.append(f"{address}: something answers there before the canary started")
    return problems


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for name in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            target = os.readlink(f"{fd_dir}/{name}")
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _probe_http(sock: socket.socket, marker: str) -> None:
    request = (f"GET /_ping?route={marker} HTTP/1.1\r\nHost: outer-guard\r\n"
               f"X-No-Docker-Route: {marker}\r\nConnection: close\r\n\r\n")
    # The canary writes its record before it answers: an answer means the record is logged.
    # A listener that hangs up is not the canary; the missing log record then says so.
    with contextlib.suppress(OSError):
        sock.sendall(request.encode())
        while sock.recv(65536):
            pass


def _only_canary_answers(canary_pid: int, listeners: Sequence[Mapping], log: Path, marker: str) -> list[str]:
    """After the canary is ready: it, and nothing else, owns each listener."""
    problems = []
    canary_inodes = _socket_inodes(canary_pid)
    tcp_tables: dict[tuple[str, int], int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            tcp_tables.update(parse_tcp_listeners(Path(table).read_text()))
    for listener in listeners:
        kind, address = listener["kind"], listener["address"]
        try:
            sock = _connect_any(address, kind)
        except OSError as err:
            problems.append(f"{address}: the canary does not answer: {err}")
            continue
        with sock:
            if kind in ("unix", "abstract"):
                pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                if pid != canary_pid:
                    problems.append(f"{address}: answered by pid {pid}, not the canary (pid {canary_pid})")
            else:
                host, port = split_tcp(address)
                inode = tcp_tables.get((proc_net_address(host), port))
                if inode is None or inode not in canary_inodes:
                    problems.append(f"{address}: the listening socket (inode {inode}) is not the canary's")
            _probe_http(sock, marker)
    problems += marker_problems([lst["address"] for lst in listeners], read_records(log), marker)
    return problems


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def toolchain_dirs() -> list[str]:
    """Where the Python code the guard starts comes from: the venv and its base Python, every
    ``PYTHONPATH`` entry, and the folders of the ``no_docker`` parts in use (as imported, and
    with symlinks resolved: a weakened copy imports them through a folder of symlinks)."""
    dirs = [sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parent.parent)]
    dirs += [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) if name.startswith("no_docker.") else None
        if where:
            # Both: the package as imported (a folder of symlinks for a weakened copy) and the
            # folder its parts lead to, the copy's tree (which, in a clone under /tmp, the
            # guard's tmpfs would hide: `no_docker.canary` not found inside).
            dirs.append(os.path.dirname(os.path.dirname(os.path.abspath(where))))
            dirs.append(os.path.dirname(os.path.dirname(os.path.realpath(where))))
    return list(dict.fromkeys(dirs))


def _overlay(config: Mapping) -> list[str]:
    """The real-engine guard: ``/var`` and ``/etc/containers`` become overlays whose upper
    layer is a tmpfs, so that whatever Podman writes there is thrown away with the guard's
    mount namespace. Podman 4.3 writes ``/var/lib/containers/cache`` whatever ``--root`` says,
    and ``/etc/containers/networks/netavark.lock`` without ``--network-config-dir`` (both
    measured); a tmpfs over all of ``/var`` would also hide the ``/var/run -> /run`` link the
    engine paths use.

    overlayfs(5): the lower layer is only the file system mounted at the path (no submounts),
    so a host engine's separate ``/var/lib/docker`` mount is not seen either. The hidden
    directories under /var (``/var/tmp``...) get their own tmpfs on top afterwards."""
    problems = []
    for index, path in enumerate(config["overlays"]):
        upper_fs = f"{config['overlay_dir']}/{index}"
        os.makedirs(upper_fs, exist_ok=True)
        _mount("tmpfs", upper_fs, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700")
        os.makedirs(f"{upper_fs}/upper")
        os.makedirs(f"{upper_fs}/work")
        host_dev = os.stat(path).st_dev
        layers = f"lowerdir={path},upperdir={upper_fs}/upper,workdir={upper_fs}/work"
        _mount("overlay", path, "overlay", 0, layers)
        if os.stat(path).st_dev == host_dev:
            problems.append(f"{path}: still the host's file system (no overlay over it)")
    return problems


def _hide(config: Mapping) -> list[str]:
    """Mount the tmpfs layers and re-bind the directories the caller shares. Returns problems."""
    problems = []
    keep_fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for path in config["keep"]}
    host_dev = {path: int(dev) for path, dev in config["host_dev"].items()}
    for path in config["hide"]:
        if os.path.islink(path) or not os.path.isdir(path):
            continue  # a symlink (/var/run -> /run) resolves into a hidden directory: checked below
        _mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
    for path in config["hide"]:
        if not os.path.lexists(path):
            continue
        real = os.path.realpath(path)
        st = os.stat(real)
        if host_dev.get(real) is not None and st.st_dev == host_dev[real]:
            problems.append(f"{path}: still the host's file system (no tmpfs over {real})")
        elif os.listdir(real):
            problems.append(f"{path}: not empty after the tmpfs was mounted")
    for path, fd in keep_fds.items():
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC, None)
        os.close(fd)
    return problems


def _start_canary(config: Mapping, unix: list[str]) -> subprocess.Popen:
    argv = canary_argv(config["canary"], unix=unix, tcp=config["tcp"], abstract=config["abstract"],
                       log=config["log"], mode=config["mode"], ready=config["canary_ready"])
    err = open(config["canary_stderr"], "wb")  # noqa: SIM115 - the child keeps it
    with err:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, close_fds=True)


def _last_line(path: str) -> str:
    try:
        lines = [ln for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {lines[-1].strip()}" if lines else ""


def _wait_for(path: str, proc: subprocess.Popen, timeout: float, stderr_path: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return json.loads(Path(path).read_text())
        if proc.poll() is not None:
            raise OSError(f"the canary exited with status {proc.returncode} before it was ready"
                          f"{_last_line(stderr_path)}")
        time.sleep(0.02)
    raise OSError(f"the canary was not ready within {timeout:.0f} s")


def _reap_orphans(canary: subprocess.Popen | None) -> None:
    """pid 1 of the guard: orphans of commands run with nsenter are reparented here."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if canary is not None and pid == canary.pid:  # keep its real status for the message below
            canary.returncode = os.waitstatus_to_exitcode(status)


def _namespaces() -> dict[str, int]:
    return {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in ("mnt", "net", "pid")}


def _prepare(config: Mapping) -> tuple[list[str], list[str]]:
    """Inside the new namespaces: hide, lo up, nothing answers yet, the files of the layout."""
    problems = [f"not in a new {name} namespace" for name, ino in _namespaces().items()
                if ino == config["outer_ns"][name]]
    if problems:
        return problems, []
    if config.get("overlays"):
        problems = _overlay(config)
        if problems:
            return problems, []
    problems = _hide(config)
    if problems:
        return problems, []
    _lo_up()
    unix = dedupe_by_realpath(config["unix"])
    problems = _nothing_answers(unix, config["tcp"], config["abstract"])
    if problems:
        return problems, []
    for path, text in config["files"].items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_text(text)
        if path.startswith(config["bin"] + "/"):
            os.chmod(path, 0o755)
    os.makedirs(config["runtime_dir"], mode=0o700, exist_ok=True)
    os.makedirs(config["work"], exist_ok=True)
    for path in unix:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    return [], unix


def _verify_canary(config: Mapping, canary: subprocess.Popen, unix: list[str]) -> dict:
    """The canary listens everywhere it should, and nothing but the canary answers there."""
    ready = _wait_for(config["canary_ready"], canary, READY_TIMEOUT, config["canary_stderr"])
    problems = []
    if ready.get("pid") != canary.pid:
        problems.append(f"the canary's ready file names pid {ready.get('pid')}, "
                        f"but the canary is pid {canary.pid}")
    listeners = ready.get("listeners", [])
    wanted = ({("unix", p) for p in unix} | {("tcp", a) for a in config["tcp"]}
              | {("abstract", n) for n in config["abstract"]})
    have = {(lst.get("kind"), lst.get("address")) for lst in listeners}
    problems += [f"{address}: the canary does not listen there" for _, address in sorted(wanted - have)]
    problems += _only_canary_answers(canary.pid, listeners, Path(config["log"]), config["marker"])
    if problems:
        return {"ok": False, "problems": problems}
    # Records up to here are the guard's own probes; guard.records() starts after them.
    log_offset = os.path.getsize(config["log"]) if os.path.exists(config["log"]) else 0
    return {"ok": True, "problems": [], "canary_pid": canary.pid, "listeners": listeners,
            "log_offset": log_offset, "unix": unix, "ns": _namespaces()}


def _hold(canary: subprocess.Popen | None, wake_r: int, stopped: Callable[[], bool]) -> int:
    """Wait for the owner: its end of our stdin closes when it exits, even on SIGKILL."""
    while not stopped():
        readable, _, _ = select.select([0, wake_r], [], [], 1.0)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        if 0 in readable and not os.read(0, 4096):
            break
        _reap_orphans(canary)
        if canary is not None and canary.poll() is not None:
            sys.stderr.write(f"outer guard: the canary exited with status {canary.returncode}\n")
            return 1
    return 0


def holder_main(config_path: str) -> int:
    """pid 1 of the guard's namespaces: set up, start and verify the canary, hold, tear down."""
    config = json.loads(Path(config_path).read_text())
    ready = config["ready"]
    canary: subprocess.Popen | None = None
    stop = []
    # pid 1 gets only the signals it has a handler for (pid_namespaces(7)).
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
    # SIGCHLD wakes the wait loop so that orphans are reaped at once, not on the next tick.
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        problems, unix = _prepare(config)
        if problems:
            _write_atomically(ready, json.dumps({"ok": False, "problems": problems}))
            return 1
        if config.get("real_engine"):
            # No canary: the engine paths stay empty for the real engine the owner starts
            # (real_engine.py), which then proves it alone answers there.
            _write_atomically(ready, json.dumps({"ok": True, "problems": [], "canary_pid": 0, "listeners": [],
                                                 "log_offset": 0, "unix": unix, "ns": _namespaces()}))
            return _hold(None, wake_r, lambda: bool(stop))
        canary = _start_canary(config, unix)
        state = _verify_canary(config, canary, unix)
        _write_atomically(ready, json.dumps(state))
        if not state["ok"]:
            return 1
        return _hold(canary, wake_r, lambda: bool(stop))
    except Exception as err:  # the owner reads the ready file; a traceback alone would be lost
        with contextlib.suppress(OSError):
            if not os.path.exists(ready):
                problem = f"holder: {type(err).__name__}: {err}"
                _write_atomically(ready, json.dumps({"ok": False, "problems": [problem]}))
        raise
    finally:
        if canary is not None and canary.poll() is None:
            canary.terminate()
            try:
                canary.wait(5)
            except subprocess.TimeoutExpired:
                canary.kill()
                canary.wait()


# --------------------------------------------------------------------------- the owner (outside)


def default_canary() -> list[str]:
    return [sys.executable, "-m", "no_docker.canary"]


def _ns_inode(pid: int | str, name: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{name}").st_ino
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    """Child pids of ``pid`` (``/proc/PID/task/PID/children`` needs CONFIG_PROC_CHILDREN)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if parse_ppid(Path(f"/proc/{entry}/stat").read_bytes()) == pid:
                    out.append(int(entry))
    return out


def parse_ppid(stat: bytes) -> int:
    """The ppid field of ``/proc/PID/stat`` (proc(5)); comm may hold spaces and ')'."""
    return int(stat[stat.rfind(b")") + 2:].split()[1])


def processes_in_namespace(name: str, inode: int) -> list[int]:
    """Pids (as seen here) of every process whose ``name`` namespace is ``inode``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_inode(entry, name) == inode:
            out.append(int(entry))
    return out


def describe_process(pid: int, proc: str = "/proc") -> str:
    """``PID (COMM, state S, parent PPID)`` from /proc/PID/stat, or ``PID (gone)``: what a
    leftover was, for the one line that names it (a zombie whose parent is outside the
    namespace, T-70's kind, shows as state Z with that parent)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return f"{pid} (gone)"
    try:
        st = parse_stat(data)
    except ValueError:
        return f"{pid} (unreadable stat)"
    return f"{pid} ({st.comm.decode(errors='replace')}, state {st.state}, parent {st.ppid})"


def userns_needed() -> bool:
    """Root makes the namespaces directly; anyone else through a user namespace."""
    return os.geteuid() != 0


class OuterGuard:
    """A mount + pid + network namespace where only the canary answers on the real engine paths.

    ``with OuterGuard(log) as guard: guard.run([...])``. ``share`` names directories of the
    caller that stay visible (same path) inside although they lie under a hidden directory
    (pytest's ``tmp_path``); the log's directory and ``$NO_DOCKER_STATE_DIR`` are shared too.
    ``scratch`` names further existing directories (``/srv``, ``/var/lib/misc``...) that get an
    empty tmpfs of their own inside: a place where an engine may appear during a run in a
    directory the run sees (the lifetime cases), without writing to the host's.

    ``real_engine=True`` (``prove --real-engine``, root only): no canary starts; the engine
    paths are left empty (checked) for the throwaway Podman the owner starts, and ``/var`` and
    ``/etc/containers`` are overlays on a tmpfs (see ``_overlay``). ``addresses`` then names every engine path
    the guard checked, for the owner's only-this-engine check.
    """

    def __init__(self, log: Path, *, mode: str = "answer", userns: bool | None = None,
                 share: Sequence[Path] = (), canary: Sequence[str] | None = None,
                 base: Path | None = None, scratch: Sequence[str] = (), real_engine: bool = False) -> None:
        if mode not in ("answer", "refuse"):
            raise ValueError(f"mode must be 'answer' or 'refuse', not {mode!r}")
        self.log = Path(log).absolute()
        self.mode = mode
        self.userns = userns_needed() if userns is None else userns
        self.canary = list(canary) if canary is not None else default_canary()
        self._share = [Path(p).absolute() for p in share]
        for path in scratch:
            if not os.path.isabs(path) or os.path.islink(path) or not os.path.isdir(path):
                raise ValueError(f"scratch {path!r}: must be an existing directory, by its real path")
        self._scratch = list(scratch)
        self._base = base
        self.real_engine = real_engine
        if real_engine and self.userns:
            raise ValueError("a real engine runs only in a root outer guard (overlayfs, Podman rootful)")
        self.addresses: dict[str, list[str]] = {}
        self._proc: subprocess.Popen | None = None
        self._stdin_w: int | None = None
        self.root: Path | None = None
        self.holder_pid = 0
        self.canary_pid = 0  # as seen inside the guard
        self.listeners: list[dict] = []
        self.layout: Layout | None = None
        self.env: dict[str, str] = {}
        self._log_offset = 0
        self._ns: dict[str, int] = {}

    # -- set-up

    def _config(self, root: Path) -> dict:
        layout = Layout(root=str(root), uid=0 if self.userns else os.getuid())
        keep = [str(root), str(self.log.parent)] + [str(p) for p in self._share]
        state_dir = os.environ.get("NO_DOCKER_STATE_DIR")
        if state_dir and os.path.isdir(state_dir):
            keep.append(os.path.abspath(state_dir))
        # The toolchain the guard's commands run with (the venv, the Python it was made from,
        # no-docker's own source in an editable install, PYTHONPATH) may lie under a directory
        # the guard hides, e.g. a CI clone in /tmp: bind it back, or nothing could start inside.
        for path in toolchain_dirs():
            real = os.path.realpath(path)
            if any(real.startswith(tmp + "/") for tmp in ("/tmp", "/var/tmp")) and real not in keep:
                keep.append(real)
        # A kept dir inside another kept dir would be a mount of its own inside it, and a
        # read-only bind of the outer one by a run inside the guard would leave it writable
        # (P4 then refuses the run): e.g. a wheel installed in a venv under /tmp, whose
        # no_docker package dir lies inside the venv.
        keep = [p for p in keep if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in keep)]
        for path in keep:
            for hidden in ("/run", "/var/run", "/dev/shm"):
                if path == hidden or path.startswith(hidden + "/"):
                    raise GuardError(f"cannot share {path}: it lies under {hidden}, which the guard hides")
        hide = list(HIDDEN_DIRS) + [p for p in self._scratch if p not in HIDDEN_DIRS]
        real_home = os.path.realpath(os.path.expanduser("~"))
        needed = [sys.prefix, sys.base_prefix, os.getcwd(), str(Path(__file__).resolve().parent), *keep]
        if os.path.isdir(real_home) and real_home != "/":
            if any(os.path.realpath(p) == real_home or os.path.realpath(p).startswith(real_home + "/")
                   for p in needed):
                hide += [f"{real_home}/{d}" for d in HOME_ENGINE_DIRS if os.path.isdir(f"{real_home}/{d}")]
            else:
                hide.append(real_home)
        host_dev = {}
        for path in hide:
            with contextlib.suppress(OSError):
                host_dev[os.path.realpath(path)] = os.stat(path).st_dev
        unix, tcp, abstract = layout.unix_paths(), list(TCP_LISTENERS), [ABSTRACT_NAME]
        try:  # every endpoint the pinned payload tries, so that the guard keeps up with it
            from no_docker.mutants.routes import canary_addresses
        except ImportError:
            pass
        else:
            wanted = canary_addresses(layout.home, layout.runtime_dir)
            unix += [p for p in wanted.get("unix", []) if p not in unix]
            tcp += [a for a in wanted.get("tcp", []) if a not in tcp]
            abstract += [n for n in wanted.get("abstract", []) if n not in abstract]
        self.layout = layout
        self.addresses = {"unix": unix, "tcp": tcp, "abstract": abstract}
        return {
            "real_engine": self.real_engine,
            "overlays": [p for p in OVERLAID_DIRS if os.path.isdir(p) and not os.path.islink(p)]
            if self.real_engine else [],
            "overlay_dir": str(root / "overlays"),
            "outer_ns": {name: _ns_inode("self", name) for name in ("mnt", "net", "pid")},
            "hide": hide,
            "host_dev": host_dev,
            "keep": keep,
            "unix": unix,
            "tcp": tcp,
            "abstract": abstract,
            "files": layout.docker_files(),
            "runtime_dir": layout.runtime_dir,
            "work": layout.work,
            "bin": layout.bin,
            "canary": self.canary,
            "mode": self.mode,
            "log": str(self.log),
            "ready": str(root / "guard-ready.json"),
            "canary_ready": str(root / "canary-ready.json"),
            "canary_stderr": str(root / "canary.stderr"),
            "marker": MARKER_PREFIX + secrets.token_hex(8),
        }

    def __enter__(self) -> OuterGuard:
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            raise GuardError("the outer guard needs unshare and nsenter (apt-get install util-linux)")
        self.root = Path(tempfile.mkdtemp(prefix="no-docker-guard-", dir=self._base))
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        assert self.root is not None
        config = self._config(self.root)
        config_path = self.root / "guard-config.json"
        config_path.write_text(json.dumps(config))
        holder = [sys.executable, "-m", "no_docker.supervisor.proving.outer_guard", "--holder",
                  str(config_path)]
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "LC_ALL")}
        stdin_r, self._stdin_w = os.pipe2(os.O_CLOEXEC)
        stderr = open(self.root / "holder.stderr", "wb")  # noqa: SIM115
        with stderr:
            self._proc = subprocess.Popen(unshare_argv(holder, userns=self.userns), stdin=stdin_r,
                                          stdout=stderr, stderr=stderr, env=env, start_new_session=True)
        os.close(stdin_r)
        ready = Path(config["ready"])
        deadline = time.monotonic() + READY_TIMEOUT + 10
        while not ready.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                why = "exited" if self._proc.returncode is not None else "was not ready in time"
                raise GuardError(f"the outer guard {why}: {self._holder_output()}")
            time.sleep(0.02)
        state = json.loads(ready.read_text())
        if not state.get("ok"):
            raise GuardError("the outer guard refuses to run: " + "; ".join(state.get("problems", [])))
        children = _children(self._proc.pid)
        if len(children) != 1:
            raise GuardError(f"cannot identify the guard's holder process (children of unshare: {children})")
        self.holder_pid = children[0]
        self._ns = {name: _ns_inode(self.holder_pid, name) for name in ("mnt", "net", "pid")}
        mine = {name: _ns_inode("self", name) for name in ("mnt", "net", "pid")}
        same = [name for name in self._ns if self._ns[name] == mine[name]]
        if same:
            raise GuardError(f"the holder shares the caller's {', '.join(same)} namespace")
        self.canary_pid = state["canary_pid"]
        self.listeners = state["listeners"]
        self._log_offset = state["log_offset"]
        assert self.layout is not None
        self.env = self.layout.env(os.environ)

    def _holder_output(self) -> str:
        assert self.root is not None
        text = ""
        for name in ("holder.stderr", "canary.stderr"):
            with contextlib.suppress(OSError):
                text += (self.root / name).read_text(errors="replace")
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else "no output"

    # -- use

    @property
    def home(self) -> Path:
        assert self.layout is not None
        return Path(self.layout.home)

    @property
    def work(self) -> Path:
        assert self.layout is not None
        return Path(self.layout.work)

    @property
    def runtime_dir(self) -> str:
        assert self.layout is not None
        return self.layout.runtime_dir

    def inside(self, path: str | Path) -> Path:
        """The outside name of a path as seen inside the guard (through the holder's root)."""
        return Path(f"/proc/{self.holder_pid}/root") / str(path).lstrip("/")

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
            timeout: float = 120, input: bytes | None = None,  # noqa: A002 - subprocess's name
            check: bool = False) -> subprocess.CompletedProcess:
        """Run argv inside the guard; stdout/stderr are captured (bytes).

        argv runs as the child of a shell inside the guard: a process that nsenter puts into
        a pid namespace has its parent outside it (``$PPID`` reads 0), and payloads look for
        the engine through ``/proc/$PPID/root``. So a signal death shows as 128+N.
        """
        if self._proc is None or self._proc.poll() is not None:
            raise GuardError("the outer guard is not running")
        # Two commands in -c: the shell forks argv instead of exec'ing it.
        inside = ["sh", "-c", '"$@"; exit $?', "outer-guard-run", *argv]
        full = nsenter_argv(self.holder_pid, inside, userns=self.userns,
                            cwd=str(cwd) if cwd is not None else str(self.work))
        proc = subprocess.Popen(full, env=dict(self.env if env is None else env), start_new_session=True,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except BaseException:
            # nsenter --pid forks; both stay in this process group (setns keeps the pgid).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        done = subprocess.CompletedProcess(full, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              cwd: str | Path | None = None, output: Path | None = None) -> subprocess.Popen:
        """Start argv inside the guard in the background (a second engine that comes and goes
        during a run). The caller ends it with :meth:`stop`; the guard's exit ends it too (it
        lives in the guard's pid namespace)."""
        if self._proc is None or self._proc.poll() is not None:
            raise GuardError("the outer guard is not running")
        full = nsenter_argv(self.holder_pid, list(argv), userns=self.userns,
                            cwd=str(cwd) if cwd is not None else str(self.work))
        sink = open(output, "wb") if output is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            return subprocess.Popen(full, env=dict(self.env if env is None else env), start_new_session=True,
                                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
        finally:
            if output is not None:
                sink.close()  # type: ignore[union-attr]

    @staticmethod
    def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
        """SIGTERM what :meth:`spawn` started and wait until it has exited, then SIGKILL after
        TIMEOUT; always reaped.

        The signal goes to nsenter's child (the command), which nsenter waits for: when this
        returns, the command itself is gone (a canary has written its last records and unlinked
        its sockets). SIGTERM to nsenter would end nsenter at once and leave the command
        shutting down, orphaned, after this returned."""
        signalled = False
        for pid in _children(proc.pid):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                signalled = True
            os.close(pidfd)
        if not signalled:  # no child yet (or gone): nsenter and its child share the process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def records(self) -> list[dict]:
        """Canary records since the guard proved itself (its own probe requests excluded)."""
        return read_records(self.log, self._log_offset)

    def settled_records(self, at_least: int = 0, quiet: float = 0.3, timeout: float = 15.0) -> list[dict]:
        """``records()`` once the canary has caught up: at least AT_LEAST of them, and none new
        for QUIET seconds. The canary records a connection when its event loop gets to it,
        which can be after the client has connected, closed and exited: records counted too
        early would blame a control run's late records on the isolated run that follows
        (seen once in T-04: 14 of the control's connection records, written 1 ms after it
        exited, on a busy 2-CPU machine). Raises GuardError when AT_LEAST is not reached."""
        deadline = time.monotonic() + timeout
        found = self.records()
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.records()
            if len(now) != len(found):
                found, since = now, time.monotonic()
            elif len(found) >= at_least and time.monotonic() - since >= quiet:
                return found
        if len(found) < at_least:
            raise GuardError(f"the canary recorded {len(found)} records within {timeout} s, "
                             f"expected at least {at_least}")
        return found

    # -- teardown

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if self._stdin_w is not None:
            os.close(self._stdin_w)  # the holder sees EOF and exits, taking the namespace with it
            self._stdin_w = None
        leftovers: list[int] = []
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                if self.holder_pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.holder_pid, signal.SIGKILL)
                proc.kill()
                proc.wait()
            if self._ns.get("pid"):
                # The kernel kills the rest of a pid namespace when its init exits; wait for it.
                deadline = time.monotonic() + 10
                while (leftovers := processes_in_namespace("pid", self._ns["pid"])) and \
                        time.monotonic() < deadline:
                    time.sleep(0.02)
        if self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        if leftovers:
            raise GuardError(f"processes of the outer guard are still alive 10 s after its init: "
                             f"{', '.join(describe_process(pid) for pid in leftovers)}")

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--holder":
        return holder_main(argv[1])
    print("usage: python -m no_docker.supervisor.proving.outer_guard --holder CONFIG", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
