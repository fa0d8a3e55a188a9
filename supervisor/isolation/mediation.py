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

Soundness (DESIGN §4): the address is read once from ``/proc/PID/mem`` (opened after RECV:
one opened before the caller's execve reads the old mm); the socket is the caller's own object
(``pidfd_getfd``), so its options, binding and O_NONBLOCK are the caller's, and a ``dup2`` onto
the fd number after we took it changes nothing we checked; the inode checked is the inode
connected. ``SECCOMP_IOCTL_NOTIF_ID_VALID`` after each read of the caller's state proves the
pid still names the blocked caller (seccomp_unotify(2), "pid reuse"). We never answer with
``SECCOMP_USER_NOTIF_FLAG_CONTINUE``: the kernel would re-read the fd and the memory after our
check (seccomp_unotify(2) warns exactly this).

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
import threading
import time

from ..record import Factory, record
from . import sockdiag

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (run path)
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


@record
class Notification:
    id: int
    pid: int
    nr: int
    arch: int
    args: tuple[int, ...]


def parse_notification(raw: bytes) -> Notification:
    """A ``struct seccomp_notif`` as filled by SECCOMP_IOCTL_NOTIF_RECV."""
    if len(raw) != NOTIF.size:
        raise MediationError(f"seccomp_notif of {len(raw)} bytes, expected {NOTIF.size}")
    nid, pid, _flags, nr, arch, _ip, *args = NOTIF.unpack(raw)
    return Notification(id=nid, pid=pid, nr=nr, arch=arch, args=tuple(args))


def response(nid: int, error: int) -> bytes:
    """A ``struct seccomp_notif_resp``: the syscall returns 0, or -1 with errno ERROR."""
    return NOTIF_RESP.pack(nid, 0, -error if error else 0, 0)


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


def parse_sockaddr(raw: bytes) -> Address:
    """Classify RAW (the bytes connect(2) was given, at most 128). Pure.

    AF_UNIX follows net/unix/af_unix.c: ``sun_path[0] == 0`` is abstract and *all*
    ``addrlen - 2`` bytes are the name; otherwise the path ends at the first NUL or at
    ``addrlen`` (unix_mkname_bsd terminates it there), so a 108-byte path without NUL is
    valid and bytes after a NUL are ignored. ``addrlen`` of 2 is an unnamed address, which
    connect refuses with EINVAL (unix_validate_addr)."""
    if len(raw) < 2:
        return Address("short", -1, raw)
    family = int.from_bytes(raw[:2], "little")  # sa_family_t, host order
    if family == socket.AF_UNIX:
        sun = raw[2:]
        if not sun:
            return Address("unnamed", family, raw)
        if sun[0] == 0:
            return Address("abstract", family, raw, name=sun)
        return Address("path", family, raw, name=sun.split(b"\0", 1)[0])
    if family == socket.AF_INET and len(raw) >= 8:
        return Address("inet", family, raw, host=socket.inet_ntop(socket.AF_INET, raw[4:8]),
                       port=int.from_bytes(raw[2:4], "big"))
    if family == socket.AF_INET6 and len(raw) >= 24:
        return Address("inet6", family, raw, host=socket.inet_ntop(socket.AF_INET6, raw[8:24]),
                       port=int.from_bytes(raw[2:4], "big"))
    return Address("other", family, raw)


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


def decide(sock_family: int, address: Address, *, same_netns: bool, target: str | None = None,
           target_error: int = 0) -> Verdict:
    """What to do with one connect. SOCK_FAMILY: the caller's socket's SO_DOMAIN; SAME_NETNS:
    the socket was created in the run's network namespace; TARGET: for a pathname address on
    a unix socket, the outcome of resolving it (TARGET_ERROR: the errno for MISSING)."""
    if sock_family == socket.AF_UNIX and address.kind == "path":
        if target == RUN_SOCKET:
            return Verdict("connect")
        if target == MISSING:
            return Verdict("answer", target_error or errno.ENOENT)
        if target == NOT_SOCKET:
            return Verdict("answer", errno.ECONNREFUSED)  # what unix_find_bsd answers
        if target == OUTSIDE_SOCKET:
            return Verdict("answer", errno.ECONNREFUSED, True, "bound outside the run")
        return Verdict("answer", errno.ECONNREFUSED, True, "cannot be resolved in the caller's view")
    if sock_family not in CONFINED_FAMILIES:
        return Verdict("answer", errno.ECONNREFUSED, True, f"socket family {sock_family} is in no namespace")
    if not same_netns:
        return Verdict("answer", errno.ECONNREFUSED, True, "socket of another network namespace")
    return Verdict("connect")


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
    the stdio relay's pipes, isolation/stdio.py), PASS_FDS, and no other fd (as ``run.spawn``
    does), default SIGPIPE/SIGXFSZ. MediationError when the filter cannot be installed;
    OSError when bwrap cannot be started.

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
            keeper.release()
        finally:
            done.release()
        # bwrap's --die-with-parent is PR_SET_PDEATHSIG, whose "parent" is the *thread* that
        # created it (prctl(2)): this thread stays until the run is over (Keeper.release).
        # Meanwhile it forks what must carry the run's filters (Keeper.fork: the prover).
        keeper.serve()

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
    the run has, not a copy."""

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self._request: Callable[[], None] | None = None
        self._answer: dict[str, object] = {}
        self._done = _thread.allocate_lock()
        self._done.acquire()

    def serve(self) -> None:
        """The spawning thread's life after the spawn: fork on request, until released."""
        while True:
            self._lock.acquire()
            child = self._request
            if child is None:
                return  # released: the run is over
            self._request = None
            try:
                pid = os.fork()
            except OSError as err:
                self._answer = {"error": err}
            else:
                if pid == 0:  # pragma: no cover - the child: runs CHILD, never returns
                    code = 70
                    try:
                        child()
                        code = 0
                    finally:
                        os._exit(code)
                self._answer = {"pid": pid}
            self._done.release()

    def fork(self, child: Callable[[], None]) -> int:
        """Fork from the spawning thread; the child runs CHILD and exits (0, or 70 when it
        raised). The child's pid; OSError when the fork failed."""
        self._request = child
        self._lock.release()
        self._done.acquire()
        answer, self._answer = self._answer, {}
        if "error" in answer:
            raise answer["error"]  # type: ignore[misc]
        return answer["pid"]  # type: ignore[return-value]

    def release(self) -> None:
        if self._lock.locked():
            self._request = None
            self._lock.release()


