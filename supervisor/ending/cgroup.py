"""A cgroup per run: a v2 leaf for ``cgroup.kill``/``cgroup.freeze``/``populated``, and a pids limit.

The cgroup is the second marker (the pid namespace is the first and suffices alone): where a
v2 leaf can be made, every process of the run starts in it, ``cgroup.kill`` SIGKILLs all of
them atomically against concurrent forks (Documentation/admin-guide/cgroup-v2.rst, kernel
5.14+), and ``cgroup.events`` says ``populated 0`` once none is left (a counter the kernel
keeps; zombies are not counted, unlike v1 ``pids.current``).

Where the leaf lives:
- no systemd (this machine kind): ``<cgroup2 mount>/<our cgroup>/no-docker/<run id>``;
- systemd host: only under our own cgroup when systemd delegated it to us (``user.delegate``
  or ``trusted.delegate`` xattr); otherwise no cgroup: systemd is the single writer of its tree.

``--max-pids N`` writes v2 ``pids.max`` when the v2 hierarchy has the pids controller, else the
v1 pids controller (``/sys/fs/cgroup/pids``, as here, where v2 has only hugetlb). A limit that
was asked for and cannot be set is an error (fail closed), never silently dropped.

``--memory-max BYTES`` likewise: v2 ``memory.max`` when the leaf's parent has the memory
controller, else a v1 memory cgroup ``no-docker/<run id>`` *below our own* v1 memory cgroup (so
a limit that encloses the supervisor, a CI job's, still encloses the run: v1 charges are
hierarchical, ``memory.use_hierarchy``) with ``memory.limit_in_bytes`` (and
``memory.memsw.limit_in_bytes``, RAM + swap, where swap is accounted). tmpfs pages are charged
to the memory cgroup of the task that first writes them (mm/shmem.c charges through
``mem_cgroup_charge`` with the writer's mm): a run filling its /tmp fills its own cgroup, and
an OOM there picks among the run's tasks only (mm/memcontrol.c ``mem_cgroup_out_of_memory``),
never the supervisor, which is not in it (it moves in only to spawn bwrap, and back).

The OOM killer outside any limit of ours (the machine's, or an enclosing cgroup's) ranks by
``oom_score_adj`` (Documentation/filesystems/proc.rst): ``prefer_for_oom`` raises the run's
(anyone may raise a value), ``protect_supervisor`` lowers ours where allowed (CAP_SYS_RESOURCE).
"""

from __future__ import annotations

import errno
import os
import time

from ..record import Factory, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

# Paths are plain str, not pathlib.Path: importing pathlib (re, fnmatch, urllib.parse, enum)
# costs 10-14 ms of every `no-docker run -- true` (DESIGN §10 budget: 30 ms).
V1_PIDS_ROOT = "/sys/fs/cgroup/pids"
V1_MEMORY_ROOT = "/sys/fs/cgroup/memory"
GROUP_DIR = "no-docker"
# The run's processes, bwrap first: what the OOM killer takes before anything else. 1000 makes
# a task's badness at least the whole of memory (mm/oom_kill.c oom_badness: adj * totalpages /
# 1000 added to its pages), so any of the run's tasks outranks any task at 0 or below.
RUN_OOM_SCORE_ADJ = 1000
# The supervisor as root: far below every ordinary task, so it is the last taken, yet not
# -1000 (OOM_SCORE_ADJ_MIN, never taken): a supervisor that leaks itself must stay killable.
SUPERVISOR_OOM_SCORE_ADJ = -900


class CgroupError(Exception):
    """The run's cgroup could not be made, limited, killed or removed."""

    option = "--max-pids"  # the option whose limit could not be enforced (create)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# --- pure helpers -------------------------------------------------------------------------


def parse_events(data: str) -> dict[str, int]:
    """``cgroup.events``: ``populated 0\\nfrozen 0\\n`` -> {"populated": 0, "frozen": 0}."""
    result = {}
    for line in data.splitlines():
        key, _, value = line.partition(" ")
        if key and value.strip().isdigit():
            result[key] = int(value)
    return result


def cgroup2_mounts(mountinfo: str) -> list[str]:
    """Mount points of cgroup2 file systems in /proc/self/mountinfo text (man 5 proc_pid_mountinfo)."""
    mounts = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        if right.split(" ", 1)[0] == "cgroup2":
            fields = left.split(" ")
            if len(fields) >= 5:
                mounts.append(fields[4].replace("\\040", " "))
    return mounts


