"""The checks that prove P1-P13 by trying, in the run's own view (DESIGN §4).

Two callers: the prover (``prover.py``), which joins a sandbox bwrap holds before anything runs
in it and runs ``Probe`` in its *held* mode, reading the held process's own state at /proc/1
of the run's /proc; and ``no-docker check`` inside a run, which runs it on itself. Standard
library only, and only its cheap corners: ``socket`` (enum), ``json`` and ``re`` each cost
more than the whole proof, so this module talks to ``_socket`` and reads a line-based plan.

Nothing the environment or a file *claims* is taken as proof. The plan (from the supervisor)
only says what to *try* (which outside sockets and ports exist) and which outside namespaces
to differ from; the verdicts come from what the kernel answers here: the pids /proc shows, the
capability sets, connect() refusing, writes failing. A sandbox that is none therefore fails at
P1 (the host's /proc), before this module reaches out.

The checks run from the least to the most intrusive: views of /proc first, then connect()
attempts (which send no byte), then write attempts (O_TMPFILE: nothing is left behind even if
one succeeded), so a sandbox that is not one is refused before anything is tried on it. The
first failure raises ``NotProven`` (``run_all``), or ends the table (``table``, for check).
"""

from __future__ import annotations

import _socket
import errno
import os
import stat
import time

EXIT_NOT_PROVEN = 125

# Init namespaces have fixed inode numbers (include/linux/proc_ns.h): a run must never be in them.
INIT_NS = {"ipc": "ipc:[4026531839]", "uts": "uts:[4026531838]", "user": "user:[4026531837]",
           "pid": "pid:[4026531836]", "cgroup": "cgroup:[4026531835]"}
ENGINE_PORTS = (2375, 2376, 2377, 4243, 6443, 10250)
# DESIGN §7: well-known engine sockets. "~" is the outside $HOME, "$XDG" the outside
# XDG_RUNTIME_DIR (both paths are also where the sandbox puts its tmpfs).
ENGINE_PATHS = (
    "/var/run/docker.sock", "/run/docker.sock", "~/.docker/run/docker.sock",
    "~/.docker/desktop/docker.sock", "$XDG/docker.sock", "/run/podman/podman.sock",
    "/var/run/podman/podman.sock", "$XDG/podman/podman.sock", "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock", "/run/containerd/containerd.sock.ttrpc",
    "/run/buildkit/buildkitd.sock", "$XDG/buildkit/buildkitd.sock", "/run/crio/crio.sock",
    "/var/run/crio/crio.sock", "/run/k3s/containerd/containerd.sock", "/var/run/cri-dockerd.sock",
    "/var/lib/kubelet/pod-resources/kubelet.sock", "~/.colima/default/docker.sock",
    "~/.rd/docker.sock", "~/.orbstack/run/docker.sock", "~/.lima/default/sock/docker.sock",
    "/proc/1/root/run/docker.sock", "/proc/1/root/var/run/docker.sock",
    "/run/user/$UID/docker.sock", "/run/user/$UID/podman/podman.sock",
)
DENIED_NAMES = frozenset({
    "KUBECONFIG", "BUILDKIT_HOST", "SSH_AUTH_SOCK", "BASH_ENV", "ENV", "ZDOTDIR",
    "PROMPT_COMMAND", "LD_PRELOAD", "LD_AUDIT", "CONTAINER_HOST", "CONTAINER_CONNECTION",
    "DOCKER_HOST", "XDG_RUNTIME_DIR",
})
DENIED_PREFIXES = ("DOCKER_", "CONTAINER_", "CONTAINERD_", "DBUS_", "PODMAN_", "BUILDKIT_", "KUBE",
                   "BASH_FUNC_")
SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshenv", ".zshrc",
                 ".zprofile", ".zlogin")
# Writable mounts never allowed below these, whatever the plan says (work dirs do live under
# /opt, /srv and /var, e.g. /var/lib/jenkins/workspace: those are left to the plan).
SYSTEM_MOUNT_PREFIXES = ("/etc/", "/usr/", "/boot/", "/nix/", "/bin/", "/sbin/", "/lib/", "/lib32/",
                         "/lib64/", "/libx32/")
# First components under the outside $HOME that run code later (plan.HOME_RUNS_LATER, in part).
HOME_RUNS_LATER = frozenset({".config", ".local", ".ssh", ".docker", ".kube", ".gnupg", ".bashrc",
                             ".bash_profile", ".bash_login", ".profile", ".zshenv", ".zshrc", ".zprofile",
                             ".zlogin", ".gitconfig", ".cargo", ".pyenv", "bin", ".bin"})
# What a run must not be able to write, whatever the plan says.
SYSTEM_WRITE_TRIES = ("/", "/etc", "/usr", "/usr/local", "/var", "/opt", "/srv")
# Host-wide kernel settings: core_pattern and modprobe name programs the kernel runs as root
# outside any sandbox. Tried with an open for writing only; nothing is ever written.
KERNEL_WRITE_TRIES = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
                      "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/sys/fs/binfmt_misc/register")
# --- the syscall filter (P5, P10) ------------------------------------------------------------
# bwrap applies the run's filter (isolation/syscall_filter.py, `--seccomp FD`) to its init and to this
# process right before exec, so CMD and everything it starts inherit it. The probe installs
# nothing (that took `import ctypes`, ~5 ms of every run); it proves the filter by trying what
# that filter refuses in its own way: a setuid or setgid mode (EPERM), in gate and check mode.
# `check` (standalone, not on every run's path) also tries syscalls of the rest of the filter
# through ctypes: arch -> (name, number, arguments, the errno the run's filter returns). Each
# unfiltered answer differs: io_uring_setup(0, NULL) EINVAL/EFAULT, openat2(AT_FDCWD, NULL,
# NULL, 0) EFAULT/EINVAL, keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) the id,
# ptrace(PTRACE_PEEKDATA, 0) ESRCH (no pid 0). Numbers: tests/unit/test_probe_seccomp.py.
FILTER_TRIES = {
    "x86_64": (("io_uring_setup", 425, (0, 0), errno.ENOSYS), ("openat2", 437, (-100, 0, 0, 0), errno.ENOSYS),
               ("keyctl", 250, (0, -3, 0), errno.EPERM), ("ptrace", 101, (2, 0, 0, 0), errno.EPERM)),
    "aarch64": (("io_uring_setup", 425, (0, 0), errno.ENOSYS),
                ("openat2", 437, (-100, 0, 0, 0), errno.ENOSYS),
                ("keyctl", 219, (0, -3, 0), errno.EPERM), ("ptrace", 117, (2, 0, 0, 0), errno.EPERM)),
}


def try_setid_modes(directory: str) -> str | None:
    """What a setuid/setgid mode met, tried on a nameless file in DIRECTORY (it vanishes on
    close): None when every try was refused with EPERM, as the run's filter refuses them (seccomp
    runs before any permission check, so nothing else answers first); else which try was not.
    OSError when nothing can be created in DIRECTORY (try another one)."""
    flags = os.O_WRONLY | getattr(os, "O_TMPFILE", 0o20200000)
    try:
        fd = os.open(directory, flags, 0o4700)
    except OSError as err:
        first = err.errno
    else:
        os.close(fd)
        return f"open(O_TMPFILE, 04700) in {directory} succeeded"
    fd = os.open(directory, flags, 0o600)
    try:
        if first != errno.EPERM:
            return f"open(O_TMPFILE, 04700) in {directory} failed with {errname(first)}, not EPERM"
        # S_ISGID alone too: a filter that only looks for S_ISUID is not the run's.
        for mode in (0o4700, 0o2700):
            try:
                os.fchmod(fd, mode)
            except OSError as err:
                if err.errno != errno.EPERM:
                    return f"fchmod(0{mode:o}) of a file in {directory} failed with {errname(err.errno)}, " \
                           "not EPERM"
            else:
                return f"fchmod(0{mode:o}) of a file in {directory} succeeded"
    finally:
        os.close(fd)
    return None


