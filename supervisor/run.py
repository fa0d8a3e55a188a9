"""``no-docker run``: start CMD in a bubblewrap sandbox once it is proven, and end the run.

Shape:

* ``main`` installs the ending signals' handlers first, parses, then ``_run`` enters a
  ``RunLifecycle`` (stale-run check, run marker, cgroup, ``--max-pids``), lists the outside,
  builds the policy, and hands over to ``Run``.
* ``Run.start`` is the one place the sandbox is started (born in the run's cgroup); bwrap holds
  it (``--block-fd``) while the prover (isolation/prover.py) proves it; ``Run.wait`` learns the
  outside pid of the sandbox's init from ``--json-status-fd`` (the lifecycle holds a pidfd on
  it and records the namespace in the run marker), takes the verdict and releases bwrap and
  the gate (policy.GATE_SCRIPT), which execs CMD.
* ``Run.end`` is the one place a run is ended: ``RunLifecycle.end`` SIGKILLs the init through
  its pidfd, writes ``cgroup.kill`` and proves every process gone (docs/supervision.md); bwrap
  is reaped.
* SIGINT/TERM/HUP/QUIT at any moment end the run too, and the exit status is 128+N; a second
  signal does not abort the ending (the handlers only record). An ending that cannot be shown
  within ``--end-timeout`` exits 125 and prints the ``no-docker end RUN_ID`` that finishes it.

Status lines go to stderr only; stdout belongs to CMD. This module imports only what the run
path needs (see tests/unit/test_isolation_run.py, which checks ``-X importtime``).
"""

from __future__ import annotations

# _signal, not signal: the wrapper module imports enum, a measurable part of `run -- true`.
import _signal as signal
import errno
import os
import select
import sys
import time

