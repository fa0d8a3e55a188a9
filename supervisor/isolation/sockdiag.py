"""Bound unix sockets and listening TCP ports of a network namespace, from the kernel's
``sock_diag`` netlink interface (sock_diag(7)), byte-exact.

Why not ``/proc/net/unix``: it prints a socket's path as raw bytes after a space and ends the
line with ``\\n``, so a path holding a newline (any local user can bind one) makes the file
ambiguous, and a listing that cannot be parsed refuses every run. sock_diag hands the name over
as a length-prefixed netlink attribute (``UNIX_DIAG_NAME``): a newline, invalid UTF-8 or a
108-byte path comes out exactly, as ``bytes``.

Layout: small pure builders and parsers over bytes (netlink framing, attributes, the unix and
inet diag messages), then :class:`DiagSocket`, the only code that talks to the kernel. Every
failure (short or garbled message, NLMSG_ERROR, a socket error) is a :class:`SockDiagError`;
nothing here returns a partial dump as if it were whole.

Sources: linux/netlink.h, linux/sock_diag.h, linux/unix_diag.h, linux/inet_diag.h;
net/unix/diag.c (what the kernel puts in each attribute), include/linux/kdev_t.h (dev_t).
"""

from __future__ import annotations

import _socket  # not socket: its enums cost more than a whole dump (this is on the run path)
import _thread
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# --- netlink framing (linux/netlink.h) -------------------------------------------------------
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_NOOP, NLMSG_ERROR, NLMSG_DONE, NLMSG_OVERRUN = 1, 2, 3, 4
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_DUMP = 0x1, 0x2, 0x300
_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_NLATTR = struct.Struct("=HH")  # nla_len, nla_type

# --- unix diag (linux/unix_diag.h) ----------------------------------------------------------
UDIAG_SHOW_NAME, UDIAG_SHOW_VFS, UDIAG_SHOW_RQLEN = 0x1, 0x2, 0x10
UNIX_DIAG_NAME, UNIX_DIAG_VFS, UNIX_DIAG_RQLEN = 0, 1, 4
_UNIX_DIAG_REQ = struct.Struct("=BBHIIIII")  # family, protocol, pad, states, ino, show, cookie[2]
_UNIX_DIAG_MSG = struct.Struct("=BBBBIII")  # family, type, state, pad, ino, cookie[2]
_UNIX_DIAG_VFS = struct.Struct("=II")  # udiag_vfs_ino, udiag_vfs_dev
_UNIX_DIAG_RQLEN = struct.Struct("=II")  # rqueue, wqueue (for a listener: backlog, max backlog)
ALL_STATES = 0xFFFFFFFF
TCP_ESTABLISHED, TCP_CLOSE, TCP_LISTEN = 1, 7, 10

# --- inet diag (linux/inet_diag.h) ----------------------------------------------------------
# inet_diag_req_v2: family, protocol, ext, pad, states, then inet_diag_sockid (48 bytes).
_INET_DIAG_REQ = struct.Struct("=BBBBI48x")
# inet_diag_msg: family, state, timer, retrans; sockid {sport(be16), dport(be16), src[16],
# dst[16], if, cookie[2]}; expires, rqueue, wqueue, uid, inode.
_INET_DIAG_MSG = struct.Struct("=BBBB2s2s16s16sIII IIIII".replace(" ", ""))

# A dump's skb is at most ~32 KiB (netlink_dump); 64 KiB leaves room, and MSG_TRUNC is checked.
_RECV_SIZE = 65536


class SockDiagError(Exception):
    """A sock_diag dump could not be made or did not parse; the message says why."""


