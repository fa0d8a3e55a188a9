"""The few Linux calls Python 3.11's standard library lacks, each one foreign call (and one
spawn, :func:`spawn_into_cgroup`, a short list of them).

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

import itertools
import os
import struct
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

# Syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
_NR = {
    "x86_64": {"seccomp": 317, "setns": 308, "pidfd_getfd": 438, "openat2": 437, "unshare": 272,
               "clone3": 435, "dup3": 292, "close": 3, "rt_sigaction": 13, "execve": 59,
               "exit_group": 231, "mmap": 9, "munmap": 11, "setsid": 112, "fcntl": 72, "capset": 126,
               "process_vm_readv": 310},
    "aarch64": {"seccomp": 277, "setns": 268, "pidfd_getfd": 438, "openat2": 437, "unshare": 97,
                "clone3": 435, "dup3": 24, "close": 57, "rt_sigaction": 134, "execve": 221,
                "exit_group": 94, "mmap": 222, "munmap": 215, "setsid": 157, "fcntl": 25, "capset": 91,
                "process_vm_readv": 270},
}
CLONE_NEWNET = 0x40000000
# openat2(2) RESOLVE_* (linux/openat2.h)
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS = 0x01, 0x02, 0x04
RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x08, 0x10
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522  # linux/capability.h: two 32-bit data structs
# clone3(2) (include/uapi/linux/sched.h)
CLONE_VFORK, CLONE_CLEAR_SIGHAND, CLONE_INTO_CGROUP = 0x4000, 0x100000000, 0x200000000
SIGCHLD = 17  # x86_64 and aarch64 alike
SIGSET_SIZE = 8  # the kernel's sigset_t: _NSIG / 8
PROT_READ_WRITE, MAP_SHARED_ANONYMOUS, PAGE = 0x3, 0x21, 4096
F_SETFD = 2

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

    # FUNCFLAG_PYTHONAPI: called with the GIL held (never released around the call), for the
    # steps of spawn_into_cgroup. No USE_ERRNO on the child's steps: libc's errno must stay as
    # execve left it (the child writes it to the parent).
    class HeldCall(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_PYTHONAPI
        _restype_ = Long

    class HeldErrnoCall(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_PYTHONAPI | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    def typed(restype: type, *argtypes: type) -> type:
        return type("TypedCall", (_ctypes.CFuncPtr,), {
            "_flags_": _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO,
            "_restype_": restype, "_argtypes_": argtypes})

    handle = _ctypes.dlopen(None, os.RTLD_NOW)
    syscall = _ctypes.dlsym(handle, "syscall")

    arrays: dict[int, type] = {}

    def buffer(data: bytes) -> object:
        """A writable C char array holding DATA (for pointers the kernel reads or fills)."""
        size = max(1, len(data))
        array = arrays.get(size)
        if array is None:
            if len(arrays) >= 64:  # bounded: sizes vary with argv and the environment
                arrays.clear()
            array = arrays[size] = type("CharArray", (_ctypes.Array,), {"_type_": Char, "_length_": size})
        return array.from_buffer_copy(data) if data else array()

    clone3 = HeldErrnoCall(_ctypes.dlsym(handle, "syscall"))
    # Its result goes through this (a C callable: no bytecode) before the step list goes on:
    # 0 in the child passes, a pid or -1 in the parent raises KeyError (spawn_into_cgroup).
    clone3.restype = {0: 0}.__getitem__
    _nr = _NR[machine]
    buffer_type = type("CharArray", (_ctypes.Array,), {"_type_": Char, "_length_": 128})
    _libc = {"ctypes": _ctypes, "Long": Long, "buffer": buffer,
             "syscall": LongCall(syscall),
             "connect": IntCall(_ctypes.dlsym(handle, "connect")),
             "prctl": IntCall(_ctypes.dlsym(handle, "prctl")),
             "held": HeldCall(_ctypes.dlsym(handle, "syscall")), "clone3": clone3,
             "errno_location": HeldCall(_ctypes.dlsym(handle, "__errno_location")),
             "memcpy": HeldCall(_ctypes.dlsym(handle, "memcpy")), "Int": Int,
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


def drop_capabilities() -> None:
    """Every capability of the calling thread gone: capset(2) with empty effective, permitted
    and inheritable sets, and the ambient set cleared (what bwrap's --cap-drop ALL leaves a
    run's command with). The bounding set stays: with no_new_privs nothing can regain from it."""
    load()
    header = _libc["buffer"](struct.pack("=Ii", _LINUX_CAPABILITY_VERSION_3, 0))  # type: ignore[index]
    data = _libc["buffer"](bytes(24))  # type: ignore[index]
    _syscall("capset", header, data)
    long_ = _libc["Long"]  # type: ignore[index]
    _call(_libc["prctl"], PR_CAP_AMBIENT, long_(PR_CAP_AMBIENT_CLEAR_ALL), long_(0), long_(0),  # type: ignore[index]
          long_(0))


# --- spawning straight into a cgroup --------------------------------------------------------


class NoCloneIntoCgroup(OSError):
    """clone3 failed before any child existed (a kernel without it or without
    CLONE_INTO_CGROUP, a seccomp filter answering ENOSYS as container runtimes do, a refused
    cgroup): the caller falls back to moving itself into the cgroup and ``posix_spawn``."""


def clone_args(flags: int, cgroup: int, exit_signal: int = SIGCHLD) -> bytes:
    """``struct clone_args`` (linux/sched.h, CLONE_ARGS_SIZE_VER2: 88 bytes), eleven u64:
    flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
    set_tid_size, cgroup. No stack: without CLONE_VM the child runs on its copy of ours."""
    return struct.pack("=11Q", flags, 0, 0, 0, exit_signal, 0, 0, 0, 0, 0, cgroup)


def exec_strings(path: str, argv: list[str], env: dict[str, str]) -> tuple[bytes, list[int], list[int]]:
    """execve(2)'s strings in one blob, each NUL-terminated: PATH at offset 0, then ARGV, then
    ENV as ``KEY=VALUE``; returns (blob, offsets of the ARGV strings, offsets of the ENV ones).
    Encoded as ``os.fsencode`` does. ValueError where ``os.posix_spawn`` raises one: an
    embedded NUL, an empty key or ``=`` in a key, no argv."""
    if not argv:
        raise ValueError("argv must not be empty")
    for key in env:
        if not key or "=" in key:
            raise ValueError(f"illegal environment variable name {key!r}")
    items = [path, *argv, *[f"{k}={v}" for k, v in env.items()]]
    text = "\0".join(items)  # one encode, not one per string: this is on every run's path
    if text.count("\0") != len(items) - 1:
        raise ValueError("embedded null byte")
    blob = text.encode(sys.getfilesystemencoding(), "surrogateescape") + b"\0"
    offsets = [0, *itertools.accumulate(len(part) + 1 for part in blob.split(b"\0")[:-2])]
    return blob, offsets[1:1 + len(argv)], offsets[1 + len(argv):]


def spawn_into_cgroup(path: str, argv: list[str], env: dict[str, str], cgroup_fd: int, *,
                      file_actions: list[tuple] | tuple = (), setsigdef: tuple[int, ...] = (),
                      setsid: bool = False) -> int:
    """``os.posix_spawn(path, argv, env, file_actions=..., setsigdef=..., setsid=...)``, with
    the child born in the cgroup v2 directory CGROUP_FD (``clone3(CLONE_INTO_CGROUP)``, Linux
    5.7) as a child of the calling thread: its pid. FILE_ACTIONS are posix_spawn's
    ``(os.POSIX_SPAWN_DUP2, fd, new_fd)`` and ``(os.POSIX_SPAWN_CLOSE, fd)``, done in order
    after SETSIGDEF and SETSID, as glibc's posix_spawn does them (``dup3``: the new fd is
    inheritable); ValueError for any other action. Unlike posix_spawn, a failed action is not
    reported (the child cannot branch, below): the fds are the caller's own and open, so only
    EMFILE could fail a dup3, and a close that fails leaves nothing open.

    Why not posix_spawn into a cgroup we moved ourselves into: each move writes ``cgroup.procs``
    and takes ``cgroup_threadgroup_rwsem`` for writing, which first waits for a whole RCU grace
    period (``rcu_sync_enter``; 9-26 ms measured here), twice a run (in, and back). A child born
    in the cgroup takes the fork side's read lock only: no wait (kernel/cgroup/cgroup.c,
    ``cgroup_css_set_fork``).

    Why this is sound from a threaded Python process. clone3 without CLONE_VM copies the
    process with only the calling thread in it (fork semantics), and glibc's fork handlers do
    not run (raw syscall). So the child must not need anything another thread may hold:
    - the GIL: every call of the list goes through a FUNCFLAG_PYTHONAPI pointer, so this thread
      holds the GIL from before the clone until the exec, and the child starts holding it;
    - the interpreter loop: it could drop the GIL in the child (a drop request made by a
      waiting thread before the clone is copied too, and ``drop_gil`` then waits forever for
      a thread that does not exist there). So the child runs no bytecode at all: the whole list
      (clone3 first) is one C-level iteration, ``deque(starmap(operator.call, steps), 0)``,
      and the clone3 result passes ``{0: 0}.__getitem__`` in C: 0 (the child) lets the list go
      on, a pid (the parent) raises KeyError, which ends the list there (-1: no child, errno);
    - the cyclic GC (it can run finalizers, i.e. bytecode, from an allocation) is disabled
      around the clone; the child allocates only small objects (tuples, ints: pymalloc, under
      the GIL), never libc's malloc, whose locks another thread may hold;
    - signals: CLONE_CLEAR_SIGHAND (5.5) has the kernel reset every caught signal to SIG_DFL in
      the child (ignored ones stay ignored: posix_spawn's rule), so no handler of ours ever
      runs there; SETSIGDEF are then reset explicitly; the signal mask is the calling
      thread's, as with posix_spawn without ``setsigmask``;
    - everything the child uses (strings, pointer arrays, clone_args, argument objects) is
      built here, before the clone. (An audit hook added with ``sys.addaudithook`` would run
      for each call, in the child too; no-docker adds none.)
    CLONE_VFORK: the parent thread waits, holding the GIL, until the child has exec'd (its copy
    of our memory released) or exited. No other thread of ours runs meanwhile (a fraction of a
    millisecond; longer only while the exec itself blocks, PATH on a hung network file system
    say, and signal handlers run after it), and when clone3 returns the outcome is known: an
    execve that failed has had the child copy libc's errno (its address is this thread's, so
    also the child's) into a shared page before exiting; it comes back as OSError once the
    child is reaped.
    NoCloneIntoCgroup when clone3 itself failed (no child exists).
    """
    import _collections
    import _operator
    import gc

    load()
    lib = _libc
    assert lib is not None
    c, long_, held = lib["ctypes"], lib["Long"], lib["held"]

    def step(name: str, *values: object) -> tuple:
        return (held, long_(_nr[name]), *(long_(v) if isinstance(v, int) else v for v in values))

    default = lib["buffer"](bytes(32))  # struct sigaction {SIG_DFL, 0, 0, 0}: x86_64 and arm64
    child = [step("rt_sigaction", signum, default, 0, SIGSET_SIZE) for signum in setsigdef]
    if setsid:
        child.append(step("setsid"))
    for action in file_actions:
        if action[0] == os.POSIX_SPAWN_DUP2 and len(action) == 3:
            child.append(step("dup3", action[1], action[2], 0) if action[1] != action[2]
                         else step("fcntl", action[1], F_SETFD, 0))  # posix_spawn: clears CLOEXEC
        elif action[0] == os.POSIX_SPAWN_CLOSE and len(action) == 2:
            child.append(step("close", action[1]))
        else:
            raise ValueError(f"file action {action!r} is not supported here")
    blob, argv_at, env_at = exec_strings(path, argv, env)
    strings = lib["buffer"](blob)
    base = c.addressof(strings)
    pointers = lib["buffer"](struct.pack(f"{len(argv_at) + len(env_at) + 2}P", *(base + o for o in argv_at),
                                         0, *(base + o for o in env_at), 0))
    argv_p = c.addressof(pointers)
    envp_p = argv_p + struct.calcsize("P") * (len(argv_at) + 1)
    args = lib["buffer"](clone_args(CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND | CLONE_VFORK, cgroup_fd))
    errno_at = lib["errno_location"]()  # this thread's errno: the child's too (a copy of it)
    shared = _syscall("mmap", 0, PAGE, PROT_READ_WRITE, MAP_SHARED_ANONYMOUS, -1, 0)  # zeroed
    try:
        steps = [(lib["clone3"], long_(_nr["clone3"]), args, long_(len(clone_args(0, 0)))), *child,
                 step("execve", base, argv_p, envp_p),
                 (lib["memcpy"], long_(shared), long_(errno_at), long_(4)),  # execve failed
                 step("exit_group", 127)]
        gc_was = gc.isenabled()
        gc.disable()
        me = os.getpid()
        try:
            _collections.deque(itertools.starmap(_operator.call, steps), 0)
        except KeyError as parent:
            pid = parent.args[0]
        except BaseException:  # pragma: no cover - every argument is converted before the clone
            if os.getpid() != me:
                os._exit(127)  # never the caller's code in the child: the parent waits (vfork)
            raise
        else:  # pragma: no cover - the child, had exit_group returned: it cannot
            os._exit(127)
        finally:
            if gc_was:
                gc.enable()
        if pid < 0:
            err = c.get_errno()
            raise NoCloneIntoCgroup(err, f"clone3: {os.strerror(err)}")
        err = lib["Int"].from_address(shared).value
    finally:
        _syscall("munmap", shared, PAGE)
    if err:
        os.waitpid(pid, 0)  # it has exited (127)
        raise OSError(err, os.strerror(err), path)
    return pid
