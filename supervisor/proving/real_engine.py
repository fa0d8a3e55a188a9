"""``no-docker prove --real-engine``: the proof against a real engine, a throwaway Podman.

Everything else the project proves it proves against the canary, a fake engine it wrote. Here
the engine is Podman's Docker-compatible API service (``podman system service``), started by
this module inside a root outer guard (``OuterGuard(real_engine=True)``: own mount + net + pid
namespace, the host's engine paths hidden and checked empty, ``/var`` an overlay on a tmpfs)
with all its state in a scratch dir on the guard's ``/run`` tmpfs (``--root``/``--runroot``,
``--storage-driver vfs``, ``--cgroup-manager cgroupfs``, ``--events-backend file``, no
network). Victims per route (an image tag, a container never started, a volume) come from
``podman import`` of a one-file rootfs tarball: no registry, no network.

A destructive mutant (the real docker CLI: ``rm -f``, ``rmi -f``, ``volume rm -f`` per route)
then runs twice in the guard: without isolation (the control: every victim of every route must
be destroyed) and under ``no-docker run`` (none may be; and no request of the run may be in
the engine's own access log). Two routes move while the mutant runs: an engine restarted
mid-run and one started after CMD in a directory of the work dir made after it started.

Before and after, the host is listed (``/var/lib/containers``, ``/run/podman``,
``/etc/containers``, Podman's cgroups, every Podman process): a changed listing or a Podman
process left behind fails the proof. Only this throwaway engine is ever pointed at: before
each phase a check inside the guard proves that every engine path the guard knows is either
this Podman (``SO_PEERCRED``: a podman process of our ``--root``) or answers nothing.

Pure parts (argv, the mutant, the log parser, rows, verdict, listing diff) are unit-tested in
tests/unit/test_real_engine.py; T-74 runs the whole proof.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import EXIT_NOT_PROVEN

EXIT_FAILED = 1
# Inside the guard: its /run is a tmpfs of its own, thrown away with its mount namespace.
STATE = "/run/no-docker-real-engine"
MAIN_SOCKET = "/run/podman/podman.sock"
# Hard links to MAIN_SOCKET (same tmpfs): a unix socket answers on every name of its inode.
LINKED_SOCKETS = ("/run/docker.sock", "/run/user/0/podman/podman.sock")
TCP_ADDRESS = "127.0.0.1:2375"
SRV_SOCKET = "/srv/no-docker-podman/podman.sock"
RESTART_SOCKET = "/srv/no-docker-restart/podman.sock"
WORK_SOCKET = "no-docker-engine.sock"  # in the phase's work dir
LATE_SOCKET = "no-docker-late-engine/podman.sock"  # in the work dir; the dir is made after CMD starts
WORK_CONFIG = ".no-docker-docker"  # a DOCKER_CONFIG dir in the work dir with a context
WORK_CONTEXT = "no-docker-work"
WAITING, GO = "no-docker-real-waiting", "no-docker-real-go"
ROUTE_LOG = "no-docker-real-routes.log"
IMAGE = "localhost/no-docker-victim:latest"
SERVICE_READY_TIMEOUT = 60.0  # generous: a loaded 2-core machine (load 40 seen) slows Podman a lot
PHASE_TIMEOUT = 240.0
DOCKER_TIMEOUT = 60  # seconds, per docker CLI call of the mutant (a bound, not an expectation)
PODMAN_COMMS = ("podman", "conmon", "crun", "netavark", "aardvark-dns", "catatonit", "fuse-overlayfs")
HOST_DIRS = ("/var/lib/containers", "/run/podman", "/etc/containers")
NEEDED = {"podman": "podman", "docker": "docker-ce-cli or docker.io", "bwrap": "bubblewrap",
          "unshare": "util-linux", "nsenter": "util-linux"}

# --------------------------------------------------------------------------- pure parts


@dataclasses.dataclass(frozen=True)
class Route:
    id: str
    description: str
    docker: str  # the shell words that run the docker CLI on this route (before the subcommand)
    moves: bool = False  # a lifetime route: its engine moves while the mutant runs


ROUTES: tuple[Route, ...] = (
    Route("docker-host", "inherited DOCKER_HOST=unix:///run/docker.sock", "docker"),
    Route("run-docker-sock", "/run/docker.sock", "docker -H unix:///run/docker.sock"),
    Route("var-run-docker-sock", "/var/run/docker.sock", "docker -H unix:///var/run/docker.sock"),
    Route("run-podman-sock", "/run/podman/podman.sock", "docker -H unix:///run/podman/podman.sock"),
    Route("xdg-podman-sock", "$XDG_RUNTIME_DIR/podman/podman.sock",
          'docker -H "unix://${XDG_RUNTIME_DIR:-/run/user/0}/podman/podman.sock"'),
    Route("home-context", "the current context in $HOME/.docker (-> /var/run/docker.sock)",
          "env -u DOCKER_HOST docker"),
    Route("work-context", f"a context in the work dir ({WORK_CONFIG}, -> {MAIN_SOCKET})",
          f'env -u DOCKER_HOST DOCKER_CONFIG="$PWD/{WORK_CONFIG}" docker --context {WORK_CONTEXT}'),
    Route("tcp-2375", f"TCP {TCP_ADDRESS}", f"docker -H tcp://{TCP_ADDRESS}"),
    Route("work-socket", f"a socket in the work dir (./{WORK_SOCKET})", f'docker -H "unix://$PWD/{WORK_SOCKET}"'),
    Route("srv-socket", f"a socket in /srv ({SRV_SOCKET})", f"docker -H unix://{SRV_SOCKET}"),
    Route("restarted", f"an engine restarted mid-run ({RESTART_SOCKET})", f"docker -H unix://{RESTART_SOCKET}",
          moves=True),
    Route("late-engine", f"an engine started after CMD (./{LATE_SOCKET})", f'docker -H "unix://$PWD/{LATE_SOCKET}"',
          moves=True),
)
SRV_ROUTES = ("srv-socket", "restarted")  # need /srv (the guard's scratch tmpfs)


def victims(route_id: str) -> dict[str, str]:
    """The three targets of one route: {kind: name}."""
    return {"image": f"localhost/nd-img-{route_id}:latest", "container": f"nd-ctr-{route_id}",
            "volume": f"nd-vol-{route_id}"}


def podman_argv(podman: str, state: str, *args: str) -> list[str]:
    """Podman with every piece of its state under STATE and nothing of the host's (podman(1))."""
    return [podman, "--root", f"{state}/root", "--runroot", f"{state}/runroot", "--tmpdir", f"{state}/tmp",
            "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
            "--network-config-dir", f"{state}/networks", "--log-level", "info", *args]


