"""From the command line and this machine to a ``Policy`` (and the plan the prover reads).

The file-system questions (does it exist, is it a symlink, where does the toolchain live) are
asked here, once; the decisions are pure functions (``effective_mount``, ``sockets_to_mask``,
``toolchain_dir_for``...) that the unit and property tests drive with made-up trees.
"""

from __future__ import annotations

import os
import stat
import sys

from ..errors import NotProven, UsageError
from ..record import record
from .later_code import (
    STARTUP_FILES,
    LaterCodeAudit,
    git_layout,
    home_link_targets,
    realpath,
    startup_names_at,
)
from .listing import Listing
from .policy import (
    FALLBACK_HOME,
    SYSTEM_DIRS,
    Policy,
    default_tmp_size,
    env_allowlist,
    env_name_denied,
    is_under,
    mount_layers,
)
from .tool_sources import cache_refusal, startup_refusal

# Always a fresh tmpfs (P3): where engines and session buses put their sockets.
ALWAYS_HIDDEN = ("/run", "/tmp", "/var/tmp", "/dev/shm")
# Engine state under /var: hidden when present, so nothing created there later is visible.
ENGINE_STATE_DIRS = ("/var/run", "/var/lib/docker", "/var/lib/containerd", "/var/lib/containers",
                     "/var/lib/kubelet", "/var/lib/rancher", "/var/lib/buildkit", "/var/lib/lxd",
                     "/var/lib/incus", "/var/snap")
# First components under $HOME that are never exposed even when a PATH entry lives there.
HOME_DENIED = frozenset({".docker", ".kube", ".ssh", ".gnupg", ".config", ".aws", ".azure",
                         ".minikube", ".colima", ".lima", ".rd", ".orbstack", ".password-store"})
# First components under $HOME where only the PATH entry itself is bound (~/.local/bin), since
# the rest (~/.local/share/containers...) can hold engine state.
HOME_ENTRY_ONLY = frozenset({".local"})