def own_v2_path(proc_cgroup: str) -> str | None:
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


# --- the run's cgroup ---------------------------------------------------------------------


@record(mutable=True)
class RunCgroup:
    """The cgroups of one run: a v2 leaf (may be None), a v1 pids cgroup and a v1 memory cgroup
    (each may be None)."""

    path: str | None
    pids_v1: str | None = None
    memory_v1: str | None = None
    _fds: list[int] = Factory(list, repr=False)  # type: ignore[assignment]
    _home: list[tuple[str, str]] = Factory(list, repr=False)  # type: ignore[assignment]

    # -- spawning into it

    def spawn_hook(self) -> Callable[[], None]:
        """A ``preexec_fn`` that moves the child into the run's cgroups before it execs.

        The files are opened here, in the parent, so the child only calls ``write(2)``: no
        allocation, no path lookup after fork. Writing "0" to ``cgroup.procs`` moves the writer
        itself (kernel/cgroup/cgroup.c, v1 and v2). Because it happens before exec, bwrap and
        everything it forks are born inside: nothing of the run is ever outside the cgroup.
        """
        self.close_hook()
        for directory in self.dirs():
            self._fds.append(os.open(f"{directory}/cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        fds = tuple(self._fds)

        def enter() -> None:
            for fd in fds:
                os.write(fd, b"0")

        return enter

    def dirs(self) -> list[str]:
        """The run's cgroup directories that exist for it: v2 leaf, v1 pids, v1 memory."""
        return [d for d in (self.path, self.pids_v1, self.memory_v1) if d is not None]

    def v1(self) -> bool:
        """Whether a v1 cgroup is among them (no clone flag reaches v1: spawning means moving)."""
        return self.pids_v1 is not None or self.memory_v1 is not None

    def close_hook(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

    def enter_self(self) -> None:
        """Move the calling process into the run's cgroups (see ``RunLifecycle.cgroup_entered``)."""
        self._home = [(directory, own_cgroup_dir(directory)) for directory in self.dirs()]
        self.add(os.getpid())

    def leave_self(self) -> None:
        for _, home in self._home:
            _write(f"{home}/cgroup.procs", str(os.getpid()))
        self._home = []

    def add(self, pid: int) -> None:
        for directory in self.dirs():
            _write(f"{directory}/cgroup.procs", str(pid))

    # -- state

    def events(self) -> dict[str, int]:
        if self.path is None:
            return {}
        try:
            return parse_events(_read(f"{self.path}/cgroup.events"))
        except FileNotFoundError:
            return {"populated": 0}
        except OSError as err:
            raise CgroupError(f"cannot read {self.path}/cgroup.events: {err.strerror}") from err

    def populated(self) -> bool:
        return bool(self.events().get("populated", 0))

    def usage(self) -> tuple[int | None, int | None, int | None]:
        """(user µs, system µs, peak bytes) the kernel counted for the run's cgroup, each None
        where it keeps no such count; read once every process of the run is gone, before the
        cgroup is removed (its counters go with it).

        CPU: v2 ``cpu.stat`` ``user_usec``/``system_usec``, which every v2 cgroup has whether
        or not the cpu controller is enabled (cgroup-v2.rst, "cpu.stat"), and which keeps the
        time of the processes that exited (their time is added on exit). Memory: v2
        ``memory.peak`` (Linux 5.19, where the memory controller is enabled for the leaf), else
        the v1 memory cgroup's ``memory.max_usage_in_bytes`` (--memory-max on a v1 machine).
        Both count what the run was charged, page cache and its tmpfs pages included."""
        user = system = peak = None
        if self.path is not None:
            try:
                stat = parse_events(_read(f"{self.path}/cpu.stat"))
                user, system = stat.get("user_usec"), stat.get("system_usec")
            except OSError:
                pass
        for path in ((f"{self.path}/memory.peak",) if self.path is not None else ()) + (
                (f"{self.memory_v1}/memory.max_usage_in_bytes",) if self.memory_v1 is not None else ()):
            try:
                peak = int(_read(path).split()[0])
                break
            except (OSError, ValueError, IndexError):
                continue
        return user, system, peak

    def procs(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(x) for x in _read(f"{self.path}/cgroup.procs").split()]
        except FileNotFoundError:
            return []

    def tree_procs(self) -> list[int]:
        """Every process in the run's cgroups and in any cgroup below them (v2 and v1)."""
        pids: list[int] = []
        for leaf in self.dirs():
            for directory in subtree(leaf):
                try:
                    pids += [int(x) for x in _read(f"{directory}/cgroup.procs").split()]
                except FileNotFoundError:
                    continue  # removed meanwhile
        return list(dict.fromkeys(pids))

    def left(self) -> list[str]:
        """The run's cgroups that still exist, each with every cgroup below it (deepest first)."""
        return [d for leaf in self.dirs() for d in subtree(leaf)]

    def wait_empty(self, deadline: float) -> bool:
        """Wait until ``populated 0`` (the kernel's own count) or the deadline."""
        delay = 0.0005
        while True:
            if not self.populated():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

    # -- ending

    def kill(self) -> bool:
        """Write ``cgroup.kill``; False where the kernel has no such file (< 5.14)."""
        if self.path is None:
            return False
        try:
            _write(f"{self.path}/cgroup.kill", "1")
        except FileNotFoundError:
            return False
        except OSError as err:
            raise CgroupError(f"cannot write {self.path}/cgroup.kill: {err.strerror}") from err
        return True

    def freeze(self, frozen: bool = True, deadline: float | None = None) -> bool:
        """Freeze (or thaw) the leaf; True once ``cgroup.events`` says so. Frozen tasks cannot
        fork: a scan of a frozen cgroup is a true snapshot (runc's fallback when there is no
        ``cgroup.kill``)."""
        if self.path is None:
            return False
        _write(f"{self.path}/cgroup.freeze", "1" if frozen else "0")
        deadline = time.monotonic() + 1.0 if deadline is None else deadline
        delay = 0.0005
        while self.events().get("frozen", 0) != int(frozen):
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        return True

    def remove(self, deadline: float | None = None) -> bool:
        """rmdir the leaves and every cgroup below them, deepest first (a run that could write
        its cgroup file system once made child cgroups that outlived it: red-team review). A
        v1 pids cgroup stays busy while zombies are counted in it, so retry until the deadline.
        True only when none of them exists any more (looked up again after the removal)."""
        self.close_hook()
        if deadline is None:
            deadline = time.monotonic() + 1.0
        for directory in self.left():
            delay = 0.001
            while True:
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() >= deadline:
                        break
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
        return not any(os.path.lexists(leaf) for leaf in self.dirs())

    def as_record(self) -> dict[str, str | None]:
        record = {"v2": None if self.path is None else str(self.path),
                  "pids_v1": None if self.pids_v1 is None else str(self.pids_v1)}
        if self.memory_v1 is not None:  # only when made: the records of earlier runs stay the same
            record["memory_v1"] = str(self.memory_v1)
        return record

    @classmethod
    def from_record(cls, record: dict[str, str | None] | None) -> RunCgroup | None:
        if not record:
            return None
        v2, v1, memory = record.get("v2"), record.get("pids_v1"), record.get("memory_v1")
        if v2 is None and v1 is None and memory is None:
            return None
        return cls(v2 or None, v1 or None, memory or None)


def subtree(root: str) -> list[str]:
    """ROOT and every directory below it, children before their parents (the order rmdir needs);
    [] when ROOT does not exist. Symlinks are not followed (a cgroup file system has none);
    iterative, so no depth of nesting can exhaust the stack."""
    order: list[str] = []
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            continue
        order.append(directory)
    return order[::-1]


def own_cgroup_dir(leaf: str, proc_cgroup: str | None = None) -> str:
    """Our current cgroup in the hierarchy that ``leaf`` belongs to (v2, v1 pids or memory)."""
    text = _read("/proc/self/cgroup") if proc_cgroup is None else proc_cgroup
    leaf = os.path.normpath(leaf)
    for mount, controller in ((V1_PIDS_ROOT, "pids"), (V1_MEMORY_ROOT, "memory")):
        if leaf == mount or leaf.startswith(mount + "/"):
            path = own_v1_path(text, controller)
            if path is not None:
                return _join(mount, path)
    own = own_v2_path(text) or "/"
    # the v2 mount is the part of ``leaf`` above "<own>/no-docker/<id>"
    mount = os.path.dirname(os.path.dirname(leaf))
    for _ in own.strip("/").split("/") if own.strip("/") else []:
        mount = os.path.dirname(mount)
    return _join(mount, own)


def own_v1_path(proc_cgroup: str, controller: str) -> str | None:
    """Our cgroup in the v1 hierarchy of CONTROLLER, from /proc/self/cgroup text
    ("4:memory:/a/b" -> "/a/b"; man 7 cgroups), or None without that hierarchy."""
    for line in proc_cgroup.splitlines():
        _, _, rest = line.partition(":")
        controllers, sep, path = rest.partition(":")
        if sep and controller in controllers.split(","):
            return path
    return None


def _join(base: str, cgroup_path: str) -> str:
    """BASE + a /proc/PID/cgroup path (absolute within the hierarchy; "/" is the root)."""
    rest = cgroup_path.strip("/")
    return os.path.join(base, rest) if rest else base


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- making one ---------------------------------------------------------------------------


def _is_delegated(path: str) -> bool:
    for name in ("user.delegate", "trusted.delegate"):
        try:
            if os.getxattr(path, name) == b"1":
                return True
        except OSError:
            continue
    return False


def v2_parent(
    mountinfo: str | None = None, proc_cgroup: str | None = None, systemd: bool | None = None
) -> str | None:
    """Where the run's ``no-docker/<id>`` leaf may be created, or None (go without)."""
    if mountinfo is None:
        mountinfo = _read("/proc/self/mountinfo")
    if proc_cgroup is None:
        proc_cgroup = _read("/proc/self/cgroup")
    if systemd is None:
        systemd = os.path.isdir("/run/systemd/system")
    own = own_v2_path(proc_cgroup)
    if own is None:
        return None
    for mount in cgroup2_mounts(mountinfo):
        base = _join(mount, own)
        if not os.path.exists(f"{base}/cgroup.procs") or not os.access(base, os.W_OK):
            continue
        if systemd and not _is_delegated(base):
            return None
        return base
    return None


def _v2_offers(group: str, controller: str) -> bool:
    try:
        return controller in _read(f"{group}/cgroup.controllers").split()
    except OSError:
        return False


def _v2_has_pids(parent: str) -> bool:
    try:
        return "pids" in _read(f"{parent}/cgroup.controllers").split()
    except OSError:
        return False


def v1_memory_parent(proc_cgroup: str | None = None, root: str = V1_MEMORY_ROOT) -> str | None:
    """Where the run's v1 memory cgroup ``no-docker/<id>`` goes: below our own (pure but for the
    read of /proc/self/cgroup when PROC_CGROUP is None), or None without a v1 memory hierarchy."""
    text = _read("/proc/self/cgroup") if proc_cgroup is None else proc_cgroup
    own = own_v1_path(text, "memory")
    if own is None:
        return None
    base = _join(root, own)
    # Already in a run's memory cgroup (no-docker inside a run cannot see it; a test harness
    # can): nest beside it, never below the run's own leaf, which the ending removes.
    parts = own.strip("/").split("/")
    if GROUP_DIR in parts:
        base = _join(root, "/".join(parts[:parts.index(GROUP_DIR)]))
    return base


def _set_memory_v1(directory: str, limit: int) -> None:
    _write(f"{directory}/memory.limit_in_bytes", str(limit))
    # RAM + swap, where the kernel accounts swap (swapaccount): without it the run could push
    # its pages to swap past the limit. Written after limit_in_bytes: memsw may not be below it.
    if os.path.exists(f"{directory}/memory.memsw.limit_in_bytes"):
        _write(f"{directory}/memory.memsw.limit_in_bytes", str(limit))


def create(run_id: str, *, max_pids: int | None = None, memory_max: int | None = None,
           parent: str | os.PathLike[str] | None = None,
           v1_pids_root: str | os.PathLike[str] | None = V1_PIDS_ROOT,
           v1_memory_parent_dir: str | os.PathLike[str] | None = None) -> RunCgroup | None:
    """Make the run's cgroups. None when no v2 leaf can be made and no limit was asked for.

    Raises ``CgroupError`` when ``max_pids`` or ``memory_max`` (bytes) was asked for and cannot
    be enforced; its ``option`` names which. V1_MEMORY_PARENT_DIR: where the v1 memory cgroup
    goes (default: ``v1_memory_parent()``).
    """
    if parent is None:
        try:
            parent = v2_parent()
        except OSError:
            parent = None
    parent = None if parent is None else os.fspath(parent)
    v1_pids_root = None if v1_pids_root is None else os.fspath(v1_pids_root)
    leaf: str | None = None
    pids_v1: str | None = None
    memory_v1: str | None = None
    option = "--max-pids"
    made: list[str] = []
    try:
        if parent is not None:
            group = os.path.join(parent, GROUP_DIR)
            try:
                _mkdir(group, exist_ok=True)
                leaf = os.path.join(group, run_id)
                _mkdir(leaf)
                made.append(leaf)
            except OSError:
                leaf = None  # not writable after all: the pid namespace alone must suffice
        if max_pids is not None:
            if leaf is not None and _v2_has_pids(group):
                _write(f"{leaf}/pids.max", str(max_pids))
            elif v1_pids_root is not None and os.path.exists(f"{v1_pids_root}/cgroup.procs"):
                v1_group = os.path.join(v1_pids_root, GROUP_DIR)
                _mkdir(v1_group, exist_ok=True)
                pids_v1 = os.path.join(v1_group, run_id)
                _mkdir(pids_v1)
                made.append(pids_v1)
                _write(f"{pids_v1}/pids.max", str(max_pids))
            else:
                raise CgroupError("no pids controller (v2 or v1) is usable here")
        if memory_max is not None:
            option = "--memory-max"
            # The leaf has memory.max exactly when its parent enables the controller for it
            # (cgroup-v2.rst, "Enabling and Disabling"); our no-docker/ group may, when it has
            # the controller itself (a delegated cgroup) and holds no process (it never does).
            # Here v2 has no controller at all: v1 is used.
            if leaf is not None and not os.path.exists(f"{leaf}/memory.max") and _v2_offers(group, "memory"):
                try:
                    _write(f"{group}/cgroup.subtree_control", "+memory")
                except OSError:
                    pass  # not allowed here: v1, or refused below
            if leaf is not None and os.path.exists(f"{leaf}/memory.max"):
                _write(f"{leaf}/memory.max", str(memory_max))
                if os.path.exists(f"{leaf}/memory.swap.max"):
                    _write(f"{leaf}/memory.swap.max", "0")  # as v1 memsw: swap is not a way past it
            else:
                mem_parent = (v1_memory_parent() if v1_memory_parent_dir is None
                              else os.fspath(v1_memory_parent_dir))
                if mem_parent is None or not os.path.exists(f"{mem_parent}/cgroup.procs"):
                    raise CgroupError("no memory controller (v2 or v1) is usable here")
                mem_group = os.path.join(mem_parent, GROUP_DIR)
                _mkdir(mem_group, exist_ok=True)
                memory_v1 = os.path.join(mem_group, run_id)
                _mkdir(memory_v1)
                made.append(memory_v1)
                _set_memory_v1(memory_v1, memory_max)
    except OSError as err:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass
        error = CgroupError(f"cannot set up the run's cgroup: {err}")
        error.option = option
        raise error from err
    except CgroupError as err:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass
        err.option = option
        raise
    if leaf is None and pids_v1 is None and memory_v1 is None:
        return None
    return RunCgroup(leaf, pids_v1, memory_v1)


def _mkdir(path: str, exist_ok: bool = False) -> None:
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not exist_ok:
            raise


# --- the OOM killer's choice ---------------------------------------------------------------


def _set_oom_score_adj(pid: int | str, value: int) -> None:
    _write(f"/proc/{pid}/oom_score_adj", str(value))


def protect_supervisor() -> bool:
    """Lower our own ``oom_score_adj`` to SUPERVISOR_OOM_SCORE_ADJ where allowed: below the last
    value a CAP_SYS_RESOURCE process set (0) only with that capability (proc.rst; fs/proc/base.c
    ``__set_oom_adj``), i.e. as root. False where refused (an ordinary user): then only the
    run's raised value (``prefer_for_oom``) puts the run first. What we fork before
    ``prefer_for_oom`` inherits it, bwrap included, until raised."""
    try:
        _set_oom_score_adj("self", SUPERVISOR_OOM_SCORE_ADJ)
    except OSError:
        return False
    return True


def prefer_for_oom(pid: int) -> bool:
    """Raise PID's ``oom_score_adj`` to RUN_OOM_SCORE_ADJ (raising needs no privilege; the file
    belongs to the process's owner). Children inherit it at fork (copied with the signal
    struct, kernel/fork.c): written for bwrap right after its spawn and for the sandbox's init
    before the sandbox is released, so the gate, CMD and all they fork carry it. False when it
    cannot be written (the process is gone, or not ours)."""
    try:
        _set_oom_score_adj(pid, RUN_OOM_SCORE_ADJ)
    except OSError:
        return False
    return True