from .ending import markers
from .ending.cgroup import prefer_for_oom, protect_supervisor
from .ending.lifecycle import DEFAULT_TIMEOUT as DEFAULT_END_TIMEOUT
from .ending.lifecycle import RunLifecycle
from .ending.procfs import ProcfsError
from .errors import EXIT_NOT_PROVEN, EXIT_USAGE, NotProven, UsageError, printable
from .isolation.diagnose import (
    NESTED_LINE,
    NetworkUse,
    inside_a_run,
    network_line,
    subdirectory_hint,
)
from .isolation.later_code import LaterCodeAudit, change_lines
from .isolation.listing import ListingError, collect
from .isolation.plan import (
    Request,
    build_policy,
    encode_plan,
    namespace_ids,
    probe_source_path,
    writable_roots,
)
from .isolation.policy import (
    DOCKER_CONFIG_DIR,
    GATE_GO_FD,
    GATE_REACHED_FD,
    SENTINEL_PATH,
    TMP_SIZE_MIN,
    Policy,
    bwrap_argv,
    is_under,
    parse_size,
    takes_size,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # importing collections is a measurable part of `run -- true`
    from collections.abc import Callable

    from .ending.algorithm import EndReport
    from .isolation.mediation import EngineTargets, Keeper, Mediator
    from .isolation.publish import Forwarder
    from .isolation.stdio import Relay as StdioRelay
    from .isolation.terminal import Relay as TerminalRelay

USAGE = ("usage: no-docker run [--work DIR] [--ro PATH]... [--rw PATH]... [--keep-env NAME]... "
         "[--publish [127.0.0.1:]PORT]... [--report FILE] [--max-pids N] [--end-timeout SECONDS] "
         "[--tmp-size SIZE] [--memory-max SIZE] [--quiet] -- CMD [ARG...] "
         "(no-docker run --help explains each)")
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Where bwrap is looked for first: a directory on $PATH may be writable by an earlier run (a
# venv's bin, ~/bin), and the bubblewrap of the next run must never come from there.
BWRAP_FALLBACK_DIRS = ("/usr/bin", "/bin")
_VALUE_OPTIONS = {"--work": "work", "--ro": "ro", "--rw": "rw", "--keep-env": "keep_env",
                  "--publish": "publish", "--report": "report", "--max-pids": "max_pids",
                  "--end-timeout": "end_timeout", "--tmp-size": "tmp_size", "--memory-max": "memory_max"}
# How long bubblewrap may take to name its sandbox process (--json-status-fd "child-pid"; it
# does so right after clone(2), before any mount). Measured here (200 spawns each): median 2.4
# ms, slowest 9 ms idle; 5.8 / 70.6 ms with 2 cores kept busy; 16 / 42 ms with 8 busy loops;
# 40 / 115 ms with 16 spawning at once (a mutation tool's parallel runs, 2 cores). A program that
# says nothing (a wrapper that never execs bwrap, a hung one) would otherwise hold the run
# without bound (241 s measured); 5 s is over 40 times the slowest start measured.
BWRAP_REPORT_TIMEOUT = 5.0
MAX_PIDS_MIN = 8  # bwrap, its init, the gate and CMD need a few pids before CMD forks anything
# pids.max takes at most PIDS_MAX - 1 = PID_MAX_LIMIT (kernel/cgroup/pids.c: EINVAL above it,
# ERANGE past int64); PID_MAX_LIMIT is 4 * 1024 * 1024 on 64-bit (include/linux/threads.h).
MAX_PIDS_MAX = 4 * 1024 * 1024
# Below this the ending cannot even poll for the run's processes once: "not proven" every time.
END_TIMEOUT_MIN, END_TIMEOUT_MAX = 0.1, 3600.0
_PATH_OPTIONS = ("--work", "--rw", "--ro", "--report")
# Kernel file systems (the run mounts its own): a bind of the host's over them would show the
# host's processes or devices (--ro /proc), or make them writable (--rw /sys). /dev/shm is a
# plain tmpfs, shareable on purpose.
KERNEL_DIRS = ("/proc", "/sys", "/dev")
SHAREABLE_IN_DEV = "/dev/shm"
# bwrap parses --size with strtoull and refuses what overflows ("--size takes a non-zero number
# of bytes", seen as a late 125); memory.max and memory.limit_in_bytes are 64-bit as well. 1 EiB
# is far below both, and above any machine's memory.
SIZE_MAX = 1 << 60


def value_refusal(name: str, value: str) -> str | None:
    """Why VALUE cannot be the value of option NAME, judged on the text alone (pure), or None.

    Everything a value can be refused for without looking at the file system, so that a bad
    value is a usage error (2) before anything starts, never a late 125 with advice that does
    not apply (issue 24). The file system's part is :func:`path_refusal`."""
    if not value:
        return "empty value"
    if name in _PATH_OPTIONS:
        if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
            return "a path with a control character (a newline?): its name would break the one-line " \
                   "messages and records of the run; rename it"
        return None
    if name == "--keep-env":
        if not (value.isascii() and value.replace("_", "a").isalnum() and not value[0].isdigit()):
            return "not a variable name (letters, digits and _, not starting with a digit)"
        return None
    if name == "--publish":
        port = value.rpartition(":")[2]
        return None if port.isascii() else "a TCP port, 1-65535"  # the rest: publish.parse_publish
    if name == "--max-pids":
        if not (value.isascii() and value.isdigit() and MAX_PIDS_MIN <= int(value) <= MAX_PIDS_MAX):
            return f"a whole number from {MAX_PIDS_MIN} to {MAX_PIDS_MAX} (the kernel's limit)"
        return None
    if name in ("--tmp-size", "--memory-max"):
        size = parse_size(value)  # the rest (form, least size): _size_option
        if size is not None and size > SIZE_MAX:
            return f"at most {SIZE_MAX >> 30}G (1 EiB)"
        return None
    if name == "--end-timeout":
        try:
            seconds = float(value) if value.isascii() else -1.0
        except ValueError:
            seconds = -1.0
        if not END_TIMEOUT_MIN <= seconds <= END_TIMEOUT_MAX:  # NaN too: every comparison is false
            return f"seconds, from {END_TIMEOUT_MIN:g} to {END_TIMEOUT_MAX:g}"
        return None
    return None


def path_refusal(flag: str, real: str, is_dir: bool) -> str | None:
    """Why the existing path REAL (resolved) cannot be FLAG's (pure), or None. A path that does
    not exist is left to plan.writable_roots and the --ro check, which say how to create it."""
    if flag in ("--work", "--rw") and not is_dir:
        return "not a directory (a writable path is a directory: the run writes in it)"
    for root in KERNEL_DIRS:
        if (real == root or real.startswith(root + "/")) and not (
                real == SHAREABLE_IN_DEV or real.startswith(SHAREABLE_IN_DEV + "/")):
            return f"{root} is a kernel file system, and the run has its own"
    if real == "/run":
        return "the run has a /run of its own (no-docker's files are there); name a directory in it"
    if flag == "--ro" and real in ("/", "/tmp", "/var/tmp"):
        return ("everything outside the run is read-only or hidden by design; name the directory CMD "
                "needs" if real == "/" else f"the run's {real} is its own, fresh; name a directory in it")
    return None


def check_paths(request: Request) -> None:
    """:func:`path_refusal` for --work, --rw and --ro: UsageError (2) before anything starts;
    and one path both writable and read-only is a contradiction, not a P4 failure."""
    writable = {os.path.realpath(p) for p in (request.work or os.getcwd(), *request.rw)} if request.ro \
        else set()  # no realpath of the work dir on the common path: a few lstat calls
    for path in request.ro:
        if os.path.realpath(path) in writable:
            raise UsageError(f"--ro {printable(path)}: also writable (the work dir or a --rw); give it once")
    for flag, paths in (("--work", (request.work,) if request.work else ()), ("--rw", request.rw),
                        ("--ro", request.ro)):
        for path in paths:
            real = os.path.realpath(path)
            if not os.path.exists(real):
                continue
            problem = path_refusal(flag, real, os.path.isdir(real))
            if problem:
                shown = path if real == os.path.abspath(path) else f"{path} (-> {real})"
                raise UsageError(f"{flag} {printable(shown)}: {problem}")
    if not (request.rw or request.ro):
        return  # the common path: nothing more is named through a writable root (--report: ReportFile)
    roots = report_roots(request)
    for flag, paths in (("--rw", request.rw), ("--ro", request.ro)):
        for path in paths:
            link = link_below_a_root(path, roots)
            if link is not None:
                raise planted_link_refusal(flag, path, link)


def planted_link_refusal(flag: str, named: str, link: str) -> UsageError:
    """The one line for a path named to a run (FLAG NAMED) whose way passes LINK (T-85)."""
    return UsageError(f"{flag} {printable(named)}: its way passes {printable(link)}, a symlink inside a "
                      f"directory runs may write (-> {printable(os.path.realpath(link))}); a run could have "
                      "made it to send this run's writes elsewhere: give the real path")


def report_roots(request: Request) -> list[str]:
    """The real paths of REQUEST's writable roots (work dir, --rw), for the link checks; a path
    that cannot be resolved (changed while it was read) is a usage error, never a traceback."""
    try:
        return [os.path.realpath(p) for p in (request.work or os.getcwd(), *request.rw)]
    except OSError as err:
        raise UsageError(f"cannot resolve the work dir or a --rw: {err.strerror or err} "
                         "(changed meanwhile?)") from err


class PlantedLink(OSError):
    """LINK, a symlink inside a root a run may write, lies on the way of a path named to a run."""

    def __init__(self, link: str) -> None:
        super().__init__(errno.ELOOP, f"{link} is a symlink inside a directory runs may write")
        self.link = link


def link_below_a_root(path: str, roots: list[str]) -> str | None:
    """The first symlink on PATH's way that lies inside one of ROOTS (real paths of the work
    dir and --rw), or None. A run may leave such a link where it could write (`a/reports` ->
    /srv/elsewhere): the next run's --report, --rw or --ro named through it would have taken
    the supervisor's (root's) writes, or the command's, outside every root (red-team, T-85).
    A link above the roots, or beside them, is the user's own. The way is the one
    :func:`open_directory_below_roots` walks, as the kernel (and bwrap's mount) walks it."""
    try:
        os.close(open_directory_below_roots(path, roots))
    except PlantedLink as planted:
        return planted.link
    except OSError:
        pass  # a part missing, or not a directory: no link lies beyond it
    return None


def open_directory_below_roots(path: str, roots: list[str]) -> int:
    """An fd (O_RDONLY|O_DIRECTORY) of the directory PATH, each component opened from the one
    before, as given (`cache/..` is the parent of where `cache` leads, not lexically folded away
    as os.path.abspath would: red-team round 2, `--rw out/cache/..`); inside ROOTS with
    O_NOFOLLOW, so that a link there fails the open itself (PlantedLink), whenever it was swapped
    in: a check of the path and then an open of it left a window that a concurrent run in the
    same work dir used to move root's --report outside (red-team round 2). Links above or beside
    the roots are followed (the user's own). Any other OSError as the kernel says."""
    # O_PATH to walk (search permission is enough, as for any path); O_PATH|O_NOFOLLOW|O_DIRECTORY
    # on a symlink fails with ENOTDIR (open(2): O_DIRECTORY), so a link inside a root stops it.
    walk = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open("/", walk)
    try:
        for part in os.path.join(os.getcwd(), path).split("/"):
            if part in ("", "."):
                continue
            here = os.readlink(f"/proc/self/fd/{fd}")
            inside = part != ".." and any(is_under(here, root) for root in roots)
            try:
                following = os.open(part, walk | (os.O_NOFOLLOW if inside else 0), dir_fd=fd)
            except OSError as err:
                if inside and err.errno == errno.ENOTDIR and os.path.islink(os.path.join(here, part)):
                    raise PlantedLink(os.path.join(here, part)) from None
                raise
            os.close(fd)
            fd = following
        opened = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    return opened


# bwrap, its init and the gate take a few MiB together (their page tables, the tmpfs inodes,
# the run's share of the page cache it reads): below this not even `true` would start.
MEMORY_MAX_MIN = 16 << 20


def _size_option(name: str, value: str | None, least: int) -> int | None:
    """--tmp-size / --memory-max: bytes, or a usage error naming the option."""
    if value is None:
        return None
    size = parse_size(value)
    if size is None or size < least:
        raise UsageError(f"{name} {value!r}: a size such as 512M or 4G (K, M, G: powers of 1024), "
                         f"at least {least >> 20}M")
    return size


def parse_args(argv: list[str]) -> Request:
    """Parse ``run``'s options; UsageError names the offending flag."""
    values: dict[str, list[str]] = {"ro": [], "rw": [], "keep_env": [], "publish": []}
    single: dict[str, str] = {}
    quiet = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            command = argv[i + 1:]
            break
        if arg == "--quiet":
            quiet = True
            i += 1
            continue
        name, eq, inline = arg.partition("=")
        if name in _VALUE_OPTIONS:
            if eq:
                value = inline
                i += 1
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 2
            else:
                raise UsageError(f"{name} needs a value; {USAGE}")
            problem = value_refusal(name, value)
            if problem:
                raise UsageError(f"{name} {value!r}: {problem}" if value else f"{name}: {problem}")
            key = _VALUE_OPTIONS[name]
            if key in values:
                values[key].append(value)
            elif key in single:
                raise UsageError(f"{name} given twice")
            else:
                single[key] = value
            continue
        if arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r}; {USAGE}")
        # A command without "--" is accepted: everything from here on is CMD.
        command = argv[i:]
        break
    else:
        command = []
    if not command:
        raise UsageError(f"no command given; {USAGE}")
    publish: tuple[int, ...] = ()
    if values["publish"]:
        from .isolation.publish import parse_publish

        publish = tuple(dict.fromkeys(parse_publish(v) for v in values["publish"]))
    return Request(command=tuple(command), work=single.get("work"), ro=tuple(values["ro"]),
                   rw=tuple(values["rw"]), keep_env=tuple(values["keep_env"]),
                   report=single.get("report"), quiet=quiet, publish=publish,
                   tmp_size=_size_option("--tmp-size", single.get("tmp_size"), TMP_SIZE_MIN),
                   memory_max=_size_option("--memory-max", single.get("memory_max"), MEMORY_MAX_MIN))


def given_options(argv: list[str]) -> set[str]:
    """The long options ARGV itself uses, before CMD (for the config merge and --report)."""
    given = set()
    i = 0
    while i < len(argv) and argv[i] != "--" and argv[i].startswith("-"):
        name, eq, _ = argv[i].partition("=")
        given.add(name)
        i += 1 if eq or name not in _VALUE_OPTIONS else 2
    return given


def with_config(argv: list[str], request: Request) -> tuple[list[str], object]:
    """ARGV with the defaults of ``[tool.no-docker]`` in the work dir's pyproject.toml merged
    in (see config.py), and the config (None without one). Only called when the file exists."""
    from .isolation import config

    work = os.path.abspath(request.work or os.getcwd())
    cfg = config.load(work)
    if cfg is None:
        return argv, None
    config.check(cfg, work, parse_args, ending_options, check_paths)
    return config.merge(cfg, argv, given_options(argv)), cfg


def ending_options(argv: list[str]) -> tuple[int | None, float]:
    """``--max-pids N`` and ``--end-timeout SECONDS`` (parse_args has accepted them already)."""
    max_pids: int | None = None
    timeout = DEFAULT_END_TIMEOUT
    i = 0
    while i < len(argv) and argv[i] != "--" and argv[i].startswith("-"):
        name, eq, inline = argv[i].partition("=")
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if name in ("--max-pids", "--end-timeout"):
            problem = value_refusal(name, value)
            if problem:
                raise UsageError(f"{name} {value!r}: {problem}")
            if name == "--max-pids":
                max_pids = int(value)
            else:
                timeout = float(value)
        i += 1 if eq or name not in _VALUE_OPTIONS else 2
    return max_pids, timeout


def bwrap_takes_size(bwrap: str) -> bool:
    """Whether BWRAP accepts ``--size`` (policy.takes_size): its file read once, 72 KB here,
    15 us; not ``bwrap --version``, an exec of a few ms. Unreadable: taken as unable."""
    import stat

    try:
        fd = os.open(bwrap, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 24:
            return False
        return takes_size(os.read(fd, st.st_size), bool(st.st_mode & stat.S_ISUID))
    except OSError:
        return False
    finally:
        os.close(fd)


def find_bwrap(environ: dict[str, str]) -> str:
    """The bubblewrap binary: $NO_DOCKER_BWRAP (not trusted to isolate: the prover proves what
    it built, the gate refuses a sandbox it did not hold)."""
    configured = environ.get("NO_DOCKER_BWRAP")
    if configured:
        if not os.access(configured, os.X_OK):
            raise NotProven("isolation", f"NO_DOCKER_BWRAP={configured} is not executable",
                            "point it at bubblewrap or unset it")
        return configured
    for directory in [*BWRAP_FALLBACK_DIRS, *environ.get("PATH", os.defpath).split(":")]:
        candidate = os.path.join(directory, "bwrap")
        if directory.startswith("/") and os.access(candidate, os.X_OK):
            return candidate
    raise NotProven("isolation", "bubblewrap (bwrap) is not installed",
                    "install it: apt-get install bubblewrap")


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def userns_blocker(read: Callable[[str], str] = _read_text) -> str | None:
    """Why an unprivileged user cannot create user namespaces here, or None if nothing says so."""
    checks = (("/proc/sys/kernel/unprivileged_userns_clone", "0",
               "sysctl kernel.unprivileged_userns_clone=1"),
              ("/proc/sys/user/max_user_namespaces", "0", "sysctl user.max_user_namespaces=15000"),
              ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
               "sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap"))
    for path, bad, remedy in checks:
        try:
            value = read(path).strip()
        except OSError:
            continue
        if value == bad:
            return f"{path} is {bad}: user namespaces are not available ({remedy})"
    return None


def plan_items(policy: Policy, listing_json: dict, started: float) -> list[tuple[str, str]]:
    """What the prover (and `check`) reads: what to try, which outside namespaces to differ from."""
    environ = os.environ
    items = [("version", "1"), ("t0", repr(started)),
             ("supervisor_pid", str(os.getpid())), ("work", policy.work), ("home", policy.home),
             ("docker_config", DOCKER_CONFIG_DIR),
             ("outside_home", environ.get("HOME", "")), ("outside_xdg", environ.get("XDG_RUNTIME_DIR", ""))]
    items += [(f"ns.{name}", value) for name, value in namespace_ids().items()]
    writable_roots = (policy.work, *policy.rw)
    items += [("writable", p) for p in policy.writable()]
    items += [("hidden", p) for p in policy.hidden if p not in writable_roots]
    items += [("readonly", p) for p in (*policy.protected, *policy.toolchain_ro, *policy.ro)]
    items += [("masked", p) for p in policy.masked]
    items += [("unmasked", p) for p in policy.unmasked]
    items += [("unix", p) for p in listing_json["unix_paths"]]
    items += [("abstract", n) for n in listing_json["abstract_names"]]
    items += [("tcp", str(p)) for p in listing_json["tcp_ports"]]
    items.append(("sentinel", SENTINEL_PATH))
    return items


def _high(fd: int) -> int:
    """FD moved above the gate's fixed numbers (policy.GATE_GO_FD, GATE_REACHED_FD), which the
    spawn places last: nothing passed to bwrap may sit where they go."""
    import fcntl

    if fd > GATE_REACHED_FD:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, GATE_REACHED_FD + 1)
    os.close(fd)
    return moved


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # MFD_CLOEXEC off: it must reach bwrap
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)  # bwrap reads --ro-bind-data from the current offset
    return fd