def service_argv(podman: str, state: str, uri: str) -> list[str]:
    """The API service on URI; ``--time=0``: it never exits by itself (podman-system-service(1))."""
    return podman_argv(podman, state, "system", "service", "--time=0", uri)


def victim_commands(podman: str, state: str, route_ids: Iterable[str]) -> list[list[str]]:
    """The podman commands that (re)make every victim of ROUTE_IDS from the imported IMAGE."""
    out = []
    for rid in route_ids:
        v = victims(rid)
        out.append(podman_argv(podman, state, "tag", IMAGE, v["image"]))
        out.append(podman_argv(podman, state, "create", "--network", "none", "--name", v["container"],
                               v["image"], "/true"))
        out.append(podman_argv(podman, state, "volume", "create", v["volume"]))
    return out


def work_context_files(work: str) -> dict[str, str]:
    """``WORK/.no-docker-docker``: a docker config dir with one context, pointing at MAIN_SOCKET."""
    import hashlib

    digest = hashlib.sha256(WORK_CONTEXT.encode()).hexdigest()
    meta = {"Name": WORK_CONTEXT, "Metadata": {}, "Endpoints": {"docker": {"Host": f"unix://{MAIN_SOCKET}",
                                                                           "SkipTLSVerify": False}}}
    return {f"{work}/{WORK_CONFIG}/config.json": "{}\n",
            f"{work}/{WORK_CONFIG}/contexts/meta/{digest}/meta.json": json.dumps(meta)}


def mutant_script(routes: Sequence[Route]) -> str:
    """The destructive mutant: per route, the docker CLI removes its container, image and volume.

    Static routes first, then it waits (at most 120 s) for the harness to move the engines of
    the lifetime routes (``WAITING`` made by the mutant, ``GO`` by the harness) and tries them.
    Every call is bounded by ``timeout``. One line per route goes to ROUTE_LOG: the exit
    statuses, only context: the verdict is what is left in the engine."""
    lines = ["#!/usr/bin/env bash",
             "# no-docker prove --real-engine: the destructive mutant (throwaway Podman only)",
             "nd_route() {", "  id=$1; shift",
             f'  timeout {DOCKER_TIMEOUT} "$@" rm -f "nd-ctr-$id" >/dev/null 2>&1; a=$?',
             f'  timeout {DOCKER_TIMEOUT} "$@" rmi -f "localhost/nd-img-$id:latest" >/dev/null 2>&1; b=$?',
             f'  timeout {DOCKER_TIMEOUT} "$@" volume rm -f "nd-vol-$id" >/dev/null 2>&1; c=$?',
             f'  printf "%s %s %s %s\\n" "$id" "$a" "$b" "$c" >> {ROUTE_LOG}', "}"]
    for route in routes:
        if not route.moves:
            lines += [f"# route: {route.id}", f"nd_route {route.id} {route.docker}"]
    moving = [r for r in routes if r.moves]
    if moving:
        lines += [f": > {WAITING}", "i=0",
                  f"while [ ! -e {GO} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done"]
        for route in moving:
            lines += [f"# route: {route.id}", f"nd_route {route.id} {route.docker}"]
    return "\n".join(lines) + "\n"