def _raw_syscall() -> object:
    """libc's ``syscall(2)`` through ``_ctypes`` alone (0.3 ms to import, and loaded already in
    the supervisor, whose prover imports nothing; ``ctypes`` costs 2.3 ms): every argument a C
    long (a plain int would be passed as a 32-bit int to a variadic call), errno kept."""
    import _ctypes

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Syscall(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    call = Syscall(_ctypes.dlsym(_ctypes.dlopen(None, os.RTLD_NOW), "syscall"))

    def syscall(*args: object) -> int:
        _ctypes.set_errno(0)
        return call(*(a if isinstance(a, bytes) else Long(a) for a in args))

    syscall.errno = _ctypes.get_errno  # type: ignore[attr-defined]
    return syscall


def try_filtered_syscalls(arch: str) -> str | None:
    """The first of FILTER_TRIES[ARCH] not answered with the run filter's errno (what it got), or
    None: io_uring, openat2, keyctl and ptrace, tried."""
    syscall = _raw_syscall()
    for name, nr, args, expected in FILTER_TRIES[arch]:
        result = syscall(nr, *args)  # type: ignore[operator]
        code = syscall.errno() if result == -1 else None  # type: ignore[attr-defined]
        if code != expected:
            return f"{name}() answered {errname(code)}, not {errname(expected)}"
    return None


def init_seccomp_mode(wait: float = 0.05) -> str | None:
    """``Seccomp:`` of pid 1, the sandbox's init, for ``check``. bwrap's init applies the filter
    right after it forks the command's side (``do_init``), which the command could outrun; a
    short bounded wait covers a scheduler that runs the child first. (The prover needs none:
    the held process it proves is pid 1 itself, whose status ``p5_filter`` reads first.)"""
    deadline = time.monotonic() + wait
    while True:
        try:
            mode = status_fields(read_text("/proc/1/status")).get("Seccomp")
        except OSError:
            mode = None
        if mode != "0" or time.monotonic() >= deadline:
            return mode
        time.sleep(0.002)


# --- nested user namespaces (P9) --------------------------------------------------------------
# Made without a uid map, a user namespace inside the run held every capability over its own
# mount and cgroup namespaces: it mounted cgroup2/v1 writable, lifted --max-pids, froze the
# sandbox's init and left cgroups behind (red-team review). The run denies them twice: bwrap's
# --disable-userns (the kernel's user.max_user_namespaces: ENOSPC) and the syscall filter
# (EPERM; clone3 ENOSYS, its flags being out of the filter's reach). P9 tries every way in, in
# a forked child (what succeeded there is gone with it).
# arch -> (unshare, clone, clone3); numbers as in syscall_filter (tested together).
USERNS_SYSCALLS = {"x86_64": (272, 56, 435), "aarch64": (97, 220, 435)}
CLONE_NEWUSER = 0x10000000
USERNS_REFUSED = (errno.EPERM, errno.ENOSPC, errno.EUSERS)  # filter, limit, nesting depth


def try_nested_userns(arch: str) -> str | None:
    """Try to make a user namespace: unshare, clone and clone3 with CLONE_NEWUSER. None when
    each was refused as the run refuses it; else the first that was not (what it answered).
    Call it in a child process: a try that succeeds moves the caller into the new namespace.

    Through ``_ctypes`` alone (0.3 ms to import; ``ctypes`` costs 2.3 ms): ``syscall(2)`` with
    every argument a C long (a plain int would be passed as a 32-bit int to a variadic call)."""
    syscall = _raw_syscall()
    unshare, clone, clone3 = USERNS_SYSCALLS[arch]
    sigchld = 17
    # struct clone_args, version 0 (64 bytes, little-endian u64s): flags, pidfd, child_tid,
    # parent_tid, exit_signal, stack, stack_size, tls
    args3 = CLONE_NEWUSER.to_bytes(8, "little") + bytes(24) + sigchld.to_bytes(8, "little") + bytes(24)
    tries = (("unshare(CLONE_NEWUSER)", (unshare, CLONE_NEWUSER), ()),
             ("clone(CLONE_NEWUSER)", (clone, CLONE_NEWUSER | sigchld, 0, 0, 0, 0), ()),
             ("clone3(CLONE_NEWUSER)", (clone3, args3, 64), (errno.ENOSYS,)))
    for name, args, also in tries:
        result = syscall(*args)  # type: ignore[operator]
        if result == 0 and name != "unshare(CLONE_NEWUSER)":
            os._exit(0)  # the new process of a clone that worked: gone at once
        if result != -1:
            if result > 0:
                os.waitpid(result, 0)
            return f"{name} succeeded"
        code = syscall.errno()  # type: ignore[attr-defined]
        if code not in USERNS_REFUSED + also:
            return f"{name} answered {errname(code)}, not a refusal"
    return None


def try_signal_outside(pid: int) -> str | None:
    """P10 from a process of the run's pid namespace: None when PID (outside) cannot be
    signalled from here, else "P10 what happened"."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    if os.path.exists(f"/proc/{pid}"):
        return None  # a process of the run that happens to have that number
    return f"P10 pid {pid} outside the run answers signals"


AF_VSOCK = 40  # linux/socket.h; spelled out: not every Python build names it
PROPERTIES = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13")
# Refusals of connect() that mean "not reachable" (anything else, e.g. a timeout, is suspect).
UNREACHED = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR, errno.ENOTSOCK,
                       errno.EACCES, errno.EPERM, errno.ENETUNREACH, errno.EHOSTUNREACH,
                       errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.ELOOP, errno.ENAMETOOLONG,
                       errno.EPROTOTYPE, errno.EINVAL})
WRITE_REFUSED = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


class NotProven(Exception):
    def __init__(self, prop: str, detail: str) -> None:
        super().__init__(f"{prop} not proven: {detail}")
        self.prop = prop
        self.detail = detail


# --- plan -------------------------------------------------------------------------------
# One "key value" per line; a list repeats its key. Values escape "\" and newline, so any
# path survives. Kept trivial so it needs no json/re (see the module docstring). The encoder
# is ``plan.encode_plan`` (outside); tests round-trip the two.

def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def decode_plan(data: bytes) -> dict[str, list[str]]:
    plan: dict[str, list[str]] = {}
    for line in data.decode("utf-8", "surrogateescape").split("\n"):
        if not line:
            continue
        key, sep, value = line.partition(" ")
        if not sep:
            raise ValueError(f"bad plan line {line[:80]!r}")
        plan.setdefault(key, []).append(_unescape(value))
    return plan


def one(plan: dict[str, list[str]], key: str, default: str = "") -> str:
    values = plan.get(key)
    return values[-1] if values else default


# --- small kernel views -----------------------------------------------------------------

def read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


def read_regular_text(path: str, limit: int = 1 << 16) -> str:
    """Like read_text, for files in the work dir: a FIFO or device there (the previous run's
    work) must not block the probe, so only a regular file is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        return os.read(fd, limit).decode("utf-8", "surrogateescape")
    finally:
        os.close(fd)


def status_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.split("\n"):
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value.strip()
    return fields


def _unoctal(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo (fs/proc_namespace.c).
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, bool, str, str]]:
    """(mount point, read-write?, fstype, "major:minor") per line of /proc/self/mountinfo
    (proc(5)), in mount order."""
    mounts = []
    for line in text.split("\n"):
        if not line:
            continue
        left, sep, right = line.partition(" - ")
        fields = left.split(" ")
        if not sep or len(fields) < 6:
            raise ValueError(f"cannot parse mountinfo line {line[:100]!r}")
        options = fields[5].split(",")
        mounts.append((_unoctal(fields[4]), "rw" in options, right.split(" ", 1)[0], fields[2]))
    return mounts