class Run:
    """One sandbox: started once, ended once, whatever happens in between."""

    def __init__(self, argv_for: object, quiet: bool, life: RunLifecycle) -> None:
        self.argv_for = argv_for
        self.quiet = quiet
        self.life = life
        self.pid: int | None = None  # bwrap's pid, until reaped
        self.bwrap_pidfd: int | None = None
        self.init_pid: int | None = None
        self.init_pidfd: int | None = None
        self.status: dict[str, int] = {}
        self.report_line: str | None = None
        self.fds: list[int] = []
        self.report_r = self.status_r = -1
        self.init_stuck = False  # bwrap did not follow CMD within the end timeout (Run.wait)
        self.frozen = False  # the run's cgroup was frozen while it ran (Run.wait)
        self._status_buf = self._report_buf = b""
        self.block_w = -1  # bwrap holds the sandbox until a byte (or EOF) arrives on its other end
        self.go_w = -1  # the gate execs CMD only after "go" on its other end (policy.GATE_SCRIPT)
        self.reached_r = -1  # the gate says it runs: after the release, CMD is about to start
        self.prover_pid: int | None = None  # the forked prover (isolation/prover.py), until reaped
        self.prover_pid_w = -1  # where the prover learns the sandbox process's pid
        self.prover_dying: int | None = None  # SIGKILLed at the release, reaped once gone
        self.untaken = False  # the process bwrap named could not be taken: refused (_untaken)
        self.unreported = False  # bwrap named no sandbox process in time: refused (wait)
        self.plan = b""
        self.passed_stdio: tuple[tuple[int, int], ...] = ()
        self._gate_words = b""  # what the gate wrote on fd 4 (its first word, a refusal)
        self.gate_refusal: str | None = None  # the gate refused CMD after the proof (P7)
        self._gate_said_done = False
        self.released = False  # "go" was (or may have been) sent: CMD may have run (_release)
        self.keeper: Keeper | None = None  # the thread that spawned bwrap (its death signal's "parent")
        self.mediator: Mediator | None = None  # P12: answers every connect() of the run
        self.sentinel: Sentinel | None = None
        self.mediation_failure: str | None = None
        self.network: NetworkUse | None = None  # the run's no-route counters (diagnose.py)
        self.publish: Forwarder | None = None  # --publish: started once the init is known
        self.stdio: StdioRelay | None = None  # P7: what the sandbox gets as 0-2 (isolation/stdio.py)
        self.terminal: TerminalRelay | None = None  # P8: the run's own pty, relayed (isolation/terminal.py)

    def engine_attempts(self) -> list[dict]:
        """The command's attempts to reach an engine (mediation.Mediator.attempt_summary), the
        sentinel left out: --report's ``engine_attempts``."""
        if self.mediator is None:
            return []
        return [a for a in self.mediator.attempt_summary() if a["target"] != SENTINEL_PATH]

    # -- start ---------------------------------------------------------------------------
    def start(self, plan: bytes, env: dict[str, str]) -> None:
        from .isolation import syscall_filter as seccomp

        # The syscall filter, for bwrap to apply to its init and the gate (`--seccomp FD`:
        # read to EOF from the current offset), and the same without its user-namespace rules,
        # carried by bwrap from its start (mediation.spawn_filtered) and so tried by the
        # prover. No filter for this arch: no run (fail closed).
        arch = os.uname().machine
        try:
            program = seccomp.program(arch)
            deny = seccomp.program(arch, userns=False)
        except KeyError:
            raise NotProven("P5", f"no syscall filter for {arch} (only {', '.join(seccomp.AUDIT_ARCH)})",
                            "the run would leave setuid files and io_uring open") from None
        from .isolation import mediation, stdio

        self.plan = plan
        self.stdio = stdio.prepare()  # P7: a socket on 0-2 is relayed through a pipe, or refused
        ttys = [fd for fd in (0, 1, 2) if os.isatty(fd)]  # nothing more when none is a terminal
        if ttys:
            from .isolation.terminal import open_relay

            # P8: the run gets a pty of its own where stdio was a tty (on top of P7's fds: a
            # terminal is never a socket, so the two never claim the same fd)
            self.terminal = open_relay(ttys, self.stdio.fds)
        given = self.terminal.fds if self.terminal is not None else self.stdio.fds
        self.passed_stdio = tuple((st.st_dev, st.st_ino) for st in map(os.fstat, given))
        self.sentinel = Sentinel(self.life.directory)
        # Every fd for bwrap above the gate's fixed numbers (3, 4), which are placed last.
        data_fd = _high(_memfd("no-docker-plan", plan))  # bwrap copies it to PLAN_PATH (for `check`)
        seccomp_fd = _high(_memfd("no-docker-seccomp", program))  # bwrap closes it before the fork
        status_r, status_w = os.pipe()
        block_r, self.block_w = os.pipe()
        go_r, self.go_w = os.pipe()
        self.reached_r, reached_w = os.pipe()
        status_w, block_r, go_r, reached_w = map(_high, (status_w, block_r, go_r, reached_w))
        self.fds = [data_fd, seccomp_fd, status_r, status_w, block_r, go_r, reached_w]
        os.set_blocking(status_r, False)
        os.set_blocking(self.reached_r, False)
        argv = self.argv_for(data_fd=data_fd, status_fd=status_w, seccomp_fd=seccomp_fd, block_fd=block_r,
                             sentinel=self.sentinel.path, terminal=self.terminal is not None)
        self.block_fd, self.seccomp_fd = block_r, seccomp_fd  # their numbers in the held sandbox
        self.status_r = status_r
        self.bwrap_path = argv[0]
        self.fds.append(self.reached_r)
        if not os.access(argv[0], os.X_OK):
            raise NotProven("isolation", f"cannot start {argv[0]}: not an executable file",
                            "install bubblewrap (apt-get install bubblewrap) or fix NO_DOCKER_BWRAP")
        try:
            with self.life.into_cgroup() as into:  # bwrap, and all it forks, is born in the run's cgroup
                # P12: bwrap and everything it starts carry the connect filter, whose listener
                # only this process holds (mediation.spawn_filtered), and the deny filter.
                self.pid, listener, self.keeper = mediation.spawn_filtered(
                    argv, env, pass_fds=(data_fd, seccomp_fd, status_w, block_r),
                    stdio=given, deny_filter=deny, new_session=True,
                    fixed_fds=((go_r, GATE_GO_FD), (reached_w, GATE_REACHED_FD)),
                    cgroup_fd=into.fd, enter_cgroup=into.enter)
        except OSError as err:
            raise NotProven("isolation", f"cannot start {argv[0]}: {err.strerror}",
                            "install bubblewrap (apt-get install bubblewrap) or fix NO_DOCKER_BWRAP") from err
        except mediation.MediationError as err:
            if inside_a_run():
                # A run's processes carry its connect filter: a second one with a listener is
                # refused (EBUSY), before bwrap could say anything.
                raise NotProven("isolation", NESTED_LINE) from err
            raise NotProven("P12", f"cannot set up the connect mediation: {err}",
                            "Linux 5.19+ is needed (seccomp user notification, WAIT_KILLABLE_RECV)") from err
        self.life.launched(self.pid)  # first: whatever fails next, the ending knows bwrap
        # The OOM killer takes the run first (bwrap now; its init before the release, _hold_init):
        # tmpfs pages count in no process's RSS, so by size alone it took the supervisor.
        prefer_for_oom(self.pid)
        self.stdio.spawned()
        self.mediator = mediation.Mediator(listener, targets=lambda: engine_targets(plan))
        self.mediator.start()
        for fd in (data_fd, seccomp_fd, status_w, block_r, go_r, reached_w):
            os.close(fd)
            self.fds.remove(fd)
        self.bwrap_pidfd = os.pidfd_open(self.pid)
        self._start_prover()

    def _start_prover(self) -> None:
        """Fork the prover from the thread that carries the run's filters, right after the
        spawn: its fork overlaps bwrap's building of the sandbox. It learns the sandbox
        process's pid on a pipe (``_hold_init``; EOF: bwrap is gone, nothing to prove) and waits
        for it to be held (prover.await_held). Its verdict comes on report_r."""
        from .isolation import probe, prover

        assert self.keeper is not None
        plan = probe.decode_plan(self.plan)
        closed_before_cmd = frozenset({self.block_fd, self.seccomp_fd, GATE_GO_FD, GATE_REACHED_FD})
        terminal = self.terminal.rdev if self.terminal is not None else None
        held = probe.Held(closed_before_cmd, self.passed_stdio, None, terminal)
        verdict_r, verdict_w = os.pipe()
        pid_r, self.prover_pid_w = os.pipe()
        block_fd = self.block_fd

        def child() -> None:
            os.close(verdict_r)
            prover.prove_when_named(pid_r, plan, held, verdict_w, block_fd)

        try:
            self.prover_pid = self.keeper.fork(child)
        finally:
            os.close(verdict_w)
            os.close(pid_r)
        os.set_blocking(verdict_r, False)
        self.report_r = verdict_r
        self.fds.append(verdict_r)

    def _name_the_sandbox(self, pid: int | None) -> None:
        """Tell the prover which process to prove (None: none, bwrap is gone)."""
        if self.prover_pid_w < 0:
            return
        try:
            if pid is not None:
                os.write(self.prover_pid_w, b"%d\n" % pid)
        except OSError:
            pass
        os.close(self.prover_pid_w)
        self.prover_pid_w = -1

    def _on_status(self) -> None:
        self._status_buf += _drain(self.status_r)
        *lines, self._status_buf = self._status_buf.split(b"\n")
        for line in lines:
            self._status_line(line)

    def _status_line(self, line: bytes) -> None:
        self.status.update(parse_status_line(line))
        pid = self.status.get("child-pid")
        if pid is not None and self.init_pidfd is None:
            self._hold_init(pid, self.status.get("pid-namespace"))

    def _hold_init(self, pid: int, pidns: object) -> None:
        # The lifecycle opens the pidfd, checks that the init is bwrap's child (its pid cannot
        # be reused before bwrap reaps it) and records its namespace (NS_GET_ID) in the marker;
        # bwrap's own report of the namespace must agree.
        if isinstance(pidns, int):
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != f"pid:[{pidns}]":
                    self._untaken(pid, f"its pid namespace is not the one bwrap reported ({pidns}): "
                                       "is it a working bubblewrap?")
                    return
            except OSError:
                pass  # already gone: set_init records that the kernel ended the namespace
        try:
            # The prover waits for the pid: named as soon as it is shown to be bwrap's live
            # child, before the marker records it.
            self.life.set_init(pid, checked=lambda: self._name_the_sandbox(pid))
        except ProcfsError as err:
            self._untaken(pid, str(err))
            return
        if self.life.init_pidfd is None:
            self._untaken(pid, self.life.init_untaken or "it could not be taken")
            return
        self.init_pid, self.init_pidfd = pid, self.life.init_pidfd
        # bwrap may have forked it before its own oom_score_adj was raised (start): the gate and
        # CMD are forked by it only after the release, and inherit this.
        prefer_for_oom(pid)
        self.network = NetworkUse(pid)
        if self.mediator is not None:
            # The init was cloned into the run's namespaces: its network namespace is the run's.
            try:
                netns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    self.mediator.set_run_netns(netns)  # as non-root, through its owning user ns
                finally:
                    os.close(netns)
            except Exception as err:  # noqa: BLE001 - any failure: the run cannot be mediated
                self.mediation_failure = f"the run's network namespace cannot be read: {err}"
        if self.publish is not None and self.init_pidfd is not None:
            self.publish.start(self.init_pidfd, pid)

    def _untaken(self, pid: int, why: str) -> None:
        """The process bwrap named cannot be taken as the sandbox (not its live child, another
        namespace...): nothing is proven, the prover is told so (EOF), and the run is refused
        (``wait`` returns): bwrap would otherwise hold the sandbox for ever."""
        self._name_the_sandbox(None)
        self.untaken = True
        self._refuse(f"P1 not proven: the sandbox process {pid} that {self.bwrap_path} named cannot be "
                     f"taken: {printable(why)}")

    def _await_init(self, timeout: float) -> None:
        """bwrap writes the init's pid right after clone(2): wait (bounded) for it, or for
        bwrap to exit, so the ending knows what to kill even right after the spawn."""
        assert self.bwrap_pidfd is not None
        deadline = time.monotonic() + timeout
        while "child-pid" not in self.status and time.monotonic() < deadline:
            ready, _, _ = select.select([self.status_r, self.bwrap_pidfd], [], [],
                                        max(0.0, deadline - time.monotonic()))
            self._on_status()
            if self.bwrap_pidfd in ready and self.status_r not in ready:
                return

    def _on_report(self) -> None:
        if self.report_r < 0:
            return
        self._report_buf += _drain(self.report_r)
        if b"\n" in self._report_buf and self.report_line is None:
            self.report_line = self._report_buf.split(b"\n", 1)[0].decode("utf-8", "replace")
            if self.network is not None:
                self.network.mark()
            proven = self.report_line.startswith("ok ")
            if not proven:
                print(f"no-docker: {self.report_line[5:]}", file=sys.stderr)
            self._release(proven)

    def _on_gate(self) -> bool | None:
        """What the gate said on fd 4: True at its first word (it runs), None at EOF (closed
        before CMD, or bwrap gone without starting it), False otherwise. A refusal after the
        first word (P7 at the last look) is kept in ``gate_refusal`` and said."""
        try:
            chunk = os.read(self.reached_r, 4096)
        except BlockingIOError:
            return False
        if chunk:
            first = not self._gate_words
            self._gate_words += chunk
            return first
        refusal = gate_words(self._gate_words)[1]
        if refusal:  # a refusal: said once (EOF is read again at the reap)
            if self.gate_refusal is None:
                self.gate_refusal = printable(refusal.decode("utf-8", "replace")[:500])
                print(f"no-docker: {self.gate_refusal}", file=sys.stderr)
        elif self._gate_words and not self._gate_said_done and (self.report_line or "").startswith("ok "):
            self._gate_said_done = True  # the gate let CMD start: said once, before CMD's output
            if not self.quiet:
                fields = self.report_line.split(" ")  # type: ignore[union-attr]
                print(f"no-docker: isolation proven in {float(fields[1]):.0f} ms ({len(fields) - 3} "
                      "properties)", file=sys.stderr)
        return None

    def _refuse(self, message: str) -> None:
        """Not proven, said by the supervisor itself (the prover never got to say anything)."""
        if self.report_line is None:
            self.report_line = f"fail {message}"
            print(f"no-docker: {message}", file=sys.stderr)

    def _release(self, proven: bool) -> None:
        """Let bwrap and the gate go on to exec CMD; when not proven, close both: bwrap goes on
        to the gate, which reads EOF and exits 125 (the ending kills it first anyway)."""
        if self.block_w < 0:
            return
        prover = self._kill_prover()
        try:
            if proven and self.mediator is not None:
                self.mediator.end_proof()  # refusals from here on are the command's
            if proven and self.terminal is not None:
                self.terminal.take_input()  # the caller's keys are the command's from now on (raw mode)
            # The sandbox was held for the verdict, so it is set up and its uid map written;
            # read also for a refusal, whose ending must settle other users' processes too.
            self.life.note_user_namespace()
            if proven:
                self.life.hold_launcher()  # before CMD can exist (RunLifecycle.hold_launcher)
            try:
                if proven:
                    self.released = True  # before the write: a short one may still have let CMD go
                    os.write(self.go_w, b"go\n")
                    os.write(self.block_w, b"g")
            except OSError:
                pass
            for fd in (self.go_w, self.block_w):
                os.close(fd)
            self.go_w = self.block_w = -1
        finally:
            # Reaped after the release, not before: it has said its verdict and only exits, and
            # SIGKILL ends it wherever it is; what is left, the teardown of its copy of our
            # memory (~0.4 ms), is the kernel's and need not hold up the command (nor, were it
            # slow, the relay of the command's terminal): `end` reaps it if it is not gone now.
            if prover is not None and not _reap(prover, block=False):
                self.prover_dying = prover

    def _kill_prover(self) -> int | None:
        """The prover has written its verdict and exits; nothing of it may outlive the proof:
        SIGKILLed now (its pid, still unreaped, cannot have been reused); the caller reaps it."""
        self._name_the_sandbox(None)
        if self.prover_pid is None:
            return None
        pid, self.prover_pid = self.prover_pid, None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return pid

    # -- wait ----------------------------------------------------------------------------
    def wait(self, wakeup_r: int, pending: list[int]) -> int | None:
        """Until bwrap exits (its status) or an ending signal arrives (None); 125, with
        ``init_stuck`` set, when bwrap has not followed CMD within the end timeout (its init
        frozen or moved from inside: the wait is never unbounded once CMD is gone), or with
        ``frozen`` set, when the run's cgroup was frozen."""
        assert self.pid is not None and self.bwrap_pidfd is not None
        from . import resume_gc

        resume_gc()  # the sandbox is started, the prover forked: the GC is on for the run's life
        poller = select.poll()
        for fd in (self.bwrap_pidfd, wakeup_r, self.status_r, self.reached_r, self.report_r):
            poller.register(fd, select.POLLIN)
        if self.mediator is not None:
            poller.register(self.mediator.failed_r, select.POLLIN)
        if self.terminal is not None:
            self.terminal.register(poller)  # the pty's master, and the caller's keys once relayed
        events_fd = self.life.watch_cgroup()  # the run's cgroup frozen: end it (RunLifecycle)
        if events_fd is not None:
            self.fds.append(events_fd)
            poller.register(events_fd, select.POLLPRI)
        cmd_fd: int | None = None
        cmd_gone: float | None = None
        report_deadline = time.monotonic() + BWRAP_REPORT_TIMEOUT
        refused_at: float | None = None
        init_watched = False
        while True:
            if pending or self.mediation_failure:
                return None  # the ending releases bwrap first (RunLifecycle.end)
            refused = self.report_line is not None and not self.report_line.startswith("ok ")
            if refused and refused_at is None:
                refused_at = time.monotonic()
            if "child-pid" not in self.status or refused:
                # Bounded: bwrap names its sandbox process within ms, and once refused (closed
                # block fd and gate) a real one exits at once; one that does neither is ended.
                deadline = refused_at + BWRAP_REPORT_TIMEOUT if refused_at is not None else report_deadline
                left = deadline - time.monotonic()
                events = dict(poller.poll(max(0.0, left) * 1000)) if left > 0 else {}
                if not events and refused:
                    return None  # the ending kills what is left of the refused sandbox
                if not events:
                    self.unreported = True  # the ending need not wait for the report again
                    self._refuse(f"isolation not proven: {self.bwrap_path} did not name its sandbox "
                                 f"process within {BWRAP_REPORT_TIMEOUT:g} s (--json-status-fd); it was "
                                 "ended (is it a working bubblewrap? see NO_DOCKER_BWRAP)")
                    return None
            elif cmd_gone is None:
                events = dict(poller.poll())
            else:
                left = cmd_gone + self.life.end_timeout - time.monotonic()
                events = dict(poller.poll(max(0, left) * 1000)) if left > 0 else {}
                if not events:
                    self.init_stuck = True
                    return EXIT_NOT_PROVEN
            if self.terminal is not None:
                self.terminal.on_events(events)
            if self.mediator is not None and self.mediator.failed_r in events:
                # Fail closed: the kernel already refuses every connect (ENOSYS); end the run.
                self.mediation_failure = f"the connect mediation stopped: {self.mediator.failure}"
                return None
            if events_fd is not None and events_fd in events and self.life.cgroup_frozen(events_fd):
                self.frozen = True
                return EXIT_NOT_PROVEN
            if cmd_fd is not None and cmd_fd in events:
                poller.unregister(cmd_fd)
                self.life.command_exited()  # notes what is left, lets bwrap go
                # bwrap's time to follow counts from its release, not from CMD's exit: the note
                # is a pass over /proc, slow beside thousands of other users' processes
                cmd_gone = time.monotonic()
            if self.init_pidfd is not None and self.init_pidfd in events:
                poller.unregister(self.init_pidfd)
                self.life.release_launcher()  # the init is gone: bwrap must report it
            if self.status_r in events:
                self._on_status()
                if self.untaken:
                    return None  # refused (_untaken); the ending kills what bwrap holds
                if events[self.status_r] & select.POLLHUP and not events[self.status_r] & select.POLLIN:
                    poller.unregister(self.status_r)
            if self.report_r >= 0 and self.report_r in events:
                self._on_report()
                if self.life.launcher_held and self.init_pidfd is not None and not init_watched:
                    # bwrap is held from the release on: if the init ends before the gate
                    # says it runs (a refusal), bwrap must be let go to report it.
                    init_watched = True
                    poller.register(self.init_pidfd, select.POLLIN)
                if events[self.report_r] & select.POLLHUP and not events[self.report_r] & select.POLLIN:
                    poller.unregister(self.report_r)
                    if self.report_line is None and self.init_pid is not None:
                        # The prover is gone without a word while bwrap holds the sandbox: it
                        # would hold it forever. Refused; the ending kills it.
                        self._refuse("P1 not proven: the prover ended without a verdict")
                        return None
            if self.reached_r in events:
                reached = self._on_gate()
                if reached is None:
                    poller.unregister(self.reached_r)
                if reached and not (self.report_line or "").startswith("ok "):
                    # The gate runs, and the sandbox was never released: bwrap did not hold it.
                    self._refuse("P1 not proven: the command's gate started before the proof: "
                                 f"{self.bwrap_path} did not hold the sandbox (--block-fd); is it a working "
                                 "bubblewrap?")
                    return None
                if reached and cmd_fd is None:
                    # the gate, about to become CMD, by the pid it said
                    cmd_fd = self.life.watch_command(gate_words(self._gate_words)[0])
                    if cmd_fd is not None:
                        self.fds.append(cmd_fd)
                        poller.register(cmd_fd, select.POLLIN)
                        if self.init_pidfd is not None and not init_watched:
                            init_watched = True
                            poller.register(self.init_pidfd, select.POLLIN)
            if wakeup_r in events:
                _drain(wakeup_r)
            if self.bwrap_pidfd in events:
                code = self._reap()
                self._on_status()
                self._on_report()
                for _ in range(8):  # the gate's last words (its refusal); a writer left is not waited for
                    if self.reached_r < 0 or self._on_gate() is None:
                        break
                return code

    def _reap(self) -> int:
        assert self.pid is not None
        code = self.life.reap(block=True)  # the lifecycle owns bwrap's exit status
        assert code is not None
        self.pid = None
        return 128 - code if code < 0 else code

    # -- end -----------------------------------------------------------------------------
    def end(self) -> EndReport:
        """End the run: kill everything of it and prove it gone (``RunLifecycle.end``), reap
        bwrap. Every path out of ``_run`` comes through here, exactly once."""
        if self.publish is not None:
            self.publish.close()  # the forwarder ends with the run, before its processes
        if self.init_pidfd is None and self.status_r >= 0:
            # A signal may end the run before the loop read bwrap's status: read it now (and
            # wait briefly if bwrap has not written it yet), so the init is killed directly
            # rather than only through --die-with-parent (bwrap #633).
            # Not when the gate already spoke: a launcher that ran it without holding the
            # sandbox (a fake bwrap: the gate is that process, exec'd, and keeps the status fd
            # open) never writes a child-pid, and every such refusal waited out the full second.
            self._on_status()
            if self.pid is not None and self.bwrap_pidfd is not None and "child-pid" not in self.status \
                    and not self.unreported and not self._gate_words:
                self._await_init(1.0)
        self._release(False)
        if self.prover_dying is not None:
            # SIGKILLed at the release, gone by now; reaped before the ending, whose subreaper
            # path (no cgroup, as non-root) would otherwise take it for a child of the run.
            _reap(self.prover_dying)
            self.prover_dying = None
        if self.sentinel is not None:
            reached = self.sentinel.close()
            if reached and not self.mediation_failure:
                self.mediation_failure = (f"{reached} connect(s) reached the sentinel socket bound outside "
                                          "the run: the connect mediation let them through")
        try:
            report = self.life.end()
        finally:
            if self.terminal is not None:
                self.terminal.close()  # the rest of the run's output; the caller's terminal as it was
            if self.mediator is not None:
                # After the run's processes are gone: nothing left to answer. The keeper's
                # wake ends the threads waiting in RECV on any kernel (Mediator.stop).
                self.mediator.stop(wake=self.keeper.wake if self.keeper is not None else None)
            if self.keeper is not None:
                self.keeper.release()  # bwrap is reaped: its spawning thread may end
            if self.stdio is not None:
                self.stdio.finish(self.life.end_timeout)  # what the run wrote, out before our lines
            self.pid = None  # reaped by the lifecycle
            self.init_pidfd = None  # closed by the lifecycle
            if self.bwrap_pidfd is not None:
                os.close(self.bwrap_pidfd)
                self.bwrap_pidfd = None
            for fd in self.fds:
                os.close(fd)
            self.fds = []
        return report