# --- dev_t ----------------------------------------------------------------------------------
def kdev_to_st_dev(kdev: int) -> int:
    """The ``st_dev`` that stat(2) reports for a file system whose kernel-internal dev_t is
    KDEV (what ``UNIX_DIAG_VFS`` carries: ``d_sb->s_dev``, net/unix/diag.c).

    The kernel's dev_t is ``major << 20 | minor`` (MINORBITS 20, include/linux/kdev_t.h);
    userspace's is glibc's 64-bit ``makedev``: minor bits 0-7 and 20-43, major bits 8-19 and
    32-43 (sys/sysmacros.h). They agree only for major 0 (tmpfs, anonymous devices), which is
    why a test on /tmp-as-tmpfs alone would not catch a missing conversion."""
    if not 0 <= kdev < 1 << 32:
        raise SockDiagError(f"kernel dev_t out of range: {kdev!r}")
    major, minor = kdev >> 20, kdev & 0xFFFFF
    return (((major & 0xFFFFF000) << 32) | ((major & 0xFFF) << 8)
            | ((minor & 0xFFFFFF00) << 12) | (minor & 0xFF))


def st_dev_to_kdev(st_dev: int) -> int:
    """Inverse of :func:`kdev_to_st_dev`; SockDiagError if ST_DEV has no 32-bit kernel form."""
    major = ((st_dev >> 8) & 0xFFF) | ((st_dev >> 32) & 0xFFFFF000)
    minor = (st_dev & 0xFF) | ((st_dev >> 12) & 0xFFFFFF00)
    if major >= 1 << 12 or minor >= 1 << 20 or kdev_to_st_dev(major << 20 | minor) != st_dev:
        raise SockDiagError(f"st_dev {st_dev:#x} has no kernel dev_t form")
    return major << 20 | minor


# --- builders (used by the collectors, and by the property tests as the parsers' inverse) ----
def _align(n: int) -> int:
    return (n + 3) & ~3  # NLMSG_ALIGN and NLA_ALIGN are both 4


def nlmsg(kind: int, flags: int, seq: int, payload: bytes, pid: int = 0) -> bytes:
    """One netlink message, padded to the 4-byte boundary."""
    length = _NLMSGHDR.size + len(payload)
    return _NLMSGHDR.pack(length, kind, flags, seq, pid) + payload + bytes(_align(length) - length)


def nlattr(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to the 4-byte boundary."""
    length = _NLATTR.size + len(payload)
    return _NLATTR.pack(length, kind) + payload + bytes(_align(length) - length)


def unix_request(seq: int = 1, states: int = ALL_STATES,
                 show: int = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS) -> bytes:
    """A dump request for every AF_UNIX socket of the namespace (sock_diag(7) example)."""
    body = _UNIX_DIAG_REQ.pack(_socket.AF_UNIX, 0, 0, states, 0, show, 0xFFFFFFFF, 0xFFFFFFFF)
    return nlmsg(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, body)


def inet_request(family: int, seq: int = 1, states: int = 1 << TCP_LISTEN) -> bytes:
    """A dump request for TCP sockets of FAMILY in STATES (default: listening)."""
    body = _INET_DIAG_REQ.pack(family, _socket.IPPROTO_TCP, 0, 0, states)
    return nlmsg(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, body)


# --- pure parsers ---------------------------------------------------------------------------
class UnixSocket:
    """One AF_UNIX socket as sock_diag shows it.

    ``name`` is the raw ``sun_path`` the socket is bound to: ``None`` if unbound, a leading
    NUL for an abstract name (all bytes significant), else the path without the NUL the kernel
    stores after it. ``vfs`` is (kernel dev_t, inode) of the socket file, for pathname sockets.
    (A plain class, not a dataclass: importing dataclasses costs milliseconds on the run path.)
    """

    __slots__ = ("inode", "sock_type", "state", "name", "vfs", "rqlen")

    def __init__(self, inode: int, sock_type: int, state: int, name: bytes | None = None,
                 vfs: tuple[int, int] | None = None, rqlen: tuple[int, int] | None = None) -> None:
        self.inode, self.sock_type, self.state = inode, sock_type, state
        self.name, self.vfs, self.rqlen = name, vfs, rqlen

    def _key(self) -> tuple:
        return (self.inode, self.sock_type, self.state, self.name, self.vfs, self.rqlen)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnixSocket) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"UnixSocket{self._key()!r}"

    @property
    def abstract(self) -> bool:
        return self.name is not None and self.name[:1] == b"\0"

    @property
    def path(self) -> bytes | None:
        return self.name if self.name and not self.abstract else None

    @property
    def file_id(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the socket file, comparable with os.stat()."""
        return None if self.vfs is None else (kdev_to_st_dev(self.vfs[0]), self.vfs[1])


class InetSocket:
    """One listening TCP socket: family, state, port, address (4 or 16 bytes, network order)."""

    __slots__ = ("family", "state", "port", "address", "inode")

    def __init__(self, family: int, state: int, port: int, address: bytes, inode: int) -> None:
        self.family, self.state, self.port, self.address, self.inode = family, state, port, address, inode

    def _key(self) -> tuple:
        return (self.family, self.state, self.port, self.address, self.inode)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InetSocket) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"InetSocket{self._key()!r}"