def surviving_mounts(mounts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The MOUNTS (mountpoint, kind), in bwrap's order, that no later mount covers: a mount
    covers every earlier mount at or below its mount point."""
    alive: list[tuple[str, str]] = []
    for point, kind in mounts:
        alive = [m for m in alive if not is_under(m[0], point)]
        alive.append((point, kind))
    return alive


def effective_mount(mounts: list[tuple[str, str]], path: str, *, survivors: bool = False
                    ) -> tuple[str, str] | None:
    """Which of MOUNTS decides what PATH shows: the deepest surviving mount point holding it.
    SURVIVORS: MOUNTS is already ``surviving_mounts(...)`` (for callers asking many times)."""
    best = None
    for point, kind in (mounts if survivors else surviving_mounts(mounts)):
        if is_under(path, point) and (best is None or len(point) >= len(best[0])):
            best = (point, kind)
    return best


def mount_sequence(policy: Policy) -> list[tuple[str, str]]:
    """The mounts of ``bwrap_argv`` in order, as (mountpoint, "bind"|"ro"|"tmpfs"|...)."""
    seq: list[tuple[str, str]] = [("/", "tmpfs")]
    seq += [(path, kind) for kind, path in mount_layers(policy) if kind != "symlink"]
    return seq


class MountView:
    """What the sandbox of POLICY shows, asked path by path (the mount table computed once)."""

    def __init__(self, policy: Policy) -> None:
        self.mounts = surviving_mounts(mount_sequence(policy))

    def visible(self, real_path: str) -> bool:
        """Does REAL_PATH (resolved outside) name the same file inside the sandbox?"""
        mount = effective_mount(self.mounts, real_path, survivors=True)
        return mount is not None and mount[1] in ("ro", "bind")


def visible_inside(policy: Policy, real_path: str) -> bool:
    """Does REAL_PATH (resolved outside) name the same file inside the sandbox?"""
    return MountView(policy).visible(real_path)


def sockets_to_mask(policy: Policy, resolved_sockets: list[str]) -> tuple[str, ...]:
    """The outside sockets (already resolved and known to be sockets) that stay visible."""
    view = MountView(policy)
    return tuple(sorted({p for p in resolved_sockets if view.visible(p)}))


def others_control(chain: list[tuple[int, int]], file_uid: int | None, me: int) -> bool:
    """Could a user other than root and ME remove, replace or bind the entry at a path (pure)?
    CHAIN: (owner, mode) of each directory from ``/`` down to the entry's parent; FILE_UID:
    the entry's owner, None when there is none now. A directory is another user's to change
    when it is theirs, or writable by group or others without the sticky bit; with it
    (``/tmp``-like), a missing name is anyone's to bind and an entry is its owner's to unlink;
    each directory of the chain is an entry of the one above it, checked as a directory."""
    trusted = (0, me)
    for uid, mode in chain:
        if uid not in trusted or (mode & 0o022 and not mode & stat.S_ISVTX):
            return True
    return bool(chain) and bool(chain[-1][1] & 0o022) and file_uid not in trusted


def controlled_by_others(real_path: str, me: int) -> bool:
    """:func:`others_control` of REAL_PATH (resolved), from stat(2); a directory of it that
    cannot be read: True (the mediation alone then, which never depends on the outside view)."""
    chain = []
    directory = os.path.dirname(real_path)
    try:
        while True:
            st = os.stat(directory)
            chain.append((st.st_uid, st.st_mode))
            if directory == "/":
                break
            directory = os.path.dirname(directory)
    except OSError:
        return True
    try:
        file_uid: int | None = os.lstat(real_path).st_uid
    except OSError:
        file_uid = None
    return others_control(chain[::-1], file_uid, me)


def toolchain_dir_for(entry: str, home: str | None, has_pyvenv_cfg: bool) -> str | None:
    """What to bind read-only so that a PATH entry (or a command's dir) works inside.

    Under $HOME: the first component (``~/.pyenv`` for ``~/.pyenv/shims``: a shim needs the
    whole pyenv), unless it holds credentials or engine state (HOME_DENIED). A venv's bin:
    the venv. Another ``bin`` or ``shims``: its parent, the tool's root (a pyenv outside the
    current $HOME). Anything else: the directory itself.
    """
    if home and home != "/" and is_under(entry, home) and entry != home:
        first = entry[len(home.rstrip("/")) + 1:].split("/", 1)[0]
        if first in HOME_DENIED:
            return None
        if first in HOME_ENTRY_ONLY:
            return entry
        return f"{home.rstrip('/')}/{first}"
    if has_pyvenv_cfg:
        return os.path.dirname(entry)
    parent = os.path.dirname(entry)
    if (os.path.basename(entry) in ("bin", "shims") and parent not in ("/", home)
            and os.path.basename(parent) not in HOME_DENIED):
        # A tool root: /opt/pyenv/shims needs /opt/pyenv/libexec, /srv/node/bin its lib.
        return parent
    return entry


@record
class Request:
    """The parsed command line of ``no-docker run``."""

    command: tuple[str, ...]
    work: str | None = None
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    keep_env: tuple[str, ...] = ()
    report: str | None = None
    quiet: bool = False
    publish: tuple[int, ...] = ()  # loopback TCP ports forwarded from the host (--publish)
    tmp_size: int | None = None  # bytes per tmpfs (--tmp-size); None: policy.default_tmp_size
    memory_max: int | None = None  # bytes, the run's cgroup memory limit (--memory-max)


# First components under $HOME that run code later, outside: never writable (--work/--rw).
HOME_RUNS_LATER = HOME_DENIED | HOME_ENTRY_ONLY | frozenset(STARTUP_FILES) | frozenset({
    ".bashrc.d", ".pam_environment", ".xprofile", ".xinitrc", ".xsession", ".xsessionrc", ".npmrc",
    ".pypirc", ".pydistutils.cfg", ".curlrc", ".wgetrc", ".inputrc", ".vimrc", ".emacs", ".emacs.d",
    ".cargo", ".rustup", ".pyenv", ".nvm", ".rbenv", ".sdkman", ".bin", "bin"})


# Where $HOME's start-up files may lead (a dotfiles checkout links them): protected there.
HOME_STARTUP_LINKS = tuple(sorted(HOME_RUNS_LATER)) + (
    ".zlogout", ".zshrc.d", ".oh-my-zsh", ".direnvrc", ".tmux.conf", ".screenrc", ".ssh/config",
    ".ssh/rc", ".config/git", ".config/git/config", ".config/git/hooks", ".config/direnv",
    ".config/fish", ".config/zsh", ".config/bash", ".config/environment.d", ".config/systemd",
    ".config/autostart", ".config/mise", ".config/nvim", ".config/pip", ".local/bin")


def runs_later_in_home(path: str, home: str) -> str | None:
    """Why PATH (resolved) must not be writable: it is, or is inside, something under $HOME that
    runs code later (a shell start-up file, ~/.config with systemd units and git's global
    config, ~/.local/bin, a tool root on PATH...), or None (pure)."""
    if not home or home == "/" or path == home or not is_under(path, home):
        return None
    first = path[len(home.rstrip("/")) + 1:].split("/", 1)[0]
    if first in HOME_RUNS_LATER:
        return f"~/{first} holds what runs later, outside"
    return None


def work_venvs(work: str) -> tuple[str, ...]:
    """The venvs at the top of the work dir (``.venv``, ``venv``...: a ``pyvenv.cfg`` in them):
    their own pip.conf is pip's config when they run it."""
    try:
        names = os.listdir(work)
    except OSError:
        return ()
    return tuple(os.path.join(work, n) for n in sorted(names)[:500]
                 if os.path.isfile(os.path.join(work, n, "pyvenv.cfg")))


def python_roots(*paths: str) -> list[str]:
    """The real directories among PATHS, outermost only (a venv's prefix holds its site-packages)."""
    real = [realpath(p) for p in paths if p and os.path.isdir(p)]
    return [r for r in dict.fromkeys(real) if not any(o != r and is_under(r, o) for o in real)]


def pins_for(protected: list[str], writable_roots: tuple[str, ...]) -> list[str]:
    """Every directory strictly between a writable root and a protected path in it (pure): bound
    onto itself it becomes a mount point, which rename(2) refuses (EBUSY). Otherwise the run
    could rename a parent away and put a writable copy of the protected path in its place."""
    pins = []
    for path in protected:
        for root in writable_roots:
            if not is_under(path, root) or path == root:
                continue
            parent = os.path.dirname(path)
            while parent != root and is_under(parent, root) and parent != "/":
                pins.append(parent)
                parent = os.path.dirname(parent)
    return list(dict.fromkeys(pins))


def _real_existing(path: str, flag: str) -> str:
    real = realpath(path)
    if not os.path.exists(real):
        # A cache dir that a fresh machine does not have yet (--rw ~/.cache/pip) is the usual case.
        todo = f" (create it first: mkdir -p {path})" if flag == "--rw" else ""
        raise UsageError(f"{flag} {path}: no such file or directory{todo}")
    return real


def shared_sticky(mode: int) -> bool:
    """Is a directory of MODE one every user may create files in, each keeping their own
    (world-writable and sticky: /tmp, /var/tmp, /dev/shm) (pure)?"""
    return bool(mode & stat.S_IWOTH and mode & stat.S_ISVTX)


def _guard_writable(path: str, flag: str) -> None:
    # A writable system directory (or an ancestor of one) would void P4 for everything below.
    for sysdir in ("/", *SYSTEM_DIRS):
        if os.path.lexists(sysdir) and is_under(realpath(sysdir), path):
            raise UsageError(f"{flag} {path}: refused, system directories stay read-only (P4)")
    # A shared directory holds other users' files: the walk after the run would take what they
    # change during it for the run's, and move it aside (the red-team review, B7: over --rw /tmp
    # it moved other sessions' files). The run has a private /tmp of its own already.
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # _real_existing has said what is missing
    if shared_sticky(mode):
        raise UsageError(f"{flag} {path}: refused, every user may write there (world-writable, sticky): "
                         "other users' files would be taken for the run's; the run has a private /tmp, "
                         "or give a directory of your own inside it (P4)")


def writable_roots(request: Request) -> list[str]:
    """The host directories REQUEST makes writable (work dir, --rw), resolved and checked as
    ``build_policy`` checks them, so that a bad --work/--rw is the usage error it always was."""
    work = _real_existing(request.work or os.getcwd(), "--work")
    _guard_writable(work, "--work")
    rw = [_real_existing(p, "--rw") for p in request.rw]
    for original, path in zip(request.rw, rw, strict=True):
        _guard_writable(path, f"--rw {original} ->")
    return [work, *rw]


def namespace_ids(proc: str = "/proc") -> dict[str, str]:
    ids = {}
    for name in ("pid", "net", "ipc", "uts", "mnt", "cgroup", "user"):
        try:
            ids[name] = os.readlink(f"{proc}/self/ns/{name}")
        except OSError:
            ids[name] = ""
    return ids


def build_policy(request: Request, listing: Listing, environ: dict[str, str],
                 *, probe_source: str, python: str | None = None,
                 audit: LaterCodeAudit | None = None) -> Policy:
    """Look at this machine once and decide what the sandbox of REQUEST shows. AUDIT (run's)
    takes the before-run fingerprint of what runs later, from the same walk."""
    for name in request.keep_env:
        if env_name_denied(name):
            raise UsageError(f"--keep-env {name}: refused, it can route to an engine or run code at "
                             "shell start-up (P6)")
    work = _real_existing(request.work or os.getcwd(), "--work")
    if not os.path.isdir(work):
        raise UsageError(f"--work {request.work}: not a directory")
    _guard_writable(work, "--work")
    rw = tuple(_real_existing(p, "--rw") for p in request.rw)
    for original, path in zip(request.rw, rw, strict=True):
        _guard_writable(path, f"--rw {original} ->")
    ro = tuple(_real_existing(p, "--ro") for p in request.ro)
    cwd = realpath(os.getcwd())
    chdir = cwd if is_under(cwd, work) else work

    system_ro, symlinks = [], []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            symlinks.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            system_ro.append(path)

    hidden = [p for p in ALWAYS_HIDDEN if p in ("/run", "/tmp", "/dev/shm") or os.path.isdir(p)]
    hidden += [p for p in ENGINE_STATE_DIRS if os.path.isdir(p) and not os.path.islink(p)]
    home_outside = environ.get("HOME", "")
    home_real = realpath(home_outside) if home_outside.startswith("/") else ""
    writable_roots = (work, *rw)
    for flag, root in (("--work", work), *(("--rw", p) for p in rw)):
        reason = runs_later_in_home(root, home_real)
        if not reason and not (home_real and is_under(home_real, root)):  # $HOME itself: below
            reason = cache_refusal(root, home_real, environ, work_venvs(work))
        # What the caller's environment names as start-up code or config (PYTHONUSERBASE,
        # GIT_CONFIG_GLOBAL, BASH_ENV, XDG_CONFIG_HOME...): the next command outside inherits
        # that environment and reads it, so a run that may write it leaves code for later (P4).
        reason = reason or startup_refusal(root, home_real, environ)
        if reason:
            raise UsageError(f"{flag} {root}: refused, {reason} (P4)")
    for root in writable_roots:
        if home_real and home_real != "/" and is_under(home_real, root):
            # Everything that runs later, outside, lives in $HOME (~/.bashrc, ~/.config/systemd,
            # crontabs...): a run that can write it proves nothing (P4, P11).
            # Where to run is the caller's choice, like --work /: a usage error (2) either way.
            raise UsageError(f"P4: $HOME ({home_real}) would be writable inside the run: it is inside "
                             f"{root} (pass a project directory as --work, or run from one)")
    if not home_real or home_real == "/" or any(is_under(h, home_real) for h in system_ro):
        # No usable $HOME (unset, /, or above a system directory): an empty one elsewhere.
        home = FALLBACK_HOME
    else:
        home = home_real
        hidden.append(home_real)
    xdg = environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):
        xdg_real = realpath(xdg)
        if (os.path.isdir(xdg_real) and not any(is_under(xdg_real, h) for h in hidden)
                and not any(is_under(xdg_real, w) for w in writable_roots)):
            hidden.append(xdg_real)

    pinned, protected, git_rw = git_layout(work, home_real)
    for root in rw:
        # A --rw path can be a repository too (a sibling checkout): same protections.
        more = git_layout(root, home_real)
        pinned, protected, git_rw = pinned + more[0], protected + more[1], git_rw + more[2]
    # Start-up files in the work dir run later, outside, when someone's shell starts there
    # (.envrc) or the work dir is someone's home; a symlinked one is protected where it leads.
    for root in writable_roots:
        for name in startup_names_at(root):
            path = realpath(os.path.join(root, name))
            if os.path.exists(path) and any(is_under(path, w) for w in writable_roots):
                protected.append(path)

    # Every git directory, .git file and virtual environment anywhere under a writable root
    # (nested submodules, worktrees, bare layouts, .tox/*), and where $HOME's start-up links
    # lead when that is a writable root (a dotfiles checkout): read-only inside, and walked
    # again after the run (later_code.LaterCodeAudit). The walk comes after git_layout, which
    # may create .git/hooks.
    audited = (work, *rw, *git_rw)
    home_targets = home_link_targets(home_real, HOME_STARTUP_LINKS, audited)
    for target in home_targets:
        if target in audited:
            raise NotProven("P4", f"a start-up link in $HOME leads to {target}, which the run may write",
                            "choose another --work/--rw, or change that link")
    for found in (audit or LaterCodeAudit()).start(list(audited), home_targets, own_venvs=rw):
        protected += found.protect()
    protected += [t for t in home_targets if os.path.exists(t) and not os.path.islink(t)]

    # The checks that prove the next run must not be changed by this one (working on no-docker
    # itself: the package is in the work dir).
    # The supervisor package the probe belongs to (probe_source is supervisor/isolation/probe.py).
    package_dir = os.path.dirname(os.path.dirname(probe_source))
    protected += [p for p in (probe_source,)
                  if any(is_under(p, w) for w in writable_roots) and os.path.isfile(p)]
    # The Python environment that runs no-docker runs again, outside and without -I, at the next
    # `no-docker run` (its console script): a venv in the work dir let a run plant a .pth file
    # there, i.e. code for the next supervisor (found by the red-team review). Read-only, with
    # the package that builds the next policy.
    for root in python_roots(sys.prefix, sys.base_prefix, package_dir):
        inside = [w for w in writable_roots if is_under(root, w)]
        if root in inside:
            raise NotProven("P4", f"the Python environment running no-docker ({root}) is the writable "
                            f"{root}: the run could change what the next run executes",
                            "install no-docker in a venv outside the work dir")
        if inside:
            protected.append(root)
    # Where commands run later come from: a PATH directory in a writable place would let the
    # run put its own `git` or `ls` there for the caller's next shell (red-team review).
    for entry in environ.get("PATH", "").split(":"):
        real = realpath(entry) if entry.startswith("/") else ""
        inside = [w for w in writable_roots if real and is_under(real, w)]
        if real in inside:
            raise NotProven("P4", f"PATH holds {real}, which the run could write: it could put "
                            "commands there that run later, outside",
                            "take it off PATH, or choose another --work/--rw")
        if inside and not os.path.exists(real):
            # The run could create it and fill it with commands (a `bwrap` for the next run).
            raise NotProven("P4", f"PATH holds {real}, which does not exist and the run could create "
                            "with commands of its own", "create it, or take it off PATH")
        if not inside or not os.path.isdir(real):
            continue
        # An (activated) venv's bin: the whole venv, since its site-packages runs too (a .pth
        # file); unless the caller gave exactly that venv as --rw.
        parent = os.path.dirname(real)
        tool = parent if os.path.isfile(os.path.join(parent, "pyvenv.cfg")) else real
        if tool not in rw:
            protected.append(tool)
    pinned += pins_for(protected, (*writable_roots, *git_rw))
    proc_readonly = tuple(p for p in ("/proc/sys", "/proc/sysrq-trigger") if os.path.exists(p))
    draft = Policy(work=work, chdir=chdir, home=home, system_ro=tuple(system_ro), proc_readonly=proc_readonly,
                   system_symlinks=tuple(symlinks), hidden=tuple(dict.fromkeys(hidden)),
                   ro=ro, rw=rw + tuple(git_rw), pinned=tuple(pinned), protected=tuple(protected))

    python = realpath(python or sys.executable)
    toolchain: list[str] = []

    draft_view = MountView(draft)

    def need(path: str, has_cfg: bool = False) -> None:
        real = realpath(path)
        if not os.path.exists(real) or draft_view.visible(real):
            return
        chosen = toolchain_dir_for(real, home_real or None, has_cfg)
        if chosen and chosen not in toolchain:
            toolchain.append(chosen)

    need(package_dir)  # no-docker itself (`check` inside a run, the pytest plugin)
    # The parts of no-docker are siblings of the supervisor package. In an editable install they
    # live in the source tree, which the run would not otherwise show, and the pytest11 entry
    # point imports no_docker.ci in every pytest started inside a run.
    parts_root = os.path.dirname(package_dir)
    for part in ("ci", "canary", "mutants"):
        need(os.path.join(parts_root, part))
    for prefix in {realpath(sys.base_prefix), realpath(sys.prefix),
                   os.path.dirname(os.path.dirname(python))}:
        need(prefix)
    for entry in environ.get("PATH", "").split(":"):
        if entry.startswith("/") and os.path.isdir(entry):
            need(entry, os.path.isfile(os.path.join(os.path.dirname(entry), "pyvenv.cfg")))
    found = which(request.command[0], environ.get("PATH", os.defpath))
    if found and "/" in found:
        # Both the directory named (a venv's bin, whose python is a symlink out of the venv)
        # and the one the symlinks lead to.
        for bindir in dict.fromkeys((os.path.dirname(os.path.abspath(found)),
                                     os.path.dirname(realpath(found)))):
            need(bindir, os.path.isfile(os.path.join(os.path.dirname(bindir), "pyvenv.cfg")))
    # A chosen toolchain root may contain another: keep the outermost only.
    toolchain = [t for t in toolchain if not any(t != o and is_under(t, o) for o in toolchain)]

    env = env_allowlist(environ, request.keep_env)
    env.update({"HOME": home, "TMPDIR": "/tmp",
                "DOCKER_CONFIG": "/run/no-docker-run/docker-config"})
    env.setdefault("PATH", os.defpath)

    tmp_size = request.tmp_size
    if tmp_size is None:
        # sysconf, not /proc/meminfo: two numbers the C library has, no file to open and parse.
        tmp_size = default_tmp_size(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    with_toolchain = draft.replace(toolchain_ro=tuple(toolchain), tmp_size=tmp_size)
    # A socket bound to a relative name (listing.relative_paths) cannot be located: the name
    # was resolved against its binder's cwd at bind(2) time, which nothing records. It is not
    # masked and does not refuse the run (any local user can bind one, issue 24): the connect
    # mediation (P12) refuses every pathname connect whose target inode no socket of the
    # run's own network namespace is bound to, whatever name the listing had for it, and the
    # prover proves the mediation on its sentinel (docs/isolation.md, "Sockets the listing
    # cannot locate"; T-65).
    #
    # A listed socket in a place another user controls (their directory, or one open to others
    # where the socket is theirs) is not masked either: its owner can unlink it and bind it
    # again at any moment, which makes bwrap fail on the vanished mask target, or shows a new,
    # unmasked socket to the prover; a user churning sockets in a directory the run sees
    # (/opt/x, /srv/x) refused 13 of 30 runs of another user (measured, issue 24). No mask
    # holds there for the run's life anyway (unlinking a mount point in another mount
    # namespace detaches the mount), so those sockets are the mediation's alone, by inode, and
    # named in the plan so that the prover's P3 passes over them (and only them).
    # Whether or not a socket is there at this moment: one unlinked since the listing is
    # bound again a moment later.
    sockets, unmasked = [], []
    me = os.geteuid()
    view = MountView(with_toolchain)
    for path in listing.unix_paths:
        real = realpath(path)
        # The listed name too: the prover stats it as listed, and a link on its way in a
        # directory of another user's can be pointed elsewhere after the plan.
        if view.visible(real) and (controlled_by_others(real, me)
                                   or (path != real and controlled_by_others(os.path.normpath(path), me))):
            unmasked.append(path)
            continue
        try:
            if stat.S_ISSOCK(os.stat(real).st_mode):
                sockets.append(real)
        except OSError:
            continue  # not in our mount namespace's view: nothing to reach by that name
    masked = sockets_to_mask(with_toolchain, sockets)
    return with_toolchain.replace(masked=masked, unmasked=tuple(unmasked), env=tuple(sorted(env.items())),
                                  probe_source=probe_source)


def encode_plan(items: list[tuple[str, str]]) -> bytes:
    """The plan for the probe: one "key value" line per item (``probe.decode_plan`` reads it)."""
    out = []
    for key, value in items:
        if not key or " " in key or "\n" in key:
            raise ValueError(f"bad plan key {key!r}")
        out.append(key + " " + value.replace("\\", "\\\\").replace("\n", "\\n"))
    return ("\n".join(out) + "\n").encode("utf-8", "surrogateescape")


def which(name: str, path: str) -> str | None:
    """The file PATH lookup would exec for NAME (like shutil.which, without importing shutil)."""
    if "/" in name:
        return name if os.access(name, os.X_OK) else None
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def probe_source_path() -> str:
    return os.path.join(os.path.dirname(realpath(__file__)), "probe.py")
