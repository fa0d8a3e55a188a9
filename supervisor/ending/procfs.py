"""Reading /proc: small pure parsers over bytes, and one thin reader with an injectable root.

The parsers never touch the file system, so unit tests feed them hostile bytes (a comm
with spaces and parentheses, a truncated line). ``ProcFS`` is the only place that calls
the OS; it turns every ``OSError`` into one of three domain errors (``ProcessGone``,
``Unreadable``, ``ProcfsError``) so callers never reason about errno values.

The root is injectable (``ProcFS(root=...)``): tests point it at a directory that mirrors
/proc except that one member's pid-namespace link cannot be read, which must make a proof
pass inconclusive, never clean (DESIGN §5).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys

from ..record import record

# ioctls on an nsfs file descriptor, from include/uapi/linux/nsfs.h:
#   NS_GET_PARENT = _IO(0xb7, 0x2)         -> new fd of the parent namespace (EPERM at our scope)
#   NS_GET_ID     = _IOR(0xb7, 13, __u64)  -> 64-bit id, never reused while the system runs
# Namespace *inode* numbers are reused (measured: one inode three times in five namespaces),
# so the inode is only a fast filter and NS_GET_ID is the identity.
NS_GET_PARENT = (0xB7 << 8) | 0x2
NS_GET_ID = (2 << 30) | (8 << 16) | (0xB7 << 8) | 13

_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ESRCH})


class ProcfsError(Exception):
    """/proc could not be read at all (not a per-process condition)."""


class ProcessGone(ProcfsError):
    """The process no longer exists (ENOENT/ESRCH): it has exited and been reaped."""


class Unreadable(ProcfsError):
    """The entry exists but cannot be read (EACCES, EPERM, anything unexpected).

    For a marker this means *unknown*: never "not a member" (pid 1's entries give EACCES even
    to root on this machine kind).
    """


def _domain_error(err: OSError, what: str) -> ProcfsError:
    """The one boundary from errno to domain errors."""
    if err.errno in _GONE_ERRNOS:
        return ProcessGone(f"{what}: {err.strerror}")
    return Unreadable(f"{what}: {err.strerror or err}")


# --- pure parsers -------------------------------------------------------------------------


@record(slots=True)
class Stat:
    """The fields of /proc/PID/stat the supervisor needs (man 5 proc_pid_stat)."""

    pid: int
    comm: bytes
    state: str  # R S D Z T t X I ...
    ppid: int
    start_time: int  # field 22, clock ticks since boot: with pid, the process identity

    @property
    def is_dead(self) -> bool:
        """Z (zombie) and X (dead) have exited: they can run no code and fork nothing."""
        return self.state in ("Z", "X", "x")


def parse_stat(data: bytes) -> Stat:
    """Parse /proc/PID/stat. comm may contain spaces and ')' so split at the *last* ')'."""
    lpar = data.find(b"(")
    rpar = data.rfind(b")")
    if lpar < 0 or rpar < lpar:
        raise ValueError(f"not a /proc/PID/stat line: {data[:80]!r}")
    rest = data[rpar + 2 :].split()
    if len(rest) < 20:
        raise ValueError(f"truncated /proc/PID/stat line: {data[:80]!r}")
    # rest[0] is field 3 (state); field 22 (starttime) is rest[19].
    return Stat(
        pid=int(data[:lpar]),
        comm=data[lpar + 1 : rpar],
        state=rest[0].decode("ascii", "replace"),
        ppid=int(rest[1]),
        start_time=int(rest[19]),
    )


def parse_nspid(status: bytes) -> tuple[int, ...]:
    """The ``NSpid:`` line of /proc/PID/status: pids from the reader's namespace downwards.

    Its length tells how deep the process's pid namespace is below the namespace of the
    procfs mount; a process cannot change it.
    """
    fields = _status_field(status, b"NSpid:")
    if not fields:
        raise ValueError("no NSpid line in /proc/PID/status (kernel < 4.1?)")
    return tuple(int(f) for f in fields)


def _status_field(status: bytes, key: bytes) -> list[bytes] | None:
    """The words after KEY on its line of /proc/PID/status, or None. A find, not a split of
    every line: a pass reads the status of every process whose ns link it may not read (the
    thousands of another user's), and this is most of its own cost there (9 -> 1.5 us)."""
    at = status.find(b"\n" + key)
    if at < 0:
        if not status.startswith(key):
            return None
        at = -1
    start = at + 1 + len(key)
    end = status.find(b"\n", start)
    return status[start : end if end >= 0 else len(status)].split()


def parse_uids(status: bytes) -> tuple[int, int, int, int]:
    """The ``Uid:`` line of /proc/PID/status: real, effective, saved set and file-system uid,
    as seen from the reader's user namespace (proc_pid_status(): ``from_kuid_munged``; an id
    with no mapping there shows as the overflow uid, 65534)."""
    fields = _status_field(status, b"Uid:")
    if fields is None or len(fields) != 4:
        raise ValueError("no well-formed Uid line in /proc/PID/status")
    real, effective, saved, fs = (int(f) for f in fields)
    return real, effective, saved, fs


SIGKILL_BIT = 1 << (9 - 1)  # signal N is bit N-1 of the SigPnd/ShdPnd masks (proc_pid_status(5))


def parse_pending(status: bytes) -> int:
    """The signals pending for a process (``ShdPnd``, the whole group's) or its main thread
    (``SigPnd``) in /proc/PID/status, as one mask."""
    mask = 0
    found = 0
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")):
            mask |= int(line.split(b":", 1)[1].strip() or b"0", 16)
            found += 1
    if found != 2:
        raise ValueError("no SigPnd/ShdPnd lines in /proc/PID/status")
    return mask


def parse_single_id_map(data: bytes) -> int | None:
    """/proc/PID/uid_map (user_namespaces(7)): the one outside id a namespace maps, or None
    unless the map is exactly one line mapping a range of length 1.

    The lines are ``ID-inside ID-outside LENGTH`` and the outside ids are those of the
    *reader's* user namespace, so the supervisor reads the ids its own /proc shows."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != 1:
        return None
    fields = lines[0].split()
    if len(fields) != 3 or not all(f.isdigit() for f in fields) or fields[2] != b"1":
        return None
    return int(fields[1])


def parse_cgroup(data: bytes) -> dict[str, str]:
    """/proc/PID/cgroup as {controllers: path}; the v2 hierarchy is under the key ``""``."""
    result: dict[str, str] = {}
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"bad /proc/PID/cgroup line: {line!r}")
        result[parts[1]] = parts[2]
    return result


def parse_ns_link(link: bytes | str) -> int:
    """``pid:[4026531836]`` -> 4026531836 (the inode of the namespace)."""
    if isinstance(link, str):
        link = link.encode()
    lbr, rbr = link.find(b"["), link.rfind(b"]")
    if lbr < 0 or rbr < lbr:
        raise ValueError(f"not a namespace link: {link!r}")
    return int(link[lbr + 1 : rbr])


def parse_boot_id(data: bytes) -> str:
    text = data.decode("ascii").strip()
    if len(text) != 36:
        raise ValueError(f"not a boot id: {text!r}")
    return text


# --- the reader ---------------------------------------------------------------------------


@record(slots=True)
class NsIdentity:
    """A pid namespace: ``ns_id`` from NS_GET_ID (None where the kernel lacks it) + inode."""

    ns_id: int | None
    inode: int


class ProcFS:
    """Thin reader over a procfs root (default /proc). Every method is one or two syscalls."""

    def __init__(self, root: str | os.PathLike[str] = "/proc") -> None:
        self.root = os.fspath(root)  # str, not pathlib.Path: pathlib costs ms on every run
        self._broot = os.fsencode(self.root)

    def _path(self, pid: int, name: bytes) -> bytes:
        return b"%s/%d/%s" % (self._broot, pid, name)

    def pids(self) -> list[int]:
        """Numeric entries of the root, i.e. the processes alive when each was listed."""
        try:
            with os.scandir(self._broot) as it:
                return [int(e.name) for e in it if e.name.isdigit()]
        except OSError as err:
            raise ProcfsError(f"cannot list {self.root}: {err.strerror}") from err

    def read(self, pid: int, name: bytes, size: int = 4096) -> bytes:
        path = self._path(pid, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            raise _domain_error(err, os.fsdecode(path)) from err
        try:
            return os.read(fd, size)
        except OSError as err:
            raise _domain_error(err, os.fsdecode(path)) from err
        finally:
            os.close(fd)

    def stat(self, pid: int) -> Stat:
        data = self.read(pid, b"stat", 1024)
        if not data:  # the process went away between open and read
            raise ProcessGone(f"{self.root}/{pid}/stat is empty")
        return parse_stat(data)

    def open_stat(self, pid: int) -> int:
        """An fd on /proc/PID/stat. It is bound to the process, not the number: once the
        process is reaped, reads give ESRCH even if the pid is reused (fs/proc/base.c)."""
        try:
            return os.open(self._path(pid, b"stat"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            raise _domain_error(err, f"{self.root}/{pid}/stat") from err

    @staticmethod
    def read_stat_fd(fd: int) -> Stat:
        try:
            data = os.pread(fd, 1024, 0)
        except OSError as err:
            raise _domain_error(err, "stat") from err
        if not data:
            raise ProcessGone("stat is empty")
        return parse_stat(data)

    def nspid(self, pid: int) -> tuple[int, ...]:
        return parse_nspid(self.read(pid, b"status", 8192))

    def status(self, pid: int) -> bytes:
        """/proc/PID/status: anyone may read it (no ptrace check), unlike the ns links."""
        data = self.read(pid, b"status", 8192)
        if not data:
            raise ProcessGone(f"{self.root}/{pid}/status is empty")
        return data

    def single_mapped_uid(self, pid: int) -> int | None:
        """The one outside uid the user namespace of ``pid`` maps (``parse_single_id_map``)."""
        return parse_single_id_map(self.read(pid, b"uid_map", 4096))

    def cgroup(self, pid: int) -> dict[str, str]:
        return parse_cgroup(self.read(pid, b"cgroup", 8192))

    def pidns_inode(self, pid: int) -> int:
        """Inode of the pid namespace; one readlink, the cheap filter of a proof pass."""
        path = self._path(pid, b"ns/pid")
        try:
            return parse_ns_link(os.readlink(path))
        except OSError as err:
            raise _domain_error(err, os.fsdecode(path)) from err
        except ValueError as err:  # a root that does not look like procfs
            raise Unreadable(f"{os.fsdecode(path)}: {err}") from err

    def open_pidns(self, pid: int) -> int:
        path = self._path(pid, b"ns/pid")
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            raise _domain_error(err, os.fsdecode(path)) from err

    def pidns_identity(self, pid: int) -> NsIdentity:
        fd = self.open_pidns(pid)
        try:
            return NsIdentity(ns_fd_id(fd), os.fstat(fd).st_ino)
        finally:
            os.close(fd)

    def boot_id(self) -> str:
        path = os.path.join(self.root, "sys/kernel/random/boot_id")
        try:
            with open(path, "rb") as f:
                return parse_boot_id(f.read())
        except OSError as err:
            raise ProcfsError(f"cannot read {path}: {err.strerror}") from err


def ns_fd_id(fd: int) -> int | None:
    """NS_GET_ID of an nsfs fd, or None when the kernel does not know the ioctl."""
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, NS_GET_ID, buf, True)
    except OSError as err:
        if err.errno in (errno.ENOTTY, errno.EINVAL):
            return None
        raise _domain_error(err, "NS_GET_ID") from err
    return int.from_bytes(buf, sys.byteorder)  # a __u64 in host order; no struct import


def ns_fd_ancestry(fd: int, limit: int = 40) -> list[NsIdentity]:
    """The namespace of ``fd`` and its parents up to (excluding) the caller's scope.

    NS_GET_PARENT stops with EPERM at the caller's own pid namespace (measured), so the list
    ends at the first namespace below ours. ``fd`` stays open; parent fds are closed here.
    """
    chain = [NsIdentity(ns_fd_id(fd), os.fstat(fd).st_ino)]
    current = fd
    try:
        for _ in range(limit):  # the kernel caps pid-namespace nesting at 32 levels
            try:
                parent = fcntl.ioctl(current, NS_GET_PARENT)
            except OSError as err:
                if err.errno == errno.EPERM:
                    break
                raise _domain_error(err, "NS_GET_PARENT") from err
            if current != fd:
                os.close(current)
            current = parent
            chain.append(NsIdentity(ns_fd_id(current), os.fstat(current).st_ino))
    finally:
        if current != fd:
            os.close(current)
    return chain