def iter_messages(data: bytes, seq: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(type, flags, payload) of each netlink message in one datagram.

    Raises SockDiagError on a message that does not fit the buffer, on NLMSG_ERROR with a
    non-zero code, on NLMSG_OVERRUN, and on a sequence number other than SEQ (a stale reply).
    """
    offset = 0
    while offset < len(data):
        if len(data) - offset < _NLMSGHDR.size:
            raise SockDiagError(f"netlink: {len(data) - offset} stray bytes at offset {offset}")
        length, kind, flags, got_seq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > len(data):
            raise SockDiagError(f"netlink: bad message length {length} at offset {offset}")
        if seq is not None and got_seq != seq:
            raise SockDiagError(f"netlink: reply for sequence {got_seq}, expected {seq}")
        payload = data[offset + _NLMSGHDR.size:offset + length]
        if kind == NLMSG_ERROR:
            if len(payload) < 4:
                raise SockDiagError("netlink: short NLMSG_ERROR")
            code = -struct.unpack_from("=i", payload)[0]
            if code:  # 0 is an ACK
                raise SockDiagError(f"sock_diag: {os.strerror(code)} (errno {code})")
        elif kind == NLMSG_OVERRUN:
            raise SockDiagError("netlink: overrun, data lost")
        elif kind != NLMSG_NOOP:
            yield kind, flags, payload
        # the last message of a datagram may omit its padding
        offset = min(len(data), offset + _align(length))


def iter_attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each netlink attribute; SockDiagError if one overruns DATA."""
    offset = 0
    while offset < len(data):
        if len(data) - offset < _NLATTR.size:
            raise SockDiagError(f"netlink: {len(data) - offset} stray attribute bytes")
        length, kind = _NLATTR.unpack_from(data, offset)
        if length < _NLATTR.size or offset + length > len(data):
            raise SockDiagError(f"netlink: bad attribute length {length} at offset {offset}")
        yield kind & 0x3FFF, data[offset + _NLATTR.size:offset + length]  # strip NLA_F_* bits
        offset = min(len(data), offset + _align(length))


def parse_unix_name(raw: bytes) -> bytes:
    """The bound name from a UNIX_DIAG_NAME payload (``addr->len - 2`` bytes of sun_path).

    For a pathname the kernel stores strlen + 1 bytes (unix_bind_bsd: the trailing NUL), so the
    path is everything before the first NUL; an abstract name (leading NUL) is kept whole."""
    if raw[:1] == b"\0":
        return raw
    return raw.split(b"\0", 1)[0]


def parse_unix_msg(payload: bytes) -> UnixSocket:
    """One SOCK_DIAG_BY_FAMILY payload of a unix dump."""
    if len(payload) < _UNIX_DIAG_MSG.size:
        raise SockDiagError(f"unix_diag: short message ({len(payload)} bytes)")
    family, sock_type, state, _pad, inode, _c0, _c1 = _UNIX_DIAG_MSG.unpack_from(payload)
    if family != _socket.AF_UNIX:
        raise SockDiagError(f"unix_diag: family {family} in a unix dump")
    name = vfs = rqlen = None
    for kind, value in iter_attrs(payload[_UNIX_DIAG_MSG.size:]):
        if kind == UNIX_DIAG_NAME:
            if not value:
                raise SockDiagError("unix_diag: empty UNIX_DIAG_NAME")
            name = parse_unix_name(value)
        elif kind == UNIX_DIAG_VFS:
            if len(value) != _UNIX_DIAG_VFS.size:
                raise SockDiagError(f"unix_diag: UNIX_DIAG_VFS of {len(value)} bytes")
            ino, dev = _UNIX_DIAG_VFS.unpack(value)
            vfs = (dev, ino)
        elif kind == UNIX_DIAG_RQLEN:
            if len(value) != _UNIX_DIAG_RQLEN.size:
                raise SockDiagError(f"unix_diag: UNIX_DIAG_RQLEN of {len(value)} bytes")
            rqlen = _UNIX_DIAG_RQLEN.unpack(value)
    return UnixSocket(inode=inode, sock_type=sock_type, state=state, name=name, vfs=vfs, rqlen=rqlen)


def parse_inet_msg(payload: bytes) -> InetSocket:
    """One SOCK_DIAG_BY_FAMILY payload of an inet dump."""
    if len(payload) < _INET_DIAG_MSG.size:
        raise SockDiagError(f"inet_diag: short message ({len(payload)} bytes)")
    fields = _INET_DIAG_MSG.unpack_from(payload)
    family, state, sport, src, inode = fields[0], fields[1], fields[4], fields[6], fields[-1]
    if family == _socket.AF_INET:
        address = src[:4]
    elif family == _socket.AF_INET6:
        address = src
    else:
        raise SockDiagError(f"inet_diag: family {family} in an inet dump")
    return InetSocket(family=family, state=state, port=int.from_bytes(sport, "big"), address=address,
                      inode=inode)


def parse_dump(data: bytes, seq: int | None = None) -> tuple[list[bytes], bool]:
    """(SOCK_DIAG_BY_FAMILY payloads, done?) of one datagram of a dump reply.

    NLMSG_DONE carries an int: non-zero means the kernel ended the dump on an error (e.g. an
    interrupted dump), which must not pass as a short but complete listing."""
    payloads: list[bytes] = []
    for kind, _flags, payload in iter_messages(data, seq):
        if kind == NLMSG_DONE:
            if len(payload) >= 4 and (code := -struct.unpack_from("=i", payload)[0]):
                raise SockDiagError(f"sock_diag: dump ended with {os.strerror(abs(code))}")
            return payloads, True
        if kind != SOCK_DIAG_BY_FAMILY:
            raise SockDiagError(f"netlink: unexpected message type {kind}")
        payloads.append(payload)
    return payloads, False


def parse_bound_files(data: bytes, seq: int | None = None) -> tuple[set[tuple[int, int]], bool]:
    """(st_dev, st_ino) of each socket file in one datagram of a unix dump, and done?

    The mediator's per-connect question, answered without building a UnixSocket per socket:
    the same framing checks as :func:`parse_dump` (it is called on the same bytes), with one
    pass over the attributes looking for UNIX_DIAG_VFS only."""
    found: set[tuple[int, int]] = set()
    payloads, done = parse_dump(data, seq)
    unpack_attr, unpack_vfs, head = _NLATTR.unpack_from, _UNIX_DIAG_VFS.unpack_from, _UNIX_DIAG_MSG.size
    for payload in payloads:
        if len(payload) < head:
            raise SockDiagError(f"unix_diag: short message ({len(payload)} bytes)")
        offset, end = head, len(payload)
        while offset < end:
            if end - offset < 4:
                raise SockDiagError("netlink: stray attribute bytes")
            length, kind = unpack_attr(payload, offset)
            if length < 4 or offset + length > end:
                raise SockDiagError(f"netlink: bad attribute length {length}")
            if kind & 0x3FFF == UNIX_DIAG_VFS:
                if length != 4 + _UNIX_DIAG_VFS.size:
                    raise SockDiagError(f"unix_diag: UNIX_DIAG_VFS of {length - 4} bytes")
                ino, dev = unpack_vfs(payload, offset + 4)
                found.add((kdev_to_st_dev(dev), ino))
            offset += (length + 3) & ~3
    return found, done


# --- the kernel boundary --------------------------------------------------------------------
class DiagSocket:
    """A NETLINK_SOCK_DIAG socket. Dumps describe the network namespace the socket was
    *created* in (sock_net of the netlink socket, net/core/sock_diag.c), whichever namespace
    the caller is in later: so one socket made inside a run's namespace serves the whole run.

    Not thread-safe: one dump at a time (callers hold :attr:`lock`)."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.lock = _thread.allocate_lock()
        self._seq = 0
        self.netns_cookie = int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, SO_NETNS_COOKIE, 8), "little")

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> DiagSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dump(self, build: object, parse: object = parse_dump) -> list:
        """Send the request BUILD(seq) makes; PARSE(datagram, seq) -> (items, done) until done."""
        with self.lock:
            self._seq = (self._seq + 1) & 0xFFFFFFFF or 1
            seq = self._seq
            try:
                self.sock.send(build(seq))  # type: ignore[operator]
                items: list = []
                while True:
                    data, _anc, flags, _addr = self.sock.recvmsg(_RECV_SIZE)
                    if flags & _socket.MSG_TRUNC:
                        raise SockDiagError("netlink: reply truncated")
                    if not data:
                        raise SockDiagError("netlink: the kernel ended the dump early")
                    found, done = parse(data, seq)  # type: ignore[operator]
                    items += found
                    if done:
                        return items
            except OSError as err:
                raise SockDiagError(f"sock_diag: {err.strerror or err}") from err

    def unix_sockets(self, states: int = ALL_STATES,
                     show: int = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS) -> list[UnixSocket]:
        """Every AF_UNIX socket of the namespace in STATES (one dump)."""
        return [parse_unix_msg(p) for p in self._dump(lambda seq: unix_request(seq, states, show))]

    def bound_files(self) -> set[tuple[int, int]]:
        """(st_dev, st_ino) of every socket file bound in the namespace (any type or state)."""
        return set(self._dump(lambda seq: unix_request(seq, ALL_STATES, UDIAG_SHOW_VFS), parse_bound_files))

    def tcp_listeners(self) -> list[InetSocket]:
        """Listening TCP sockets of the namespace, IPv4 and IPv6."""
        found: list[InetSocket] = []
        for family in (_socket.AF_INET, _socket.AF_INET6):
            found += [parse_inet_msg(p) for p in self._dump(lambda seq, f=family: inet_request(f, seq))]
        return found


SO_NETNS_COOKIE = 71  # asm-generic/socket.h; Linux 5.14: the namespace's 64-bit cookie


def _new_netlink() -> _socket.socket:
    return _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW | _socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)


NS_GET_USERNS = 0xB701  # _IO(NSIO, 0x1), linux/nsfs.h: the user namespace that owns a namespace


def owning_userns(ns_fd: int) -> int:
    """An fd of the user namespace that owns the namespace NS_FD refers to (ioctl_ns(2)).

    Not the user namespace of a process of the run: bwrap's ``--disable-userns`` leaves the run
    in a user namespace nested in the one that owns its network namespace, where joining
    would give no capability over the network namespace (netns_install needs CAP_SYS_ADMIN
    over its owner)."""
    import fcntl

    return fcntl.ioctl(ns_fd, NS_GET_USERNS)


def _netlink_through_a_child(netns_fd: int, userns_fd: int) -> _socket.socket:
    """A netlink socket made inside NETNS_FD by a forked child that first joins USERNS_FD (the
    namespace's owner): how a supervisor that is not root reaches the run's network namespace.

    setns(2) into a user namespace needs a single-threaded caller, and gives CAP_SYS_ADMIN
    there to the owner's processes (user_namespaces(7)): a forked child is single-threaded,
    joins, makes the socket and hands it over SCM_RIGHTS, then exits; nothing of ours stays
    in the run's namespaces. Nothing is imported after the fork."""
    from . import syscalls as _linux

    _linux.load()
    setns, make, clone_newuser, clone_newnet = _linux.setns, _new_netlink, 0x10000000, _linux.CLONE_NEWNET
    mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
    rights = struct.Struct("=i")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child always exits here
        try:
            mine.close()
            setns(userns_fd, clone_newuser)
            setns(netns_fd, clone_newnet)
            made = make()
            theirs.sendmsg([b"S"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights.pack(made.fileno()))])
            os._exit(0)
        except OSError as err:  # the parent sees no socket and names the errno
            os._exit(err.errno if err.errno and 0 < err.errno < 255 else 255)
        except BaseException:  # noqa: BLE001 - the parent sees no socket and says so
            os._exit(255)
    theirs.close()
    try:
        mine.settimeout(10)
        _msg, ancillary, _flags, _addr = mine.recvmsg(1, _socket.CMSG_SPACE(rights.size))
    finally:
        mine.close()
        _, status = os.waitpid(pid, 0)
    fds = [rights.unpack(data[:rights.size])[0] for level, kind, data in ancillary
           if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS and len(data) >= rights.size]
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        code = os.waitstatus_to_exitcode(status)
        why = os.strerror(code) if 0 < code < 255 else f"exit status {code}"
        raise SockDiagError(f"the child joining the namespace made no socket ({why}; as an ordinary user "
                            "only a namespace whose owner we made can be joined)")
    return _socket.socket(fileno=fds[0])


def _is_our_netns(netns_fd: int) -> bool:
    """NETNS_FD is the network namespace this thread is in (the same nsfs inode)."""
    theirs, ours = os.fstat(netns_fd), os.stat("/proc/thread-self/ns/net")
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def open_diag(netns_fd: int | None = None) -> DiagSocket:
    """A DiagSocket for the caller's network namespace, or for the one NETNS_FD refers to
    (an fd of ``/proc/PID/ns/net``). Without CAP_SYS_ADMIN here, a forked child joins the
    namespace's owning user namespace (ours when we made it, through bwrap), then the namespace.

    For another namespace the netlink socket must be *created* there: a dedicated thread
    joins the namespace with setns(2) (only that thread moves: the network namespace is per
    task, setns(2) NOTES), creates the socket, and returns; the thread then ends, so no later
    code of ours ever runs in the run's namespace even if moving back failed. Needs
    CAP_SYS_ADMIN in our own user namespace and in the namespace's owner (netns_install)."""
    try:
        if netns_fd is None or _is_our_netns(netns_fd):
            # Our own namespace needs no setns(2) (nor the rights it takes).
            return DiagSocket(_new_netlink())
        result: list[_socket.socket | BaseException] = []

        def inside() -> None:
            from . import syscalls as _linux
            try:
                home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    _linux.setns(netns_fd, _linux.CLONE_NEWNET)
                    try:
                        result.append(_new_netlink())
                    finally:
                        _linux.setns(home, _linux.CLONE_NEWNET)
                finally:
                    os.close(home)
            except BaseException as err:  # handed to the caller's thread below
                result.append(err)

        done = _thread.allocate_lock()
        done.acquire()

        def run_inside() -> None:
            try:
                inside()
            finally:
                done.release()

        _thread.start_new_thread(run_inside, ())
        done.acquire()  # the thread has left the namespace (or ended) by now
        errors = [r for r in result if isinstance(r, BaseException)]
        socks = [r for r in result if isinstance(r, _socket.socket)]
        if not socks and errors and isinstance(errors[0], OSError) and errors[0].errno == 1:
            # EPERM: not root. The owner's way: a child joins the namespace's owning user
            # namespace (ours to enter when we made it, through bwrap), then the namespace.
            owner = owning_userns(netns_fd)
            try:
                return DiagSocket(_netlink_through_a_child(netns_fd, owner))
            finally:
                os.close(owner)
        if errors or len(socks) != 1:
            for sock in socks:
                sock.close()
            raise errors[0] if errors else SockDiagError("the setns thread made no socket")
        return DiagSocket(socks[0])
    except OSError as err:
        raise SockDiagError(f"cannot open sock_diag: {err.strerror or err}") from err