class Sentinel:
    """A unix socket bound and listening outside the run (in the run's marker directory, which
    the run never sees), shown inside at SENTINEL_PATH: the prover's P12 connect must be refused
    by the mediation. Nothing ever accepts on it; :meth:`close` counts what queued up anyway
    (a connect that got through) and removes it."""

    def __init__(self, directory: str | None) -> None:
        import _socket

        if directory is None:
            raise NotProven("P12", "the run has no marker directory for its sentinel socket")
        self.path = os.path.join(directory, "outside.sock")
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
        try:
            # sun_path holds 108 bytes (unix(7)), and a state dir under pytest's or a CI's
            # temporary directory makes the marker directory's path longer than that: the
            # socket is bound through the directory's descriptor, whose name is short.
            where = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                self.sock.bind(f"/proc/self/fd/{where}/outside.sock")
            finally:
                os.close(where)
            self.sock.listen(16)
            self.sock.setblocking(False)
        except OSError as err:
            self.sock.close()
            reason = err.strerror or err
            raise NotProven("P12", f"cannot bind the sentinel socket {self.path}: {reason}") from err

    def close(self) -> int:
        reached = 0
        while True:
            try:
                fd, _ = self.sock._accept()
            except OSError:
                break
            os.close(fd)
            reached += 1
        self.sock.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        return reached