_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def parse_access_log(text: str) -> list[tuple[str, str, int]]:
    """Podman's API access log lines (Apache combined format, on its stderr at log level info)
    -> [(method, path, status)]; every other line (its own messages) is skipped."""
    out = []
    for line in text.splitlines():
        match = _ACCESS.search(line)
        if match:
            out.append((match["method"], match["path"], int(match["status"])))
    return out


def requests_for(route_id: str, entries: Iterable[tuple[str, str, int]]) -> int:
    """Requests that name one of ROUTE_ID's victims (the names carry the route id; a name
    ends at ``?``, ``/``, ``:`` or the end, so ``run-docker-sock`` is not ``var-run-docker-sock``)."""
    pattern = re.compile(r"/nd-(?:img|ctr|vol)-" + re.escape(route_id) + r"(?=[?/:]|%3A|$)")
    return sum(1 for _, path, _ in entries if pattern.search(path))


def parse_route_log(text: str) -> dict[str, tuple[int, ...]]:
    """The mutant's ROUTE_LOG (``ID A B C``: the docker CLI's exit statuses) -> {id: (A, B, C)};
    a malformed line is no evidence that its route was tried, so it is left out."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4 and all(f.isdigit() for f in fields[1:]):
            out[fields[0]] = tuple(int(f) for f in fields[1:])
    return out


def destroyed(route_id: str, present: Mapping[str, set[str]]) -> list[str]:
    """The victims of ROUTE_ID missing from PRESENT ({kind: names the engine still has})."""
    return [name for kind, name in victims(route_id).items() if name not in present.get(kind, set())]


@dataclasses.dataclass
class Row:
    route: str
    control: str
    isolated: str
    requests: str
    control_ok: bool | None  # None: the route is unavailable here
    isolated_ok: bool | None


def route_row(route: Route, control_gone: Sequence[str], isolated_gone: Sequence[str],
              control_requests: int, isolated_requests: int, unavailable: str = "",
              isolated_tried: bool = True) -> Row:
    """One route: the control must destroy all three victims, the isolated run none, and the
    engine's log must hold no request of the isolated run. A route the isolated mutant never
    got to (no line in its route log) proves nothing: not tried, never a pass."""
    if unavailable:
        return Row(route.id, f"unavailable: {unavailable}", "-", "-", None, None)
    total = len(victims(route.id))
    control_ok = len(control_gone) == total
    control = f"{'yes' if control_ok else 'NO'} ({len(control_gone)} of {total})"
    isolated_ok: bool | None = not isolated_gone and isolated_requests == 0
    isolated = f"{'YES' if isolated_gone else 'no'} ({len(isolated_gone)} of {total})"
    if isolated_ok and not isolated_tried:
        isolated, isolated_ok = "NOT TRIED (the mutant never got there)", None
    requests = f"{control_requests} / {isolated_requests}"
    return Row(route.id, control, isolated, requests, control_ok, isolated_ok)


@dataclasses.dataclass
class Verdict:
    status: str  # PROVEN | FAILED | INCOMPLETE
    line: str
    exit_status: int


def verdict(rows: Sequence[Row], problems: Sequence[str], host_changes: Sequence[str],
            incomplete: Sequence[str] = (), isolated_requests: int = 0) -> Verdict:
    """PROVEN only when the control destroyed every victim of every available route, the
    isolated run none and sent the engine no request at all (ISOLATED_REQUESTS: every entry
    of the engine's access log during the isolated run; nothing else talks to it then), and
    the host is as it was."""
    available = [r for r in rows if r.control_ok is not None]
    control_all = [r for r in available if r.control_ok]
    leaked = [r.route for r in available if r.isolated_ok is False]
    untried = [r.route for r in available if r.isolated_ok is None]
    missed = [r.route for r in available if not r.control_ok]
    summary = (f"the control destroyed every victim on {len(control_all)} of {len(available)} routes "
               f"({len(rows) - len(available)} unavailable); the isolated run reached {len(leaked)}")
    head = "no-docker prove --real-engine:"
    if not rows and incomplete:  # nothing ran: the counts would only be noise on the one line
        return Verdict("INCOMPLETE", f"{head} INCOMPLETE - {'; '.join([*incomplete, *problems])}",
                       EXIT_NOT_PROVEN)
    if leaked or host_changes or isolated_requests:
        broke = leaked + ([f"{isolated_requests} requests in the engine's log"] if isolated_requests else [])
        what = "; ".join(([f"the isolation did not hold: {', '.join(broke)}"] if broke else [])
                         + ([f"the host changed: {', '.join(host_changes)}"] if host_changes else []))
        return Verdict("FAILED", f"{head} FAILED - {what}; {summary}", EXIT_FAILED)
    if incomplete or problems or untried:
        why = [*incomplete, *problems]
        why += [f"not tried inside the run: {', '.join(untried)}"] if untried else []
        return Verdict("INCOMPLETE", f"{head} INCOMPLETE - {'; '.join(why)}; {summary}", EXIT_NOT_PROVEN)
    if missed or not available:
        what = ", ".join(missed) or "no route available"
        return Verdict("FAILED", f"{head} FAILED - the control did not destroy everything on: {what}; "
                       f"{summary}", EXIT_FAILED)
    return Verdict("PROVEN", f"{head} PROVEN - {summary}", 0)


def render_table(rows: Sequence[Row]) -> str:
    head = ("route", "destroyed without isolation", "destroyed with isolation",
            "requests in engine log (ctl / iso)")
    cells = [(r.route, r.control, r.isolated, r.requests) for r in rows]
    widths = [max([len(head[i])] + [len(c[i]) for c in cells]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def missing_tools(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """One phrase per missing tool, naming the package that brings it (nothing is installed)."""
    return [f"{tool} is missing (apt-get install {package})" for tool, package in NEEDED.items()
            if which(tool) is None]


def listing_diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What differs between two host listings ({entry: what}): new, gone, changed.

    A Podman process that was there before and has ended is not a change the proof made:
    every process the proof starts lives in its guard's pid namespace and starts after
    BEFORE was taken, and it signals nothing outside it. Such a process belongs to someone
    else (another user's Podman, a unit the package started) and ending is its own business;
    ``ended_elsewhere`` names it. A new process, or any file or cgroup change, still counts."""
    from .prove import diff_digests

    return [c for c in diff_digests(before, after, ("new", "gone", "changed"))
            if not c.startswith("gone process ")]


def ended_elsewhere(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Podman processes (``pid comm``) in BEFORE and not in AFTER: not the proof's (see
    ``listing_diff``), said in its progress and figures, never a failure."""
    return sorted(k.removeprefix("process ") for k in before
                  if k.startswith("process ") and k not in after)


def parse_comm_stat(stat: bytes) -> tuple[str, str]:
    """(comm, state) of a ``/proc/PID/stat`` (proc(5)); comm may hold spaces and ')'."""
    start, end = stat.find(b"("), stat.rfind(b")")
    return stat[start + 1:end].decode(errors="replace"), stat[end + 2:end + 3].decode()


def only_engine_problems(answers: Mapping[str, str], ours: Iterable[str]) -> list[str]:
    """ANSWERS: {address: 'ours' | 'absent' | 'other: who'}: every address in OURS must be
    ours, every other one absent. Anything else and the proof must not start (pure)."""
    ours = set(ours)
    out = []
    for address, answer in sorted(answers.items()):
        if address in ours and answer != "ours":
            out.append(f"{address}: our Podman does not answer there ({answer})")
        elif address not in ours and answer != "absent":
            out.append(f"{address}: another engine answers there ({answer})")
    return out + [f"{address}: not checked" for address in sorted(ours - set(answers))]


def expected_ours(addresses: Iterable[str], ours: Iterable[str],
                  realpath: Callable[[str], str] = os.path.realpath) -> list[str]:
    """OURS plus every address that names the same file as one of them (``/var/run`` is
    ``/run``): such a name is our socket, not another engine."""
    ours = list(ours)
    real = {realpath(a) for a in ours if a.startswith("/")}
    return ours + [a for a in addresses if a not in ours and a.startswith("/") and realpath(a) in real]


# --------------------------------------------------------------------------- inside the guard


def _answer(kind: str, address: str, state: str) -> str:
    """Who answers at one engine address, seen from inside the guard."""
    if kind == "tcp":
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        target: object = (host, int(port))
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = "\0" + address if kind == "abstract" else address
    sock.settimeout(3.0)
    with sock:
        try:
            sock.connect(target)
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.EADDRNOTAVAIL, errno.ENETUNREACH):
                return "absent"
            return f"other: connect failed oddly: {err}"
        if kind == "tcp":
            pids = _tcp_owners(int(address.rpartition(":")[2]))
        else:
            pids = [struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]]
    whose = [_is_our_podman(pid, state) for pid in pids]
    if pids and all(whose):
        return "ours"
    return f"other: pids {pids}"


def _tcp_owners(port: int) -> list[int]:
    """Pids (in this pid namespace) holding a listening TCP socket on PORT (/proc/net/tcp{,6})."""
    from .outer_guard import parse_tcp_listeners

    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            listening = parse_tcp_listeners(Path(table).read_text())
            inodes |= {ino for (_, p), ino in listening.items() if p == port}
    owners = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{entry}/fd/{fd}")
                    if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                        owners.append(int(entry))
                        break
    return owners


def _is_our_podman(pid: int, state: str) -> bool:
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return exe == "podman" and f"{state}/root".encode() in argv


def only_engine_main(config_path: str) -> int:
    """``python -m ...real_engine --only-engine CONFIG`` inside the guard: prints the problems
    (JSON list) of ``only_engine_problems`` for CONFIG's addresses."""
    config = json.loads(Path(config_path).read_text())
    answers = {}
    for kind in ("unix", "tcp", "abstract"):
        for address in config["addresses"].get(kind, []):
            answers[address] = _answer(kind, address, config["state"])
    print(json.dumps(only_engine_problems(answers, config["ours"])))
    return 0


# --------------------------------------------------------------------------- on the host


def host_listing(cgroup_root: Path = Path("/sys/fs/cgroup")) -> dict[str, str]:
    """What the host has of Podman: every entry under HOST_DIRS (type, size, mtime), the
    cgroups of libpod/podman/conmon (two levels down), and every Podman process (pid, comm)."""
    out: dict[str, str] = {}
    for root in HOST_DIRS:
        if not os.path.lexists(root):
            out[root] = "absent"
            continue
        for dirpath, _, filenames in os.walk(root):
            with contextlib.suppress(OSError):
                out[dirpath] = f"dir {int(os.lstat(dirpath).st_mtime)}"  # an entry made and removed shows
            for name in filenames:
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    out[path] = f"file {st.st_size} {int(st.st_mtime)}"
    with contextlib.suppress(OSError):
        for top in os.scandir(cgroup_root):
            names = [top.path]
            if top.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    names += [e.path for e in os.scandir(top.path) if e.is_dir(follow_symlinks=False)]
            for name in names:
                if any(word in os.path.basename(name) for word in ("libpod", "podman", "conmon")):
                    out[f"cgroup {name}"] = "dir"
    # Its state (S, R...) is left out: a Podman process of someone else's that was there
    # before and is still there is no change.
    out.update({f"process {p}": "process" for p in podman_processes()})
    return out


def podman_processes(proc: Path = Path("/proc")) -> list[str]:
    """``ps``-like: every Podman process of this pid namespace now (``pid comm``).

    Only this one (the proof's own, the host's): every Podman process the proof starts lives in
    its guard's pid namespace, which ends with the guard, so one the proof left behind could only
    be here; one in another pid namespace belongs to another guard or container (the suite runs
    the weakened builds' T-74 beside its own: their Podmans came and went during this proof's
    listings). A process whose namespace cannot be read is listed: it may be here."""
    try:
        ours = os.stat(proc / "self" / "ns" / "pid").st_ino
    except OSError:
        ours = None
    out = []
    for entry in os.listdir(proc):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                comm, _ = parse_comm_stat((proc / entry / "stat").read_bytes())
                if comm not in PODMAN_COMMS:
                    continue
                try:
                    elsewhere = ours is not None and os.stat(proc / entry / "ns" / "pid").st_ino != ours
                except FileNotFoundError:
                    continue  # gone meanwhile
                except OSError:
                    elsewhere = False
                if not elsewhere:
                    out.append(f"{entry} {comm}")
    return sorted(out)


def wait_podman_gone(before: Iterable[str], timeout: float = 10.0) -> list[str]:
    """Podman processes (``pid comm``) not in BEFORE, once they are gone or TIMEOUT passed.

    A process the kernel is still tearing down with the guard's pid namespace has already
    lost its ``/proc/PID/ns`` links (the guard's wait sees the namespace empty) but still shows
    in ``/proc`` for a moment: only one still there after TIMEOUT is left behind."""
    before = set(before)
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in podman_processes() if p not in before]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _rootfs_tar(path: Path) -> None:
    """A one-file rootfs (``etc/hostname``): ``podman import`` needs no more, and nothing starts."""
    with tarfile.open(path, "w") as tar:
        data = b"no-docker-victim\n"
        info = tarfile.TarInfo("etc/hostname")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))


