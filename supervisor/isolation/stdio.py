"""P7 for stdio: no socket on fd 0, 1 or 2 crosses into the run.

Why: a socket keeps the network namespace it was created in. An unconnected TCP socket on
stdin, created outside, reaches the host's loopback engine port with ``connect(0, ...)`` from
inside the run (red-team finding, issue 16 C.8), and an unconnected UDP one reaches any host
port with ``sendto`` — which no connect mediation sees. A connected unix socket can also
*receive* descriptors (SCM_RIGHTS) from its peer, e.g. another socket of the host's namespace.

What a user expects: stdio that *is* a socket is ordinary — socat ``EXEC:``, systemd units with
``StandardInput=socket``, inetd-style services, CI runners and ssh sessions that hand a
``socketpair`` to their child. Refusing every socket would break all of them. So a connected
stream socket is **relayed**: the run gets a pipe, and the supervisor copies bytes between the
pipe and the socket (as ``sudo``'s ``use_pty`` and ``script`` do for terminals). Only bytes
cross: the peer is the one the caller connected before the run existed, and the run cannot
point it anywhere else, shut it down, or receive a descriptor through it.

Refused (125, P7, naming the fd and what to do), because no relay keeps their meaning and
each can reach outside: an unconnected or listening socket (connect/accept/sendto anywhere),
a datagram or seqpacket socket (re-connect, sendto), and a stream socket connected to a
listener of this machine — a pathname or abstract unix name, or a loopback TCP address: the
caller connected stdio to a local daemon, perhaps an engine, and a relay would hand it to the
run (the rule P7 had before the relay).

Inside, the probe's P7 proves the result on its own (any socket on 0-2 of another network
namespace refuses the run), and the connect mediation refuses a connect on such a socket too:
three layers, each enough for ``connect``.

The facts are read from the descriptors (thin, :func:`stdio_facts`); what to do with them is a
pure function (:func:`plan`), covered by unit tests.
"""

from __future__ import annotations

import _socket as socket  # not socket: its enums cost more than this module's work (run path)
import errno
import os
import select
import stat

from ..errors import NotProven
from ..record import record

PASS, RELAY = "pass", "relay"
REMEDY = "give the command a pipe, a file or a terminal there instead: `... | no-docker run -- CMD`"
LOOPBACK_V4 = "127."
LOOPBACK_V6 = ("::1", "::ffff:127.")


@record
class Facts:
    """What no-docker needs to know of one stdio descriptor."""

    fd: int
    socket: bool = False
    identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino): the same socket on two fds
    sock_type: int = 0
    family: int = 0
    listening: bool = False
    peer: object = None  # getpeername(); None when not connected
    peer_is_ours: bool = False  # the peer's IP address is one of this machine's (address_is_ours)
    path_only: bool = False  # an O_PATH descriptor of a socket file: no socket operation works on it


def peer_is_local_listener(family: int, peer: object) -> bool:
    """Whether PEER is a listener of this machine: a named unix socket (pathname or abstract:
    a socketpair's peer has no name) or a TCP loopback address (pure)."""
    if family == socket.AF_UNIX:
        name = peer.strip(b"\0") if isinstance(peer, bytes) else str(peer or "").strip("\0")
        return bool(name)
    if family in (socket.AF_INET, socket.AF_INET6) and isinstance(peer, tuple) and peer:
        host = str(peer[0])
        return host.startswith(LOOPBACK_V4) or host.startswith(LOOPBACK_V6)
    return False


def address_is_ours(family: int, host: str) -> bool:
    """Whether HOST is an address of this machine (of the caller's network namespace): a
    socket can be bound to it. A TCP peer at such an address is a listener (or a client) of
    this machine reached through a non-loopback address, e.g. the host's own eth0 address
    with an engine on 0.0.0.0:2375 (found by the red-team review of issue 13): as local as
    127.0.0.1. An error other than "not an address here" counts as ours (fail closed)."""
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.bind((host, 0))
    except OSError as err:
        return err.errno != errno.EADDRNOTAVAIL
    finally:
        probe.close()
    return True


def plan(facts: list[Facts]) -> list[str]:
    """PASS or RELAY for each descriptor; NotProven("P7") for a socket that must not cross (pure)."""
    actions = []
    for f in facts:
        if not f.socket:
            actions.append(PASS)
            continue
        what = f"fd {f.fd} is a socket"
        if f.path_only:
            # open(2): an O_PATH fd names the file without opening it, but connect(2) to
            # /proc/self/fd/N reaches whatever listens on that socket file (issue 24: found as a
            # traceback). No relay exists for a name.
            raise NotProven("P7", f"fd {f.fd} is an O_PATH descriptor of a socket file: through "
                            f"/proc/self/fd/{f.fd} the run could connect to what listens there", REMEDY)
        if f.listening:
            raise NotProven("P7", f"{what} listening for connections: no relay keeps it, and the run "
                            "would accept from outside", REMEDY)
        if f.sock_type != socket.SOCK_STREAM:
            raise NotProven("P7", f"{what} of type {f.sock_type} (not a stream): it can send to any "
                            "address outside the run", REMEDY)
        if f.peer is None:
            raise NotProven("P7", f"{what} that is not connected: it could connect outside the run "
                            "(it keeps the network namespace it was made in)", REMEDY)
        if f.peer_is_ours or peer_is_local_listener(f.family, f.peer):
            raise NotProven("P7", f"{what} connected to {f.peer!r}, a listener of this machine "
                            "(perhaps an engine): relaying it would hand it to the run", REMEDY)
        actions.append(RELAY)
    return actions