def _reap(pid: int, *, block: bool = True) -> bool:
    """Reap our child PID (waiting for it when BLOCK): True once it is reaped or gone."""
    try:
        return os.waitpid(pid, 0 if block else os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True  # reaped already (a subreaper's wait for every child)


def gate_words(words: bytes) -> tuple[int | None, bytes]:
    """What the gate wrote on fd 4 (pure): its pid in the run's namespace from its first word
    (``x<pid>\\n``; None if that is not whole) and what follows it (a refusal, or nothing)."""
    if not words.startswith(b"x"):
        return None, words
    line, newline, rest = words[1:].partition(b"\n")
    if not newline:
        return None, b""
    return (int(line) if line.isdigit() and len(line) <= 10 else None), rest


def audit_and_undo(audit: LaterCodeAudit, released: bool, policy: Policy, run_id: str, state: str
                   ) -> tuple[list[str], object, list[str], str | None]:
    """(later-code lines, the undo, what is not undone, the run id of the record that stops the
    next runs) for a run that has ended. Whatever the walk or the undo meet that they cannot
    read (a NUL in a planted commondir made os raise ValueError, red-team, T-85) ends here as
    not undone, recorded: never a traceback that leaves everything in place and exits 1."""
    try:
        return _audit_and_undo(audit, released, policy, run_id, state)
    except Exception as err:  # noqa: BLE001 - fail closed: the next run there must refuse
        line = (f"(the after-run audit failed: {type(err).__name__}: {err}; what the run left in "
                f"{', '.join(audit.roots)} is not known)")
        from .ending import left as left_record

        try:
            left_record.write(state, run_id, audit.roots, [line], [])
        except OSError as failed:
            return [line], None, [line, f"(the record that stops the next run could not be written: "
                                        f"{failed.strerror or failed})"], None
        return [line], None, [line], run_id


def _audit_and_undo(audit: LaterCodeAudit, released: bool, policy: Policy, run_id: str, state: str
                    ) -> tuple[list[str], object, list[str], str | None]:
    # Only a run whose CMD may have started can have left anything: before the release only the
    # supervisor's own prover ran, and a walk then would take what others changed meanwhile (in
    # a shared --rw) for the run's, and undo it (the red-team review, B7).
    changed = audit.changed() if released else {}
    later_code = change_lines(changed)
    undo, not_undone, recorded = None, [], None
    if changed:
        # A 125 alone is walked past (a mutation tool scores it as killed and goes on, and the
        # next `git status` outside runs the planted fsmonitor): undo it, then walk again.
        from .isolation.quarantine import put_back

        kept = (*policy.protected, *policy.pinned)
        undo = put_back(changed, audit.roots, run_id, audit.started_ns, kept, walked=audit.walked)
        for _ in range(4):
            lost = {line.split(": ", 1)[0] for line in undo.lost}  # gone, and said so apart
            # What this undo moved into its own quarantine is where it belongs.
            left = {path: change for path, change in audit.changed().items()
                    if path not in lost and not any(path.startswith(q + "/") for q in undo.quarantines)}
            if not left or undo.failed:
                break
            # What the first undo revealed (a directory made to look like a repository or a
            # venv hides what is below it from the walk): undone the same way, then again.
            done = len(undo.moved) + len(undo.restored)
            put_back(left, audit.roots, run_id, audit.started_ns, kept, undo, walked=audit.walked)
            if len(undo.moved) + len(undo.restored) == done:
                break
        not_undone = [*undo.failed, *change_lines(left)]
        if not_undone:
            # What is left stops the next run there until the user has looked (a 125 alone is
            # walked past: red-team round 4, B2): a record in the state dir, which no run writes.
            from .ending import left as left_record

            try:
                left_record.write(state, run_id, audit.roots, not_undone, undo.quarantines)
                recorded = run_id
            except OSError as err:
                not_undone.append(f"(the record that stops the next run could not be written: "
                                  f"{err.strerror or err})")
    return later_code, undo, not_undone, recorded


def undo_words(undo: object, not_undone: list[str], recorded: str | None = None) -> str:
    """The end of the P4 line: what was undone, or what is left to inspect (pure). RECORDED:
    the run id whose record (ending/left.py) now stops the next runs there."""
    from .isolation.quarantine import describe, lost_words

    done = describe(undo) if undo is not None else ""  # type: ignore[arg-type]
    lost = printable(lost_words(undo)) if undo is not None else ""  # type: ignore[arg-type]
    if not_undone:
        return (f"{done + lost + '; ' if done else ''}NOT undone: {printable(not_undone[0])}"
                f"{f' (+{len(not_undone) - 1} more)' if len(not_undone) > 1 else ''}; inspect it before "
                "running git, pytest, pip or a shell there"
                + (f"; new runs there refuse until: no-docker end {recorded}" if recorded else ""))
    if done:
        return f"{done}: none of it runs later (look at it there){lost}"
    return "inspect it before running git, pytest, pip or a shell there"


def refusal_line(refusals: list[dict]) -> str | None:
    """``3 connects refused: /opt/engine/docker.sock x3`` (DESIGN §3), or None (pure)."""
    total = sum(r["count"] for r in refusals)
    if not total:
        return None
    targets = ", ".join(f"{printable(r['target'])} x{r['count']}" for r in refusals)
    return f"{total} connect{'s' if total != 1 else ''} refused: {targets}"


def attempt_line(attempts: list[dict]) -> str | None:
    """``3 attempts to reach an engine: /run/docker.sock x2 (docker, pid 812),
    127.0.0.1:2375 x1 (curl, pid 815)``, or None (pure). One caller is named per target (the
    rest are in --report's ``engine_attempts``)."""
    total = sum(a["count"] for a in attempts)
    if not total:
        return None
    shown = []
    for a in attempts:
        callers = a["callers"]
        who = f" ({printable(callers[0]['command'])}, pid {callers[0]['pid']}" if callers else ""
        if len(callers) > 1:
            who += f", +{len(callers) - 1} more"
        shown.append(f"{printable(a['target'])} x{a['count']}{who}{')' if who else ''}")
    return f"{total} attempt{'s' if total != 1 else ''} to reach an engine: {', '.join(shown)}"


def engine_targets(plan: bytes) -> EngineTargets:
    """The run's engine targets (mediation.engine_targets), made from its plan when the
    mediator first needs them: a run that tries nothing pays nothing."""
    from .isolation import mediation, probe

    return mediation.engine_targets(probe.decode_plan(plan), dict(os.environ), os.getuid())


def parse_status_line(line: bytes) -> dict[str, int]:
    """The integer fields of one ``--json-status-fd`` document (bwrap writes flat objects:
    ``{ "child-pid": 123, "pid-namespace": 4026532256, ... }``, one per line). Parsed by hand:
    importing json costs more than the rest of this function's callers together."""
    fields: dict[str, int] = {}
    body = line.strip()
    if not (body.startswith(b"{") and body.endswith(b"}")):
        return fields
    for part in body[1:-1].split(b","):
        key, colon, value = part.partition(b":")
        key, value = key.strip(), value.strip()
        if colon and key.startswith(b'"') and key.endswith(b'"') and value.lstrip(b"-").isdigit():
            fields[key[1:-1].decode("ascii", "replace")] = int(value)
    return fields


def _drain(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


class ReportFile:
    """Where ``--report`` goes, pinned before the run starts.

    The report's directory may be the work dir, which the run writes: a run could plant a
    symlink where the supervisor (perhaps root) is about to write, or swap a parent directory
    (red-team finding: ``REPORT.tmp<pid>`` -> a victim file outside). So the directory is
    opened once, before the sandbox exists, and the report is written relative to that fd
    under a random name with ``O_EXCL|O_NOFOLLOW``, then renamed over the final name (rename
    replaces a planted symlink itself, never its target).
    """

    def __init__(self, path: str, roots: list[str] | None = None) -> None:
        self.path = path
        self.name = os.path.basename(path)
        if not self.name or self.name in (".", ".."):
            raise UsageError(f"--report {path}: not a file name")
        directory = os.path.dirname(os.path.join(os.getcwd(), path))
        try:
            # Through no link inside the roots a run may write (ROOTS: the work dir, --rw), at
            # the moment of the open (T-85).
            self.dir_fd = open_directory_below_roots(directory, roots or [])
        except PlantedLink as planted:
            raise planted_link_refusal("--report", path, planted.link) from None
        except OSError as err:
            raise UsageError(f"--report {path}: cannot open its directory: {err.strerror}") from err
        # Checked now, not after CMD ran (when a 0 would have to become 125, issue 24): the name
        # is not a directory, and a file can be made in its directory (a probe, removed again).
        import stat

        try:
            try:
                if stat.S_ISDIR(os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False).st_mode):
                    raise UsageError(f"--report {path}: is a directory; give the name of a file")
            except FileNotFoundError:
                pass
            probe = f".{self.name}.{os.urandom(6).hex()}.tmp"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600, dir_fd=self.dir_fd))
            os.unlink(probe, dir_fd=self.dir_fd)
        except OSError as err:
            os.close(self.dir_fd)
            raise UsageError(f"--report {path}: cannot write there: {err.strerror}") from err
        except UsageError:
            os.close(self.dir_fd)
            raise

    def write(self, doc: dict) -> None:
        tmp = f".{self.name}.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=self.dir_fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                # json.dump(doc, f, indent=2, sort_keys=True) by hand: no `import json` per run
                f.write(markers.to_json_indented(doc) + "\n")
            os.replace(tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.dir_fd)
            except OSError:
                pass
            raise

    def close(self) -> None:
        os.close(self.dir_fd)


