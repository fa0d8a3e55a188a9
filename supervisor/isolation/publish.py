"""``--publish [127.0.0.1:]PORT``: a loopback TCP port of the host, forwarded to the same port
on the run's own loopback (DESIGN §3), for servers that must be reached from outside (e.g.
cosmic-ray's HTTP workers).

How: the supervisor listens on the host's ``127.0.0.1:PORT`` (before the run starts, so a
taken port is refused before anything of the run exists). Once bwrap reports the run's init,
each port's accept thread enters (setns) the init's ``/proc/<pid>/ns/net`` (checked against
the init's pidfd) and stays there: its listener keeps the host's namespace it was made in, and
every socket the thread makes from then on is born on the run's loopback. Network namespaces
are per thread; the supervisor's other threads never move. An unprivileged supervisor may not
enter a network namespace owned by another user namespace, and a multithreaded process may not
join another user namespace, so there a forked factory process of ours joins the run's user
and network namespaces once and hands back each socket it makes over SCM_RIGHTS.

These connects are the supervisor's, not the run's: they never pass through the run's seccomp
filter or its connect mediation, and they only ever reach ``127.0.0.1:PORT`` inside the run. The
run gains nothing outside: it sees a peer connecting to its listener, and the host listener is
not on its loopback.

Loopback only, never an engine port (2375-2377 Docker, 4243 old Docker, 6443 Kubernetes API,
10250 kubelet): a usage error (2). Each relayed connection has one thread of ours; all end
with the run: ``Forwarder.close()`` closes the listeners and every relayed socket.
"""

from __future__ import annotations

import os
import select
import socket
import threading

from ..errors import NotProven, UsageError

ENGINE_PORTS = frozenset({2375, 2376, 2377, 4243, 6443, 10250})
LOOPBACK = "127.0.0.1"
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def parse_publish(text: str) -> int:
    """``PORT`` or ``127.0.0.1:PORT`` -> PORT; UsageError for anything else."""
    host, sep, port_text = text.rpartition(":")
    if sep and host != LOOPBACK:
        raise UsageError(f"--publish {text}: loopback only (127.0.0.1:PORT or PORT)")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"--publish {text}: a TCP port, 1-65535")
    port = int(port_text)
    if port in ENGINE_PORTS:
        raise UsageError(f"--publish {text}: refused, {port} is a container engine's port")
    return port


def _prepare_setns() -> None:
    """Load what ``_setns`` needs now, in the parent: a forked child must not import (another
    thread may hold the import lock at the fork)."""
    from . import syscalls

    syscalls.load()


def _setns(fd: int, nstype: int) -> None:
    """setns(2) for the calling thread (one foreign call, ``syscalls.setns``)."""
    from . import syscalls

    syscalls.setns(fd, nstype)


