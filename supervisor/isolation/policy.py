"""What a run may see and touch (a ``Policy``), and the bubblewrap argv that enforces it.

``bwrap_argv(policy, ...)`` is a pure function: every flag it emits is traceable to one of the
properties P1-P11 of DESIGN §4 (see ``FLAG_PROPERTIES`` and docs/isolation.md). The decisions
that need the file system (what exists, what is a symlink, where the toolchain lives) are made
once by ``build_policy`` in ``supervisor/isolation/plan.py``; this module never stats anything.

Mount order matters, because bwrap applies mounts in command-line order and a later mount
covers an earlier one:

1. system directories read-only, fresh ``/proc`` (``/proc/sys`` read-only, the init's
   memory masked) and ``/dev``                                          (P1, P4, P5, P8)
2. tmpfs over every place sockets and per-user state live               (P3, P11)
3. the run's own directory (the plan, an empty DOCKER_CONFIG)           (P6)
4. the toolchain read-only (no-docker, python, venv, PATH dirs)        (usability)
5. the work dir and --rw paths writable, --ro paths read-only           (P4)
6. read-only re-binds inside writable places (.git/hooks, .git/config)  (P4, P11)
7. /dev/null over every outside socket that would still be visible      (P3)
8. the root tmpfs remounted read-only                                   (P4)
"""

from __future__ import annotations

from ..record import record

# Inside the sandbox: where the run's own files appear. Under /run, which is a fresh tmpfs.
# Top-level directories that make up "the system": bound read-only when they are directories,
# re-created as symlinks when they are symlinks (merged /usr).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
               "/var", "/srv", "/nix")

RUN_DIR = "/run/no-docker-run"
PLAN_PATH = f"{RUN_DIR}/plan.json"
DOCKER_CONFIG_DIR = f"{RUN_DIR}/docker-config"
FALLBACK_HOME = f"{RUN_DIR}/home"
# A socket the supervisor binds and listens on *outside* the run, shown inside at this path:
# the prover's P12 try. Only the connect mediation stands between a connect and it.
SENTINEL_PATH = f"{RUN_DIR}/outside.sock"

# Names that route to an engine, or make a shell run code at start-up (P6, P11). A --keep-env
# of one of these is a usage error; the prover refuses any of them in the environment (its own
# copy of this list: it imports nothing of no-docker).
DENIED_ENV_NAMES = frozenset({
    "KUBECONFIG", "BUILDKIT_HOST", "SSH_AUTH_SOCK", "BASH_ENV", "ENV", "ZDOTDIR",
    "PROMPT_COMMAND", "LD_PRELOAD", "LD_AUDIT", "CONTAINER_HOST", "CONTAINER_CONNECTION",
    "DOCKER_HOST", "XDG_RUNTIME_DIR",
})
DENIED_ENV_PREFIXES = ("DOCKER_", "CONTAINER_", "CONTAINERD_", "DBUS_", "PODMAN_", "BUILDKIT_",
                       "KUBE", "BASH_FUNC_")
# Passed through when set outside (P6 is an allowlist). Everything else needs --keep-env.
ALLOWED_ENV_NAMES = ("PATH", "LANG", "LANGUAGE", "TERM", "COLORTERM", "NO_COLOR", "TZ", "USER",
                     "LOGNAME", "SHELL", "COLUMNS", "LINES", "CI")
ALLOWED_ENV_PREFIXES = ("LC_",)

# The size of each tmpfs of the run (/tmp, /var/tmp, /run, /dev/shm, $HOME...), unless
# --tmp-size says otherwise: a quarter of the machine's RAM. The kernel's default is half of RAM
# for EACH (Documentation/filesystems/tmpfs.rst), so a run filling its /tmp could take half the
# RAM and, with a second place, all of it: tmpfs pages are in no process's RSS, so the OOM killer
# then took the supervisor (measured, issue 24). A quarter is more than a test suite puts in
# one place (a wheel build, pytest's tmp_path, a few GiB at most on a 16 GiB machine), and a
# single runaway writer gets ENOSPC with three quarters of the RAM left.
TMP_SIZE_SHARE = 4
TMP_SIZE_MIN = 1 << 20  # bwrap makes the run's own files in /run (the plan, docker-config)
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int | None:
    """Bytes of a size as the command line spells it: digits, then K, M or G (powers of 1024,
    either case; an optional trailing B or iB: "512M", "2GiB", "1048576"); None when it is not
    one (pure)."""
    body = text.strip().upper()
    for tail in ("IB", "B"):
        if body.endswith(tail) and body[:-len(tail)][-1:] in ("K", "M", "G"):
            body = body[:-len(tail)]
            break
    unit = body[-1:] if body[-1:] in SIZE_UNITS else ""
    digits = body[:-1] if unit else body
    if not digits.isdigit() or not digits.isascii():
        return None
    return int(digits) * SIZE_UNITS[unit]