PIDFD_THREAD = os.O_EXCL  # linux/pidfd.h


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


class Mediator:
    """Answers the connects of one run. ``start()`` it as soon as the listener is received,
    ``set_run_netns()`` as soon as the run's network namespace exists (until then every
    connect is refused), ``stop()`` it in the ending, after the run's processes are gone.

    Threads (leader/followers): one thread at a time (the leader) polls, receives and answers
    notifications itself, so the common case costs no thread switch. Before a connect that may
    block (a blocking socket: a full unix backlog, TCP SYN retries) it marks itself busy; a
    follower (spawned then if none waits) takes the leader role over once that connect has
    lasted STALL, so a blocked connect delays others by at most ~STALL. At most MAX_THREADS
    connects block at once; beyond that the next waits in the kernel. Followers wake every
    STALL only while a leader is busy.
    All signals are blocked in these threads: a connect of ours is never cut short by EINTR.
    """

    MAX_THREADS = 32
    MAX_KNOWN = 256  # socket files of the run held open (O_PATH) as proven inside
    MAX_CALLERS = 8

    def __init__(self, listener: int, arch: str | None = None) -> None:
        from . import syscalls as _linux

        self.arch = arch or os.uname().machine
        if self.arch not in AUDIT_ARCH:
            raise MediationError(f"no connect mediation for {self.arch}")
        self._linux = _linux
        self.listener = listener
        self.audit_arch = AUDIT_ARCH[self.arch]
        self.connect_nr = NR[self.arch]["connect"]
        self.refusals: dict[tuple[str, str], Refusal] = {}
        self.errors: list[str] = []  # mediator faults (each answered ECONNREFUSED)
        self.mediated = 0
        self._diag: sockdiag.DiagSocket | None = None
        self._cookie: int | None = None
        self._cv = threading.Condition()
        self._leader: int | None = None  # thread ident of the one thread that may RECV
        self._busy_since: float | None = None
        self._known: dict[tuple[int, int], int] = {}
        self._idle = 0
        self._threads: list[_thread.LockType] = []  # one lock per thread, held while it runs
        self._closing = False
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.proof_refusals: dict[tuple[str, str], Refusal] = {}
        self._netns_known = threading.Event()
        self._stopping = False
        # Readable once the mediation has stopped on its own (its listener closed under it, a
        # RECV that failed): the supervisor polls it and ends the run, 125 (fail closed).
        self.failed_r, self._failed_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.failure: str | None = None

    # -- life ------------------------------------------------------------------------------
    def start(self) -> None:
        self._spawn()

    def set_run_netns(self, netns_fd: int) -> None:
        """The run's network namespace (an fd of /proc/PID/ns/net of a process of the run)."""
        diag = sockdiag.open_diag(netns_fd)
        self._diag, self._cookie = diag, diag.netns_cookie
        self._netns_known.set()

    def end_proof(self) -> None:
        """The run is proven and released: refusals recorded from now on are the command's.
        (The prover's own tries are refused too, and are not reported.)"""
        with self._cv:
            self.proof_refusals, self.refusals = self.refusals, {}

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

    def stop(self, timeout: float = 2.0) -> None:
        """Close the listener (the kernel answers ENOSYS to whatever is still pending) and end
        the threads. A thread stuck in a connect to a run socket is released when the run's
        processes are gone (its peer closes); it is a daemon thread either way."""
        self._stopping = True
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        for done in list(self._threads):
            if done.acquire(timeout=timeout):
                done.release()
        if self.listener >= 0:
            try:
                os.close(self.listener)
            except OSError:
                pass  # closed under us already (the failure the supervisor has reported)
            self.listener = -1
        os.close(self._wake_r)
        os.close(self._wake_w)
        os.close(self.failed_r)
        os.close(self._failed_w)
        with self._cv:
            for fd in self._known.values():
                os.close(fd)
            self._known.clear()
        if self._diag:
            self._diag.close()

    def summary(self) -> list[dict]:
        return [r.to_json() for r in sorted(self.refusals.values(), key=lambda r: -r.count)]

    def _spawn(self) -> None:
        """One more mediator thread. ``_thread`` directly: ``threading.Thread.start`` waits until
        the new thread runs, a scheduler round trip on every ``no-docker run`` for nothing."""
        if len(self._threads) >= self.MAX_THREADS:
            return
        done = _thread.allocate_lock()
        done.acquire()  # released when the thread ends: stop() joins on it

        def serve() -> None:
            try:
                self._serve()
            finally:
                done.release()

        self._threads.append(done)
        _thread.start_new_thread(serve, ())

    # -- leader/followers ------------------------------------------------------------------
    STALL = 0.01  # a connect blocked this long (s) loses the receiving role to a follower

    def _lead(self) -> bool:
        """Wait until this thread may receive; False when stopping. A follower takes the role
        over from a leader stuck in a connect for STALL (it cannot be in RECV then)."""
        me = threading.get_ident()
        with self._cv:
            while not self._closing:
                stuck = self._busy_since is not None and time.monotonic() - self._busy_since >= self.STALL
                if self._leader is None or stuck:
                    self._leader, self._busy_since = me, None
                    return True
                self._idle += 1
                self._cv.wait(self.STALL if self._busy_since is not None else None)
                self._idle -= 1
            return False

    def _busy(self) -> None:
        """Mark the leader as entering a connect that may block: a follower (spawned now if
        none waits) takes over after STALL. No thread switch unless it does block."""
        with self._cv:
            if self._leader != threading.get_ident():
                return
            self._busy_since = time.monotonic()
            if self._idle:
                self._cv.notify()  # start its STALL clock
            else:
                self._spawn()

    def _unbusy(self) -> None:
        with self._cv:
            if self._leader == threading.get_ident():
                self._busy_since = None

    def _still_leader(self) -> bool:
        with self._cv:
            return self._leader == threading.get_ident() and not self._closing

    def _quit(self) -> None:
        with self._cv:
            self._closing = True
            self._leader = None
            self._cv.notify_all()

    def _serve(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # _signal has both
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        buf = bytearray(NOTIF.size)
        while self._lead():
            while self._still_leader():
                events = dict(poller.poll())
                if self._wake_r in events or events.get(self.listener, 0) & (
                        select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    # Stopping, or every task of the filter is gone (seccomp_notify_poll:
                    # POLLHUP, the run is over), or the listener was closed under us (POLLNVAL).
                    if self._wake_r not in events and events.get(self.listener, 0) & (
                            select.POLLNVAL | select.POLLERR):
                        self._fail("its listener was closed")
                    self._quit()
                    return
                buf[:] = bytes(NOTIF.size)  # RECV refuses a non-zeroed buffer (check_zeroed_user)
                try:
                    fcntl.ioctl(self.listener, SECCOMP_IOCTL_NOTIF_RECV, buf, True)
                except OSError as err:
                    if err.errno in (errno.ENOENT, errno.EINTR):
                        continue  # the caller was killed between poll and RECV
                    self.errors.append(f"RECV: {err}")
                    self._fail(f"receiving a notification failed: {err}")
                    self._quit()
                    return
                self._answer(parse_notification(bytes(buf)))

    # -- one notification ------------------------------------------------------------------
    def _valid(self, nid: int) -> None:
        try:
            fcntl.ioctl(self.listener, SECCOMP_IOCTL_NOTIF_ID_VALID, struct.pack("=Q", nid))
        except OSError as err:
            raise _Gone from err

    def _answer(self, note: Notification) -> None:
        try:
            error = self._mediate(note)
        except _Gone:
            # Most likely nobody waits any more; answer anyway (SEND says ENOENT then): a
            # notification left unanswered would hang its caller for the run's life.
            error = errno.ECONNREFUSED
        except Exception as err:  # a fault of ours: fail closed, say so
            self.errors.append(f"{type(err).__name__}: {err}")
            error = errno.ECONNREFUSED
        self.mediated += 1
        try:
            fcntl.ioctl(self.listener, SECCOMP_IOCTL_NOTIF_SEND, response(note.id, error))
        except OSError:
            pass  # ENOENT: the caller was killed meanwhile; the answer has no reader

    def _mediate(self, note: Notification) -> int:
        """0 or the errno for NOTE. Raises _Gone when the caller's state can no longer be
        trusted to be the caller's."""
        if note.arch != self.audit_arch or note.nr != self.connect_nr:
            return errno.ENOSYS  # the filter notifies nothing else
        nid, pid = note.id, note.pid
        fd, addrlen = _int32(note.args[0]), _int32(note.args[2])
        if not 0 <= addrlen <= SOCKADDR_STORAGE:
            return errno.EINVAL  # move_addr_to_kernel
        raw = b""
        if addrlen:
            try:
                mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as err:
                self._valid(nid)
                raise MediationError(f"/proc/{pid}/mem: {err.strerror}") from err
            try:
                self._valid(nid)  # mem is the caller's (its pid was not reused)
                try:
                    raw = os.pread(mem, addrlen, note.args[1])
                except OSError:
                    raw = b""
            finally:
                os.close(mem)
            self._valid(nid)  # the caller still waits: what we read is its address now
            if len(raw) != addrlen:
                return errno.EFAULT  # what copy_from_user makes of a bad pointer
        # note.pid is the calling *thread*; PIDFD_THREAD (Linux 6.9) names that very task,
        # whose fd table is the one connect(2) uses (a thread may have its own: CLONE_FILES
        # is optional). Older kernels: EINVAL for a non-leader, then the thread group's.
        try:
            try:
                pidfd = os.pidfd_open(pid, PIDFD_THREAD)
            except OSError as err:
                if err.errno != errno.EINVAL:
                    raise
                pidfd = os.pidfd_open(_tgid(pid))
        except OSError as err:
            self._valid(nid)
            raise MediationError(f"pidfd_open({pid}): {err.strerror}") from err
        try:
            self._valid(nid)  # pidfd names the caller
            try:
                sockfd = self._linux.pidfd_getfd(pidfd, fd)
            except OSError as err:
                self._valid(nid)
                if err.errno == errno.EBADF:
                    return errno.EBADF  # what connect(2) says for a bad fd
                raise
        finally:
            os.close(pidfd)
        try:
            self._valid(nid)
            return self._decide_and_connect(note, sockfd, parse_sockaddr(raw))
        finally:
            os.close(sockfd)

    def _decide_and_connect(self, note: Notification, sockfd: int, address: Address) -> int:
        try:
            probe = socket.socket(fileno=sockfd)  # reads SO_DOMAIN; ENOTSOCK for a non-socket
        except OSError as err:
            self._valid(note.id)
            return errno.ENOTSOCK if err.errno == errno.ENOTSOCK else errno.ECONNREFUSED
        try:
            sock_family = probe.family
            cookie = int.from_bytes(probe.getsockopt(socket.SOL_SOCKET, sockdiag.SO_NETNS_COOKIE, 8),
                                    "little")
        finally:
            probe.detach()  # the fd stays ours to close
        if self._cookie is None:
            # A connect before the supervisor has read the init's pid from bwrap: wait for the
            # run's namespace (bounded), rather than refuse a connect of the run's own.
            self._netns_known.wait(5.0)
            self._valid(note.id)
        same = self._cookie is not None and cookie == self._cookie
        target, target_error, pathfd = None, 0, -1
        try:
            if sock_family == socket.AF_UNIX and address.kind == "path":
                target, target_error, pathfd = self._resolve(note, address.name)
            verdict = decide(sock_family, address, same_netns=same, target=target, target_error=target_error)
            if verdict.refused:
                self._record(note.pid, address, verdict.reason)
                self._valid(note.id)
            if verdict.action != "connect":
                return verdict.error
            connect_to = sockaddr_un(b"/proc/self/fd/%d" % pathfd) if pathfd >= 0 else address.raw
            if fcntl.fcntl(sockfd, fcntl.F_GETFL) & os.O_NONBLOCK:
                return self._linux.connect_raw(sockfd, connect_to)  # never sleeps
            self._busy()  # may block (full backlog, SYN retries): others must not wait on it
            try:
                return self._linux.connect_raw(sockfd, connect_to)
            finally:
                self._unbusy()
        finally:
            if pathfd >= 0:
                os.close(pathfd)

    def _resolve(self, note: Notification, path: bytes) -> tuple[str, int, int]:
        """(outcome, errno, O_PATH fd or -1) of PATH in the caller's root and cwd.

        An absolute path is opened with RESOLVE_IN_ROOT from the caller's root (absolute
        symlinks and ``..`` stay inside it, as for the caller). A relative path must start
        at the caller's cwd while ``..`` stops at the caller's root, which openat2 cannot
        express with one dirfd: we try RESOLVE_BENEATH from the cwd (exact whenever the walk
        stays below the cwd), and otherwise rebuild the cwd as a path inside the root (see
        :meth:`_cwd_in_root`). RESOLVE_NO_MAGICLINKS: a ``/proc/PID/root``-style jump would
        be resolved with *our* view of /proc; such a path is refused (fails closed)."""
        linux = self._linux
        flags = os.O_PATH | os.O_CLOEXEC
        in_root = linux.RESOLVE_IN_ROOT | linux.RESOLVE_NO_MAGICLINKS
        pid = note.pid
        try:
            if path.startswith(b"/"):
                base = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    self._valid(note.id)
                    fd = linux.openat2(base, path, flags, in_root)
                finally:
                    os.close(base)
            else:
                base = os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    self._valid(note.id)
                    try:
                        fd = linux.openat2(base, path, flags,
                                           linux.RESOLVE_BENEATH | linux.RESOLVE_NO_MAGICLINKS)
                    except OSError as err:
                        if err.errno != errno.EXDEV:
                            raise
                        fd = self._open_from_root(note, base, path, flags, in_root)
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
            with self._cv:
                if key in self._known:
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
        never another socket. A miss (new socket, or evicted) costs one sock_diag dump."""
        with self._cv:
            if key in self._known or self._closing:
                return
            if len(self._known) >= self.MAX_KNOWN:
                os.close(self._known.pop(next(iter(self._known))))  # the oldest
            self._known[key] = os.dup(fd)

    def _open_from_root(self, note: Notification, cwd: int, path: bytes, flags: int, in_root: int) -> int:
        """Open relative PATH whose walk leaves the cwd: as ``<cwd inside the root>/PATH``
        with RESOLVE_IN_ROOT from the root. The cwd's place in the root comes from the
        /proc links (d_path from our root), and is trusted only when that place opens to the
        very directory of the cwd fd (same st_dev, st_ino); else OSError(EXDEV): refused."""
        pid = note.pid
        root_link = os.fsencode(os.readlink(f"/proc/{pid}/root"))
        cwd_link = os.fsencode(os.readlink(f"/proc/{pid}/cwd"))
        if root_link == b"/":
            inner = cwd_link
        elif cwd_link == root_link or cwd_link.startswith(root_link + b"/"):
            inner = cwd_link[len(root_link):] or b"/"
        else:
            raise OSError(errno.EXDEV, "cwd outside the root")
        root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._valid(note.id)
            check = self._linux.openat2(root, inner, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, in_root)
            try:
                a, b = os.fstat(check), os.fstat(cwd)
                if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
                    raise OSError(errno.EXDEV, "cwd moved")
            finally:
                os.close(check)
            return self._linux.openat2(root, inner.rstrip(b"/") + b"/" + path, flags, in_root)
        finally:
            os.close(root)

    def _record(self, pid: int, address: Address, reason: str) -> None:
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().rstrip(b"\n").decode("utf-8", "replace")
        except OSError:
            comm = "?"
        key = (address.describe(), reason)
        with self._cv:
            entry = self.refusals.setdefault(key, Refusal(key[0], reason))
            entry.count += 1
            if len(entry.callers) < self.MAX_CALLERS:
                entry.callers.append((pid, comm))