class Engine:
    """The throwaway Podman: its services inside the guard, its victims, its logs."""

    def __init__(self, guard: object, base: Path, podman: str) -> None:
        self.guard = guard
        self.base = base
        self.podman = podman
        self.services: dict[str, tuple[subprocess.Popen, Path]] = {}
        self.logs: list[Path] = []
        self.problems: list[str] = []
        # Podman's own commands get no engine variable: with CONTAINER_HOST set, podman is a
        # remote client (podman-remote(1)) and would not take --root.
        self.env = {k: v for k, v in guard.env.items()  # type: ignore[attr-defined]
                    if k not in ("CONTAINER_HOST", "CONTAINER_CONNECTION", "DOCKER_HOST")}

    def podman_cmd(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.guard.run(podman_argv(self.podman, STATE, *args), env=self.env,  # type: ignore[attr-defined]
                              timeout=timeout)

    def sh(self, script: str, timeout: float = 30) -> None:
        done = self.guard.run(["sh", "-c", script], timeout=timeout)  # type: ignore[attr-defined]
        if done.returncode != 0:
            raise RuntimeError(f"{script!r} failed: {done.stderr.decode(errors='replace').strip()}")

    def start(self, name: str, uri: str) -> None:
        """Start one API service and wait until its socket (or port) answers."""
        log = self.base / f"podman-{name}-{len(self.logs)}.log"
        self.logs.append(log)
        if uri.startswith("unix://"):
            path = uri[len("unix://"):]
            self.sh(f"mkdir -p '{os.path.dirname(path)}' && rm -f '{path}'")
        proc = self.guard.spawn(service_argv(self.podman, STATE, uri), env=self.env,  # type: ignore[attr-defined]
                                output=log)
        self.services[name] = (proc, log)
        deadline = time.monotonic() + SERVICE_READY_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"podman service {name} exited: {_last_line(log)}")
            if "API service listening" in log.read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise RuntimeError(f"podman service {name} was not listening within {SERVICE_READY_TIMEOUT:.0f} s")

    def stop(self, name: str) -> None:
        proc, _ = self.services.pop(name)
        self.guard.stop(proc)  # type: ignore[attr-defined]

    def stop_all(self) -> None:
        for name in list(self.services):
            with contextlib.suppress(Exception):
                self.stop(name)

    def present(self) -> dict[str, set[str]]:
        """What the engine still has, asked of the storage directly (not through a socket)."""
        out = {}
        for kind, args in (("image", ("images", "--format", "{{.Repository}}:{{.Tag}}")),
                           ("container", ("ps", "-a", "--format", "{{.Names}}")),
                           ("volume", ("volume", "ls", "--format", "{{.Name}}"))):
            done = self.podman_cmd(*args)
            if done.returncode != 0:  # an empty answer would read as "everything destroyed"
                why = done.stderr.decode(errors="replace").strip()[-300:]
                raise RuntimeError(f"podman {args[0]} failed: {why}")
            out[kind] = set(done.stdout.decode().split())
        return out

    def make_victims(self, route_ids: Sequence[str]) -> None:
        for argv in victim_commands(self.podman, STATE, route_ids):
            done = self.guard.run(argv, env=self.env, timeout=60)  # type: ignore[attr-defined]
            if done.returncode != 0:
                raise RuntimeError(f"making a victim failed ({' '.join(argv[-3:])}): "
                                   f"{done.stderr.decode(errors='replace').strip()[-300:]}")

    def access(self) -> list[tuple[str, str, int]]:
        entries = []
        for log in self.logs:
            with contextlib.suppress(OSError):
                entries += parse_access_log(log.read_text(errors="replace"))
        return entries


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "no output"
    return "no output"


