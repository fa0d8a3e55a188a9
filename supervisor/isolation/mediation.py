"""Connect mediation (P12): every ``connect()`` of the run is decided
by the supervisor, outside the run, through a seccomp user-notification filter.

Why: the proof before start covers the sockets that exist then. An engine that restarts during
the run binds a *new* inode (a ``/dev/null`` mask covers only the old one), and a socket bound
later in any directory the run can see is reachable: ``connect()`` to a pathname socket ignores
read-only mounts and network namespaces (notes/isolation-anchors.md §1). So the filter returns
``SECCOMP_RET_USER_NOTIF`` for ``connect``, and :class:`Mediator` answers each one:

* pathname AF_UNIX: resolve the path in the caller's own root and cwd, open the file
  ``O_PATH``, and connect the caller's socket *through that fd* (``/proc/self/fd/N``) only when
  the socket file is bound by a socket of the run's network namespace (sock_diag, bound files
  by (st_dev, st_ino)); else ECONNREFUSED, recorded. Missing: ENOENT; not a socket:
  ECONNREFUSED (what unix_find_bsd answers, net/unix/af_unix.c).
* every other address: allowed only for a socket created in the run's network namespace
  (SO_NETNS_COOKIE), which confines abstract unix names, TCP, UDP, netlink and packet sockets
  already; then connected with the caller's exact bytes. A socket from outside (inherited,
  passed over SCM_RIGHTS) is refused: it would reach the host's loopback. Socket families that
  no network namespace confines (AF_VSOCK and any family not in :data:`CONFINED_FAMILIES`) are
  refused whatever their namespace.

Soundness (DESIGN §4): the address is read once, after RECV, by one ``process_vm_readv``
of the calling thread (nothing is opened ahead: a ``/proc/PID/mem`` opened before the caller's
execve would read the old mm); the socket is the caller's own object (``pidfd_getfd``), so its
options, binding and O_NONBLOCK are the caller's, and a ``dup2`` onto the fd number after we
took it changes nothing we checked; the inode checked is the inode connected.
``SECCOMP_IOCTL_NOTIF_ID_VALID`` after the reads of the caller's state and before we act on
them proves the tid still named the blocked caller when each was made (seccomp_unotify(2),
"pid reuse"): one check covers every read made before it, because the kernel says valid only
while the caller is alive and blocked in this very connect (:meth:`Mediator._valid` gives the
kernel's reasons); an answer with no connect needs none, SEND reaches only a caller still
waiting. We never answer with ``SECCOMP_USER_NOTIF_FLAG_CONTINUE``: the kernel would re-read
the fd and the memory after our check (seccomp_unotify(2) warns exactly this).

Fails closed: a notification the mediator cannot decide gets ECONNREFUSED; when the listener
is closed (the supervisor died or stopped) the kernel answers ENOSYS to every pending and
future ``connect`` of the filter's tasks (kernel/seccomp.c, seccomp_do_user_notification:
``err = -ENOSYS; if (!match->notif) goto out``): nothing passes unchecked.

The filter is installed with ``SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`` (Linux 5.19): once the
mediator has received a notification, the caller ignores non-fatal signals until the answer,
so a signal cannot make the caller restart a connect that the mediator is already making on
the same socket (which would answer EISCONN/EALREADY, or connect twice).
"""

from __future__ import annotations

import _signal as signal  # not signal: the wrapper imports enum (this is on the run path)
import _socket as socket  # not socket: its enums cost more than a whole mediated connect
import _thread
import errno
import fcntl
import os
import select
import stat
import struct
import time

from ..record import Factory, record
from . import sockdiag
from .syscalls import RESOLVE_BENEATH, RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

# --- the filter -----------------------------------------------------------------------------
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Syscall numbers (syscall_64.tbl; asm-generic/unistd.h for aarch64).
NR = {
    "x86_64": {"connect": 42},
    "aarch64": {"connect": 203},
}
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_USER_NOTIF = 0x7FFF0000, 0x00050000, 0x7FC00000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
Insn = tuple[int, int, int, int]  # (code, jt, jf, k), as in seccomp.program

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV = 1 << 5



class MediationError(Exception):
    """The mediation cannot be set up (unknown architecture, kernel refusal, lost listener)."""


def _encode(insns: list[Insn]) -> bytes:
    return b"".join(struct.pack("=HBBI", *insn) for insn in insns)


