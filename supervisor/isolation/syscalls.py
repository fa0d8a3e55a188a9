"""The few Linux calls Python 3.11's standard library lacks, each one ``ctypes`` call.

``seccomp(2)``, ``pidfd_getfd(2)``, ``openat2(2)`` and ``setns(2)`` have no ``os`` wrapper in
3.11 (``os.setns`` arrives in 3.12); ``connect_raw`` is libc's ``connect`` on bytes, because
``socket.connect`` only takes addresses it can build itself, and the mediator must hand the
kernel exactly the bytes and length the caller passed (an odd ``addrlen``, an ``AF_UNSPEC``
disconnect, a family Python has no tuple form for).

ctypes costs ~10 ms to import: nothing imports this module at start-up; the mediator loads it
on its own thread (:func:`load`), and the install path in the forked child uses the handle the
parent loaded before forking (no import, no lock, after fork).

Every function raises ``OSError`` with the call's errno; callers turn it into domain errors.
"""

from __future__ import annotations

import os
import struct

# Syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
_NR = {
    "x86_64": {"seccomp": 317, "setns": 308, "pidfd_getfd": 438, "openat2": 437, "unshare": 272},
    "aarch64": {"seccomp": 277, "setns": 268, "pidfd_getfd": 438, "openat2": 437, "unshare": 97},
}
CLONE_NEWNET = 0x40000000
# openat2(2) RESOLVE_* (linux/openat2.h)
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS = 0x01, 0x02, 0x04
RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x08, 0x10

_libc = None
_nr: dict[str, int] = {}


def load() -> None:
    """Import ctypes and bind libc (idempotent). Call it before ``os.fork()`` when the child
    will use these functions: importing after a fork in a threaded process can deadlock."""
    global _libc, _nr
    if _libc is not None:
        return
    import ctypes

    machine = os.uname().machine
    if machine not in _NR:
        raise OSError(0, f"no syscall table for {machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.connect.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    libc.connect.restype = ctypes.c_int
    _nr = _NR[machine]
    _libc = (ctypes, libc)


def _syscall(name: str, *args: object) -> int:
    load()
    ctypes, libc = _libc  # type: ignore[misc]
    res = libc.syscall(_nr[name], *args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res


def notif_sizes() -> tuple[int, int, int]:
    """SECCOMP_GET_NOTIF_SIZES: (sizeof seccomp_notif, _resp, seccomp_data) of this kernel."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    buf = ctypes.create_string_buffer(6)
    _syscall("seccomp", ctypes.c_uint(3), ctypes.c_uint(0), buf)
    return struct.unpack("=HHH", buf.raw)


def install_filter(program: bytes, flags: int) -> int:
    """seccomp(SECCOMP_SET_MODE_FILTER, FLAGS, &{len, PROGRAM}); the listener fd when FLAGS
    holds SECCOMP_FILTER_FLAG_NEW_LISTENER, else 0."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    insns = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(insns))
    buf = ctypes.create_string_buffer(fprog, len(fprog))
    return _syscall("seccomp", ctypes.c_uint(1), ctypes.c_uint(flags), buf)


def pidfd_getfd(pidfd: int, targetfd: int) -> int:
    """A duplicate of fd TARGETFD of the process PIDFD refers to (close-on-exec; needs
    PTRACE_MODE_ATTACH_REALCREDS over it, pidfd_getfd(2))."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    return _syscall("pidfd_getfd", ctypes.c_int(pidfd), ctypes.c_int(targetfd), ctypes.c_uint(0))


def openat2(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
    """openat2(2) with ``struct open_how {flags, mode=0, resolve}``."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    how = struct.pack("=QQQ", flags, 0, resolve)
    return _syscall("openat2", ctypes.c_int(dirfd), ctypes.c_char_p(path), ctypes.c_char_p(how),
                    ctypes.c_size_t(len(how)))


def setns(fd: int, nstype: int) -> None:
    """setns(2) for the calling thread."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    _syscall("setns", ctypes.c_int(fd), ctypes.c_int(nstype))


def unshare(flags: int) -> None:
    """unshare(2) (tests only: a child's fresh network namespace)."""
    load()
    ctypes = _libc[0]  # type: ignore[index]
    _syscall("unshare", ctypes.c_int(flags))


def connect_raw(fd: int, address: bytes) -> int:
    """connect(2) of FD to ADDRESS exactly as given (bytes and length); 0 or the errno.
    ctypes drops the GIL for the call, so a blocking connect stalls only this thread."""
    load()
    ctypes, libc = _libc  # type: ignore[misc]
    if libc.connect(fd, address, len(address)) == 0:
        return 0
    return ctypes.get_errno()


PR_SET_NO_NEW_PRIVS = 38


def set_no_new_privs() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS, 1): required to install a filter without CAP_SYS_ADMIN."""
    load()
    ctypes, libc = _libc  # type: ignore[misc]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