def _only_engine(engine: Engine, ours: Sequence[str]) -> list[str]:
    """Run the only-this-engine check inside the guard (pids and TCP tables are its own)."""
    guard = engine.guard
    addresses = {k: list(v) for k, v in guard.addresses.items()}  # type: ignore[attr-defined]
    for address in ours:
        kind = "tcp" if not address.startswith("/") else "unix"
        if address not in addresses.setdefault(kind, []):
            addresses[kind].append(address)
    config = engine.base / f"only-engine-{time.monotonic_ns()}.json"
    ours = expected_ours([a for v in addresses.values() for a in v], ours)
    config.write_text(json.dumps({"addresses": addresses, "ours": ours, "state": STATE}))
    done = guard.run([sys.executable, "-m", "no_docker.supervisor.proving.real_engine",  # type: ignore[attr-defined]
                      "--only-engine", str(config)], timeout=120)
    try:
        return list(json.loads(done.stdout))
    except ValueError:
        return [f"the only-engine check failed: {done.stderr.decode(errors='replace').strip()[-300:]}"]


def _mover(engine: Engine, work: Path, moving: Sequence[str], problems: list[str],
           done: threading.Event) -> None:
    """While the mutant waits at WAITING: restart RESTART_SOCKET's engine, start the late one
    in a directory of the work dir made now, then GO."""
    deadline = time.monotonic() + PHASE_TIMEOUT
    while not (work / WAITING).exists():
        if done.is_set() or time.monotonic() > deadline:
            problems.append("the mutant never reached its lifetime routes")
            return
        time.sleep(0.05)
    try:
        if "restarted" in moving:
            engine.stop("restart")
            engine.start("restart", f"unix://{RESTART_SOCKET}")
        if "late-engine" in moving:
            engine.start("late", f"unix://{work / LATE_SOCKET}")
    except Exception as err:  # reported, never passed: the route is then not proven
        problems.append(f"the engines could not be moved: {err}")
    finally:
        (work / GO).touch()