def visible_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def expand(path: str, home: str, xdg: str) -> str | None:
    path = path.replace("$UID", str(os.getuid()))
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:] if home.startswith("/") else None
    if path.startswith("$XDG/"):
        return xdg.rstrip("/") + path[4:] if xdg.startswith("/") else None
    return path


SUN_PATH = 108  # sizeof(sockaddr_un.sun_path)


def try_connect(family: int, address: object, timeout: float = 1.0) -> int | None:
    """connect() and close at once, sending nothing. None when it connected, else the errno.

    A pathname that fills all of ``sun_path`` (the kernel takes 108 bytes without a NUL;
    Python wants room for one) is tried relative to its directory, from inside it."""
    if family == _socket.AF_UNIX and isinstance(address, str) and address.startswith("/"):
        raw = os.fsencode(address)
        if len(raw) >= SUN_PATH - 1:
            return _try_connect_in_dir(raw, timeout)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
    except OSError as err:
        return err.errno if err.errno is not None else -1
    finally:
        sock.close()
    return None


def _try_connect_in_dir(path: bytes, timeout: float) -> int | None:
    parent, _, name = path.rpartition(b"/")
    try:
        here = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        return err.errno
    try:
        try:
            os.chdir(parent or b"/")
        except OSError as err:
            return err.errno
        return try_connect(_socket.AF_UNIX, name, timeout) if len(name) < SUN_PATH - 1 else errno.ENAMETOOLONG
    finally:
        os.fchdir(here)  # the command must start where bwrap put it
        os.close(here)


def abstract_names_bound(table: str = "/proc/net/unix") -> set[str]:
    """The abstract socket names bound in this network namespace (its /proc/net/unix: the
    last field, ``@name``)."""
    names = set()
    try:
        with open(table, "rb") as f:
            lines = f.read().split(b"\n")[1:]
    except OSError as err:
        raise NotProven("P2", f"cannot read {table}: {err.strerror}") from err
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith(b"@"):
            names.add(fields[7][1:].decode("utf-8", "surrogateescape"))
    return names


def listening_tcp(family: int) -> list[int]:
    """The ports of the listening TCP sockets of FAMILY in this network namespace, from a
    sock_diag dump (sock_diag(7), inet_diag_req_v2 with states = 1 << TCP_LISTEN): the kernel
    walks only its listening hash, where reading /proc/net/tcp walks every TCP socket of the
    machine (measured here: 2.5 ms for two empty tables, 0.1 ms for the dumps)."""
    body = bytes([family, 6, 0, 0]) + (1 << 10).to_bytes(4, "little") + bytes(48)
    request = (len(body) + 16).to_bytes(4, "little") + (20).to_bytes(2, "little") + \
        (0x301).to_bytes(2, "little") + (1).to_bytes(4, "little") + bytes(4) + body
    sock = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW | _socket.SOCK_CLOEXEC, 4)
    ports = []
    try:
        sock.settimeout(5)
        sock.sendto(request, (0, 0))
        while True:
            data = sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length = int.from_bytes(data[offset:offset + 4], "little")
                kind = int.from_bytes(data[offset + 4:offset + 6], "little")
                if length < 16 or offset + length > len(data):
                    raise OSError(errno.EPROTO, "malformed sock_diag reply")
                if kind == 3:  # NLMSG_DONE
                    return ports
                if kind == 2:  # NLMSG_ERROR
                    code = -int.from_bytes(data[offset + 16:offset + 20], "little", signed=True)
                    raise OSError(code, os.strerror(code) if code > 0 else "sock_diag error")
                if kind == 20 and length >= 16 + 8:  # an inet_diag_msg: its source port, big-endian
                    ports.append(int.from_bytes(data[offset + 20:offset + 22], "big"))
                offset += (length + 3) & ~3
            if not data:
                raise OSError(errno.EPROTO, "sock_diag ended the dump early")
    finally:
        sock.close()


def try_dgram_route(family: int, address: object) -> int | None:
    """A UDP connect() only looks the route up; no packet leaves. None when a route exists."""
    sock = _socket.socket(family, _socket.SOCK_DGRAM)
    try:
        sock.connect(address)
    except OSError as err:
        return err.errno
    finally:
        sock.close()
    return None


def try_write(path: str) -> int | None:
    """Try to write at PATH without changing it. None when the write was possible, else errno.

    Directories: an O_TMPFILE file, which has no name and vanishes on close. Files: an
    O_WRONLY|O_APPEND open, which writes nothing.
    """
    try:
        st = os.stat(path)
    except OSError:
        return errno.ENOENT
    if stat.S_ISDIR(st.st_mode):
        flags = os.O_WRONLY | getattr(os, "O_TMPFILE", 0o20200000)
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as err:
            if err.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                # File system without O_TMPFILE: the kernel's own write-permission check.
                return None if os.access(path, os.W_OK) else errno.EROFS
            return err.errno
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode):
        return errno.EROFS  # devices (/dev/null over a masked socket) are nothing to write
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except OSError as err:
        return err.errno
    os.close(fd)
    return None


