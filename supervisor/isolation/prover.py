"""The prover: proves a held sandbox from inside its namespaces, before anything runs there.

``no-docker run`` starts bwrap with ``--block-fd``: bwrap builds the whole sandbox (namespaces,
mounts, ``pivot_root``, capabilities dropped) and then waits, before it starts anything in it
(bubblewrap.c: ``drop_privs``, then the read of the block fd, then ``--seccomp`` and the fork
of the init). Meanwhile a child of the supervisor, forked from the thread that carries the
run's filters (``mediation.Keeper.fork``, so it holds the very seccomp filters the run has),
joins the held process's namespaces and root, takes CMD's credentials (no capability,
``no_new_privs``, no controlling terminal) and runs the same checks as the in-run ``check``
(``probe.Probe``, in its ``held`` mode: the held process's own state is read at /proc/1 of the
run's /proc). Its verdict, one line, goes to a pipe only the supervisor reads: nothing in the
run can write it (the held process is blocked, and nothing else exists there yet). Then the
supervisor releases bwrap and the gate (policy.GATE_SCRIPT) lets CMD start, or refuses.

This replaces an in-sandbox probe started as a second Python interpreter on every run.

Joining, in this order (setns(2)): first the user namespace that *owns* the run's others (bwrap
creates a second, nested one for ``--disable-userns``; its parent owns the mount, network,
IPC, UTS, cgroup and pid namespaces, and capabilities in a child namespace are no use in its
parent), then those, then the nested user namespace itself. Every /proc/PID/ns/* and the root
are opened before the first setns: after the mount namespace's, /proc is the run's.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

from . import probe, syscalls

# How long bwrap may take to build and hold the sandbox (2-5 ms here; a loaded machine, much
# more), and how often the prover looks meanwhile.
HELD_TIMEOUT = 30.0
HELD_POLL = 0.0002
# read(2)'s number per arch: the held sandbox process sleeps in read on --block-fd.
READ_SYSCALL = {"x86_64": b"0", "aarch64": b"63"}
NS_GET_USERNS = 0xB701  # linux/nsfs.h _IO(0xb7, 0x1)
# setns(2) nstype per /proc/PID/ns entry, in joining order after the owning user namespace.
JOIN_ORDER = (("mnt", 0x00020000), ("net", 0x40000000), ("ipc", 0x08000000), ("uts", 0x04000000),
              ("cgroup", 0x02000000), ("pid", 0x20000000))
CLONE_NEWUSER = 0x10000000


def session_problem(stat_line: str, caller_session: int) -> str | None:
    """P8 from outside: None when /proc/PID/stat's session is not CALLER_SESSION and there is no
    controlling terminal (tty_nr 0), else what is wrong (pure)."""
    fields = stat_line[stat_line.rfind(")") + 2:].split(" ")
    if len(fields) < 5:
        return f"cannot read the sandbox's session from {stat_line[:80]!r}"
    session, tty = int(fields[3]), int(fields[4])
    if session == caller_session:
        return "the sandbox shares the caller's session (bwrap was not started in a new session)"
    if tty != 0:
        return f"the sandbox has a controlling terminal (tty_nr {tty}): TIOCSTI could reach it"
    return None


def held_in_read(syscall_fields: list[bytes], arch: str, fd: int) -> bool:
    """/proc/PID/syscall's fields show a process blocked in read(2) on FD (pure). The first
    field is the syscall number (or "running"), the second its first argument, in hex."""
    if len(syscall_fields) < 2 or syscall_fields[0] != READ_SYSCALL.get(arch):
        return False
    try:
        return int(syscall_fields[1], 16) == fd
    except ValueError:
        return False


def await_held(pid: int, block_fd: int, timeout: float = HELD_TIMEOUT) -> None:
    """Until PID waits on BLOCK_FD: bwrap names its sandbox process right after clone(2), long
    before the mounts exist and the capabilities are dropped (a prover that looked then would
    see the outside); it reads the block fd only once all of that is done (bubblewrap.c).
    NotProven when that does not happen within TIMEOUT, or PID is gone."""
    arch = os.uname().machine
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/syscall", "rb") as f:
                if held_in_read(f.read().split(), arch, block_fd):
                    return
        except OSError as err:
            raise probe.NotProven("P1", f"the sandbox process {pid} is gone before the proof "
                                  f"({err.strerror})") from err
        if time.monotonic() > deadline:
            raise probe.NotProven("P1", f"the sandbox was not held for the proof within {timeout:g} s "
                                  "(is the bubblewrap in use a working one?)")
        time.sleep(HELD_POLL)


def join(pid: int) -> None:
    """Enter every namespace and the root of process PID (this process must be single-threaded:
    a forked child)."""
    opened = {name: os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in
              ("user", *(n for n, _ in JOIN_ORDER))}
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    own = {name: os.stat(f"/proc/self/ns/{name}").st_ino for name in ("user", *(n for n, _ in JOIN_ORDER))}
    owner = fcntl.ioctl(opened["mnt"], NS_GET_USERNS)  # the mount namespace is always the run's own
    nested = os.fstat(owner).st_ino != os.fstat(opened["user"]).st_ino
    # A user namespace one is in already cannot be joined again (EINVAL): a sandbox without one
    # (P1/P5/P9 say so) is entered as it is.
    if os.fstat(owner).st_ino != own["user"]:
        syscalls.setns(owner, CLONE_NEWUSER)
    for name, nstype in JOIN_ORDER:
        # One we are in already (a sandbox that shares it: P1/P2/P9 say so) is not joined: its
        # owner may be a user namespace we just left.
        if os.fstat(opened[name]).st_ino != own[name]:
            syscalls.setns(opened[name], nstype)
    if nested and os.fstat(opened["user"]).st_ino != own["user"]:
        syscalls.setns(opened["user"], CLONE_NEWUSER)
    os.fchdir(root)
    os.chroot(".")
    os.chdir("/")
    for fd in (*opened.values(), owner, root):
        os.close(fd)


def become_command() -> None:
    """CMD's credentials: no capability, no_new_privs (its uid and gid are already the run's:
    setns keeps them)."""
    syscalls.drop_capabilities()
    syscalls.set_no_new_privs()


def keep_only(*keep: int) -> None:
    """Close every descriptor of this process but KEEP; 0-2 become /dev/null.

    The prover is a fork of the supervisor: it holds the connect mediation's listener, the
    gate's and the block fd's write ends, the write end of its own pid pipe, and whatever the
    caller let the supervisor inherit. Its children (the P9 try, ``sudo``) are in the run's pid
    namespace while the sandbox is held, and a process there reaches much through /proc (the
    prover's fds and memory through the held process's O_PATH /proc of the host, its pipes
    through /proc/1/fd): none of it may be there to reach (red-team review of the prover)."""
    null = os.open("/dev/null", os.O_RDWR)
    for target in (0, 1, 2):
        if target not in keep:
            os.dup2(null, target)
    if null > 2 and null not in keep:
        os.close(null)
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def seal_imports() -> None:
    """No module is loaded from here on: only built-in and frozen ones, which read no file.

    Once the prover has joined the run's mount namespace, a path-based import would search
    ``sys.path`` in the *run's* view, where a previous run may have left a module of that name
    (the work dir, when it is on ``sys.path``) whose code would then run in the prover, beside
    the verdict pipe. Everything the checks need is imported by the supervisor beforehand
    (tested: tests/unit/test_prover.py); an import that was not fails closed (ImportError: the
    run is not proven)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if getattr(finder, "__name__", "") in ("BuiltinImporter", "FrozenImporter")]
    sys.path_importer_cache.clear()


