"""The few Linux calls Python 3.11's standard library lacks, each one foreign call.

``seccomp(2)``, ``pidfd_getfd(2)``, ``openat2(2)`` and ``setns(2)`` have no ``os`` wrapper in
3.11 (``os.setns`` arrives in 3.12); ``connect_raw`` is libc's ``connect`` on bytes, because
``socket.connect`` only takes addresses it can build itself, and the mediator must hand the
kernel exactly the bytes and length the caller passed (an odd ``addrlen``, an ``AF_UNSPEC``
disconnect, a family Python has no tuple form for).

Through ``_ctypes`` alone, not ``ctypes``: ``ctypes`` costs ~1.2 ms to import here (it builds
every C type class), on every ``no-docker run``; this module needs four classes of its own.
``syscall(2)`` is variadic: every argument goes as a C long (a plain Python int would be passed
as a 32-bit int). The connect mediator's calls (``pidfd_getfd``, ``openat2``, ``connect_raw``,
``process_vm_readv``: each once per mediated connect) are bound once with their argument types
(the conversion happens in C: ~0.5 µs a call less than wrapping each int in Python). The forked
child that installs the filter uses what the parent loaded before forking (:func:`load`): no
import after a fork.

Every function raises ``OSError`` with the call's errno; callers turn it into domain errors.
"""

from __future__ import annotations

import os
import struct

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

# Syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
_NR = {
    "x86_64": {"seccomp": 317, "setns": 308, "pidfd_getfd": 438, "openat2": 437, "unshare": 272,
               "process_vm_readv": 310},
    "aarch64": {"seccomp": 277, "setns": 268, "pidfd_getfd": 438, "openat2": 437, "unshare": 97,
                "process_vm_readv": 270},
}
CLONE_NEWNET = 0x40000000
# openat2(2) RESOLVE_* (linux/openat2.h)
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS = 0x01, 0x02, 0x04
RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x08, 0x10
PR_SET_NO_NEW_PRIVS = 38

_libc = None
_nr: dict[str, int] = {}