# bubblewrap has --size from 0.7.0 (containers/bubblewrap#509) and refuses it when setuid ("The
# --size option is not permitted in setuid mode"); 0.6 (Ubuntu 22.04) and 0.4 (Debian 11) say
# "Unknown option --size". That refusal message is in every binary that parses the option.
SIZE_OPTION_MARK = b"--size must be followed by --tmpfs"


def takes_size(binary: bytes, setuid: bool) -> bool:
    """Whether the bubblewrap whose file is BINARY accepts ``--size`` (pure). A wrapper script
    that execs bwrap does not show it: it is taken as unable (no --size), never refused."""
    return not setuid and SIZE_OPTION_MARK in binary


def default_tmp_size(ram: int) -> int:
    """Each tmpfs's size when --tmp-size is not given, for RAM bytes of memory (pure)."""
    return max(TMP_SIZE_MIN, ram // TMP_SIZE_SHARE // (1 << 20) * (1 << 20))



def is_under(path: str, root: str) -> bool:
    """True when PATH is ROOT or inside it (both absolute and normalized)."""
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")

def env_name_denied(name: str) -> bool:
    """True when NAME must never cross into a run (P6). DOCKER_CONFIG is set by us, not kept."""
    return name in DENIED_ENV_NAMES or name.startswith(DENIED_ENV_PREFIXES)


def env_allowlist(outside: dict[str, str], keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables that pass from OUTSIDE: the allowlist plus KEEP, never a denied name."""
    passed = {}
    for name, value in outside.items():
        if env_name_denied(name):
            continue
        if name in ALLOWED_ENV_NAMES or name.startswith(ALLOWED_ENV_PREFIXES) or name in keep:
            passed[name] = value
    return passed


@record
class Policy:
    """Everything the sandbox of one run looks like. Paths are absolute and already resolved.

    Each field says which property it serves; ``bwrap_argv`` turns it into flags.
    """

    work: str  # writable (P4); also the default working directory
    chdir: str
    home: str  # inside HOME: an empty tmpfs at this path (P3, P11)
    system_ro: tuple[str, ...]  # real directories bound read-only at the same path (P4)
    system_symlinks: tuple[tuple[str, str], ...] = ()  # (link, target), e.g. ("/bin", "usr/bin")
    hidden: tuple[str, ...] = ()  # tmpfs over each (P3): /run, /tmp, $HOME, $XDG_RUNTIME_DIR...
    toolchain_ro: tuple[str, ...] = ()  # the python running no-docker, its venv, PATH dirs
    ro: tuple[str, ...] = ()  # --ro
    rw: tuple[str, ...] = ()  # --rw
    pinned: tuple[str, ...] = ()  # writable dirs re-bound onto themselves so they cannot be renamed
    protected: tuple[str, ...] = ()  # read-only re-binds inside writable places (P4, P11)
    masked: tuple[str, ...] = ()  # outside sockets still visible: /dev/null bound over them (P3)
    # Listed sockets still visible in a place another user controls (plan.others_control):
    # no mask there would hold, they are the connect mediation's alone (P12). Listed names.
    unmasked: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the complete environment of bwrap and CMD (P6)
    # Host-wide kernel settings under the fresh /proc, read-only: root in bwrap's user namespace
    # is still uid 0 to the sysctl permission check (test_perm compares with GLOBAL_ROOT_UID),
    # so kernel.core_pattern, a command the kernel runs as root on the host, was writable (P4).
    proc_readonly: tuple[str, ...] = ("/proc/sys",)
    probe_source: str = ""  # no-docker's own checks (probe.py): read-only where it is writable
    # The memory of the sandbox's init (bwrap's pid 1), /dev/null bound over it: through a
    # writable /proc/1/mem a run could make the init do what the filter refuses (P5; red-team
    # review, when the init carried no filter; it carries them all now, the mask stays).
    proc_masked: tuple[str, ...] = ("/proc/1/mem", "/proc/1/task/1/mem")
    # The size in bytes of every tmpfs above (bwrap's --size before each --tmpfs), so that what
    # the run writes to its fresh directories is bounded by it, not by the kernel's half of the
    # RAM each. None: the kernel's default (unbounded tests only).
    tmp_size: int | None = None

    def writable(self) -> tuple[str, ...]:
        """Mount points the prover accepts as writable (P4)."""
        return (self.work, *self.rw, *self.pinned, *self.hidden)


def _depth(path: str) -> int:
    return 0 if path == "/" else path.rstrip("/").count("/")


def _by_depth(paths: tuple[str, ...]) -> list[str]:
    # Parents before children, so a child mount is not covered by its parent's mount.
    # sorted() is stable, so equal depth keeps the caller's order.
    return sorted(dict.fromkeys(paths), key=_depth)


# flag -> the properties it serves; tests check that every property has at least one flag.
FLAG_PROPERTIES: dict[str, tuple[str, ...]] = {
    "--unshare-all": ("P1", "P2", "P5", "P9", "P10"),
    "--proc": ("P1",),
    "--tmpfs": ("P3", "P11"),
    "--ro-bind": ("P3", "P4"),
    "--bind": ("P4",),
    "--remount-ro": ("P4",),
    "--cap-drop": ("P5", "P10"),
    "--clearenv": ("P6",),
    "--setenv": ("P6",),
    "--new-session": ("P8",),
    "--dev": ("P8",),
    "--die-with-parent": ("P1",),
    "--ro-bind-data": ("P3",),
    "--json-status-fd": (),
    "--seccomp": ("P5", "P10"),
    "--unshare-user": ("P9",),
    "--disable-userns": ("P9",),
    "--assert-userns-disabled": ("P9",),
    "--chdir": (),
    "--symlink": (),
    "--dir": ("P6",),
    "--perms": ("P6",),
    "--size": (),  # a bound on memory (issue 24), not an isolation property
    "--block-fd": ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P13"),
}
# P7 (only fds 0-2 cross) is not a bwrap flag: the supervisor starts bwrap with close_fds and
# passes exactly the plan, filter, status and block fds, which bwrap closes before the gate, and
# the gate's two pipes, which it closes itself before it checks that only 0-2 are left;
# P11 follows from P6 and from the gate being the first process started in the sandbox.


# No user namespace can be made inside a run (P9). Unmapped, a nested one held every capability
# over its own mount and cgroup namespaces (mount cgroup2/v1, lift --max-pids, freeze the init,
# leave cgroups: red-team review). bwrap sets user.max_user_namespaces to 1 in the run's user
# namespace and moves the run into a second one that cannot raise it, so the kernel refuses
# every further one (ENOSPC), whatever syscall asks (clone3 included); it needs --unshare-user
# (as root too: uid 0 is mapped to itself) and checks the result before it holds the sandbox, as
# --assert-userns-disabled asks. The syscall filter refuses the same on its own
# (syscall_filter.userns_rules, with --seccomp), and the prover tries (P9).
NO_NESTED_USERNS = ("--unshare-user", "--disable-userns", "--assert-userns-disabled")


def mount_layers(policy: Policy) -> list[tuple[str, str]]:
    """Every mount of the sandbox in bwrap's order, as (kind, path); kinds: "ro", "bind",
    "tmpfs", "proc", "dev", "mask" (/dev/null over a socket), "symlink" ("link\0target").

    The one source of truth for ``bwrap_argv`` and for ``plan.MountView`` (what stays visible):
    a later mount covers an earlier one, so the order is the policy.
    """
    layers: list[tuple[str, str]] = []
    # 1. System directories read-only; fresh /proc (P1), its host-wide settings read-only (P4),
    #    and /dev with its own devpts (P8).
    layers += [("ro", p) for p in _by_depth(policy.system_ro)]
    layers += [("symlink", f"{link}\0{target}") for link, target in policy.system_symlinks]
    layers += [("proc", "/proc")] + [("ro", p) for p in policy.proc_readonly]
    layers += [("mask", p) for p in policy.proc_masked] + [("dev", "/dev")]
    # 2. Hide every place sockets and per-user state live (P3, P11), and bring the toolchain
    #    back read-only: together, parents first, so a toolchain dir above a hidden one
    #    (/tmp/x for /tmp/x/home) cannot uncover it (hidden first among equals).
    both = [("tmpfs", p) for p in dict.fromkeys(policy.hidden)]
    both += [("ro", p) for p in dict.fromkeys(policy.toolchain_ro) if p not in policy.hidden]
    layers += sorted(both, key=lambda layer: _depth(layer[1]))
    # 3. The work dir, then --ro/--rw by depth (a --ro inside the work dir wins over it).
    layers += [("bind", policy.work)]
    user = {path: "ro" for path in policy.ro}
    user.update({path: "bind" for path in policy.rw})
    layers += [(user[p], p) for p in _by_depth(tuple(user))]
    # 4. Hidden places inside what the user made visible again (--ro /tmp/x above $HOME): hidden
    #    again. Never the work dir or a --rw path themselves.
    roots = (policy.work, *policy.ro, *policy.rw)
    layers += [("tmpfs", h) for h in _by_depth(policy.hidden)
               if any(_strictly_under(h, r) for r in roots) and h not in roots]
    # 5. Writable dirs that must stay put (.git), then read-only re-binds inside them.
    layers += [("bind", p) for p in _by_depth(policy.pinned)]
    layers += [("ro", p) for p in _by_depth(policy.protected)]
    # 6. Outside sockets that would still be visible: a read-only bind does not stop connect()
    #    (notes/isolation-anchors.md §1), so the socket inode itself must be covered.
    layers += [("mask", p) for p in sorted(set(policy.masked))]
    return layers


def _strictly_under(path: str, root: str) -> bool:
    return path != root and (root == "/" or path.startswith(root.rstrip("/") + "/"))


# The gate: what bwrap runs once the supervisor releases the sandbox it holds (--block-fd),
# with CMD as its arguments: the shell that every system has (dash: ~1 ms), no second Python.
# It tells the supervisor it was reached (a byte on fd 4): before the release that means bwrap
# did not hold the sandbox (a fake or weakened NO_DOCKER_BWRAP), and the run is refused. It then
# waits for the supervisor's verdict (fd 3): only "go" execs CMD; anything else, EOF included
# (the supervisor refused, or is gone), exits 125 with CMD never started. Last, in the run's own
# view, it proves that no descriptor but 0-2 crosses into CMD (P7): the ones bwrap held while
# the prover looked were closed on the way (bwrap's /proc, --block-fd, --seccomp), and one left
# open here is refused, said on fd 4 for the supervisor (`[ -e ]` after the glob: the
# directory's own descriptor is gone by then). fd 4 is closed right before CMD: EOF there
# without a refusal means CMD was started. A name starting with "-" would be an option to
# `command`: no such command is run (env(1) refuses them too).
GATE_GO_FD, GATE_REACHED_FD = 3, 4
GATE_FD_CHECK = (
    'for f in /proc/$$/fd/*; do\n'
    '  case ${f##*/} in 0|1|2|4) ;; *) if [ -e "$f" ]; then\n'
    '    printf "P7 not proven: fd %s crossed into the run" "${f##*/}" >&4; exit 125; fi;; esac\n'
    'done\n'
)
GATE_SCRIPT = (
    # Its first word carries its own pid in the run's namespace: the supervisor holds CMD by
    # it (RunLifecycle.command_pidfd), never by "the init's only child", which is a daemon CMD
    # left once CMD has exited.
    'printf "x%s\\n" "$$" >&4 || exit 125\n'
    'IFS= read -r go <&3 || go=\n'
    'exec 3<&-\n'
    '[ "$go" = go ] || exit 125\n'
    + GATE_FD_CHECK +
    'exec 4>&-\n'
    'case $1 in -*|"") echo "no-docker: $1: command not found" >&2; exit 127;; esac\n'
    'command -v "$1" >/dev/null || { echo "no-docker: $1: command not found" >&2; exit 127; }\n'
    'case $1 in */*) [ -x "$1" ] && [ ! -d "$1" ] || {\n'
    '  echo "no-docker: $1: cannot execute: Permission denied" >&2; exit 126; };; esac\n'
    'exec "$@"\n'
)
GATE_SHELL = "/bin/sh"
# With a terminal, the command's session takes the run's pty as its controlling terminal
# (Ctrl-C typed outside reaches it through the pty): util-linux setsid(1) makes a new session,
# whose leader, a shell, opens the first terminal among 0-2 without O_NOCTTY (the kernel then
# makes it the session's; one that is another session's stays no one's: tty_open_proc_set_tty).
GATE_TERMINAL = ('/usr/bin/setsid', GATE_SHELL, '-c',
                 'for n in 0 1 2; do if [ -t "$n" ]; then exec 9<>"/proc/self/fd/$n" 9<&-; break; fi; done\n'
                 'exec "$@"\n', 'no-docker-tty')


def shell_quote(word: str) -> str:
    """WORD as one sh word (pure): single quotes, each ' spelled '"'"'."""
    return "'" + word.replace("'", "'\"'\"'") + "'"


def bwrap_argv(
    policy: Policy,
    command: list[str],
    *,
    bwrap: str = "bwrap",
    data_fd: int,
    block_fd: int,
    status_fd: int | None = None,
    seccomp_fd: int | None = None,
    sentinel: str | None = None,
    terminal: bool = False,
) -> list[str]:
    """The complete argv: bwrap, its flags, then the gate and COMMAND (``GATE_SCRIPT``).

    DATA_FD is the plan for bwrap to copy to PLAN_PATH (``no-docker check`` reads it there).
    BLOCK_FD: bwrap holds the finished sandbox before it starts anything in it, until a byte
    (or EOF) arrives there; meanwhile the supervisor's prover proves it (isolation/prover.py).
    SECCOMP_FD, when given, holds ``seccomp.program(arch)``: bwrap applies it to its init and to
    the gate, and so to CMD, on top of the filters the run carries from its start
    (mediation.spawn_filtered). SENTINEL, when given, is a listening socket of the
    supervisor, shown at SENTINEL_PATH: the prover proves P12 by a connect to it that the
    mediation must refuse. TERMINAL: stdio is the run's pty, to become CMD's controlling tty.
    """
    if not command:
        raise ValueError("bwrap_argv: empty command")
    argv = [bwrap]
    for kind, path in mount_layers(policy):
        if kind == "symlink":
            link, target = path.split("\0", 1)
            argv += ["--symlink", target, link]
        elif kind == "tmpfs" and policy.tmp_size is not None:
            argv += ["--size", str(policy.tmp_size), "--tmpfs", path]
        elif kind in ("tmpfs", "proc", "dev"):
            argv += [f"--{kind}", path]
        elif kind == "mask":
            argv += ["--ro-bind", "/dev/null", path]
        else:
            argv += ["--ro-bind" if kind == "ro" else "--bind", path, path]
        if kind == "tmpfs" and path == "/run":
            # The run's own files, right after the fresh /run: the plan (the outside listing,
            # for `check`) and an empty read-only DOCKER_CONFIG (P6).
            argv += ["--ro-bind-data", str(data_fd), PLAN_PATH]
            argv += ["--perms", "0555", "--dir", DOCKER_CONFIG_DIR]
            if sentinel is not None:
                argv += ["--ro-bind", sentinel, SENTINEL_PATH]
            if policy.home == FALLBACK_HOME:
                argv += ["--dir", FALLBACK_HOME]
    # bwrap's /dev tmpfs read-only: --dev takes no --size, so a run could write files there up
    # to the kernel's half of the RAM (issue 24). Its device nodes are bind mounts of their own,
    # /dev/pts and /dev/shm mounts of their own: they stay as they are (not recursive).
    argv += ["--remount-ro", "/dev"]
    # The root tmpfs itself read-only (non-recursive: /tmp, /run... stay writable tmpfs).
    argv += ["--remount-ro", "/"]
    argv += ["--chdir", policy.chdir]
    argv += NO_NESTED_USERNS  # with --unshare-all below: no user namespace inside (P9)
    # Namespaces: user (when possible), pid, net, ipc, uts, cgroup.
    # --unshare-all = --unshare-user-try --unshare-ipc --unshare-pid --unshare-net
    #                 --unshare-uts --unshare-cgroup-try (bwrap(1)).
    argv += ["--unshare-all"]
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    # The environment is also bwrap's own (run.py spawns it with policy.env): the prover reads
    # it from /proc/PID/environ of the held sandbox, which shows what bwrap was started with.
    argv += ["--clearenv"]
    for name, value in policy.env:
        argv += ["--setenv", name, value]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--block-fd", str(block_fd)]
    script = GATE_SCRIPT
    if terminal:
        words = " ".join(shell_quote(a) for a in GATE_TERMINAL)
        script = script.replace('exec "$@"', f'exec {words} "$@"')
    argv += ["--", GATE_SHELL, "-c", script, "no-docker-gate", *command]
    return argv