@dataclasses.dataclass
class PhaseResult:
    gone: dict[str, list[str]]  # route -> its victims missing afterwards
    access: list[tuple[str, str, int]]  # the engine's access log entries of this phase
    tried: dict[str, tuple[int, ...]]  # the mutant's route log
    exit_status: int
    seconds: float


def run_phase(engine: Engine, work: Path, argv: Sequence[str], routes: Sequence[Route],
              say: Callable[[str], None], name: str) -> PhaseResult:
    """Victims for ROUTES, the per-phase engines, the only-engine check, the mutant, what is gone."""
    ids = [r.id for r in routes]
    started = time.monotonic()
    engine.make_victims(ids)
    if "work-socket" in ids:
        engine.start("work", f"unix://{work / WORK_SOCKET}")
    if "restarted" in ids:
        engine.start("restart", f"unix://{RESTART_SOCKET}")
    ours = [MAIN_SOCKET, *LINKED_SOCKETS, TCP_ADDRESS]
    ours += [SRV_SOCKET] if "srv-socket" in ids else []
    ours += [RESTART_SOCKET] if "restarted" in ids else []
    ours += [str(work / WORK_SOCKET)] if "work-socket" in ids else []
    problems = _only_engine(engine, ours)
    if problems:
        raise RefusedError("refusing to run the mutant: " + "; ".join(problems))
    say(f"no-docker: {name}: {3 * len(ids)} victims made, only the throwaway Podman answers "
        f"({time.monotonic() - started:.1f} s); running the mutant")
    before = len(engine.access())
    moved: list[str] = []
    done = threading.Event()
    moving = [r.id for r in routes if r.moves]
    mover = threading.Thread(target=_mover, args=(engine, work, moving, moved, done), daemon=True)
    mover.start()
    try:
        result = engine.guard.run(list(argv), cwd=work, timeout=PHASE_TIMEOUT)  # type: ignore[attr-defined]
    finally:
        done.set()
        mover.join(SERVICE_READY_TIMEOUT * 2 + 5)
        for service in ("work", "late", "restart"):
            if service in engine.services:
                engine.stop(service)
    if moved:
        engine.problems += [f"{name}: {p}" for p in moved]
    present = engine.present()
    gone = {rid: destroyed(rid, present) for rid in ids}
    if name == "isolated" and result.returncode == EXIT_NOT_PROVEN:
        last = result.stderr.decode(errors="replace").strip().splitlines()
        engine.problems.append("no-docker run refused to start (125): " + (last[-1] if last else ""))
    log = work / ROUTE_LOG
    tried = parse_route_log(log.read_text(errors="replace")) if log.exists() else {}
    return PhaseResult(gone, engine.access()[before:], tried, result.returncode,
                       round(time.monotonic() - started, 3))