def stdio_facts() -> list[Facts]:
    """The facts of fds 0-2 (a closed fd is a plain PASS: nothing crosses)."""
    out = []
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            out.append(Facts(fd))
            continue
        if not stat.S_ISSOCK(st.st_mode):
            out.append(Facts(fd))
            continue
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError as err:
            if err.errno not in (errno.EBADF, errno.ENOTSOCK):
                raise
            # fstat sees the socket file; the descriptor itself is O_PATH (F_GETFL says so too)
            out.append(Facts(fd, True, (st.st_dev, st.st_ino), path_only=True))
            continue
        try:
            sock_type = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
            listening = bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
            try:
                peer = sock.getpeername()
            except OSError:
                peer = None
            ours = (sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(peer, tuple)
                    and address_is_ours(sock.family, str(peer[0])))
            out.append(Facts(fd, True, (st.st_dev, st.st_ino), sock_type, sock.family, listening, peer,
                             ours))
        finally:
            sock.close()
    return out


class Relay:
    """Pipes for the stdio sockets of the caller, and the threads that copy through them.

    :meth:`fds` are what the run gets as 0, 1, 2; the supervisor closes its copies of the
    run's ends once the sandbox is spawned (:meth:`spawned`), and :meth:`finish` after the
    run's processes are gone: the output threads then read to EOF and write the rest out.
    """

    def __init__(self, facts: list[Facts], actions: list[str]) -> None:
        self._run_ends: list[int] = []
        self._threads: list = []  # threading.Thread, started once the sandbox is spawned
        self._stop_r, self._stop_w = os.pipe()
        targets = [f.fd for f in facts]
        outputs: dict[tuple[int, int], int] = {}  # one pipe per socket: stdout/stderr order kept
        for f, action in zip(facts, actions, strict=True):
            if action != RELAY:
                continue
            if f.fd == 0:
                read_end, write_end = os.pipe()
                targets[0] = read_end
                self._run_ends.append(read_end)
                self._thread(self._copy_in, os.dup(0), write_end)
            elif f.identity in outputs:
                targets[f.fd] = outputs[f.identity]
            else:
                read_end, write_end = os.pipe()
                targets[f.fd] = outputs[f.identity] = write_end
                self._run_ends.append(write_end)
                self._thread(self._copy_out, read_end, os.dup(f.fd))
        self.fds = tuple(targets)

    def _thread(self, target, *args: int) -> None:  # noqa: ANN001
        import threading  # only when a socket is on stdio: not on the common run path

        self._threads.append(threading.Thread(target=target, args=args, daemon=True, name="no-docker-stdio"))

    def spawned(self) -> None:
        """The sandbox holds the run's ends now: ours go, so EOF comes when the run's do; the
        copying starts (not before: the spawn forks, and a fork should see no other thread)."""
        for fd in self._run_ends:
            os.close(fd)
        self._run_ends = []
        for thread in self._threads:
            if thread.ident is None:
                thread.start()

    def finish(self, timeout: float) -> None:
        """After the run: stop reading the caller's input, write out what the run wrote."""
        self.spawned()
        try:
            os.write(self._stop_w, b"x")
        except OSError:
            pass
        for thread in self._threads:
            thread.join(timeout)  # a peer that never reads must not hold the supervisor
        os.close(self._stop_w)
        os.close(self._stop_r)

    def _copy_in(self, sock: int, pipe: int) -> None:
        try:
            while True:
                ready, _, _ = select.select([sock, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                try:
                    data = os.read(sock, 65536)
                except BlockingIOError:
                    continue  # the caller's socket may be O_NONBLOCK; we never change its flags
                except OSError:
                    return
                if not data or not _write_all(pipe, data):
                    return  # EOF from the peer, or the run closed its stdin
        finally:
            os.close(sock)
            os.close(pipe)  # the run reads EOF

    def _copy_out(self, pipe: int, sock: int) -> None:
        try:
            while True:
                data = os.read(pipe, 65536)  # EOF once every process of the run has closed it
                if not data or not _write_all(sock, data):
                    return  # on EPIPE, closing our end gives the run SIGPIPE, as the socket would
        except OSError:
            return
        finally:
            os.close(sock)
            os.close(pipe)


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
        except OSError as err:
            if err.errno in (errno.EPIPE, errno.ECONNRESET, errno.EBADF):
                return False
            raise
    return True


def prepare() -> Relay:
    """P7 for stdio, before the sandbox exists: the relay whose ``fds`` the sandbox gets as
    0-2 (0, 1, 2 themselves when none is a socket). NotProven for a socket that must not cross."""
    facts = stdio_facts()
    return Relay(facts, plan(facts))