def load() -> None:
    """Bind libc's ``syscall``, ``connect`` and ``prctl`` (idempotent). Call it before
    ``os.fork()`` when the child will use these functions."""
    global _libc, _nr
    if _libc is not None:
        return
    import _ctypes

    machine = os.uname().machine
    if machine not in _NR:
        raise OSError(0, f"no syscall table for {machine}")

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Int(_ctypes._SimpleCData):
        _type_ = "i"

    class Char(_ctypes._SimpleCData):
        _type_ = "c"

    class Bytes(_ctypes._SimpleCData):  # c_char_p: a bytes object passed as a pointer to its data
        _type_ = "z"

    class LongCall(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    class IntCall(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int

    def typed(restype: type, *argtypes: type) -> type:
        return type("TypedCall", (_ctypes.CFuncPtr,), {
            "_flags_": _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO,
            "_restype_": restype, "_argtypes_": argtypes})

    handle = _ctypes.dlopen(None, os.RTLD_NOW)
    syscall = _ctypes.dlsym(handle, "syscall")

    def buffer(data: bytes) -> object:
        """A writable C char array holding DATA (for pointers the kernel reads or fills)."""
        array = type("CharArray", (_ctypes.Array,), {"_type_": Char, "_length_": max(1, len(data))})
        return array.from_buffer_copy(data) if data else array()

    _nr = _NR[machine]
    buffer_type = type("CharArray", (_ctypes.Array,), {"_type_": Char, "_length_": 128})
    _libc = {"ctypes": _ctypes, "Long": Long, "buffer": buffer,
             "syscall": LongCall(syscall),
             "connect": IntCall(_ctypes.dlsym(handle, "connect")),
             "prctl": IntCall(_ctypes.dlsym(handle, "prctl")),
             # (nr, a, b, c): pidfd_getfd
             "syscall_3": typed(Long, Long, Long, Long, Long)(syscall),
             # (nr, dirfd, path, how, size): openat2
             "syscall_openat2": typed(Long, Long, Long, Bytes, Bytes, Long)(syscall),
             # (nr, pid, local iov, 1, remote iov, 1, flags): process_vm_readv
             "syscall_vm": typed(Long, Long, Long, Bytes, Long, Bytes, Long, Long)(syscall),
             "connect_typed": typed(Int, Int, Bytes, Int)(_ctypes.dlsym(handle, "connect")),
             "buffer_128": buffer_type}


def _call(function: object, *args: object) -> int:
    c = _libc["ctypes"]  # type: ignore[index]
    c.set_errno(0)
    res = function(*args)  # type: ignore[operator]
    if res < 0:
        err = c.get_errno()
        raise OSError(err, os.strerror(err))
    return res


def _syscall(name: str, *args: object) -> int:
    load()
    long_ = _libc["Long"]  # type: ignore[index]
    return _call(_libc["syscall"], _nr[name], *(a if not isinstance(a, int) else long_(a) for a in args))  # type: ignore[index]


def notif_sizes() -> tuple[int, int, int]:
    """SECCOMP_GET_NOTIF_SIZES: (sizeof seccomp_notif, _resp, seccomp_data) of this kernel."""
    load()
    buf = _libc["buffer"](bytes(6))  # type: ignore[index]
    _syscall("seccomp", 3, 0, buf)
    return struct.unpack("=HHH", bytes(buf))


def install_filter(program: bytes, flags: int) -> int:
    """seccomp(SECCOMP_SET_MODE_FILTER, FLAGS, &{len, PROGRAM}); the listener fd when FLAGS
    holds SECCOMP_FILTER_FLAG_NEW_LISTENER, else 0."""
    load()
    insns = _libc["buffer"](program)  # type: ignore[index]
    fprog = _libc["buffer"](struct.pack("=HxxxxxxQ", len(program) // 8,  # type: ignore[index]
                                        _libc["ctypes"].addressof(insns)))  # type: ignore[index]
    return _syscall("seccomp", 1, flags, fprog)


def _errno() -> OSError:
    err = _libc["ctypes"].get_errno()  # type: ignore[index]
    return OSError(err, os.strerror(err))


def pidfd_getfd(pidfd: int, targetfd: int) -> int:
    """A duplicate of fd TARGETFD of the process PIDFD refers to (close-on-exec; needs
    PTRACE_MODE_ATTACH_REALCREDS over it, pidfd_getfd(2))."""
    load()
    fd = _libc["syscall_3"](_nr["pidfd_getfd"], pidfd, targetfd, 0)  # type: ignore[index]
    if fd < 0:
        raise _errno()
    return fd


def open_how(flags: int, resolve: int) -> bytes:
    """``struct open_how {flags, mode=0, resolve}`` for :func:`openat2`."""
    return struct.pack("=QQQ", flags, 0, resolve)


def openat2(dirfd: int, path: bytes, flags: int, resolve: int, how: bytes | None = None) -> int:
    """openat2(2); HOW, when given, is ``open_how(flags, resolve)`` made once by the caller."""
    load()
    if how is None:
        how = open_how(flags, resolve)
    fd = _libc["syscall_openat2"](_nr["openat2"], dirfd, path, how, len(how))  # type: ignore[index]
    if fd < 0:
        raise _errno()
    return fd


def vm_reader() -> Callable[[int, int, int], bytes]:
    """A ``read(pid, address, length)``: up to LENGTH (<= 128) bytes at ADDRESS in the memory
    of task PID, by one process_vm_readv(2) (PTRACE_MODE_ATTACH_REALCREDS over it, as
    pidfd_getfd). Fewer bytes when the range runs into unmapped memory; OSError EFAULT when
    none can be read, ESRCH when no task has that id. Each reader reads into its own buffer:
    one per thread."""
    load()
    libc = _libc
    buf = libc["buffer_128"]()  # type: ignore[index]
    local = struct.pack("=QQ", libc["ctypes"].addressof(buf), 128)  # type: ignore[index]
    call, nr, remote = libc["syscall_vm"], _nr["process_vm_readv"], struct.Struct("=QQ").pack  # type: ignore[index]

    def read(pid: int, address: int, length: int) -> bytes:
        got = call(nr, pid, local, 1, remote(address, length), 1, 0)
        if got < 0:
            raise _errno()
        return buf.raw[:got]

    return read


def setns(fd: int, nstype: int) -> None:
    """setns(2) for the calling thread."""
    _syscall("setns", fd, nstype)


def unshare(flags: int) -> None:
    """unshare(2) (tests only: a child's fresh network namespace)."""
    _syscall("unshare", flags)


def connect_raw(fd: int, address: bytes) -> int:
    """connect(2) of FD to ADDRESS exactly as given (bytes and length); 0 or the errno.
    The foreign call drops the GIL, so a blocking connect stalls only this thread."""
    load()
    if _libc["connect_typed"](fd, address, len(address)) == 0:  # type: ignore[index]
        return 0
    return _libc["ctypes"].get_errno()  # type: ignore[index]


def set_no_new_privs() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS, 1): required to install a filter without CAP_SYS_ADMIN."""
    load()
    long_ = _libc["Long"]  # type: ignore[index]
    _call(_libc["prctl"], PR_SET_NO_NEW_PRIVS, long_(1), long_(0), long_(0), long_(0))  # type: ignore[index]