class Forwarder:
    """The host-side listeners of one run and the relays they start."""

    def __init__(self, ports: tuple[int, ...]) -> None:
        self.ports = ports
        self.listeners: list[socket.socket] = []
        self.netns_fd: int | None = None
        self.userns_fd: int | None = None
        self._factory: _Factory | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._stop_r, self._stop_w = os.pipe()
        self.connections = 0

    def bind(self) -> None:
        """Listen on the host's loopback before the run starts: a port already taken is a
        clear refusal (125) before anything of the run exists."""
        for port in self.ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((LOOPBACK, port))
            except OSError as err:
                sock.close()
                self.close()
                raise NotProven("--publish", f"cannot listen on {LOOPBACK}:{port}: {err.strerror}",
                                "choose a free port") from err
            sock.listen(64)
            self.listeners.append(sock)

    def start(self, init_pidfd: int, init_pid: int) -> None:
        """Take the run's network namespace from its init and start accepting."""
        if self._closed or self.netns_fd is not None:
            return
        fd = os.open(f"/proc/{init_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        # The pid may have been reused between bwrap's report and the open: the pidfd, opened
        # and checked by the lifecycle, still polls unreadable only while that init is alive.
        if select.select([init_pidfd], [], [], 0)[0]:
            os.close(fd)
            return
        self.netns_fd = fd
        if os.geteuid() != 0:
            # The user namespace that owns the run's network namespace, not the init's own:
            # bwrap's --disable-userns leaves the run one user namespace deeper, where joining
            # gives no capability over its network namespace (sockdiag.owning_userns).
            from .sockdiag import owning_userns

            try:
                self.userns_fd = owning_userns(fd)
            except OSError:
                self.userns_fd = None
        for sock in self.listeners:
            threading.Thread(target=self._accept_loop, args=(sock,), daemon=True,
                             name=f"no-docker-publish-{sock.getsockname()[1]}").start()

    def _enter_netns(self) -> bool:
        """Move the calling thread (an accept loop of ours) into the run's network namespace,
        so every socket it creates is born there; False when this process may not (an
        unprivileged supervisor), and the factory process makes them instead."""
        assert self.netns_fd is not None
        try:
            _setns(self.netns_fd, CLONE_NEWNET)
            return True
        except PermissionError:
            if self.userns_fd is None:
                raise
        with self._lock:
            if self._factory is None:
                self._factory = _Factory(self.userns_fd, self.netns_fd)
        return False

    def _accept_loop(self, listener: socket.socket) -> None:
        """Accept outside, connect inside. This thread lives in the run's network namespace
        (``_enter_netns``): its listener was made before, in the host's, and keeps it; the
        sockets it makes from then on are the run's loopback's. Network namespaces are per
        thread: the supervisor's other threads stay where they are."""
        port = listener.getsockname()[1]
        try:
            entered = self._enter_netns()
        except OSError:
            listener.close()  # no way into the run's loopback: clients are refused, not hung
            return
        factory = self._factory
        while not self._closed:
            try:
                ready, _, _ = select.select([listener, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                outside, _ = listener.accept()
            except OSError:
                return
            inside = None
            try:
                inside = (socket.socket(socket.AF_INET, socket.SOCK_STREAM) if entered
                          else factory.make())  # type: ignore[union-attr]
                inside.settimeout(5)
                inside.connect((LOOPBACK, port))
                inside.settimeout(None)
            except OSError:
                # nothing listens inside (yet), or the run is ending: the client sees a close
                outside.close()
                if inside is not None:
                    inside.close()
                continue
            with self._lock:
                if self._closed:
                    outside.close()
                    inside.close()
                    return
                self._open.update((outside, inside))
                self.connections += 1
            threading.Thread(target=self._relay, args=(outside, inside), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        """Both directions on one thread: poll, copy, half-close on EOF."""
        open_dirs = {a: b, b: a}
        try:
            while open_dirs and not self._closed:
                ready, _, _ = select.select([*open_dirs, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                for src in ready:
                    dst = open_dirs.get(src)
                    if dst is None:
                        continue
                    data = src.recv(1 << 16)
                    if not data:
                        del open_dirs[src]
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        continue
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                for sock in (a, b):
                    self._open.discard(sock)
                    sock.close()

    def close(self) -> None:
        """Stop accepting, close every relayed connection (the run is over)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for sock in (*self.listeners, *self._open):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open.clear()
        os.write(self._stop_w, b"x")
        if self._factory is not None:
            self._factory.close()
        for fd in (self.netns_fd, self.userns_fd):
            if fd is not None:
                os.close(fd)
        self.netns_fd = self.userns_fd = None


class _Factory:
    """A child process of the supervisor that lives in the run's user and network namespaces
    and makes sockets there on request, passing each back over a socketpair (SCM_RIGHTS).

    It is ours, not the run's: forked from the supervisor (outside the run's pid namespace and
    cgroup, after entering nothing), it joins the namespaces with setns(2) and only ever calls
    socket(2). It exits when the supervisor closes its end (``close``), and is reaped then.
    """

    def __init__(self, userns_fd: int, netns_fd: int) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        _prepare_setns()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; only syscalls, then _exit
            status = 1
            try:
                parent.close()
                _setns(userns_fd, CLONE_NEWUSER)
                _setns(netns_fd, CLONE_NEWNET)
                while child.recv(1):
                    made = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socket.send_fds(child, [b"s"], [made.fileno()])
                    made.close()
                status = 0
            finally:
                os._exit(status)
        child.close()
        self.pid = pid
        self.sock = parent
        self.lock = threading.Lock()

    def make(self) -> socket.socket:
        with self.lock:
            self.sock.send(b"m")
            _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        if not fds:
            raise PermissionError("cannot make a socket in the run's network namespace")
        return socket.socket(fileno=fds[0])

    def close(self) -> None:
        self.sock.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass  # reaped with the run's other children already