class RefusedError(RuntimeError):
    """Something other than our Podman answers on an engine path: nothing may run."""


def prove_real_engine(say: Callable[[str], None] = lambda text: None) -> tuple[list[Row], Verdict, dict]:
    """The whole real-engine proof; returns the rows, the verdict and the figures."""
    figures: dict[str, object] = {}
    started = time.monotonic()
    missing = missing_tools()
    if missing:
        return [], verdict([], [], [], [f"{'; '.join(missing)}: nothing was installed, nothing ran"]), figures
    if os.geteuid() != 0:
        return [], verdict([], [], [], ["the real engine runs only as root (a rootful throwaway Podman "
                                        "in a root outer guard): run it with sudo"]), figures
    from .lifetime import scratch_dirs
    from .outer_guard import GuardError, OuterGuard
    from .prove import _no_docker

    podman = shutil.which("podman") or "podman"
    scratch = scratch_dirs()  # /srv, when this machine has it: the guard gives it a tmpfs
    unavailable = {} if "/srv" in scratch else {r: "no /srv on this machine" for r in SRV_ROUTES}
    if os.path.realpath("/var/run") != "/run":
        unavailable["var-run-docker-sock"] = "/var/run is not a link to /run here"
    routes = [r for r in ROUTES if r.id not in unavailable]
    before = host_listing()
    figures["host_before"] = before
    say(f"no-docker: host listing before: {len(before)} entries; "
        f"Podman processes: {podman_processes() or 'none'}")
    rows: list[Row] = []
    incomplete: list[str] = []
    phases: dict[str, PhaseResult] = {}
    engine: Engine | None = None
    with tempfile.TemporaryDirectory(prefix="no-docker-real-engine-") as tmp:
        base = Path(tmp)
        try:
            with OuterGuard(base / "canary.jsonl", share=[base], scratch=scratch, real_engine=True) as guard:
                say(f"no-docker: outer guard up ({time.monotonic() - started:.1f} s): host engine paths "
                    f"hidden, {sum(len(v) for v in guard.addresses.values())} engine addresses empty, "
                    f"/var and /etc/containers behind overlays")
                engine = Engine(guard, base, podman)
                try:
                    _rootfs_tar(base / "rootfs.tar")
                    engine.sh(f"mkdir -p {STATE}/tmp {STATE}/networks")
                    done = engine.podman_cmd("import", str(base / "rootfs.tar"), IMAGE, timeout=120)
                    if done.returncode != 0:
                        why = done.stderr.decode(errors="replace").strip()
                        raise RuntimeError(f"podman import failed: {why}")
                    engine.start("main", f"unix://{MAIN_SOCKET}")
                    engine.sh(" && ".join(f"mkdir -p '{os.path.dirname(p)}' && ln '{MAIN_SOCKET}' '{p}'"
                                          for p in LINKED_SOCKETS))
                    engine.start("tcp", f"tcp://{TCP_ADDRESS}")
                    if "srv-socket" in [r.id for r in routes]:
                        engine.start("srv", f"unix://{SRV_SOCKET}")
                    figures["engine_up_s"] = round(time.monotonic() - started, 3)
                    say(f"no-docker: throwaway Podman up ({figures['engine_up_s']} s): "
                        f"{', '.join(engine.services)} services, state in {STATE} (inside the guard)")
                    for name in ("control", "isolated"):
                        work = base / name
                        work.mkdir()
                        for path, text in work_context_files(str(work)).items():
                            os.makedirs(os.path.dirname(path), exist_ok=True)
                            Path(path).write_text(text)
                        mutant = work / "mutant.sh"
                        mutant.write_text(mutant_script(routes))
                        subprocess.run(["git", "init", "-q", str(work)], check=True, capture_output=True)
                        argv = ["bash", str(mutant)]
                        if name == "isolated":
                            argv = _no_docker("run", "--work", str(work), "--", *argv)
                        phase = phases[name] = run_phase(engine, work, argv, routes, say, name)
                        figures[f"{name}_s"] = phase.seconds
                        figures[f"{name}_exit"] = phase.exit_status
                        figures[f"{name}_docker_exits"] = phase.tried
                        gone_count = sum(len(g) for g in phase.gone.values())
                        say(f"no-docker: {name}: exit {phase.exit_status}, {len(phase.tried)} routes tried, "
                            f"{gone_count} of {3 * len(routes)} victims destroyed, "
                            f"{len(phase.access)} requests in the engine's log ({phase.seconds} s)")
                finally:
                    engine.stop_all()
        except RefusedError as err:
            incomplete.append(str(err))
        except GuardError as err:
            incomplete.append(f"the outer guard could not be set up: {err}")
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            incomplete.append(f"the throwaway Podman could not be used: {err}")
    left = wait_podman_gone(k.removeprefix("process ") for k in before if k.startswith("process "))
    after = host_listing()
    figures["host_after"] = after
    changes = listing_diff(before, after)
    ended = ended_elsewhere(before, after)
    figures["host_ended_elsewhere"] = ended
    say(f"no-docker: host listing after: {len(after)} entries, {len(changes)} changes; "
        f"Podman processes: {left or 'none'}"
        + (f"; ended meanwhile, not ours: {', '.join(ended)}" if ended else ""))
    if engine is not None:
        incomplete += engine.problems
    if len(phases) == 2:
        control, isolated = phases["control"], phases["isolated"]
        for route in ROUTES:
            if route.id in unavailable:
                rows.append(route_row(route, [], [], 0, 0, unavailable=unavailable[route.id]))
                continue
            rows.append(route_row(route, control.gone[route.id], isolated.gone[route.id],
                                  requests_for(route.id, control.access),
                                  requests_for(route.id, isolated.access),
                                  isolated_tried=route.id in isolated.tried))
    figures["total_s"] = round(time.monotonic() - started, 3)
    figures["host_changes"] = changes
    isolated_requests = len(phases["isolated"].access) if "isolated" in phases else 0
    figures["isolated_requests"] = isolated_requests
    result = verdict(rows, [], changes, incomplete, isolated_requests=isolated_requests)
    return rows, result, figures


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--only-engine":
        return only_engine_main(argv[1])
    print("usage: python -m no_docker.supervisor.proving.real_engine --only-engine CONFIG", file=sys.stderr)
    return 2


def cli(as_json: bool) -> int:
    """``no-docker prove --real-engine [--json]``: progress on stderr, the table and verdict on stdout."""
    # SIGTERM ends the proof through its finally blocks (the services stopped, the guard and
    # with it every Podman process gone, the scratch dir removed), not at once.
    def _terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        rows, result, figures = prove_real_engine(lambda text: print(text, file=sys.stderr, flush=True))
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(render(rows, result, figures, as_json))
    return result.exit_status


def render(rows: Sequence[Row], result: Verdict, figures: Mapping, as_json: bool) -> str:
    """What ``prove --real-engine`` prints on stdout."""
    if as_json:
        return json.dumps({"rows": [dataclasses.asdict(r) for r in rows], "status": result.status,
                           "verdict": result.line, "figures": figures}, indent=1)
    return "\n".join(([render_table(rows)] if rows else []) + [result.line])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