class _Signals:
    """The ending signals, caught from the first moment of ``main`` to its last.

    The handlers only record the signal and wake the poll loop (``set_wakeup_fd``); nothing is
    raised, so no signal can abort the ending half-way, and a second signal changes nothing:
    the exit status stays 128 + the first one.
    """

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.wakeup_r, self.wakeup_w = os.pipe()
        os.set_blocking(self.wakeup_r, False)
        os.set_blocking(self.wakeup_w, False)
        self.previous = {sig: signal.signal(sig, self._record) for sig in ENDING_SIGNALS}
        self.old_wakeup = signal.set_wakeup_fd(self.wakeup_w, warn_on_full_buffer=False)
        # What the package's early handlers recorded (supervisor/__init__.py), read once ours
        # are in place, so that nothing arriving in between is lost.
        from . import EARLY_SIGNALS

        self.pending.extend(EARLY_SIGNALS)

    def _record(self, signum: int, _frame: object) -> None:
        self.pending.append(signum)

    def restore(self) -> None:
        signal.set_wakeup_fd(self.old_wakeup)
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        os.close(self.wakeup_r)
        os.close(self.wakeup_w)


def give_closed_stdio_devnull() -> None:
    """A 0, 1 or 2 that the caller closed gets /dev/null (the lowest free number is the one
    missing). Left closed, the next fd the supervisor opens takes that number, and a pipe or
    memfd of ours would become the run's stdio (red-team review: exit 1 and a traceback).

    A stderr we cannot write (an O_PATH fd, a directory, /dev/null opened read-only: a
    zero-length write(2) fails with EBADF, and has no effect on anything writable) keeps its
    fd for CMD, but our status lines go nowhere: failing to print one must not turn the run's
    status into exit 1 with a traceback (issue 24). A socket is never written to here (an
    empty write sends an empty datagram): stdio.py judges sockets."""
    import stat

    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            os.set_inheritable(os.open(os.devnull, os.O_RDWR), True)
            st = None
        if fd == 2 and sys.stderr is None:
            # Closed when the interpreter started: print(file=None) would write to stdout, CMD's.
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
        elif fd == 2 and st is not None and not _writable_stderr(stat.S_ISSOCK(st.st_mode)):
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def _writable_stderr(is_socket: bool) -> bool:
    if is_socket:  # never written to here: an empty write would send an empty datagram
        import fcntl  # only for a socket on stderr

        return not fcntl.fcntl(2, fcntl.F_GETFL) & getattr(os, "O_PATH", 0o10000000)
    try:
        os.write(2, b"")
    except OSError:
        return False
    return True