def read_pid(fd: int) -> int | None:
    """The sandbox process's pid, one line on FD from the supervisor; None at EOF."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 32)
        if not chunk:
            return None
        data += chunk
    return int(data)


def prove_when_named(pid_fd: int, plan: dict[str, list[str]], held: probe.Held, verdict_fd: int,
                     block_fd: int) -> None:
    """The forked prover's whole life: the pid of the process to prove arrives on PID_FD (EOF:
    none, bwrap is gone: nothing is written), then one line to VERDICT_FD, ``ok MS_TOTAL MS_OWN
    P1 ...`` or ``fail MESSAGE``. Never raises."""
    keep_only(pid_fd, verdict_fd)  # first: its copy of the pid pipe's write end goes too
    try:
        pid = read_pid(pid_fd)
    except (OSError, ValueError):
        pid = None
    os.close(pid_fd)
    if pid is None:
        return
    try:
        with open(f"/proc/{pid}/stat") as f:  # before this process leaves the caller's session
            session = session_problem(f.read(), os.getsid(0))
    except OSError as err:
        session = f"cannot read the sandbox's session: {err.strerror}"
    prove(pid, plan, probe.Held(held.fds, held.stdio, session, held.terminal), verdict_fd, block_fd)


def prove(pid: int, plan: dict[str, list[str]], held: probe.Held, verdict_fd: int, block_fd: int) -> None:
    """Prove the sandbox process PID: one line to VERDICT_FD, ``ok MS_TOTAL MS_OWN P1 ...`` or
    ``fail MESSAGE`` (the in-sandbox probe's report format). Never raises."""
    try:
        keep_only(verdict_fd)
        seal_imports()  # before the wait, not after: it costs 0.3 ms, and the wait is idle
        await_held(pid, block_fd)
        started = time.monotonic()
        try:
            os.setsid()  # off the caller's terminal, as the run is
            join(pid)
            become_command()
        except OSError as err:
            raise probe.NotProven("P1", f"cannot enter the held sandbox (pid {pid}): {err}") from err
        checks = probe.Probe(plan, gate=True, held=held)
        checks.run_all()
        now = time.monotonic()
        total_ms = (now - float(probe.one(plan, "t0", "0") or 0)) * 1000
        line = (f"ok {total_ms:.1f} {(now - started) * 1000:.1f} "
                f"{' '.join(checks.proven)}\n")
    except probe.NotProven as err:
        line = "fail " + str(err).replace("\n", " ") + "\n"
    except Exception as err:  # noqa: BLE001 - any fault of the prover: not proven, said once
        line = f"fail prover: unexpected error: {type(err).__name__}: {err}".replace("\n", " ") + "\n"
    os.write(verdict_fd, line.encode("utf-8", "replace"))
