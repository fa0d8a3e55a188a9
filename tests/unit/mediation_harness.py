"""Harness of tests/unit/test_mediation.py (imported there, fixtures included): a tiny
``python -c`` child under the mediation filter, in a fresh network
namespace (``unshare(CLONE_NEWNET)`` with loopback up, or bwrap), with the mediator running
in this process. Every child is killed and reaped, every mediator stopped, even on failure."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time

import pytest
from no_docker.supervisor.isolation import mediation, syscall_filter
from no_docker.supervisor.isolation import syscalls as _linux

BWRAP = "/usr/bin/bwrap"
CLONE_NEWUSER = 0x10000000  # linux/sched.h
SIOCSIFFLAGS, IFF_UP_RUNNING_LOOPBACK = 0x8914, 0x1 | 0x8 | 0x40


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("=16sH22x", b"lo", IFF_UP_RUNNING_LOOPBACK))


def install(channel: socket.socket) -> None:
    """In the forked child: install the mediation filter, hand the listener to the parent over
    CHANNEL and close it here (the run never holds it). The product starts bwrap the other way
    (mediation.spawn_filtered: a thread carries the filter); a fork suits a test child."""
    if os.geteuid() != 0:
        _linux.set_no_new_privs()
    listener = _linux.install_filter(mediation.program(os.uname().machine),
                                     mediation.SECCOMP_FILTER_FLAG_NEW_LISTENER
                                     | mediation.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
    try:
        socket.send_fds(channel, [b"L"], [listener])
    finally:
        os.close(listener)


def receive_listener(channel: socket.socket) -> int:
    """The listener fd the child sent; MediationError if none came."""
    _msg, fds, _flags, _addr = socket.recv_fds(channel, 16, 1)
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise mediation.MediationError("no listener from the child")
    os.set_inheritable(fds[0], False)
    return fds[0]


def python_under(hidden: tuple[str, ...]) -> list[str]:
    """The directories of the running Python (venv, base install, the executable's) that lie
    under one of HIDDEN (outermost only): what a sandbox hiding those must bind back."""
    found = []
    for path in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)):
        real = os.path.realpath(path)
        if any(real == h or real.startswith(h + "/") for h in hidden):
            found.append(real)
    return [p for p in dict.fromkeys(found) if not any(o != p and p.startswith(o + "/") for o in found)]


class Child:
    """One child under the filter; ``result()`` is the JSON its code prints last."""

    def __init__(self, code: str, *, mediate: bool = True, p13: bool = False, stdin: int | None = None,
                 bwrap: bool = False, binds: tuple[str, ...] = (), start: bool = True) -> None:
        _linux.load()  # before fork: no import in the child
        self.mediator: mediation.Mediator | None = None
        self.pid = -1
        parent, child = socket.socketpair()
        out_r, out_w = os.pipe()
        info_r, info_w = os.pipe()
        block_r, self.block_w = os.pipe()
        argv = [sys.executable, "-I", "-c", code]
        if bwrap:
            argv = [BWRAP, "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
                    "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                    "--info-fd", str(info_w), "--block-fd", str(block_r)]
            for path in binds:
                argv += ["--bind", path, path]
            # The Python the child runs, back over the fresh /tmp when it lives there (a clone
            # under /tmp: its venv), read-only, as the product's plan binds a toolchain.
            for path in python_under(("/tmp",)):
                argv += ["--ro-bind", path, path]
            argv += ["--", sys.executable, "-I", "-c", code]
        pid = os.fork()
        if pid == 0:  # child: nothing here may raise into pytest
            try:
                parent.close()
                if not bwrap:
                    # As an ordinary user, a user namespace too (as bwrap makes the run's): the
                    # mediator then reads the namespace the owner's way (sockdiag.open_diag).
                    _linux.unshare(_linux.CLONE_NEWNET | (0 if os.geteuid() == 0 else CLONE_NEWUSER))
                    _loopback_up()
                if p13:  # the run's deny filter: its AF_VSOCK and MSG_FASTOPEN rules (P13)
                    _linux.install_filter(syscall_filter.program(os.uname().machine), 0)
                if mediate:
                    install(child)
                else:
                    child.send(b"-")
                child.recv(1)  # the supervisor has the run's namespace: go
                os.dup2(out_w, 1)
                if stdin is not None:
                    os.dup2(stdin, 0)
                if bwrap:
                    os.set_inheritable(info_w, True)
                    os.set_inheritable(block_r, True)
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        self.pid = pid
        child.close()
        parent.settimeout(30)  # a child that never sends its listener fails the test, never hangs it
        os.close(out_w)
        os.close(info_w)
        os.close(block_r)
        self.out_r, self.info_r = out_r, info_r
        try:
            if mediate:
                self.mediator = mediation.Mediator(receive_listener(parent))
                if start:
                    self.mediator.start()
            else:
                parent.recv(1)
            netns_pid = pid
            if bwrap:
                parent.send(b"g")  # bwrap must run to make the namespace; the code waits on it
                netns_pid = self._bwrap_child_pid()
            if self.mediator:
                fd = os.open(f"/proc/{netns_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    self.mediator.set_run_netns(fd)
                finally:
                    os.close(fd)
            if bwrap:
                os.write(self.block_w, b"x")  # bwrap waits for this before exec'ing the code
            else:
                parent.send(b"g")
        except BaseException:
            self.close()
            raise
        finally:
            parent.close()

    def _bwrap_child_pid(self) -> int:
        data = b""
        deadline = time.monotonic() + 5
        while b"}" not in data and time.monotonic() < deadline:
            select.select([self.info_r], [], [], 0.1)
            chunk = os.read(self.info_r, 4096)
            if not chunk:
                break
            data += chunk
        return json.loads(data)["child-pid"]

    def result(self, timeout: float = 10.0) -> dict:
        out = b""
        ready: list[int] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.out_r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.out_r, 65536)
            if not chunk:
                break
            out += chunk
        else:
            pass
        if not ready or time.monotonic() >= deadline:
            os.kill(self.pid, signal.SIGKILL)  # a hung child fails the test, never hangs it
            os.waitpid(self.pid, 0)
            self.pid = -1
            raise AssertionError(f"child still running after {timeout} s; output so far: {out[-500:]!r}")
        _, status = os.waitpid(self.pid, 0)
        self.pid = -1
        lines = out.decode().strip().splitlines()
        assert lines, f"child printed nothing (status {status:#x})"
        return json.loads(lines[-1])

    def close(self) -> None:
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = -1
        if self.mediator:
            self.mediator.stop()
        for fd in (self.out_r, self.info_r, self.block_w):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def spawn():
    children: list[Child] = []

    def make(code: str, **kw: object) -> Child:
        child = Child(code, **kw)  # type: ignore[arg-type]
        children.append(child)
        return child

    yield make
    for child in children:
        child.close()


@pytest.fixture(autouse=True)
def no_fd_leak():
    before = set(os.listdir("/dev/fd"))
    yield
    time.sleep(0.01)
    after = set(os.listdir("/dev/fd"))
    leaked = {fd: _target(fd) for fd in after - before}
    leaked = {fd: t for fd, t in leaked.items() if t is not None}
    assert not leaked, f"leaked fds: {leaked}"


def _target(fd: str) -> str | None:
    try:
        return os.readlink(f"/dev/fd/{fd}")
    except OSError:
        return None  # the listdir fd itself


# --- weakened builds (by hand: NO_DOCKER_WEAKEN=name pytest ...) -----------------------------
# Each must make at least one test fail; INTEGRATION.md lists which.
class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


def _weaken(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from no_docker.supervisor.isolation import sockdiag

    if name == "allow-all-pathname":  # every socket file counts as bound inside
        monkeypatch.setattr(sockdiag.DiagSocket, "bound_files", lambda self: _Everything())
    elif name == "no-netns-check":  # a socket from outside passes as the run's
        orig = mediation.decide
        monkeypatch.setattr(mediation, "decide", lambda *a, **kw: orig(*a, **{**kw, "same_netns": True}))
    elif name == "continue":  # check, then let the kernel redo the connect (unsound)
        real = mediation.NOTIF_RESP

        class Continue:  # the answer's packer: "error" -1 (from the connect below) is CONTINUE
            @staticmethod
            def pack(nid, val, neg_error, flags):  # noqa: ANN001, ANN205
                if neg_error == 1:
                    return real.pack(nid, 0, 0, mediation.SECCOMP_USER_NOTIF_FLAG_CONTINUE)
                return real.pack(nid, val, neg_error, flags)

        monkeypatch.setattr(_linux, "connect_raw", lambda fd, addr: -1)
        monkeypatch.setattr(mediation, "NOTIF_RESP", Continue)
    elif name == "resolve-in-our-root":  # the supervisor's view instead of the caller's
        orig_open = os.open
        monkeypatch.setattr(mediation.os, "open", lambda p, *a, **kw: orig_open(
            "/" if isinstance(p, str) and p.endswith("/root") else p, *a, **kw))
    elif name == "single-thread":  # never hand the receiving role over
        monkeypatch.setattr(mediation.Mediator, "_blocking_connect", lambda self, me: None)
        monkeypatch.setattr(mediation.Mediator, "_unblocked", lambda self, me: None)
    elif name == "no-wait-killable":
        monkeypatch.setattr(mediation, "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", 0)
    elif name == "cache-without-hold":  # cache (st_dev, st_ino) but let the inode go
        def remember(self, key, fd):  # noqa: ANN001, ANN202
            self._known[key] = os.open("/dev/null", os.O_PATH | os.O_CLOEXEC)
        monkeypatch.setattr(mediation.Mediator, "_remember", remember)
    elif name == "no-id-valid":
        monkeypatch.setattr(mediation.Mediator, "_valid", lambda self, nid: None)
    else:
        raise pytest.UsageError(f"unknown NO_DOCKER_WEAKEN={name}")


@pytest.fixture(autouse=True)
def weakened(monkeypatch):
    name = os.environ.get("NO_DOCKER_WEAKEN")
    if name:
        _weaken(name, monkeypatch)
    yield