def main(argv: list[str]) -> int:
    started = time.monotonic()
    give_closed_stdio_devnull()
    if argv[:1] in (["-h"], ["--help"]):
        from .isolation.run_help import HELP

        print(HELP)
        return 0
    signals = _Signals()  # first: from here on a signal ends the run, never half of it
    report_file = None
    try:
        request = parse_args(argv)
        cli_argv, cfg = argv, None
        if os.path.exists(os.path.join(request.work or ".", "pyproject.toml")):  # one stat when none
            argv, cfg = with_config(argv, request)
            request = parse_args(argv)
        max_pids, end_timeout = ending_options(argv)
        check_paths(request)
        report_file = ReportFile(request.report, report_roots(request)) if request.report else None
        try:
            return _run(request, started, signals, max_pids, end_timeout, report_file,
                        (cli_argv, cfg) if report_file else None)
        except NotProven as err:
            # Refused before the sandbox existed: the report says so too, then the CLI prints it.
            if report_file:
                doc = {"command": list(request.command), "proven": False, "exit_status": EXIT_NOT_PROVEN,
                       "properties": [], "failed": str(err), "signal": None,
                       "timings_ms": {"total": round((time.monotonic() - started) * 1000, 2)}}
                try:
                    report_file.write(doc)
                except OSError:
                    pass
            raise
    finally:
        if report_file:
            report_file.close()
        signals.restore()


def _settings(origin: tuple[list[str], object] | None) -> dict[str, str]:
    """--report's ``settings``: where each option in effect came from."""
    from .isolation import config

    argv, cfg = origin if origin is not None else ([], None)
    return config.sources(cfg, given_options(argv) - {"--work", "--report"})  # type: ignore[arg-type]