def _arch_prologue(arch: str) -> list[Insn]:
    """Refuse other ABIs (ENOSYS, like seccomp.py): an i386 ``socketcall``/``connect`` or an
    x32 ``connect`` has another number and would never be notified. Leaves A = nr."""
    try:
        audit_arch = AUDIT_ARCH[arch]
    except KeyError:
        raise MediationError(f"no connect mediation for {arch} (only {', '.join(AUDIT_ARCH)})") from None
    insns: list[Insn] = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, audit_arch),
                         (_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS), (_LD_ABS, 0, 0, 0)]
    if arch == "x86_64":
        insns += [(_JGE, 0, 1, X32_SYSCALL_BIT), (_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    return insns


def program(arch: str) -> bytes:
    """The mediation filter for ARCH: ``connect`` -> SECCOMP_RET_USER_NOTIF, the rest allowed
    (the deny filter, seccomp.program, is a separate filter; the kernel runs both and the
    stricter action wins: ERRNO outranks USER_NOTIF, seccomp(2) "Filter return values")."""
    insns = _arch_prologue(arch)
    insns += [(_JEQ, 0, 1, NR[arch]["connect"]), (_RET, 0, 0, SECCOMP_RET_USER_NOTIF),
              (_RET, 0, 0, SECCOMP_RET_ALLOW)]
    return _encode(insns)


# --- notification structs and ioctls (linux/seccomp.h) --------------------------------------
def _ioc(direction: int, nr: int, size: int) -> int:
    return direction << 30 | size << 16 | ord("!") << 8 | nr  # asm-generic/ioctl.h _IOC


# struct seccomp_notif {u64 id; u32 pid; u32 flags; struct seccomp_data {int nr; u32 arch;
# u64 instruction_pointer; u64 args[6]}}
NOTIF = struct.Struct("=QIIiIQ6Q")
NOTIF_RESP = struct.Struct("=QqiI")  # id, val, error (negative errno), flags
SECCOMP_IOCTL_NOTIF_RECV = _ioc(3, 0, NOTIF.size)  # _IOWR
SECCOMP_IOCTL_NOTIF_SEND = _ioc(3, 1, NOTIF_RESP.size)  # _IOWR
SECCOMP_IOCTL_NOTIF_ID_VALID = _ioc(1, 2, 8)  # _IOW(u64)
# _IOW(struct seccomp_notif_addfd). Unused: installing a socket we connected at the caller's
# fd number would lose the caller's options, binding and other fds of the same socket;
# connecting the caller's own socket (pidfd_getfd) keeps them all.
SECCOMP_IOCTL_NOTIF_ADDFD = _ioc(1, 3, 24)
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1  # never used: see the module docstring
SECCOMP_IOCTL_NOTIF_SET_FLAGS = _ioc(1, 4, 8)  # _IOW(u64); the flags are the argument itself
SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP = 1


# The part of struct seccomp_notif a connect needs: id, pid, flags, nr, arch,
# instruction_pointer, args[0] (fd), args[1] (sockaddr pointer), args[2] (addrlen).
NOTIF_HEAD = struct.Struct("=QIIiIQQQQ")


def _int32(value: int) -> int:
    """A syscall's ``int`` argument from its 64-bit register (the kernel truncates)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


# --- addresses ------------------------------------------------------------------------------
SOCKADDR_STORAGE = 128  # move_addr_to_kernel: addrlen outside [0, 128] is EINVAL (net/socket.c)
SUN_PATH = 108


@record
class Address:
    """A sockaddr as the caller passed it. ``kind`` is one of: ``path``, ``abstract``,
    ``unnamed`` (AF_UNIX, no name), ``inet``, ``inet6``, ``short`` (no family), ``other``."""

    kind: str
    family: int
    raw: bytes
    name: bytes = b""  # path (without its NUL and anything after) or abstract name (leading NUL)
    host: str = ""
    port: int = 0

    def describe(self) -> str:
        if self.kind in ("path", "abstract"):
            if self.kind == "path":
                return os.fsdecode(self.name)
            return "@" + self.name[1:].decode("utf-8", "replace")
        if self.kind in ("inet", "inet6"):
            return f"[{self.host}]:{self.port}" if self.kind == "inet6" else f"{self.host}:{self.port}"
        return f"family {self.family}"


def address_kind(raw: bytes) -> str:
    """The ``kind`` of :func:`parse_sockaddr` alone, without building the record (the
    mediator's hot path needs nothing more to decide). Pure."""
    if len(raw) < 2:
        return "short"
    family = raw[0] | raw[1] << 8  # sa_family_t, host order (little-endian on both arches)
    if family == socket.AF_UNIX:
        if len(raw) == 2:
            return "unnamed"
        return "abstract" if raw[2] == 0 else "path"
    if family == socket.AF_INET and len(raw) >= 8:
        return "inet"
    if family == socket.AF_INET6 and len(raw) >= 24:
        return "inet6"
    return "other"


def unix_path(raw: bytes) -> bytes:
    """The pathname of a ``path`` address: up to the first NUL or to ``addrlen``."""
    return raw[2:].split(b"\0", 1)[0]


def parse_sockaddr(raw: bytes) -> Address:
    """Classify RAW (the bytes connect(2) was given, at most 128). Pure.

    AF_UNIX follows net/unix/af_unix.c: ``sun_path[0] == 0`` is abstract and *all*
    ``addrlen - 2`` bytes are the name; otherwise the path ends at the first NUL or at
    ``addrlen`` (unix_mkname_bsd terminates it there), so a 108-byte path without NUL is
    valid and bytes after a NUL are ignored. ``addrlen`` of 2 is an unnamed address, which
    connect refuses with EINVAL (unix_validate_addr)."""
    kind = address_kind(raw)
    if kind == "short":
        return Address("short", -1, raw)
    family = raw[0] | raw[1] << 8
    if kind == "path":
        return Address("path", family, raw, name=unix_path(raw))
    if kind == "abstract":
        return Address("abstract", family, raw, name=raw[2:])
    if kind == "inet":
        return Address("inet", family, raw, host=socket.inet_ntop(socket.AF_INET, raw[4:8]),
                       port=int.from_bytes(raw[2:4], "big"))
    if kind == "inet6":
        return Address("inet6", family, raw, host=socket.inet_ntop(socket.AF_INET6, raw[8:24]),
                       port=int.from_bytes(raw[2:4], "big"))
    return Address(kind, family, raw)


def sockaddr_un(path: bytes) -> bytes:
    """The sockaddr_un for a pathname (with its NUL), as connect(2) expects it."""
    if len(path) >= SUN_PATH:
        raise ValueError(f"unix path of {len(path)} bytes does not fit sun_path")
    return struct.pack("=H", socket.AF_UNIX) + path + b"\0"


# --- the decision (pure) --------------------------------------------------------------------
# Families a network namespace confines: their connect reaches only the socket's own
# namespace. AF_UNIX pathnames are the exception, handled by inode.
CONFINED_FAMILIES = frozenset({socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK,
                               socket.AF_PACKET})

# Outcomes of resolving a pathname in the caller's view.
MISSING, NOT_SOCKET, RUN_SOCKET, OUTSIDE_SOCKET, UNRESOLVABLE = (
    "missing", "not-socket", "run-socket", "outside-socket", "unresolvable")


@record
class Verdict:
    """``connect``: make the connect (through the resolved fd for a path, else with the
    caller's bytes) and answer its result; ``answer``: answer ERROR without connecting.
    ``refused``: a refusal to record and report (the kernel would have let it through)."""

    action: str
    error: int = 0
    refused: bool = False
    reason: str = ""


CONNECT = Verdict("connect")
_OUTSIDE = Verdict("answer", errno.ECONNREFUSED, True, "bound outside the run")
_NOT_SOCKET = Verdict("answer", errno.ECONNREFUSED)  # what unix_find_bsd answers
_UNRESOLVABLE = Verdict("answer", errno.ECONNREFUSED, True, "cannot be resolved in the caller's view")
_OTHER_NETNS = Verdict("answer", errno.ECONNREFUSED, True, "socket of another network namespace")


def decide(sock_family: int, kind: str, *, same_netns: bool, target: str | None = None,
           target_error: int = 0) -> Verdict:
    """What to do with one connect. SOCK_FAMILY: the caller's socket's family; KIND: the
    address's (:func:`address_kind`); SAME_NETNS: the socket was created in the run's network
    namespace (not consulted for a pathname: the inode decides); TARGET: for a pathname
    address on a unix socket, the outcome of resolving it (TARGET_ERROR: the errno for
    MISSING). Made verdicts are shared constants: one connect costs no record."""
    if sock_family == socket.AF_UNIX and kind == "path":
        if target == RUN_SOCKET:
            return CONNECT
        if target == MISSING:
            return Verdict("answer", target_error or errno.ENOENT)
        if target == NOT_SOCKET:
            return _NOT_SOCKET
        if target == OUTSIDE_SOCKET:
            return _OUTSIDE
        return _UNRESOLVABLE
    if sock_family not in CONFINED_FAMILIES:
        return Verdict("answer", errno.ECONNREFUSED, True, f"socket family {sock_family} is in no namespace")
    if not same_netns:
        return _OTHER_NETNS
    return CONNECT


# --- naming attempts to reach an engine (issue 26 item 2; pure) ---------------------------
# A connect the kernel refuses by itself (the mount plan hid the path: ENOENT; a /dev/null mask:
# ECONNREFUSED; nothing of the run listens on the port) is no refusal of ours, but it is still
# a try to reach an engine, and a mutation-testing user wants to know which mutant made it.
# Socket file names only engines use (what a context or DOCKER_HOST may point at elsewhere).
ENGINE_SOCKET_NAMES = frozenset({b"docker.sock", b"podman.sock", b"containerd.sock",
                                 b"containerd.sock.ttrpc", b"buildkitd.sock", b"crio.sock",
                                 b"cri-dockerd.sock", b"dockershim.sock", b"kubelet.sock"})
# What docker and podman read as their endpoint (a connect like any other, to what they name).
HOST_VARIABLES = (b"DOCKER_HOST=", b"CONTAINER_HOST=")


@record
class EngineTargets:
    """Where an engine may answer, as a run would name it: PATHS (socket files: the well-known
    engine paths, the outside sockets the plan masked, what the outside DOCKER_HOST or
    CONTAINER_HOST names) and PORTS (engine TCP ports, and those the outside variables name)."""

    paths: frozenset[bytes] = frozenset()
    ports: frozenset[int] = frozenset()
    abstract: frozenset[bytes] = frozenset()  # abstract names bound outside at the start (no '@')


def host_endpoint(value: str) -> tuple[str, bytes | int] | None:
    """("path", b"/run/docker.sock") for ``unix:///run/docker.sock``, ("port", 2375) for
    ``tcp://10.0.0.5:2375`` (or ``http(s)://``), None for anything else (ssh://, npipe://, a
    name). Pure."""
    scheme, sep, rest = value.strip().partition("://")
    if not sep:
        return None
    if scheme == "unix":
        return ("path", os.fsencode(rest)) if rest.startswith("/") else None
    if scheme not in ("tcp", "http", "https"):
        return None
    hostport = rest.split("/", 1)[0].rpartition("@")[2]
    port = hostport.rpartition("]")[2].rpartition(":")[2] if ":" in hostport.rpartition("]")[2] else ""
    if port.isascii() and port.isdigit() and 0 < int(port) < 65536:
        return ("port", int(port))
    return ("port", 2376 if scheme == "https" else 2375)  # docker's defaults for a bare host


def engine_targets(plan: dict[str, list[str]], environ: dict[str, str], uid: int) -> EngineTargets:
    """The :class:`EngineTargets` of a run, from its plan (the outside and inside $HOME and
    XDG_RUNTIME_DIR, the masked sockets) and the supervisor's ENVIRON. Pure but for nothing:
    every input is given."""
    from .probe import ENGINE_PATHS, ENGINE_PORTS

    homes = {h for h in (*plan.get("outside_home", []), *plan.get("home", [])) if h.startswith("/")}
    xdgs = [x for x in plan.get("outside_xdg", []) if x.startswith("/")] or [f"/run/user/{uid}"]
    paths: set[bytes] = set()
    for pattern in ENGINE_PATHS:
        pattern = pattern.replace("$UID", str(uid))
        if pattern.startswith("~/"):
            paths.update(os.fsencode(h.rstrip("/") + pattern[1:]) for h in homes)
        elif pattern.startswith("$XDG/"):
            paths.update(os.fsencode(x.rstrip("/") + pattern[4:]) for x in xdgs)
        else:
            paths.add(os.fsencode(pattern))
    paths.update(os.fsencode(p) for p in plan.get("masked", []))
    ports = set(ENGINE_PORTS)
    for name in ("DOCKER_HOST", "CONTAINER_HOST"):
        found = host_endpoint(environ.get(name, ""))
        if found is not None:
            (paths if found[0] == "path" else ports).add(found[1])  # type: ignore[arg-type]
    abstract = frozenset(n.encode("utf-8", "surrogateescape") for n in plan.get("abstract", []))
    return EngineTargets(frozenset(paths), frozenset(ports), abstract)


def caller_hosts(environ_block: bytes) -> list[tuple[str, bytes | int]]:
    """The endpoints DOCKER_HOST and CONTAINER_HOST name in a /proc/PID/environ block. Pure."""
    found = []
    for item in environ_block.split(b"\0"):
        if item.startswith(HOST_VARIABLES):
            endpoint = host_endpoint(item.partition(b"=")[2].decode("utf-8", "replace"))
            if endpoint is not None:
                found.append(endpoint)
    return found


def path_attempt(path: bytes, error: int, targets: EngineTargets,
                 hosts: list[tuple[str, bytes | int]] | None = None) -> str | None:
    """Why a pathname connect the kernel answered ERROR (the path was hidden or masked in the
    run's view) is an attempt to reach an engine, or None. HOSTS: the caller's DOCKER_HOST and
    CONTAINER_HOST endpoints (:func:`caller_hosts`), asked only when the path is no known one.
    Pure."""
    if path in targets.paths:
        why = "an engine's path"
    elif path.rpartition(b"/")[2] in ENGINE_SOCKET_NAMES:
        why = "an engine's socket name"
    elif hosts and ("path", path) in hosts:
        why = "the caller's DOCKER_HOST"
    else:
        return None
    what = "hidden from the run" if error == errno.ENOENT else "masked" if error == errno.ECONNREFUSED \
        else "not reachable"
    return f"{why}, {what} ({errno.errorcode.get(error, error)})"


# --- starting bwrap under the filter ------------------------------------------------------
def spawn_filtered(argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...],
                   arch: str | None = None, stdio: tuple[int, int, int] = (0, 1, 2), *,
                   deny_filter: bytes | None = None, fixed_fds: tuple[tuple[int, int], ...] = (),
                   new_session: bool = False, cgroup_fd: int | None = None,
                   enter_cgroup: Callable[[], None] | None = None) -> tuple[int, int, Keeper]:
    """Start ARGV (bwrap) under the mediation filter: (its pid, the listener fd, the keeper of
    the thread that spawned it).

    A seccomp filter belongs to the thread that installs it (without TSYNC, seccomp(2)), and a
    child inherits the filter of the thread that creates it. So a short-lived thread of the
    supervisor installs the filter on itself (and no_new_privs when not root, per thread
    too), takes the listener fd (close-on-exec: the sandbox never holds it, it could answer its
    own connects), spawns bwrap, and ends, taking its filter with it. Cheaper than a ``fork``
    of the whole supervisor, which the first version did. The child gets STDIO as 0, 1, 2 (P7:
    the stdio relay's pipes, isolation/stdio.py), PASS_FDS, and no other fd, default
    SIGPIPE/SIGXFSZ. MediationError when the filter cannot be installed; OSError when bwrap
    cannot be started.

    CGROUP_FD (a cgroup v2 directory): bwrap is born in it (``syscalls.spawn_into_cgroup``),
    so we never move ourselves into the run's cgroup, which costs a grace period each way.
    Where the kernel refuses that clone3, ENTER_CGROUP is called (it moves this process into
    the cgroup; the caller moves it back) and bwrap is ``posix_spawn``ed as without CGROUP_FD.

    DENY_FILTER, when given, is installed on the same thread first (the run's syscall filter
    without its user-namespace rules, ``syscall_filter.program(userns=False)``): bwrap and
    everything it starts carry it from the first instruction, and so does the prover that
    :meth:`Keeper.fork` starts from this thread, which tries it. FIXED_FDS are (source, target)
    pairs placed after the stdio ones (the gate's pipes at the numbers its script names);
    NEW_SESSION starts bwrap in a session of its own, without a controlling terminal (P8).
    """
    from . import syscalls as _linux

    _linux.load()
    prog = program(arch or os.uname().machine)  # MediationError for an unknown arch: no run
    flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
    for fd in pass_fds:
        os.set_inheritable(fd, True)
    actions: list[tuple] = [(os.POSIX_SPAWN_DUP2, source, target)
                            for target, source in enumerate(stdio) if source != target]
    for target, source in enumerate(stdio):
        if source == target:
            os.set_inheritable(source, True)  # no dup2 clears close-on-exec there
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in pass_fds:
            try:
                if os.get_inheritable(fd):
                    actions.append((os.POSIX_SPAWN_CLOSE, fd))
            except OSError:
                continue  # the descriptor listdir used, closed by now
    actions += [(os.POSIX_SPAWN_DUP2, source, target) for source, target in fixed_fds]
    no_new_privs = os.geteuid() != 0
    done = _thread.allocate_lock()
    done.acquire()
    keeper = Keeper()
    result: dict[str, object] = {}

    def spawn_bwrap() -> int:
        how = {"file_actions": actions, "setsigdef": (signal.SIGPIPE, signal.SIGXFSZ), "setsid": new_session}
        if cgroup_fd is not None:
            try:
                return _linux.spawn_into_cgroup(argv[0], argv, env, cgroup_fd, **how)
            except _linux.NoCloneIntoCgroup:
                if enter_cgroup is None:
                    raise
                enter_cgroup()
        return os.posix_spawn(argv[0], argv, env, **how)

    def spawn() -> None:
        try:
            if no_new_privs:
                _linux.set_no_new_privs()
            try:
                if deny_filter is not None:
                    _linux.install_filter(deny_filter, 0)
                result["listener"] = _linux.install_filter(prog, flags)
            except OSError as err:
                raise MediationError(f"{argv[0]}: {err}") from err
            result["pid"] = spawn_bwrap()
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            result["error"] = err
            keeper.release(timeout=0)  # this very thread: it ends right below
        finally:
            done.release()
        # bwrap's --die-with-parent is PR_SET_PDEATHSIG, whose "parent" is the *thread* that
        # created it (prctl(2)): this thread stays until the run is over (Keeper.release).
        # Meanwhile it forks what must carry the run's filters (Keeper.fork: the prover).
        try:
            keeper.serve()
        finally:
            keeper.gone.release()

    _thread.start_new_thread(spawn, ())
    done.acquire()
    if "error" in result:
        if "listener" in result:
            os.close(result["listener"])  # type: ignore[arg-type]
        raise result["error"]  # type: ignore[misc]
    return result["pid"], result["listener"], keeper  # type: ignore[return-value]


class Keeper:
    """Holds the thread that spawned bwrap until :meth:`release` (the run is over): bwrap's
    death signal (``--die-with-parent``) fires when that thread ends, not the process.

    That thread carries the run's filters (the connect mediation's and the deny filter):
    :meth:`fork` has it fork a child that inherits exactly those filter objects (a child gets
    the filters of the thread that forks it, seccomp(2)), so the prover tries the very filters
    the run has, not a copy; :meth:`wake` has it make one connect of its own, a notification
    that wakes a mediator thread waiting in RECV (Mediator.stop)."""

    WAKE_TIMEOUT = 1.0

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self._request: tuple[bool, Callable[[], None]] | None = None  # (fork?, what to run)
        self._answer: dict[str, object] = {}
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._stuck = False  # a wake not answered in time: the thread is still in it
        self._released = False
        self.gone = _thread.allocate_lock()  # released as the thread ends (release() joins on it)
        self.gone.acquire()

    def serve(self) -> None:
        """The spawning thread's life after the spawn: fork or call on request, until released."""
        while True:
            self._lock.acquire()
            request, self._request = self._request, None
            if request is None:
                return  # released: the run is over
            forking, job = request
            if not forking:
                try:
                    job()
                    self._answer = {}
                except Exception as err:  # noqa: BLE001 - handed to the caller's thread
                    self._answer = {"error": err}
                self._done.release()
                continue
            try:
                pid = os.fork()
            except OSError as err:
                self._answer = {"error": err}
            else:
                if pid == 0:  # pragma: no cover - the child: runs JOB, never returns
                    code = 70
                    try:
                        job()
                        code = 0
                    finally:
                        os._exit(code)
                self._answer = {"pid": pid}
            self._done.release()

    def fork(self, child: Callable[[], None]) -> int:
        """Fork from the spawning thread; the child runs CHILD and exits (0, or 70 when it
        raised). The child's pid; OSError when the fork failed."""
        self._request = (True, child)
        self._lock.release()
        self._done.acquire()
        answer, self._answer = self._answer, {}
        if "error" in answer:
            raise answer["error"]  # type: ignore[misc]
        return answer["pid"]  # type: ignore[return-value]

    def wake(self, waiting: Callable[[], bool]) -> bool:
        """While WAITING() says a mediator thread waits in RECV: one ``connect`` of the
        spawning thread, which carries the mediation filter. The kernel hands it to a thread
        waiting in RECV as a notification like any other (a stopping thread answers it ENOSYS
        and ends), or answers ENOSYS itself once the listener is closed (the last mediator
        thread out closes it), so no connect here waits for ever. No address and fd -1: the
        filter notifies before connect looks at either. All in that thread: one hand-over for
        every wake (measured here, two threads woken and joined by stop(): ~0.2 ms when the
        CPUs were busy 2 ms before, as in an ending; ~0.5 ms after 10 ms idle, the virtual
        CPUs' wake-ups). False when the thread is gone, or did not come back within
        WAKE_TIMEOUT (it is then left to that answer: no further wake)."""
        from . import syscalls as _linux

        if self._stuck or self._released:
            return False
        deadline = time.monotonic() + self.WAKE_TIMEOUT

        def wakes() -> None:
            while waiting() and time.monotonic() < deadline:
                _linux.connect_raw(-1, b"")

        self._request = (False, wakes)
        self._lock.release()
        if not self._done.acquire(timeout=self.WAKE_TIMEOUT + 0.1):
            self._stuck = True
            return False
        self._answer = {}
        return True

    def release(self, timeout: float = 1.0) -> None:
        """Let the spawning thread end, and wait (TIMEOUT) until it has: nothing of the run
        outlives the ending in this process (an in-process run leaves no thread)."""
        if not self._released:
            self._released = True
            self._request = None
            self._lock.release()
        if self.gone.acquire(timeout=timeout) if timeout > 0 else self.gone.acquire(False):
            self.gone.release()


PIDFD_THREAD = os.O_EXCL  # linux/pidfd.h


def _comm(pid: int) -> str:
    """The command name of PID ("?" once it is gone): what a status line names a caller by."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode("utf-8", "replace")
    except OSError:
        return "?"


def _tgid(tid: int) -> int:
    with open(f"/proc/{tid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"Tgid:"):
                return int(line.split()[1])
    raise OSError(errno.ESRCH, "no Tgid")


# --- the mediator ---------------------------------------------------------------------------
class _Gone(Exception):
    """The notification is no longer valid (caller killed, or its pid no longer names it)."""


@record(mutable=True)
class Refusal:
    """One refused target: how often, by whom (the first few pids and commands)."""

    target: str
    reason: str
    count: int = 0
    callers: list[tuple[int, str]] = Factory(list)

    def to_json(self) -> dict:
        return {"target": self.target, "reason": self.reason, "count": self.count,
                "callers": [{"pid": p, "command": c} for p, c in self.callers]}


class _Worker:
    """One mediator thread's own state: its pidfd cache and address reader are used by that
    thread alone (no lock); ``parked`` (under the mediator's lock) says it waits in RECV."""

    __slots__ = ("done", "parked", "pidfds", "read", "surplus")

    def __init__(self, done: _thread.LockType) -> None:
        self.done = done
        self.pidfds: dict[int, int] = {}  # caller tid -> pidfd (PIDFD_THREAD), oldest first
        self.read: Callable[[int, int, int], bytes] | None = None  # syscalls.vm_reader(), made by the thread
        self.parked = False
        self.surplus = False  # counted out of the pool already: ends after its answer


class Mediator:
    """Answers the connects of one run. ``start()`` it as soon as the listener is received,
    ``set_run_netns()`` as soon as the run's network namespace exists (until then every
    connect is refused), ``stop()`` it in the ending, after the run's processes are gone.

    Threads: every free thread waits in SECCOMP_IOCTL_NOTIF_RECV itself (no poll), and the
    one the kernel hands a notification to answers it, so a connect costs no thread switch
    and no hand-over. Before a connect that may block (a blocking socket: a full unix backlog,
    TCP SYN retries) a thread makes sure another one is free to receive (spawned then if none
    is), so a blocked connect delays no other. At most MAX_THREADS connects block at once;
    beyond that the next waits in the kernel. The pool keeps at most two threads free: a
    thread whose connect returns beyond that ends. (Two threads in RECV are both woken for a
    notification and one takes it: the other goes back to sleep inside the kernel, ~1 µs on
    the same CPU; a hand-over to a thread waiting on a lock cost 3-20 µs here, the woken
    thread taking the GIL from another CPU.)

    Stopping: a thread in RECV cannot be woken by a signal (they are all blocked here) and
    need not return when the run's last task exits (Linux 6.11 made RECV return then; before,
    it waits for the next notification). So :meth:`stop` sends one: a connect of the thread
    that spawned bwrap (``Keeper.wake``), which carries the filter; a stopping thread answers
    any notification ENOSYS (what the kernel answers once the listener is gone) and ends, and
    the last thread out closes the listener when :meth:`stop` could not (see there).

    All signals are blocked in these threads: a connect of ours is never cut short by EINTR.
    The listener has SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6; ignored before): the
    kernel wakes the receiving thread on the caller's CPU, and the caller on ours when we
    answer. Measured here: the do-nothing round trip falls from ~+45-60 µs to ~+5-18 µs when
    the other CPU is idle (a cross-CPU wake-up of an idle virtual CPU costs ~20 µs each way).
    """

    MAX_THREADS = 32
    MAX_KNOWN = 256  # socket files of the run held open (O_PATH) as proven inside
    MAX_PIDFDS = 16  # per thread: pidfds of recent callers
    MAX_CALLERS = 8

    def __init__(self, listener: int, arch: str | None = None,
                 targets: Callable[[], EngineTargets] | None = None) -> None:
        from . import syscalls as _linux

        self.arch = arch or os.uname().machine
        if self.arch not in AUDIT_ARCH:
            raise MediationError(f"no connect mediation for {self.arch}")
        self._linux = _linux
        self.listener = listener
        self.audit_arch = AUDIT_ARCH[self.arch]
        self.connect_nr = NR[self.arch]["connect"]
        self.refusals: dict[tuple[str, str], Refusal] = {}
        # Attempts to reach an engine, the command's only (named from end_proof on: the
        # prover's own tries are not, and cost nothing): refusals, and connects the kernel
        # answered for a hidden engine path or an engine port (issue 26 item 2).
        self.attempts: dict[tuple[str, str], Refusal] = {}
        self._naming = False
        self._make_targets = targets
        self._targets: EngineTargets | None = None  # made at the first attempt that needs them
        self._hosts: dict[int, list[tuple[str, bytes | int]]] = {}  # pid -> its DOCKER_HOST & co.
        self.errors: list[str] = []  # mediator faults (each answered ECONNREFUSED)
        self.mediated = 0
        self._diag: sockdiag.DiagSocket | None = None
        self._cookie: int | None = None
        self._lock = _thread.allocate_lock()  # threads, counters, refusals, the cache's changes
        self._workers: list[_Worker] = []  # the running threads
        self._alive = 0  # threads of the pool (surplus ones out already)
        self._blocking = 0  # of which in a connect that may block
        self._close_when_last = False  # stop() left the listener to the last thread out
        self._lost = False  # its number was closed under us (EBADF): never ours to close again
        self._known: dict[tuple[int, int], int] = {}
        self._closing = False
        self._pidfd_thread = True  # PIDFD_THREAD works (Linux 6.9); False once EINVAL says not
        self.proof_refusals: dict[tuple[str, str], Refusal] = {}
        # Released once the run's network namespace is known (a lock as an event: `threading`
        # is not imported on the run path, 2.8 ms of every run).
        self._netns_known = _thread.allocate_lock()
        self._netns_known.acquire()
        self._stopping = False
        # Readable once the mediation has stopped on its own (its listener closed under it, a
        # RECV that failed): the supervisor polls it and ends the run, 125 (fail closed).
        self.failed_r, self._failed_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.failure: str | None = None

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            fcntl.ioctl(self.listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
        except OSError:
            pass  # before Linux 6.6: only slower (a wake-up may cross CPUs)
        self._spawn()

    def set_run_netns(self, netns_fd: int) -> None:
        """The run's network namespace (an fd of /proc/PID/ns/net of a process of the run)."""
        diag = sockdiag.open_diag(netns_fd)
        self._diag, self._cookie = diag, diag.netns_cookie
        if self._netns_known.locked():
            self._netns_known.release()

    def end_proof(self) -> None:
        """The run is proven and released: refusals recorded from now on are the command's.
        (The prover's own tries are refused too, and are not reported.)"""
        with self._lock:
            self.proof_refusals, self.refusals = self.refusals, {}
            self._naming = True

    def _fail(self, why: str) -> None:
        """The mediation stopped by itself: say so once (the kernel answers ENOSYS to every
        connect of the run from now on; the supervisor ends the run)."""
        if self._stopping or self.failure is not None:
            return
        self.failure = why
        try:
            os.write(self._failed_w, b"x")
        except OSError:
            pass

    def stop(self, timeout: float = 2.0, wake: Callable[[Callable[[], bool]], bool] | None = None) -> None:
        """Close the listener (the kernel answers ENOSYS to whatever is still pending) and end
        the threads. A thread stuck in a connect to a run socket is released when the run's
        processes are gone (its peer closes); it is a daemon thread either way.

        While any thread runs the listener is left to the last one out to close (each answers
        ENOSYS to what it receives meanwhile, as the kernel does once the listener is closed):
        its number is never closed while a thread may still use it, so no thread ever acts on
        a number reused since.

        WAKE (``Keeper.wake``: connects by a task that carries the filter, while the predicate
        it is given says a thread waits) ends the threads waiting in RECV, and every thread is
        joined (TIMEOUT in all): each wake is a notification, which one of them receives,
        answers ENOSYS and ends on. Why
        not wait for the kernel: RECV returns when the filter has no task left only since
        Linux 6.11 (seccomp_notify_recv's recv_wait_event, "seccomp: interrupt
        SECCOMP_IOCTL_NOTIF_RECV when all users have exited"); before, it waits for the next
        notification, however long no task can send one (the listener's POLLHUP, Linux 5.8,
        wakes poll(2) only), and the filter keeps users as long as the spawning thread lives,
        or any task of the run the ending could not end. A wake works on every kernel with
        user notification. Without WAKE (the supervisor is gone, as the tests play it; the
        run's tasks may still live), threads in RECV are not waited for: they end at the next
        notification, or, on Linux 6.11+, once no task holds the filter."""
        self._stopping = True
        with self._lock:
            self._closing = True
            working = [w.done for w in self._workers if not w.parked]
        deadline = time.monotonic() + timeout
        for done in working:
            if done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                done.release()
        with self._lock:
            if not self._workers and self.listener >= 0:
                self._close_listener()
            else:
                self._close_when_last = True
        if wake is not None:
            self._wake_parked(wake, deadline)
        os.close(self.failed_r)
        os.close(self._failed_w)
        with self._lock:
            while self._known:
                os.close(self._known.popitem()[1])  # out of the cache before closed: see _remember
        if self._diag:
            self._diag.close()

    def _wake_parked(self, wake: Callable[[Callable[[], bool]], bool], deadline: float) -> None:
        """WAKE the threads waiting in RECV, then join every thread (until DEADLINE). Once
        stopping no thread parks again, so what is not parked now is ending, or in a connect
        that ends with the run (joined above). A thread marked parked but not yet in RECV gets
        the notification when it gets there (it stays queued); one that left RECV on its own
        meanwhile ends too, and the last one out closes the listener, which answers the wake."""
        if self._parked():
            wake(self._parked)
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            if worker.done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                worker.done.release()

    def _parked(self) -> bool:
        with self._lock:
            return any(w.parked for w in self._workers)

    def _close_listener(self) -> None:
        if not self._lost:
            try:
                os.close(self.listener)
            except OSError:
                pass
        self.listener = -1

    def _orphaned(self) -> bool:
        """No task holds the filter any more (seccomp_notify_poll: POLLHUP): the run is over."""
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        return any(events & select.POLLHUP for _, events in poller.poll(0))

    def summary(self) -> list[dict]:
        return [r.to_json() for r in sorted(self.refusals.values(), key=lambda r: -r.count)]

    def attempt_summary(self) -> list[dict]:
        """The command's attempts to reach an engine, most frequent first (--report's
        ``engine_attempts``: the shape of ``connects_refused``)."""
        with self._lock:
            found = sorted(self.attempts.values(), key=lambda r: -r.count)
        return [r.to_json() for r in found]

    def targets(self) -> EngineTargets:
        if self._targets is None:
            self._targets = self._make_targets() if self._make_targets is not None else EngineTargets()
        return self._targets

    def _spawn(self) -> None:
        """One more mediator thread. ``_thread`` directly: ``threading.Thread.start`` waits until
        the new thread runs, a scheduler round trip on every ``no-docker run`` for nothing."""
        with self._lock:
            worker = self._enlist()
        if worker is not None:
            _thread.start_new_thread(self._serve, (worker,))

    def _enlist(self) -> _Worker | None:
        """Under ``_lock``: count one more thread in; its state, or None at MAX_THREADS or when
        stopping."""
        if self._alive >= self.MAX_THREADS or self._closing:
            return None
        done = _thread.allocate_lock()
        done.acquire()  # released when the thread ends: stop() joins on it
        worker = _Worker(done)
        self._workers.append(worker)
        self._alive += 1
        return worker

    def _quit(self) -> None:
        with self._lock:
            self._closing = True

    def _blocking_connect(self, me: _Worker) -> None:
        """Before a connect that may block: count this thread as blocking, and spawn a thread
        when no other is left free to receive."""
        with self._lock:
            self._blocking += 1
            worker = self._enlist() if self._alive - self._blocking < 1 else None
        if worker is not None:
            _thread.start_new_thread(self._serve, (worker,))

    def _unblocked(self, me: _Worker) -> None:
        """After that connect, before its answer: this thread is free again, or surplus (more
        than two free). Not later (at the next park, say): the answer lets the caller connect
        again at once, and another thread receiving that would count this one as still blocked
        and spawn one more, for every connect (measured: +15-20 µs each)."""
        with self._lock:
            self._blocking -= 1
            if self._alive - self._blocking > 2:
                self._alive -= 1
                me.surplus = True

    # -- receiving -------------------------------------------------------------------------
    def _serve(self, me: _Worker) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # _signal has both
        try:
            me.read = self._linux.vm_reader()
            self._receive(me)
        except Exception as err:  # a fault of ours outside one notification: fail closed, loudly
            self.errors.append(f"{type(err).__name__}: {err}")
            self._fail(f"a mediator thread failed: {err}")
            self._quit()
        finally:
            for pidfd in me.pidfds.values():
                os.close(pidfd)
            with self._lock:
                if not me.surplus:
                    self._alive -= 1
                self._workers.remove(me)
                if not self._workers and self._close_when_last and self.listener >= 0:
                    self._close_listener()
            me.done.release()

    def _receive(self, me: _Worker) -> None:
        # Everything the loop uses is bound to a local once: a notification costs no lookup.
        listener, ioctl, mediate, send = self.listener, fcntl.ioctl, self._mediate, NOTIF_RESP.pack
        recv_nr, send_nr, lock = SECCOMP_IOCTL_NOTIF_RECV, SECCOMP_IOCTL_NOTIF_SEND, self._lock
        head, buf, zero = NOTIF_HEAD.unpack_from, bytearray(NOTIF.size), bytes(NOTIF.size)
        while True:
            with lock:
                if self._closing or me.surplus:
                    return
                me.parked = True
            buf[:] = zero  # RECV refuses a non-zeroed buffer (check_zeroed_user)
            try:
                ioctl(listener, recv_nr, buf, True)
                failed = 0
            except OSError as err:
                failed = err.errno or -1
            with lock:
                me.parked = False
                closing = self._closing
            if closing:
                # The listener is still open (stop() leaves it to the last thread out while
                # one runs); answer as the kernel will once it is closed.
                if not failed:
                    try:
                        ioctl(listener, send_nr, send(head(buf)[0], 0, -errno.ENOSYS, 0))
                    except OSError:
                        pass
                return
            if failed:
                if failed == errno.ENOENT and self._orphaned():
                    self._quit()  # every task of the filter is gone: the run is over (Linux 6.11)
                    return
                if failed in (errno.ENOENT, errno.EINTR):
                    continue  # the caller was killed before we received it
                if failed == errno.EBADF:
                    with lock:
                        self._lost = True  # closed under us (the failure the supervisor reports)
                self.errors.append(f"RECV: {os.strerror(failed)}")
                self._fail(f"receiving a notification failed: {os.strerror(failed)}")
                self._quit()
                return
            nid, pid, _flags, nr, arch, _ip, fd, address, addrlen = head(buf)
            try:
                error = mediate(me, nid, pid, nr, arch, fd, address, addrlen)
            except _Gone:
                # Most likely nobody waits any more; answer anyway (SEND says ENOENT then): a
                # notification left unanswered would hang its caller for the run's life.
                error = errno.ECONNREFUSED
            except Exception as err:  # a fault of ours: fail closed, say so
                self.errors.append(f"{type(err).__name__}: {err}")
                error = errno.ECONNREFUSED
            self.mediated += 1
            try:
                ioctl(listener, send_nr, send(nid, 0, -error, 0))
            except OSError:
                pass  # ENOENT: the caller was killed meanwhile; the answer has no reader

    # -- one notification ------------------------------------------------------------------
    def _valid(self, nid: int) -> None:
        """SECCOMP_IOCTL_NOTIF_ID_VALID, else _Gone.

        Why one call covers every read of the caller's state made before it: the kernel
        says valid only while the notification is on the filter's list in state SENT
        (kernel/seccomp.c, seccomp_notify_id_valid), and the caller takes it off that list
        (seccomp_do_user_notification, ``list_del(&n.list)``) before its connect returns,
        so before it can exit, be reaped, or be killed by another thread's execve
        (de_thread). Valid now means the caller has been alive and blocked in this connect
        since RECV; its tid (``pid`` here) named it and nothing else all along (a tid is
        not reused while its task lives; de_thread hands the leader's tid over only once
        the old leader is dead), its memory is the one mm it has had since (only execve
        replaces an mm, and the caller is blocked), and its root and cwd were read by tid
        at those times. So every read made by tid since RECV (/proc/PID/..., pidfd_open,
        process_vm_readv) read the caller's state, as of the moment of each read."""
        try:
            fcntl.ioctl(self.listener, SECCOMP_IOCTL_NOTIF_ID_VALID, struct.pack("=Q", nid))
        except OSError as err:
            raise _Gone from err

    def _mediate(self, me: _Worker, nid: int, pid: int, nr: int, arch: int, fd: int, address: int,
                 addrlen: int) -> int:
        """0 or the errno for one notification. Raises _Gone when the caller's state can no
        longer be trusted to be the caller's.

        No ID_VALID until just before the connect (:meth:`_valid`): an answer without a
        connect (EFAULT, EBADF, ENOENT...) needs none, because SEND itself reaches only a
        caller still waiting, which makes every read before it the caller's (the same
        argument); a refusal is checked before it is recorded."""
        if arch != self.audit_arch or nr != self.connect_nr:
            return errno.ENOSYS  # the filter notifies nothing else
        fd, addrlen = _int32(fd), _int32(addrlen)
        if not 0 <= addrlen <= SOCKADDR_STORAGE:
            return errno.EINVAL  # move_addr_to_kernel
        raw = b""
        if addrlen:
            # One process_vm_readv, by tid: the address is read once, after RECV, from the
            # mm the caller has now (a /proc/PID/mem opened before an execve would read the
            # old one; there is nothing opened here). Same permission as pidfd_getfd below
            # (PTRACE_MODE_ATTACH_REALCREDS). A task that exec'd meanwhile is not the caller:
            # the execve killed it (de_thread), and the ID_VALID before the connect says so.
            try:
                raw = me.read(pid, address, addrlen)  # type: ignore[misc]  # set before the loop
            except OSError as err:
                if err.errno == errno.EFAULT:
                    return errno.EFAULT  # what copy_from_user makes of a bad pointer
                if err.errno == errno.ESRCH:
                    raise _Gone from err
                raise MediationError(f"reading the address of {pid}: {err.strerror}") from err
            if len(raw) != addrlen:
                return errno.EFAULT
        try:
            sockfd = self._caller_fd(me, pid, fd)
        except OSError as err:
            if err.errno == errno.EBADF:
                return errno.EBADF  # what connect(2) says for a bad fd
            if err.errno == errno.ESRCH:
                raise _Gone from err
            raise MediationError(f"the socket of {pid}: {err.strerror}") from err
        try:
            return self._decide_and_connect(me, nid, pid, sockfd, raw)
        finally:
            os.close(sockfd)

    def _caller_fd(self, me: _Worker, pid: int, fd: int) -> int:
        """Our duplicate of fd FD of the calling thread PID (its own fd table: a thread may
        have one, CLONE_FILES is optional), through a pidfd of that thread (PIDFD_THREAD,
        Linux 6.9; older kernels: of its thread group).

        A thread's pidfd is kept for its next connects (the common case: one process
        connecting again and again). Sound: a pidfd names one struct pid for life; when
        that tid's task is gone (and the number possibly someone else's), pidfd_getfd says
        ESRCH and a fresh pidfd is opened. While the task is there it holds the tid, so if
        the caller (that tid) is alive it is that task; if it is not, the notification is
        invalid and nothing we got is used (ID_VALID before the connect, SEND otherwise)."""
        getfd, pidfds = self._linux.pidfd_getfd, me.pidfds
        pidfd = pidfds.get(pid)
        if pidfd is not None:
            try:
                return getfd(pidfd, fd)
            except OSError as err:
                if err.errno != errno.ESRCH:
                    raise
                del pidfds[pid]
                os.close(pidfd)
        cache = self._pidfd_thread
        try:
            pidfd = os.pidfd_open(pid, PIDFD_THREAD) if cache else os.pidfd_open(_tgid(pid))
        except OSError as err:
            if err.errno != errno.EINVAL or not cache:
                raise
            self._pidfd_thread = cache = False  # before Linux 6.9
            pidfd = os.pidfd_open(_tgid(pid))
        if not cache:  # a group's pidfd would name the group of whichever task has that tid later
            try:
                return getfd(pidfd, fd)
            finally:
                os.close(pidfd)
        if len(pidfds) >= self.MAX_PIDFDS:
            os.close(pidfds.pop(next(iter(pidfds))))
        pidfds[pid] = pidfd
        return getfd(pidfd, fd)

    def _decide_and_connect(self, me: _Worker, nid: int, pid: int, sockfd: int, raw: bytes) -> int:
        # The family from getsockname (the one system call of a socket object made from an
        # fd when type and protocol are given); ENOTSOCK for a non-socket. SOCK_NONBLOCK in
        # the type: otherwise, with a default timeout set anywhere in this process
        # (socket.setdefaulttimeout), making the object would switch the *caller's* socket
        # to non-blocking (FIONBIO on the shared file).
        try:
            probe = socket.socket(-1, socket.SOCK_STREAM | socket.SOCK_NONBLOCK, 0, sockfd)
        except OSError as err:
            return errno.ENOTSOCK if err.errno == errno.ENOTSOCK else errno.ECONNREFUSED
        try:
            sock_family = probe.family
            kind = address_kind(raw)
            pathname = sock_family == socket.AF_UNIX and kind == "path"
            # A connect before the supervisor has read the init's pid from bwrap: wait for the
            # run's namespace (bounded), rather than refuse a connect of the run's own; once
            # known, let every other waiter through too.
            if self._cookie is None and self._netns_known.acquire(timeout=5.0):
                self._netns_known.release()
            # A pathname's own socket's namespace does not matter (the inode decides): no call.
            same = not pathname and self._cookie is not None and int.from_bytes(
                probe.getsockopt(socket.SOL_SOCKET, sockdiag.SO_NETNS_COOKIE, 8), "little") == self._cookie
        finally:
            probe.detach()  # the fd stays ours to close
        target, target_error, pathfd = None, 0, -1
        try:
            if pathname:
                target, target_error, pathfd = self._resolve(pid, unix_path(raw))
            verdict = decide(sock_family, kind, same_netns=same, target=target, target_error=target_error)
            if verdict.refused:
                self._record(nid, pid, raw, verdict.reason)
            if verdict.action != "connect":
                if pathname and self._naming and not verdict.refused:
                    self._name_hidden(nid, pid, raw, verdict.error)
                return verdict.error
            if self._naming and kind in ("inet", "inet6") and (raw[2] << 8 | raw[3]) in self.targets().ports:
                self._name_port(nid, pid, raw)
            connect_to = _PROC_SELF_FD + b"%d\0" % pathfd if pathfd >= 0 else raw
            blocking = not fcntl.fcntl(sockfd, fcntl.F_GETFL) & os.O_NONBLOCK
            self._valid(nid)  # the one check before acting: every read above was the caller's
            if not blocking:
                error = self._linux.connect_raw(sockfd, connect_to)  # never sleeps
            else:
                self._blocking_connect(me)  # may block (full backlog, SYN retries): others must not wait
                try:
                    error = self._linux.connect_raw(sockfd, connect_to)
                finally:
                    self._unblocked(me)
            if error and kind == "abstract" and self._naming and raw[3:] in self.targets().abstract:
                # Nothing of the run has that name, and something outside had it at the start.
                self._attempt(nid, pid, raw, "an abstract name bound outside when the run started")
            return error
        finally:
            if pathfd >= 0:
                os.close(pathfd)

    def _resolve(self, pid: int, path: bytes) -> tuple[str, int, int]:
        """(outcome, errno, O_PATH fd or -1) of PATH in the caller's root and cwd.

        An absolute path is opened with RESOLVE_IN_ROOT from the caller's root (absolute
        symlinks and ``..`` stay inside it, as for the caller). A relative path must start
        at the caller's cwd while ``..`` stops at the caller's root, which openat2 cannot
        express with one dirfd: we try RESOLVE_BENEATH from the cwd (exact whenever the walk
        stays below the cwd), and otherwise rebuild the cwd as a path inside the root (see
        :meth:`_open_from_root`). RESOLVE_NO_MAGICLINKS: a ``/proc/PID/root``-style jump would
        be resolved with *our* view of /proc; such a path is refused (fails closed).
        /proc/PID/root and cwd are read by tid: see :meth:`_valid` for why the check before
        the connect covers them."""
        linux = self._linux
        try:
            if path[:1] == b"/":
                base = os.open(f"/proc/{pid}/root", _O_DIR)
                try:
                    fd = linux.openat2(base, path, 0, 0, _HOW_IN_ROOT)
                finally:
                    os.close(base)
            else:
                base = os.open(f"/proc/{pid}/cwd", _O_DIR)
                try:
                    try:
                        fd = linux.openat2(base, path, 0, 0, _HOW_BENEATH)
                    except OSError as err:
                        if err.errno != errno.EXDEV:
                            raise
                        fd = self._open_from_root(pid, base, path)
                finally:
                    os.close(base)
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ENOTDIR):
                return MISSING, err.errno, -1
            return UNRESOLVABLE, err.errno, -1
        try:
            st = os.fstat(fd)
            if not stat.S_ISSOCK(st.st_mode):
                os.close(fd)
                return NOT_SOCKET, 0, -1
            key = (st.st_dev, st.st_ino)
            if key in self._known:  # no lock: see _remember
                return RUN_SOCKET, 0, fd
            if self._diag is None:
                os.close(fd)
                return UNRESOLVABLE, 0, -1  # the run's namespace is not known yet
            bound = self._diag.bound_files()
        except (OSError, sockdiag.SockDiagError):
            os.close(fd)
            raise
        if key in bound:
            self._remember(key, fd)
            return RUN_SOCKET, 0, fd
        os.close(fd)
        return OUTSIDE_SOCKET, 0, -1

    def _remember(self, key: tuple[int, int], fd: int) -> None:
        """Cache a socket file found bound inside the run, *holding it open* (O_PATH).

        Why a hit needs no new dump: while we hold the inode it cannot be freed, so no other
        live inode of that file system has its number, and a resolved file with the same
        (st_dev, st_ino) is that inode. Only the socket whose bind created an inode is ever
        found through it (unix_bind_bsd sets u->path once; unix_find_socket_byinode), and
        that socket is the run's: if it has closed, connect gets ECONNREFUSED from the kernel,
        never another socket. A miss (new socket, or evicted) costs one sock_diag dump.
        Lookups take no lock: an entry leaves the dict *before* its fd is closed, so a key
        seen in it (one atomic dict lookup) is an inode still held at that moment."""
        with self._lock:
            if key in self._known or self._closing:
                return
            if len(self._known) >= self.MAX_KNOWN:
                os.close(self._known.pop(next(iter(self._known))))  # the oldest
            self._known[key] = os.dup(fd)

    def _open_from_root(self, pid: int, cwd: int, path: bytes) -> int:
        """Open relative PATH whose walk leaves the cwd: as ``<cwd inside the root>/PATH``
        with RESOLVE_IN_ROOT from the root. The cwd's place in the root comes from the
        /proc links (d_path from our root), and is trusted only when that place opens to the
        very directory of the cwd fd (same st_dev, st_ino); else OSError(EXDEV): refused."""
        root_link = os.fsencode(os.readlink(f"/proc/{pid}/root"))
        cwd_link = os.fsencode(os.readlink(f"/proc/{pid}/cwd"))
        if root_link == b"/":
            inner = cwd_link
        elif cwd_link == root_link or cwd_link.startswith(root_link + b"/"):
            inner = cwd_link[len(root_link):] or b"/"
        else:
            raise OSError(errno.EXDEV, "cwd outside the root")
        root = os.open(f"/proc/{pid}/root", _O_DIR)
        try:
            check = self._linux.openat2(root, inner, 0, 0, _HOW_DIR_IN_ROOT)
            try:
                a, b = os.fstat(check), os.fstat(cwd)
                if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
                    raise OSError(errno.EXDEV, "cwd moved")
            finally:
                os.close(check)
            return self._linux.openat2(root, inner.rstrip(b"/") + b"/" + path, 0, 0, _HOW_IN_ROOT)
        finally:
            os.close(root)

    def _record(self, nid: int, pid: int, raw: bytes, reason: str) -> None:
        """Count a refusal, with the caller's pid and command, once ID_VALID has said the
        caller is still the one waiting (so neither the refusal nor the command is another's)."""
        comm = _comm(pid)
        self._valid(nid)
        key = (parse_sockaddr(raw).describe(), reason)
        with self._lock:
            entry = self.refusals.setdefault(key, Refusal(key[0], reason))
            entry.count += 1
            if len(entry.callers) < self.MAX_CALLERS:
                entry.callers.append((pid, comm))
            if self._naming:
                self._count_attempt(key, pid, comm)

    def _count_attempt(self, key: tuple[str, str], pid: int, comm: str) -> None:
        """Under ``_lock``: one more attempt at KEY (target, reason) by PID (distinct callers)."""
        entry = self.attempts.setdefault(key, Refusal(*key))
        entry.count += 1
        if len(entry.callers) < self.MAX_CALLERS and (pid, comm) not in entry.callers:
            entry.callers.append((pid, comm))

    def _name_hidden(self, nid: int, pid: int, raw: bytes, error: int) -> None:
        """A pathname connect the kernel answered ERROR in the run's view: an attempt when the
        path is an engine's (:func:`path_attempt`); the caller's environment is read only for a
        path that is no known one, to see whether its DOCKER_HOST names it."""
        path, targets = unix_path(raw), self.targets()
        reason = path_attempt(path, error, targets)
        if reason is None and error == errno.ENOENT:
            # A symlink to a hidden engine path (``ln -s /run/docker.sock ./d.sock``): its
            # target, one hop, read through the caller's root or cwd (a name only: the connect
            # was answered already, nothing is opened).
            base = f"/proc/{pid}/root" if path[:1] == b"/" else f"/proc/{pid}/cwd"
            try:
                link = os.readlink(os.fsencode(base) + b"/" + path)
            except (OSError, ValueError):
                link = None
            if link is not None:
                reason = path_attempt(link, error, targets)
                if reason is not None:
                    reason = f"a symlink to {os.fsdecode(link)}: {reason}"
        if reason is None:
            hosts = self._caller_hosts(pid)
            if not hosts:
                return
            reason = path_attempt(path, error, targets, hosts)
            if reason is None:
                return
        self._attempt(nid, pid, raw, reason)

    def _caller_hosts(self, pid: int) -> list[tuple[str, bytes | int]]:
        """The DOCKER_HOST/CONTAINER_HOST endpoints in PID's environment, read once per pid (a
        /proc/PID/environ read goes through the caller's memory: ~100 µs measured, paid for
        every failed lookup of glibc's nscd socket otherwise). A name only: a pid reused or an
        environment changed by an exec since at worst misnames an attempt, it decides nothing."""
        cache = self._hosts
        found = cache.get(pid)
        if found is None:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    block = f.read(1 << 17)  # what DOCKER_HOST can be found in; the rest is ignored
            except OSError:
                return []
            found = caller_hosts(block) if b"_HOST=" in block else []
            if len(cache) >= self.MAX_PIDFDS * 4:
                cache.pop(next(iter(cache)), None)
            cache[pid] = found
        return found

    def _name_port(self, nid: int, pid: int, raw: bytes) -> None:
        """A connect to an engine port from the run's network namespace, where the run's own
        listeners are the only ones: an attempt unless one of them listens on that port (a test
        with its own fake engine). The connect itself goes on as before."""
        port = raw[2] << 8 | raw[3]
        diag = self._diag
        try:
            if diag is not None and any(s.port == port for s in diag.tcp_listeners()):
                return
        except (OSError, sockdiag.SockDiagError):
            pass  # named: better a name too many than an attempt unnamed
        self._attempt(nid, pid, raw, "an engine port, nothing of the run listens there")

    def _attempt(self, nid: int, pid: int, raw: bytes, reason: str) -> None:
        """Count an attempt (not a refusal) with the caller's pid and command, once ID_VALID has
        said the caller is still the one waiting (as :meth:`_record`). A caller counted at this
        target already is counted again without reading its command anew (a client retrying in
        a loop pays one set lookup, not a /proc read per try)."""
        key = (parse_sockaddr(raw).describe(), reason)
        with self._lock:
            entry = self.attempts.get(key)
            if entry is not None and any(p == pid for p, _ in entry.callers):
                entry.count += 1
                return
        comm = _comm(pid)
        self._valid(nid)
        with self._lock:
            self._count_attempt(key, pid, comm)


_O_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
# struct open_how for openat2, made once: O_PATH opens in the caller's root, or beneath its cwd.
_HOW_IN_ROOT = struct.pack("=QQQ", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
_HOW_DIR_IN_ROOT = struct.pack("=QQQ", _O_DIR, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
_HOW_BENEATH = struct.pack("=QQQ", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
_PROC_SELF_FD = struct.pack("=H", socket.AF_UNIX) + b"/proc/self/fd/"  # + the fd number and NUL