def try_open_rw(path: str) -> int | None:
    """Open PATH read-write and close it at once (nothing is written): None when it opened."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as err:
        return err.errno
    os.close(fd)
    return None


def _c_path(text: str) -> str:
    """A path from a git file as git uses it: a C string, ended by a NUL (os refuses one:
    ValueError, which stopped the proof with "unexpected error")."""
    return text.split("\0", 1)[0]


def git_write_tries(work: str) -> list[str]:
    """Files in WORK's git layout that run code later, outside: found here, not taken from the
    plan, so a policy that forgot to protect them is still caught."""
    if not work.startswith("/"):
        return []
    dotgit = os.path.join(work, ".git")
    common = dotgit
    tries = []
    if os.path.isfile(dotgit):
        tries.append(dotgit)  # rewriting it would point git at another config
        try:
            first = read_regular_text(dotgit).split("\n", 1)[0]
            gitdir = os.path.join(work, _c_path(first.partition("gitdir:")[2].strip()))
            common = gitdir
            try:
                named = read_regular_text(os.path.join(gitdir, "commondir"))
                common = os.path.join(gitdir, _c_path(named.strip()))
            except OSError:
                pass
        except OSError:
            return tries
    elif not os.path.isdir(dotgit):
        return tries
    else:
        try:  # a .git directory with a commondir file takes config and hooks from there
            named = read_regular_text(os.path.join(dotgit, "commondir"))
            common = os.path.join(dotgit, _c_path(named.strip()))
        except OSError:
            pass
    # HEAD, info/ and commondir too: each changes what git runs or where it looks (issue 16).
    return tries + [os.path.join(common, "hooks"), os.path.join(common, "config"),
                    *(os.path.join(dotgit, n) for n in ("hooks", "config", "HEAD", "info", "commondir"))]


SO_NETNS_COOKIE = 71  # asm-generic/socket.h (Linux 5.14); not in every Python's socket module


def netns_cookie(sock: _socket.socket) -> int | None:
    """The network namespace a socket was created in (None: the kernel cannot say, which P7
    takes as "another namespace": fail closed)."""
    try:
        return int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, SO_NETNS_COOKIE, 8), "little")
    except OSError:
        return None


def errname(code: int | None) -> str:
    return errno.errorcode.get(code, str(code)) if code is not None else "success"


# --- the properties -----------------------------------------------------------------------

class Held:
    """What the prover knows of the sandbox bwrap holds (``no-docker run``, prover.py): the
    held process is pid 1 of the run's pid namespace, and the prover, which joined the run's
    namespaces and root with CMD's credentials, reads its state there (/proc/1/...) where the
    in-run ``check`` reads its own (/proc/self/...).

    ``fds``: the descriptors the held process may hold without O_CLOEXEC besides 0-2 (the ones
    the supervisor passed and bwrap or the gate close before CMD: --block-fd, --seccomp, the
    gate's pipes); ``stdio``: (st_dev, st_ino) of what the supervisor passed as 0, 1, 2;
    ``session``: what the prover saw of the held process's session from outside (None: a
    session of its own, without the caller's terminal; else what is wrong); ``terminal``: the
    device of the run's own pty (the only terminal 0-2 may be)."""

    def __init__(self, fds: frozenset[int], stdio: tuple[tuple[int, int], ...], session: str | None,
                 terminal: int | None = None) -> None:
        self.fds = fds
        self.stdio = stdio
        self.session = session
        self.terminal = terminal  # st_rdev of the pty no-docker relays, when stdio was a terminal


O_PATH = 0o10000000
O_CLOEXEC_FLAG = 0o2000000  # as fdinfo's octal "flags:" shows it


class Probe:
    """All checks over one plan. ``gate`` is the pre-exec mode (stricter: the run must be
    alone in the sandbox); ``check`` mode runs inside a live run, next to its processes.
    ``held``: the gate as the prover runs it, on the sandbox bwrap holds (see Held)."""

    def __init__(self, plan: dict[str, list[str]], *, gate: bool, held: Held | None = None) -> None:
        self.plan = plan
        self.gate = gate or held is not None
        self.held = held
        self.proc = "/proc/1" if held is not None else "/proc/self"
        self._environ: dict[str, str] | None = None
        self.proven: list[str] = []
        self._mounts: list[tuple[str, bool, str, str]] | None = None
        self._status: dict[str, str] | None = None
        self.sudo_pid: int | None = None
        self.userns_try: tuple[int, int] | None = None  # (pid, read end) of the P9 try
        self._netns_cookie: int | None = None
        # prop -> what was tried and what the kernel answered, for `check`'s detail (a few
        # appends per proof: the gate pays nothing that shows)
        self.said: dict[str, list[str]] = {}

    # helpers
    def tell(self, prop: str, text: str) -> None:
        self.said.setdefault(prop, []).append(text)

    def mounts(self) -> list[tuple[str, bool, str, str]]:
        if self._mounts is None:
            try:
                self._mounts = parse_mountinfo(read_text(f"{self.proc}/mountinfo"))
            except (OSError, ValueError) as err:
                raise NotProven("P4", f"cannot read {self.proc}/mountinfo: {err}") from err
        return self._mounts

    def status(self) -> dict[str, str]:
        if self._status is None:
            self._status = status_fields(read_text(f"{self.proc}/status"))
        return self._status

    def environ(self) -> dict[str, str]:
        """The run's environment: the held process's (what bwrap was started with, and passes
        on), or this process's own (``check``)."""
        if self.held is None:
            return dict(os.environ)
        if self._environ is None:
            try:
                raw = read_text(f"{self.proc}/environ")
            except OSError as err:
                raise NotProven("P6", f"cannot read {self.proc}/environ: {err}") from err
            self._environ = dict(item.partition("=")[::2] for item in raw.split("\0") if item)
        return self._environ

    def ns(self, name: str) -> str:
        try:
            return os.readlink(f"{self.proc}/ns/{name}")
        except OSError as err:
            raise NotProven("P1", f"cannot read {self.proc}/ns/{name}: {err}") from err

    def _differs(self, prop: str, name: str) -> None:
        inside = self.ns(name)
        outside = one(self.plan, f"ns.{name}")
        if not outside:
            raise NotProven(prop, "no run plan names the outside namespaces (not inside a no-docker run)")
        if inside == outside or inside == INIT_NS.get(name):
            raise NotProven(prop, f"same {name} namespace as outside ({inside})")
        self.tell(prop, f"{name} namespace {inside}, outside {outside}")

    # P1: own pid namespace, /proc shows only the run
    def p1(self) -> None:
        self._differs("P1", "pid")
        pids = visible_pids()
        if self.gate:
            others = sorted(set(pids) - {1, os.getpid()})
            if others:
                raise NotProven("P1", f"/proc shows {len(pids)} processes, e.g. pid {others[:5]}, "
                                "not only the run")
        if 1 not in pids:
            raise NotProven("P1", "/proc has no pid 1: it is not this namespace's /proc")
        self.tell("P1", f"/proc shows {len(pids)} processes, pid 1 among them")

    # P5: no capabilities, no_new_privs, no privilege gain
    def p5(self) -> None:
        status = self.status()
        for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            value = status.get(name)
            if value is None or int(value, 16) != 0:
                raise NotProven("P5", f"{name} is {value} (capabilities kept; bwrap needs --cap-drop ALL)")
        if status.get("NoNewPrivs") != "1":
            raise NotProven("P5", f"NoNewPrivs is {status.get('NoNewPrivs')}: setuid programs could gain "
                            "privileges")
        try:
            os.setgroups([])
        except PermissionError:
            pass
        else:
            raise NotProven("P5", "setgroups() succeeded: the probe holds CAP_SETGID")

    # P5 (syscall part): the run's filter is on this process and on the sandbox's init; no
    # setuid/setgid mode can be set (check: nor io_uring, openat2, keyctl, ptrace be used)
    def p5_filter(self) -> None:
        mode = self.status().get("Seccomp")
        if mode != "2":
            raise NotProven("P5", f"no syscall filter on the probe (Seccomp: {mode}; bwrap needs --seccomp)")
        mode = init_seccomp_mode() if self.held is None else mode  # held: pid 1 is what was read
        if mode != "2":
            raise NotProven("P5", f"no syscall filter on the sandbox's init, pid 1 (Seccomp: {mode}; "
                            "bwrap needs --seccomp)")
        leak: str | None = None
        places = ("/tmp", self.environ().get("HOME", "/tmp"), one(self.plan, "work", "/tmp"))
        for directory in dict.fromkeys(places):
            try:
                leak = try_setid_modes(directory)
                break
            except OSError as err:
                error = err
        else:
            # `check` in someone else's sandbox may have no writable /tmp to try in: the
            # syscall tries below are what is left.
            if self.gate:
                raise NotProven("P5", f"no syscall filter shown to refuse setuid modes ({error})") from error
        if leak:
            raise NotProven("P5", f"{leak}: the run's syscall filter is not there, the run could leave "
                            "a setuid program behind")
        if not self.gate or self.held is not None:
            # The rest of the deny list: io_uring, openat2, keyctl, ptrace (the prover carries
            # the very filter the run carries; `check` runs under it).
            arch = os.uname().machine
            if arch not in FILTER_TRIES:
                raise NotProven("P5", f"no syscall filter for {arch} (only {', '.join(FILTER_TRIES)})")
            try:
                wrong = try_filtered_syscalls(arch)
            except (ImportError, AttributeError) as err:
                raise NotProven("P5", f"cannot try the syscall filter: {err}") from err
            if wrong:
                raise NotProven("P5", f"{wrong}: not the run's syscall filter")
        # The init's memory stays masked (policy.proc_masked): code written there would run as
        # the run's init. Opened only, never written.
        for path in ("/proc/1/mem", "/proc/1/task/1/mem"):
            if os.getpid() != 1 and try_open_rw(path) is None:
                raise NotProven("P5", f"{path} is writable: the sandbox's init could be made to run "
                                "the run's code")

    # P12: every connect() of the run goes through the supervisor's mediation, which refuses a
    # pathname socket bound outside the run, whenever it appeared. Tried on the supervisor's own
    # sentinel: a socket bound and listening outside, shown at SENTINEL_PATH. Without the
    # mediation the kernel would accept this connect; only the mediation answers ECONNREFUSED
    # (ENOSYS: the filter is there but nobody answers it, also a failure).
    def p12(self) -> None:
        sentinel = one(self.plan, "sentinel")
        if not sentinel:
            raise NotProven("P12", "no sentinel socket in the run plan: the connect mediation cannot "
                            "be tried")
        try:
            shown = stat.S_ISSOCK(os.stat(sentinel).st_mode)
        except OSError as err:
            raise NotProven("P12", f"the sentinel {sentinel} is not there ({errname(err.errno)})") from err
        if not shown:
            raise NotProven("P12", f"the sentinel {sentinel} is not a socket")
        code = try_connect(_socket.AF_UNIX, sentinel)
        if code is None:
            raise NotProven("P12", f"connect to the sentinel {sentinel}, bound outside the run, succeeded: "
                            "no connect mediation")
        if code != errno.ECONNREFUSED:
            raise NotProven("P12", f"connect to the sentinel {sentinel}: {errname(code)} instead of the "
                            "mediation's refusal")
        self.tell("P12", f"connect() to the sentinel {sentinel}, listening outside: ECONNREFUSED "
                  "(the mediation's answer)")

    # P13: no socket family that no network namespace confines. AF_VSOCK reaches the
    # hypervisor host and its VMs (Docker Desktop's engine) from any namespace; the run's
    # filter refuses it (syscall_filter.SOCKET_SYSCALLS). Tried, not read from the filter: a
    # kernel that autoloads vsock on first use would answer this very try.
    def p13(self) -> None:
        for label, attempt in (("socket", lambda: _socket.socket(AF_VSOCK, _socket.SOCK_STREAM)),
                               ("socketpair", lambda: _socket.socketpair(AF_VSOCK, _socket.SOCK_STREAM))):
            try:
                made = attempt()
            except OSError as err:
                if err.errno not in (errno.EAFNOSUPPORT, errno.EPERM, errno.EOPNOTSUPP):
                    raise NotProven("P13", f"{label}(AF_VSOCK) failed with {err} instead of being "
                                    "refused") from err
                self.tell("P13", f"{label}(AF_VSOCK): {errname(err.errno)}")
                continue
            for sock in made if isinstance(made, tuple) else (made,):
                sock.close()
            raise NotProven("P13", f"{label}(AF_VSOCK) succeeded: vsock reaches the hypervisor host and "
                            "its VMs from any network namespace")

    def start_sudo(self) -> None:
        # `sudo -n true` must fail; started early so it runs while the other checks do. Only
        # from an absolute PATH dir outside every writable place: a relative entry ("bin") is
        # the work dir, where the previous run could have left a `sudo` of its own (measured:
        # it ran, before the syscall filter existed; red-team review).
        writable = [w for w in self.plan.get("writable", []) if w.startswith("/")]
        environ = self.environ()
        for directory in environ.get("PATH", "/usr/bin:/bin").split(":"):
            if not directory.startswith("/") or any(
                    directory == w or directory.startswith(w.rstrip("/") + "/") for w in writable):
                continue
            candidate = os.path.join(directory, "sudo")
            if os.access(candidate, os.X_OK):
                try:
                    # A fixed environment: the run's may name libraries in the work dir
                    # (LD_LIBRARY_PATH kept), whose code must not run while it is proven.
                    self.sudo_pid = os.posix_spawn(
                        candidate, [candidate, "-n", "true"], {"PATH": SAFE_PATH, "LC_ALL": "C"},
                        file_actions=[(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                                      (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                                      (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
                except OSError:
                    self.sudo_pid = None
                return

    def finish_sudo(self) -> None:
        if self.sudo_pid is None:
            return
        _, status = os.waitpid(self.sudo_pid, 0)
        self.sudo_pid = None
        if os.waitstatus_to_exitcode(status) == 0:
            raise NotProven("P5", "`sudo -n true` succeeded inside the run")

    def p5_sudo(self) -> None:
        """`no-docker check`: ``sudo -n true`` must fail, tried on the spot (the held proof of a
        run does not try it: NoNewPrivs and the empty capability sets, p5, are what makes it
        fail, and they are read from the kernel; docs/isolation.md)."""
        self.start_sudo()
        self.finish_sudo()

    # P6: environment allowlist
    def p6(self) -> None:
        environ = self.environ()
        for name in environ:
            if name in DENIED_NAMES or (name.startswith(DENIED_PREFIXES) and name != "DOCKER_CONFIG"):
                raise NotProven("P6", f"${name} is set inside the run")
        if not self.gate:
            self.tell("P6", f"{len(environ)} variables read, none denied (DOCKER_*, KUBECONFIG, "
                      "SSH_AUTH_SOCK, LD_PRELOAD, ...)")
            return  # a run's commands may change HOME or DOCKER_CONFIG for their own children
        config = environ.get("DOCKER_CONFIG", "")
        if config != one(self.plan, "docker_config") or not config:
            raise NotProven("P6", f"DOCKER_CONFIG is {config!r}, not the run's empty directory")
        try:
            entries = os.listdir(config)
        except OSError as err:
            raise NotProven("P6", f"DOCKER_CONFIG {config}: {err}") from err
        if entries:
            raise NotProven("P6", f"DOCKER_CONFIG {config} is not empty: {sorted(entries)[:3]}")
        if environ.get("HOME") != one(self.plan, "home"):
            raise NotProven("P6", f"HOME is {environ.get('HOME')!r}, not the run's empty home")
        self.tell("P6", f"{len(environ)} variables read, none denied")

    def own_netns_cookie(self) -> int | None:
        if self._netns_cookie is None:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                self._netns_cookie = netns_cookie(sock)
            finally:
                sock.close()
        return self._netns_cookie

    # P7: no fd but 0, 1, 2; none of them a socket of another network namespace, nor connected
    # to a named listener
    def p7(self) -> None:
        if self.held is not None:
            self.p7_held(self.held)
            return
        # `check`, next to a running command, whose own fds are its business: 0-2 only.
        for fd in (0, 1, 2):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if not stat.S_ISSOCK(st.st_mode):
                continue
            sock = _socket.socket(fileno=os.dup(fd))
            try:
                cookie = netns_cookie(sock)
                foreign = cookie is None or cookie != self.own_netns_cookie()
                peer = sock.getpeername()
            except OSError:
                peer = None
            finally:
                sock.close()
            if foreign:
                # A socket keeps its creation namespace: connect/sendto on it reach the host's
                # loopback (the supervisor relays a stdio socket through a pipe; this is the
                # proof that nothing crossed anyway).
                raise NotProven("P7", f"fd {fd} is a socket of another network namespace: it can "
                                "connect or send outside the run")
            named = peer.strip("\0") if isinstance(peer, str) else peer.strip(b"\0") if isinstance(
                peer, bytes) else peer
            if named:
                raise NotProven("P7", f"fd {fd} is a socket connected to {peer!r} outside the run")
        self.tell("P7", "fds 0-2 read (fstat, SO_NETNS_COOKIE): none a socket of another network "
                  "namespace or connected to a listener")

    def p7_held(self, held: Held) -> None:
        """P7 on the held sandbox: every descriptor that would cross an exec is 0-2 or one that
        is closed before CMD (``Held.fds``; bwrap's own O_PATH /proc, which it closes before
        exec); 0-2 are what the supervisor passed (never a socket: one is relayed through a
        pipe). The gate proves again, right before CMD, that only 0-2 are left."""
        fds = f"{self.proc}/fd"
        for name in os.listdir(fds):
            fd = int(name)
            if fd in (0, 1, 2) or fd in held.fds:
                continue
            try:
                flags = int(status_fields(read_text(f"{self.proc}/fdinfo/{fd}")).get("flags", "0"), 8)
                target = os.readlink(f"{fds}/{fd}")
            except (OSError, ValueError):
                continue  # closed meanwhile
            if flags & O_CLOEXEC_FLAG or (flags & O_PATH and target == "/proc"):
                continue
            raise NotProven("P7", f"fd {fd} ({target}) crossed into the run")
        for fd, expected in zip((0, 1, 2), held.stdio, strict=True):
            try:
                st = os.stat(f"{fds}/{fd}")
            except OSError as err:
                raise NotProven("P7", f"fd {fd} of the run cannot be read: {err}") from err
            if stat.S_ISSOCK(st.st_mode):
                raise NotProven("P7", f"fd {fd} is a socket of another network namespace: it can "
                                "connect or send outside the run")
            if (st.st_dev, st.st_ino) != expected:
                raise NotProven("P7", f"fd {fd} of the run is not what no-docker gave it")
        self.tell("P7", "only fds 0-2 cross in, each what no-docker gave, none a socket")

    # P8: new session; the only terminal the run holds is its own (the pty no-docker relays,
    # made the controlling terminal of the command's session here); no other terminal visible
    def p8(self) -> None:
        if self.held is not None:
            self.p8_held(self.held)
            return
        sid = os.getsid(0)
        if sid <= 0 or not os.path.exists(f"/proc/{sid}"):
            raise NotProven("P8", f"session {sid} is not a process of the run (no --new-session)")
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            pass
        else:
            try:
                pgrp = os.tcgetpgrp(fd)
            except OSError:
                pgrp = 0
            finally:
                os.close(fd)
            # Its foreground job is seen from inside only if it is a job of the run.
            if pgrp <= 0 or not os.path.exists(f"/proc/{pgrp}"):
                raise NotProven("P8", "/dev/tty opens: the run's controlling terminal belongs to a "
                                "session outside the run")
        self.tell("P8", f"session {sid} is a process of the run; /dev/tty: the run's own or none")

    def p8_held(self, held: Held) -> None:
        """P8 on the held sandbox: its session is not the caller's and has no controlling
        terminal (bwrap was started in a session of its own; the gate makes the run's pty the
        command's, where there is one); no terminal of another session is visible."""
        if held.session is not None:
            raise NotProven("P8", held.session)
        for fd in (0, 1, 2):
            # A terminal among 0-2 must be the run's own pty: on the caller's, a command could
            # change modes that outlive the run (tcsetattr) or signal the caller's foreground
            # job (TIOCSWINSZ -> SIGWINCH).
            path = f"{self.proc}/fd/{fd}"
            try:
                if not stat.S_ISCHR(os.stat(path).st_mode):
                    continue
                tty = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if os.isatty(tty) and os.fstat(tty).st_rdev != held.terminal:
                    raise NotProven("P8", f"fd {fd} is a terminal other than the run's own (the caller's?): "
                                    "a command could change its modes or signal the caller's jobs")
            finally:
                os.close(tty)
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            pass
        else:
            os.close(fd)
            raise NotProven("P8", "/dev/tty opens: the run has a controlling terminal outside it")
        try:
            terminals = [n for n in os.listdir("/dev/pts") if n != "ptmx"]
        except OSError:
            terminals = []
        if terminals:
            raise NotProven("P8", f"/dev/pts shows terminals {terminals[:3]} of other sessions")
        self.tell("P8", "a session of its own, no controlling terminal outside, /dev/pts empty")

    # P9: own IPC and UTS namespaces, cgroup filesystem not writable
    def p9(self) -> None:
        for name in ("ipc", "uts"):
            self._differs("P9", name)
        for point, rw, fstype, _ in self.mounts():
            if fstype in ("cgroup", "cgroup2") and rw:
                raise NotProven("P9", f"cgroup filesystem writable at {point}")
        for path in ("/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs"):
            if os.path.exists(path) and try_write(path) is None:
                raise NotProven("P9", f"{path} is writable")
        self.tell("P9", "no cgroup file system mounted writable, cgroup.procs not writable")
        if not self.gate:  # the gate tries in parallel with the other checks (run_all)
            self.start_userns_try()
            self.finish_userns_try()

    # P9 (nested user namespaces): tried in a child; the gate starts it early and collects it last
    def start_userns_try(self) -> None:
        arch = os.uname().machine
        if arch not in USERNS_SYSCALLS:
            raise NotProven("P9", f"cannot try nested user namespaces on {arch} "
                            f"(only {', '.join(USERNS_SYSCALLS)})")
        read_end, write_end = os.pipe()
        outside = one(self.plan, "supervisor_pid")
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(read_end)
                # The held prover is not in the run's pid namespace; this child is (setns):
                # P10 is tried here, saving a fork.
                answer = (try_signal_outside(int(outside)) if self.held is not None and outside.isdigit()
                          else None) or try_nested_userns(arch) or ""
            except BaseException as err:  # noqa: BLE001 - any failure to try is reported
                answer = f"cannot try: {err!r}"
            try:
                os.write(write_end, (answer or "refused").encode("utf-8", "replace"))
            finally:
                os._exit(0)
        os.close(write_end)
        self.userns_try = (pid, read_end)

    def finish_userns_try(self, timeout: float = 10.0) -> None:
        if self.userns_try is None:
            return
        import select  # here, not at the top: only the try needs it (0.2 ms)

        pid, read_end = self.userns_try
        self.userns_try = None
        try:
            answer = b""
            deadline = time.monotonic() + timeout
            while True:  # the child writes once and exits: read to EOF, bounded
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([read_end], [], [], remaining)[0]:
                    break
                chunk = os.read(read_end, 4096)
                if not chunk:
                    break
                answer += chunk
        finally:
            os.close(read_end)
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        text = answer.decode("utf-8", "replace")
        if text.startswith("P10 "):
            raise NotProven("P10", text[4:])
        if text != "refused":
            raise NotProven("P9", f"a nested user namespace: {text or 'no answer from the try'} "
                            "(bwrap needs --disable-userns; the run's syscall filter refuses it too)")
        self.tell("P9", "a nested user namespace (unshare, clone): refused")

    # P11: nothing a shell reads at start-up comes from outside
    def p11(self) -> None:
        home = self.environ().get("HOME", "")
        for name in STARTUP_FILES:
            if os.path.lexists(os.path.join(home, name)) and self.gate:
                raise NotProven("P11", f"{home}/{name} exists in the run's home")
        found = sum(os.path.lexists(os.path.join(home, name)) for name in STARTUP_FILES)
        self.tell("P11", f"{len(STARTUP_FILES)} shell start-up files looked for in the run's home "
                  f"{home or '$HOME'}: {found} there")

    # P4 (mount part): every writable mount is one the run may write
    def p4_mounts(self) -> None:
        allowed = set(self.plan.get("writable", []))
        home = one(self.plan, "outside_home").rstrip("/")
        for point, rw, fstype, _ in self.mounts():
            if rw and fstype != "tmpfs" and (point.startswith(SYSTEM_MOUNT_PREFIXES) or point in (
                    "/etc", "/usr", "/opt", "/srv", "/var", "/boot", "/nix", "/")):
                # Whatever the plan says (a planted `.git` file once named /etc/cron.d).
                raise NotProven("P4", f"{point} ({fstype}) is mounted writable inside a system directory")
            if rw and home.startswith("/") and point.startswith(home + "/") and point[len(home) + 1:].split(
                    "/", 1)[0] in HOME_RUNS_LATER:
                raise NotProven("P4", f"{point} is mounted writable: it holds what runs later, outside")
            if not rw or point in allowed:
                continue
            if fstype in ("proc", "devpts", "mqueue") or point == "/dev":
                continue
            if point.startswith("/dev/") and fstype in ("devtmpfs", "tmpfs"):
                continue  # device nodes bwrap binds (/dev/null...) and /dev/shm
            raise NotProven("P4", f"{point} ({fstype}) is mounted writable")
        writable = sum(rw for _, rw, _, _ in self.mounts())
        self.tell("P4", f"{len(self.mounts())} mounts read, the {writable} writable ones all allowed")

    # P2: loopback only; nothing outside reachable through the network stack
    def p2(self) -> None:
        self._differs("P2", "net")
        try:
            lines = read_text(f"{self.proc}/net/dev").split("\n")[2:]
        except OSError as err:
            raise NotProven("P2", f"cannot read {self.proc}/net/dev: {err}") from err
        interfaces = sorted(line.split(":", 1)[0].strip() for line in lines if ":" in line)
        if interfaces != ["lo"]:
            raise NotProven("P2", f"network interfaces {interfaces}, expected only lo")
        # Each try below is a connect(), and each connect a round trip through the mediation
        # (P12). The gate, before anything of the command exists, tries one TCP connect to
        # loopback and one abstract name: with lo the only interface (above) no route leads
        # anywhere but loopback (a route lookup adds nothing: a route needs a device), and no
        # listener exists yet (below). `check`, next to a running command, tries them all.
        routes = ((_socket.AF_INET, ("192.0.2.1", 9)), (_socket.AF_INET6, ("2001:db8::1", 9)))
        loopbacks = ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1"))
        abstract = self.plan.get("abstract", [])
        if self.gate:
            routes, loopbacks, abstract = (), loopbacks[:1], abstract[:1]
        for family, address in routes:
            try:
                code = try_dgram_route(family, address)
            except OSError:
                continue  # family not supported at all: no route either
            if code is None:
                raise NotProven("P2", f"a route to {address[0]} exists")
        ports = sorted({int(p) for p in self.plan.get("tcp", [])} | set(ENGINE_PORTS))
        if self.gate:
            # Before the command: no listener at all in this network namespace (a fresh one),
            # read from the kernel's own tables. A TCP connect to loopback reaches only a
            # listener of the connecting socket's namespace, so no listed or engine port can
            # answer here; one port is then tried for real.
            self.no_listener_yet()
            ports = ports[:1]
        else:
            # `check`, next to a running command: its own listeners on an engine or listed
            # port count against the run, as they always did. Read from the kernel's tables,
            # not connected to: a loopback connect reaches only a listener of this namespace,
            # which the table lists exactly, and each connect would itself be an attempt the
            # mediation names (every `pytest --no-docker` session said "12 attempts to reach an
            # engine": its plugin's check).
            self.no_listener_on(ports)
            ports = []
        for port in ports:
            for family, host in loopbacks:
                try:
                    code = try_connect(family, (host, port))
                except OSError:
                    continue
                if code not in UNREACHED:
                    raise NotProven("P2", f"connect to {host} port {port}: {errname(code)}")
        if not self.gate and abstract:
            # The same for abstract names: the network namespace's own table (/proc/net/unix
            # lists only this namespace's sockets), not a connect the mediation would name.
            bound = abstract_names_bound()
            for name in abstract:
                if name in bound:
                    raise NotProven("P2", f"abstract socket @{name} is bound in the run's network namespace")
            abstract = []
        for name in abstract:
            code = try_connect(_socket.AF_UNIX, b"\0" + name.encode("utf-8", "surrogateescape"))
            if code not in UNREACHED:
                raise NotProven("P2", f"abstract socket @{name}: {errname(code)}")
        self.tell("P2", f"interfaces: lo only; {len(routes)} routes out looked up, none; "
                  f"{len(ports) * len(loopbacks)} loopback connects to engine and listed ports "
                  f"{'' if self.gate else '(none: the listening table shows no socket on them) '}"
                  f"{len(abstract)} to abstract names: all refused")

    def no_listener_on(self, ports: list[int]) -> None:
        for family in (_socket.AF_INET, _socket.AF_INET6):
            try:
                found = listening_tcp(family)
            except OSError as err:
                raise NotProven("P2", f"cannot list the listening sockets (sock_diag): {err}") from err
            held = sorted(set(found) & set(ports))
            if held:
                raise NotProven("P2", f"a listening TCP socket on port {held[0]} in the run's network "
                                "namespace (an engine's or a listed port)")

    def no_listener_yet(self) -> None:
        for family in (_socket.AF_INET, _socket.AF_INET6):
            try:
                found = listening_tcp(family)
            except OSError as err:
                raise NotProven("P2", f"cannot list the listening sockets (sock_diag): {err}") from err
            if found:
                raise NotProven("P2", f"{len(found)} listening TCP socket(s) (ports {sorted(found)[:3]}) "
                                "in the run's network namespace before the command started")

    # P3: no pathname socket of any engine reachable
    def p3(self) -> None:
        for path in self.plan.get("hidden", []):
            if not self.hidden_by_tmpfs(path):
                raise NotProven("P3", f"{path} is not hidden by a tmpfs")
        home, xdg = one(self.plan, "outside_home"), one(self.plan, "outside_xdg")
        # Listed sockets in places another user controls are the mediation's alone (the plan
        # says which: plan.others_control); every other listed path and every engine path must
        # show no socket.
        unmasked = set(self.plan.get("unmasked", []))
        candidates = [p for p in self.plan.get("unix", []) if p not in unmasked]
        candidates += [p for p in (expand(e, home, xdg) for e in ENGINE_PATHS) if p]
        for path in dict.fromkeys(candidates):
            # The hiding layer alone: nothing bound outside may even show as a socket here.
            # connect(2) resolves the name exactly as stat(2) does (symlinks, search
            # permission), and reaches only a socket inode: where stat finds none (missing, a
            # /dev/null mask, a file), the connect is refused by the kernel before anything is
            # reached, so the stat is that try's outcome, without a round trip through the
            # connect mediation (P12), which stands behind this layer for sockets that appear
            # later and is tried on its own sentinel.
            try:
                shown = stat.S_ISSOCK(os.stat(path).st_mode)
            except OSError:
                continue
            if shown:
                raise NotProven("P3", f"{path} is a socket in the run's view: it is neither hidden nor "
                                "masked (--ro-bind /dev/null over it), or stop that listener")
        self.tell("P3", f"{len(self.plan.get('hidden', []))} engine directories hidden by a tmpfs; "
                  f"{len(dict.fromkeys(candidates))} outside socket paths (listed and well-known) show no "
                  "socket, so connect() there is refused")

    def hidden_by_tmpfs(self, path: str) -> bool:
        """PATH shows a tmpfs mounted exactly there: a tmpfs mount point in mountinfo whose
        device is the one stat() finds at PATH now (a later mount above it would shadow it
        while mountinfo still lists it)."""
        try:
            st = os.stat(path)
        except OSError:
            return False
        dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        return any(point == path and fstype == "tmpfs" and device == dev
                   for point, _, fstype, device in self.mounts())

    # P4 (write part): try to write where nothing may be written
    def p4_writes(self) -> None:
        # The git layout of every writable root (the work dir, a --rw checkout), found here.
        roots = dict.fromkeys((one(self.plan, "work"), *self.plan.get("writable", [])))
        tries = [*SYSTEM_WRITE_TRIES, *KERNEL_WRITE_TRIES, *(t for r in roots for t in git_write_tries(r)),
                 *self.plan.get("readonly", [])]
        outside_home = one(self.plan, "outside_home")
        if outside_home.startswith("/") and outside_home != one(self.plan, "home"):
            tries.append(outside_home)
        answers: dict[str, int] = {}
        for path in dict.fromkeys(tries):
            if not os.path.lexists(path):
                continue
            code = try_write(path)
            if code is None:
                raise NotProven("P4", f"{path} is writable inside the run")
            if code not in WRITE_REFUSED and code != errno.ENOENT:
                raise NotProven("P4", f"writing {path} failed oddly: {errname(code)}")
            answers[errname(code)] = answers.get(errname(code), 0) + 1
        self.tell("P4", f"{sum(answers.values())} writes tried outside the writable places: "
                  + (", ".join(f"{n} {name}" for name, n in sorted(answers.items())) or "none there"))

    # P10: nothing outside can be signalled or traced
    def p10(self) -> None:
        outside_pid = one(self.plan, "supervisor_pid")
        if outside_pid.isdigit():
            pid = int(outside_pid)
            if self.held is not None:
                return  # tried in the P9 child, in the run's pid namespace (start_userns_try)
            try:
                os.kill(pid, 0)
            except (ProcessLookupError, PermissionError) as err:
                answer = errname(err.errno)
            else:
                if not os.path.exists(f"/proc/{pid}"):
                    raise NotProven("P10", f"pid {pid} outside the run answers signals")
                answer = "a process of the run with that number"
            self.tell("P10", f"kill() of the supervisor's pid {pid} outside, signal 0: {answer}")

    def steps(self) -> tuple[tuple[str, object], ...]:
        """The checks in the order they run: views first, connect() next, writes last."""
        sudo = (("P5", self.p5_sudo),) if not self.gate else ()  # `check`: tried and waited for
        return (("P1", self.p1), ("P5", self.p5), *sudo, ("P6", self.p6),
                ("P7", self.p7),
                ("P8", self.p8), ("P9", self.p9), ("P11", self.p11), ("P4", self.p4_mounts),
                ("P2", self.p2), ("P3", self.p3), ("P12", self.p12), ("P5", self.p5_filter),
                ("P13", self.p13),
                ("P4", self.p4_writes),
                ("P10", self.p10))

    def table(self) -> list[tuple[str, str, str]]:
        """(property, "proven"|"failed"|"not tried", detail) for `no-docker check`.

        After the first failure nothing more is tried: a probe that is not inside a sandbox
        must not go on to connect() to the host's sockets.
        """
        rows: dict[str, tuple[str, str]] = {}
        failed: NotProven | None = None
        for prop, check in self.steps():
            if failed is not None:
                rows.setdefault(prop, ("not tried", f"after {failed.prop} failed"))
                continue
            try:
                check()  # type: ignore[operator]
            except NotProven as err:
                failed = err
                rows[prop] = ("failed", err.detail)
            except OSError as err:
                failed = NotProven(prop, f"unexpected error: {err}")
                rows[prop] = ("failed", failed.detail)
            else:
                rows.setdefault(prop, ("proven", ""))
        # What each proven property's checks tried and what the kernel answered.
        return [(p, rows[p][0], "; ".join(self.said.get(p, [])) if rows[p][0] == "proven" else rows[p][1])
                for p in PROPERTIES if p in rows]

    def run_all(self) -> list[tuple[str, str]]:
        """Every property, in order; the first failure raises NotProven."""
        order = self.steps()
        done = []
        try:
            for prop, check in order:
                check()  # type: ignore[operator]
                if prop == "P1" and self.gate and self.held is None:
                    # In parallel with the rest: sudo takes longer than every other check. Only
                    # once the pid namespace is proven ours; `sudo -n true` runs nothing but true
                    # (under the run's filter: bwrap applied it before exec; p5_filter proves it).
                    # Not in the held proof of every run: there P5 rests on what the kernel says
                    # of the held process (p5), docs/isolation.md "Why P5 needs no sudo per run".
                    self.start_sudo()
                if prop == "P7" and self.gate:
                    self.start_userns_try()  # after P7: its pipe is an fd P7 would refuse
                done.append(prop)
            self.finish_sudo()
            self.finish_userns_try()
            if self.held is not None:
                # Every try's process is gone: the held process is alone again, as when the
                # proof began (nothing the tries started may live on into CMD's run).
                others = sorted(set(visible_pids()) - {1})
                if others:
                    raise NotProven("P1", f"processes {others[:5]} of the proof outlived it")
        finally:
            if self.userns_try is not None:
                os.close(self.userns_try[1])
                try:
                    os.kill(self.userns_try[0], 9)
                    os.waitpid(self.userns_try[0], 0)
                except OSError:
                    pass
            if self.sudo_pid is not None:
                try:
                    os.kill(self.sudo_pid, 9)
                    os.waitpid(self.sudo_pid, 0)
                except OSError:
                    pass
        self.proven = sorted(set(done), key=PROPERTIES.index)
        return [(p, "proven") for p in self.proven]