def _run(request: Request, started: float, signals: _Signals, max_pids: int | None,
         end_timeout: float, report_file: ReportFile | None,
         origin: tuple[list[str], object] | None = None) -> int:
    pending = signals.pending
    environ = dict(os.environ)
    protect_supervisor()  # as root; an ordinary user may only raise it (cgroup.protect_supervisor)
    bwrap = find_bwrap(environ)
    # Each tmpfs of the run is sized where bwrap can do it; an older or setuid one mounts them at
    # the kernel's default (half the RAM each) as before, unless a size was asked for: refused.
    sized = bwrap_takes_size(bwrap)
    if not sized and request.tmp_size is not None:
        raise NotProven("--tmp-size", f"{bwrap} cannot size a tmpfs (--size needs bubblewrap 0.7 or "
                        "later, not setuid)", "upgrade bubblewrap or run without --tmp-size")
    if os.geteuid() != 0:
        blocker = userns_blocker()
        if blocker:
            raise NotProven("isolation", blocker)
    if pending:
        return 128 + pending[0]
    # The state dir must lie outside everything the run can write, or a run could plant the
    # run.json that the next run or `end` acts on as root (red-team round 2, A1): checked
    # against the roots asked for before any marker is read, and again once the policy knows
    # every writable root (a worktree's common git dir...).
    state = markers.state_dir()
    roots = writable_roots(request)
    markers.refuse_writable_state(state, roots)
    # The stale-run check, the run marker, the cgroup (+ --max-pids). Leaving the block by any
    # path ends the run; an ending that cannot be shown is reported below, never dropped.
    with RunLifecycle(list(request.command), max_pids=max_pids, memory_max=request.memory_max,
                      end_timeout=end_timeout,
                      subreaper=True, enter_cgroup_early=True, state=state, work=roots[0]) as life:
        try:
            listing = collect()
        except ListingError as err:
            raise NotProven("P3", f"outside socket listing refused: {err}",
                            "it cannot be shown unreachable without knowing it") from err
        listed = time.monotonic()
        # Files created during the run that make git or a shell run code later, outside (a new
        # .git/commondir, a new bare layout, .envrc...) cannot be blocked by mounts: build_policy
        # fingerprints them (audit) and they are compared once every process of the run is gone.
        audit = LaterCodeAudit()
        try:
            policy = build_policy(request, listing, environ, probe_source=probe_source_path(), audit=audit)
        except (OSError, ValueError, RecursionError) as err:
            # What the work dir holds (a previous run's work) that the plan could not read: no
            # run, one line (a NUL in a git file or a name too long was a traceback, exit 1).
            raise NotProven("P4", f"the work dir's layout cannot be read: {type(err).__name__}: {err}",
                            "inspect what the last run left there (.git, pyproject.toml, links)") from err
        if not sized:
            policy = policy.replace(tmp_size=None)
        markers.refuse_writable_state(state, [policy.work, *policy.rw])
        # Code an earlier run left and could not undo, where this one may write (ending/left.py):
        # checked once, against every writable root the policy knows (those asked for included)
        from .ending.left import refuse_if_left

        refuse_if_left(state, [policy.work, *policy.rw])
        listing_json = listing.to_json()
        plan = encode_plan(plan_items(policy, listing_json, started))

        def argv_for(*, data_fd: int, block_fd: int, status_fd: int, seccomp_fd: int,
                     sentinel: str | None = None, terminal: bool = False) -> list[str]:
            return bwrap_argv(policy, list(request.command), bwrap=bwrap, data_fd=data_fd, block_fd=block_fd,
                              status_fd=status_fd, seccomp_fd=seccomp_fd, sentinel=sentinel,
                              terminal=terminal)

        run = Run(argv_for, request.quiet, life)
        if request.publish and not pending:
            from .isolation.publish import Forwarder

            run.publish = Forwarder(request.publish)
            run.publish.bind()
        code: int | None = None
        try:
            if not pending:  # a signal before the sandbox exists: nothing is started
                run.start(plan, dict(policy.env))
                code = run.wait(signals.wakeup_r, pending)
        finally:
            ending = run.end()
    ended = time.monotonic()
    network_attempts = run.network.attempts() if run.network is not None else 0
    report = run.report_line or ""
    proven = report.startswith("ok ") and run.gate_refusal is None
    later_code, undo, not_undone, recorded = audit_and_undo(audit, run.released, policy, life.run_id, state)
    # Only the command's refusals: until the verdict they are the prover's own tries.
    refused = ([r for r in run.mediator.summary() if r["target"] != SENTINEL_PATH]
               if run.mediator and proven else [])
    attempts = run.engine_attempts() if proven else []
    if run.frozen and ending.clean:
        print("no-docker: the run's cgroup was frozen while it ran (from inside the run?); the run "
              "was ended, the command's status is not known", file=sys.stderr)
    if run.init_stuck and ending.clean:
        print(f"no-docker: the sandbox's init did not end within {end_timeout:g} s of the command "
              "(frozen or moved from inside the run?); the run was ended, the command's status is "
              "not known", file=sys.stderr)
    if not ending.clean:
        # The run's processes could not be shown gone: that outranks every other status.
        print(f"no-docker: ending not proven: {ending.reason}; the run's marker is kept; "
              f"finish it with: {life.end_command()}", file=sys.stderr)
        status = EXIT_NOT_PROVEN
    elif life.marker_failure is not None:
        # Every process is shown gone, but run.json could not be rewritten or removed (the
        # state dir filled up or went read-only during the run): the next run would trip on it.
        print(f"no-docker: {life.marker_failure}; the run itself was ended (every process gone)",
              file=sys.stderr)
        status = EXIT_NOT_PROVEN
    elif run.mediation_failure:
        print(f"no-docker: P12 not proven: {run.mediation_failure}; every connect of the run was refused "
              "from then on and the run was ended", file=sys.stderr)
        status = EXIT_NOT_PROVEN
    elif later_code:
        print("no-docker: P4 not proven: the run left code that runs later, outside: "
              f"{printable(later_code[0])}"
              f"{f' (+{len(later_code) - 1} more)' if len(later_code) > 1 else ''}; "
              f"{undo_words(undo, not_undone, recorded)}", file=sys.stderr)
        status = EXIT_NOT_PROVEN
    elif pending:
        status = 128 + pending[0]
    elif proven:
        status = code if code is not None else EXIT_NOT_PROVEN
    else:
        status = EXIT_NOT_PROVEN
        hint = subdirectory_hint(policy.work, report[5:]) if report.startswith("fail ") else None
        if hint:
            print(f"no-docker: {hint}", file=sys.stderr)
        if not report.startswith("fail ") and run.gate_refusal is None:
            if "child-pid" not in run.status and not os.environ.get("NO_DOCKER_BWRAP"):
                detail = ("bubblewrap could not create the sandbox (its message is above); if it cannot "
                          "create namespaces, enable user namespaces (sysctl user.max_user_namespaces, "
                          "kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns)")
                blocker = userns_blocker() if os.geteuid() != 0 else None
                if blocker:
                    detail = blocker
            elif inside_a_run():
                detail = NESTED_LINE
            else:
                detail = (f"the sandbox was never proven (is {bwrap} a working bubblewrap?); "
                          "the command was not started")
            print(f"no-docker: isolation not proven: {detail}", file=sys.stderr)
    line = refusal_line(refused)
    if line:
        # Always printed, --quiet or not: a mutation-testing user wants to know which mutant
        # tried to reach an engine (the pids and commands are in --report).
        print(f"no-docker: {line}", file=sys.stderr)
    line = attempt_line(attempts)
    if line:
        # Also always printed: which command of the run tried to reach an engine (issue 26).
        print(f"no-docker: {line}", file=sys.stderr)
    if ending.clean and not request.quiet and "child-pid" in run.status:
        print(f"no-docker: {ending.line()}", file=sys.stderr)
    if network_attempts:
        print(f"no-docker: {network_line(network_attempts)}", file=sys.stderr)
    if report_file:
        fields = report.split(" ")
        doc = {
            "command": list(request.command), "proven": proven, "exit_status": status,
            "properties": fields[3:] if proven else [],
            "failed": report[5:] if report.startswith("fail ") else run.gate_refusal,
            "signal": pending[0] if pending else None, "bwrap": bwrap, "work": policy.work,
            "masked_sockets": list(policy.masked), "listing": listing_json,
            "run_id": life.run_id, "ending": ending.to_json(), "later_code": later_code,
            "later_code_undo": undo.to_json() if undo is not None else None,
            "later_code_not_undone": not_undone,
            "connects_refused": refused, "engine_attempts": attempts,
            "mediation_failure": run.mediation_failure,
            "network_attempts": network_attempts,
            # CPU time and peak memory of the run's processes (issue 28 item 9; also in "ending")
            "usage": ending.usage.to_json() if ending.usage is not None else None,
            "settings": _settings(origin), "published": list(request.publish),
            "timings_ms": {"listing": round((listed - started) * 1000, 2),
                           "proven": float(fields[1]) if proven else None,
                           "probe": float(fields[2]) if proven else None,
                           "ending": round(ending.elapsed_ms, 2),
                           "total": round((ended - started) * 1000, 2)},
        }
        try:
            report_file.write(doc)
        except OSError as err:
            print(f"no-docker: cannot write --report {request.report}: {err}", file=sys.stderr)
            if status == 0:
                status = EXIT_NOT_PROVEN
    return status


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main(sys.argv[1:]))
    except (UsageError, NotProven) as err:
        print(f"no-docker: {err}", file=sys.stderr)
        sys.exit(EXIT_USAGE if isinstance(err, UsageError) else EXIT_NOT_PROVEN)
