"""Code that runs later, outside: protected before a run, audited after it (DESIGN §4 P4, §7).

A run may write its work dir, but some files there make code run *later, outside* the run:
git's hooks and config (and every place git's discovery takes them from: any directory
shaped like a repository, a ``.git`` file's gitdir, ``commondir``, submodules at any depth,
worktrees), a virtual environment's site-packages and bin/, and shell or tool start-up files
(also where $HOME's start-up links lead). Two halves:

- before: ``git_layout``, ``STARTUP_FILES`` and the walk (``survey``) name what the plan
  re-binds read-only (and pins, so it cannot be renamed away);
- after: ``LaterCodeAudit`` keeps the before-walk's fingerprint and walks again once every
  process of the run has ended (nothing can race it then); ``later_code_changes`` names what
  the run added, changed or removed, and ``run`` exits 125 naming it.

Every open of a path the run could write goes through ``read_regular`` or the walk's
``openat``: no link followed, regular files only, non-blocking, bounded.
"""

from __future__ import annotations

import os
import stat
import sys
import time

from ..errors import NotProven, printable
from . import tool_sources
from .policy import SYSTEM_DIRS, is_under


def _shown(path: str, limit: int = 160) -> str:
    """PATH for a one-line message: ``printable``, cut where longer than LIMIT."""
    text = printable(path)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(path)} characters)"


def as_git_reads_it(text: str) -> str:
    """A path read from a file (commondir, a .git file's gitdir, an include.path) as git uses
    it: a C string, which a NUL byte ends. Python's os functions refuse a NUL instead
    (ValueError): a run that wrote one into a nested .git/commondir made the after-run audit
    crash, so nothing it planted was undone (red-team, T-85)."""
    return text.split("\0", 1)[0]


def realpath(path: str) -> str:
    """``os.path.realpath(PATH)``, asked of the kernel where PATH exists: an ``O_PATH`` open and
    the readlink of its /proc/self/fd entry (3 syscalls, ~2.6 µs) where ``posixpath`` lstats
    every component (~8 µs); a policy is built from ~160 of them on every run. Where PATH
    cannot be opened (missing, a loop, no search permission, no /proc), ``os.path.realpath``
    itself, which resolves what exists and keeps the rest as written. PATH is cut at a NUL
    (:func:`as_git_reads_it`): every caller's path comes from a file git reads."""
    path = as_git_reads_it(path)
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        # Most paths a policy asks about do not exist (start-up files, engine sockets): the
        # real parent and the last name as written, as posixpath would make it, unless the
        # last name is itself a (dangling) link or a "." / ".." step.
        # (Only where the parent itself resolves: a missing component before a ".." is
        # resolved lexically by posixpath, and the rest may exist after all.)
        head, tail = os.path.split(path)
        if tail in ("", ".", "..") or not head or os.path.lexists(path):
            return os.path.realpath(path)
        try:
            fd = os.open(head, os.O_PATH | os.O_CLOEXEC)
        except (OSError, ValueError):
            return os.path.realpath(path)
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{fd}"), tail)
        except OSError:
            return os.path.realpath(path)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return os.path.realpath(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)

ERRNO_EINVAL = 22  # errno.EINVAL, without importing errno on the run path

# Files in the work dir that run code later, outside (DESIGN §7): re-bound read-only when they
# exist. .git/hooks and .git/config are handled with the git layout below.
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                 ".zshenv", ".zshrc", ".zprofile", ".zlogin", ".envrc", ".gitconfig", ".vscode",
                 ".idea", ".config/autostart", ".config/systemd",
                 # Hook managers run these at the next commit outside (the red-team review):
                 # pre-commit's `language: system` entries, lefthook commands, husky scripts;
                 # mise runs its hooks and env sources on entering the directory.
                 ".pre-commit-config.yaml", ".pre-commit-config.yml",
                 ".husky", ".githooks", "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml",
                 # lefthook.dev/configuration "Config file name": each format, dotted or not, in
                 # .config/ (undotted), the -local config merged over it; source_dir and
                 # source_dir_local hold its scripts (the red-team review, B8: lefthook-local.toml).
                 *(f"{where}{name}.{ext}" for where in ("", ".", ".config/")
                   for name in ("lefthook", "lefthook-local")
                   for ext in ("yml", "yaml", "toml", "json", "jsonc")),
                 ".lefthook", ".lefthook-local",
                 # The same kind: overcommit (.overcommit.yml, its .git-hooks/ scripts), husky 4's
                 # configs, lint-staged's (run by a husky hook at each commit), mise's .config/.
                 ".overcommit.yml", ".git-hooks", ".huskyrc", ".huskyrc.json", ".huskyrc.js",
                 "husky.config.js", *(f".lintstagedrc{ext}" for ext in ("", ".json", ".yaml", ".yml", ".js",
                                                                         ".mjs", ".cjs")),
                 "lint-staged.config.js", "lint-staged.config.mjs", "lint-staged.config.cjs",
                 ".config/mise.toml", ".config/mise", ".mise")


_NOFOLLOW_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def startup_names_at(root: str) -> tuple[str, ...]:
    """The ``STARTUP_FILES`` whose first component is an entry of the resolved ROOT (one
    listing, not a lookup per name: there are 74 of them); all of them when ROOT cannot be
    listed (each is then looked up, and fails closed as before)."""
    try:
        fd = open_nofollow(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
    except OSError:
        return STARTUP_FILES
    try:
        names = set(os.listdir(fd))
    except OSError:
        return STARTUP_FILES
    finally:
        os.close(fd)
    return tuple(n for n in STARTUP_FILES if n.split("/", 1)[0] in names)


def open_nofollow(path: str, flags: int) -> int:
    """Open the absolute PATH with FLAGS, following no symlink in any component (each directory
    is opened ``O_NOFOLLOW`` from the one above it, as ``openat2(RESOLVE_NO_SYMLINKS)`` would):
    a path in a place the run could write may have been turned into a link to a device, a
    FIFO or a file outside. Callers pass resolved paths, so a legitimate path never fails."""
    path = os.path.normpath(path)
    if not path.startswith("/") or path == "/":
        raise OSError(ERRNO_EINVAL, f"{path}: not an absolute file path")
    parts = path[1:].split("/")
    dir_fd = os.open("/", _NOFOLLOW_DIR)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _NOFOLLOW_DIR, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def read_regular(path: str, limit: int = 1 << 20) -> bytes:
    """Up to LIMIT bytes of PATH, which must be a regular file reached through no symlink: the
    work dir may hold what the previous run left (a FIFO named .git/index would block a plain
    open() forever and wake a writer outside; a link to a device would open the device)."""
    if "\0" in path:  # no file has such a name; os would raise ValueError, not OSError
        raise OSError(ERRNO_EINVAL, f"{path!r}: a NUL byte in the name")
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError(ERRNO_EINVAL, f"{path}: not a regular file")
    fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        return _read_fd(fd, path, limit)
    finally:
        os.close(fd)


def _read_fd(fd: int, path: str, limit: int) -> bytes:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(ERRNO_EINVAL, f"{path}: not a regular file")
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _read_text(path: str, limit: int = 1 << 20) -> str:
    return read_regular(path, limit).decode("utf-8", "replace")


def _git_value(raw: str) -> str:
    """A git config value as git reads it (pure): `;` or `#` outside double quotes starts a
    comment (git-config(1), "Syntax"), quotes are dropped, `\\"` and `\\\\` unescaped."""
    out, quoted, i = [], False, 0
    raw = raw.strip()
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in ";#" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def git_config_code_paths(text: str) -> tuple[list[str], list[str]]:
    """(core.hooksPath values, include/includeIf paths) of one git config file (pure; a line
    parser that is enough for these keys: sections, case-insensitive names, quoted values)."""
    hooks: list[str] = []
    includes: list[str] = []
    section = ""
    # A backslash at a line's end continues the value on the next (git-config(1), "Syntax").
    for raw in text.replace("\\\n", "").split("\n"):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head, _, rest = line[1:].partition("]")
            section = head.strip().split(" ", 1)[0].strip('"').lower()
            line = rest.strip()
            if not line:
                continue
        key, eq, value = line.partition("=")
        value = as_git_reads_it(_git_value(value))  # a path: a NUL ends it (and os refuses one)
        key = key.strip().lower()
        if not eq or not value:
            continue
        if section == "core" and key == "hookspath":
            hooks.append(value)
        elif section in ("include", "includeif") and key == "path":
            includes.append(value)
    return hooks, includes


_INCLUDE_LIMIT = 50  # config files followed through include.path (git itself stops at 10 levels)


def _configured_code_paths(work: str, common: str, home: str) -> list[str]:
    """Paths in WORK that git configuration makes run code later: a core.hooksPath in the work
    tree (husky's `.husky`), a config file included from the work tree. Created empty when
    missing (as git init makes .git/hooks), so that they can be re-bound read-only."""
    found = []
    configs = [os.path.join(common, "config")]
    if home:
        # Resolved: a dotfiles checkout links them (~/.gitconfig -> ~/dotfiles/git/.gitconfig),
        # and read_regular follows no link.
        configs += [realpath(os.path.join(home, ".gitconfig")),
                    realpath(os.path.join(home, ".config", "git", "config"))]
    seen: set[str] = set()
    while configs and len(seen) < _INCLUDE_LIMIT:
        config = configs.pop(0)
        if config in seen:
            continue
        seen.add(config)
        try:
            hooks, includes = git_config_code_paths(_read_text(config))
        except OSError:
            continue
        for value, base, is_dir in ([(h, work, True) for h in hooks]
                                    + [(i, os.path.dirname(config), False) for i in includes]):
            if value.startswith("~/") and home:
                value = os.path.join(home, value[2:])
            path = realpath(os.path.join(base, value))
            if not is_dir:
                configs.append(path)  # an included file's own hooksPath and includes count too
            if not is_under(path, work) or path == work:
                continue
            if not os.path.lexists(path):
                if is_dir:
                    try:
                        os.makedirs(path, 0o755, exist_ok=True)
                    except OSError as err:
                        # A hooks dir that cannot exist runs nothing, but one git could still
                        # make there later would: refuse (a name too long, a file in the way).
                        raise NotProven("P4", f"core.hooksPath of {config} names {_shown(path)}, which "
                                        f"cannot be made read-only: {err.strerror}",
                                        "fix or remove core.hooksPath there") from err
                elif os.path.isdir(os.path.dirname(path)):
                    try:  # never through a link the run planted meanwhile
                        os.close(open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK))
                    except OSError:
                        continue
            found.append(path)
    return found


def gitdir_may_be_writable(gitdir: str, common: str, work: str) -> bool:
    """May the GITDIR (and COMMON dir) a ``.git`` file in WORK names be bound writable?

    The .git file is the run's to write when the work dir had no .git: `gitdir: /etc/cron.d`
    made the next run bind /etc/cron.d writable (red-team review). So only a gitdir that points
    back at WORK, as git's own worktree and submodule layouts do, whose common dir holds it,
    and neither of them a system directory (or above one).
    """
    if not points_back(gitdir, work):
        return False
    if common != gitdir and os.path.dirname(os.path.dirname(gitdir)) != common:
        return False
    return not any(is_under(sysdir, path) or is_under(path, sysdir)
                   for path in (gitdir, common) for sysdir in SYSTEM_DIRS)


def points_back(gitdir: str, work: str) -> bool:
    """Does GITDIR name WORK as its work tree, as git itself records it? A linked worktree's
    gitdir holds a ``gitdir`` file naming WORK/.git; a submodule's config sets core.worktree."""
    try:
        back = _read_text(os.path.join(gitdir, "gitdir")).split("\n", 1)[0].strip()
        return realpath(os.path.join(gitdir, back)) == os.path.join(work, ".git")
    except OSError:
        pass
    try:
        text = _read_text(os.path.join(gitdir, "config"))
    except OSError:
        return False
    for raw in text.split("\n"):
        key, eq, value = raw.strip().partition("=")
        if eq and key.strip().lower() == "worktree":
            return realpath(os.path.join(gitdir, value.strip().strip('"'))) == work
    return False


def git_layout(work: str, home: str = "") -> tuple[list[str], list[str], list[str]]:
    """(pinned writable dirs, read-only re-binds, extra writable dirs) for the repo at WORK.

    A .git directory is re-bound onto itself so it cannot be renamed away and replaced by one
    whose config runs code (``rename(2)`` refuses a mount point: EBUSY); its hooks and config
    are read-only. A worktree's .git *file* is read-only (rewriting it would point git at
    another config), and its gitdir and common dir are made writable with the same
    protections, so git keeps working inside.
    """
    dotgit = os.path.join(work, ".git")
    pinned: list[str] = []
    protected: list[str] = []
    extra_rw: list[str] = []
    if os.path.islink(dotgit):
        # A symlink cannot be made a mount point (mount follows it), so the run could re-point
        # it at a .git of its own whose hooks run outside: refuse rather than guess.
        raise NotProven("P4", f"{dotgit} is a symlink, which the run could re-point at a .git of its own",
                        "replace it with the directory or a 'gitdir:' file")
    if os.path.isdir(dotgit):
        gitdir = common = dotgit
        pinned.append(dotgit)
        try:
            # A .git directory with a commondir file takes its config and hooks from there.
            named = _read_text(os.path.join(dotgit, "commondir")).strip()
            common = realpath(os.path.join(dotgit, named))
        except OSError:
            pass
        if common != dotgit and os.path.isdir(common) and is_under(common, work):
            pinned.append(common)  # never made writable when outside: the run may have written it
    elif os.path.isfile(dotgit):
        protected.append(dotgit)
        try:
            first = _read_text(dotgit).split("\n", 1)[0].strip()
        except OSError as err:
            raise NotProven("P4", f"{dotgit} cannot be read: {err}",
                            "inspect it, then remove or fix it") from err
        if not first.startswith("gitdir:"):
            return pinned, protected, extra_rw
        gitdir = realpath(os.path.join(work, first[len("gitdir:"):].strip()))
        common = gitdir
        try:
            named = _read_text(os.path.join(gitdir, "commondir")).strip()
            common = realpath(os.path.join(gitdir, named))
        except OSError:
            pass
        outside_ok = gitdir_may_be_writable(gitdir, common, work)
        for path in dict.fromkeys((common, gitdir)):
            if os.path.isdir(path) and not is_under(path, work):
                if outside_ok:
                    extra_rw.append(path)
            elif os.path.isdir(path):
                pinned.append(path)
    else:
        return pinned, protected, extra_rw
    hooks = os.path.join(common, "hooks")
    if (common in pinned or common in extra_rw) and not os.path.lexists(hooks):
        # A missing hooks dir could be created inside and then run outside; git init makes it.
        # Only where the run may write: a common dir it cannot write is not one it can plant
        # hooks in, and one named by a planted .git file (`gitdir: /etc/cron.d`) is not ours to
        # write either (the supervisor made /etc/cron.d/hooks as root there, T-81).
        try:
            os.mkdir(hooks, 0o755)
        except OSError as err:
            raise NotProven("P4", f"{hooks} is missing and cannot be made read-only: {err.strerror or err}",
                            "create it (git init does), or give the repository's .git to your user") from err
    candidates = [hooks, os.path.join(common, "config"), os.path.join(common, "config.worktree"),
                  os.path.join(gitdir, "config.worktree"), os.path.join(gitdir, "hooks"),
                  os.path.join(gitdir, "config")]
    candidates += _configured_code_paths(work, common, home)
    modules = os.path.join(common, "modules")
    if os.path.isdir(modules):
        for sub in sorted(os.listdir(modules))[:200]:
            candidates += [os.path.join(modules, sub, "hooks"), os.path.join(modules, sub, "config")]
    # A submodule with its own .git directory (an "embedded" one, which `git status` outside
    # recurses into) and every other git directory below: found by the walk (``survey``),
    # which replaced a parse of the index for gitlinks (as costly as the walk on a large index).
    protected += [p for p in dict.fromkeys(candidates) if os.path.lexists(p) and not os.path.islink(p)]
    return pinned, protected, extra_rw


# --- what runs later, outside: checked again once the run has ended ------------------------
# A read-only bind protects only what exists when the run starts. Git follows files the run
# can still create in the writable .git and work tree (found by the red-team reviews, each a
# `git status` or `git log` outside that ran the run's code): ``.git/commondir`` moves the
# config and hooks git reads to a directory of the run's choosing; a new ``sub/.git`` file (with
# a gitlink in the writable index) makes `git status` recurse into a submodule whose config
# sets ``core.fsmonitor``; HEAD + objects/ + refs/ copied into any directory make it a bare
# repository with a config of the run's. New start-up files (.envrc...) belong here too. So
# the supervisor walks every writable root before the run and again after every process of
# it has ended (nothing can race it then), and ``later_code_changes`` names what differs.


def _fingerprint(st: os.stat_result, data: bytes | None, link: str | None = None) -> str:
    """What a path is, for comparing before and after a run: "absent", "dir", "symlink:TARGET",
    "special:MODE" or "file:FIRST-LINE (N bytes)" followed by a NUL and the whole content (the
    first line is what git follows in a .git file; the content is compared, never shown).
    The content itself rather than a hash: importing hashlib costs 2 ms of every start-up.
    DATA holds at most _FILE_LIMIT + 1 bytes."""
    if link is not None:
        return "symlink:" + link
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        # A FIFO must never be opened (it would block, or wake a writer outside); its ctime
        # moves with every chmod, so an unreadable thing cannot be changed unseen either.
        return f"special:{stat.S_IFMT(st.st_mode):o} ctime={st.st_ctime_ns}"
    if data is None:
        return f"unreadable ctime={st.st_ctime_ns}"
    # (A NUL in it would end the shown part early: the fields after it are parsed.)
    first = data.split(b"\n", 1)[0][:200].decode("utf-8", "replace").replace("\0", "\\0")
    # Mode and owner too: what a file is put back with (quarantine.put_back).
    owner = f"{stat.S_IMODE(st.st_mode):o} {st.st_uid} {st.st_gid}\0"
    if len(data) > _FILE_LIMIT:
        # Read no further (bounded reads): a write anywhere in it moves its ctime, which no
        # unprivileged process can set back.
        return f"file:{first} ({st.st_size} bytes) ino={st.st_ino} ctime={st.st_ctime_ns}\0" + owner + data[
            :_FILE_LIMIT].decode("latin-1")
    return f"file:{first} ({st.st_size} bytes)\0" + owner + data.decode("latin-1")


def _kind_at(dir_fd: int, name: str) -> str:
    """The fingerprint of NAME in the directory DIR_FD, opened through no link, never blocking."""
    if "\0" in name:  # a name read from a file (an include.path): what git would open
        name = as_git_reads_it(name) or "."
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        try:
            return _fingerprint(st, None, os.readlink(name, dir_fd=dir_fd))
        except OSError:
            return f"unreadable ctime={st.st_ctime_ns}"
    if not stat.S_ISREG(st.st_mode):
        return _fingerprint(st, None)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return _fingerprint(st, None)
    try:
        st = os.fstat(fd)
        data = _read_fd(fd, name, _FILE_LIMIT + 1) if stat.S_ISREG(st.st_mode) else None
    except OSError:
        data = None
    finally:
        os.close(fd)
    return _fingerprint(st, data)


def _entry_kind(path: str) -> str:
    """The fingerprint of PATH (see ``_fingerprint``), reached through no link."""
    head, name = os.path.split(os.path.normpath(path))
    try:
        dir_fd = os.open("/", _NOFOLLOW_DIR) if head == "/" else open_nofollow(head, _NOFOLLOW_DIR)
    except OSError:
        return "absent"
    try:
        return _kind_at(dir_fd, name)
    finally:
        os.close(dir_fd)


# --- the walk: every directory of a writable root ------------------------------------------
# Git's discovery (setup_git_directory_gently) tries, in each directory from where it starts
# upwards, DIR/.git (a directory, or a file naming one with "gitdir:") and then DIR itself as a
# bare repository; is_git_directory() accepts any directory with HEAD (a symlink into refs/, a
# "ref: refs/..." or an object name), objects/ and refs/ (both looked up in the common dir when
# a commondir file names one). So whatever git starts from any directory of the work dir is
# fixed by every .git entry and every directory shaped like a git directory under it, and by
# the config, hooks, info/, commondir and HEAD of each of those: the walk fingerprints all of
# them, and names them for the plan to re-bind read-only. A virtual environment (a directory
# with pyvenv.cfg: .venv, .tox/*, .nox/*) runs its site-packages' .pth files and
# sitecustomize, and its bin/, at its next use: the same.
WALK_LIMIT = 200_000  # files and directories; past it the run is refused (125), never cut short
WALK_DEPTH = 128
_FILE_LIMIT = 64 << 10  # bytes compared as content; past it (a binary in a venv's bin/): inode and ctime
_WALK_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_GIT_FILES = ("config", "config.worktree", "commondir", "HEAD")
# hooks/, info/, and git's in-progress state: `git rebase --continue` runs the `exec` lines of
# rebase-merge/git-rebase-todo, `git am --continue` and `cherry-pick --continue` go on from
# rebase-apply/ and sequencer/ (the red-team review, B10): read-only when there before the run
# (as hooks/), a new or changed one found after it and moved aside.
_GIT_DIRS = ("hooks", "info", "rebase-merge", "rebase-apply", "sequencer")
_SITE_CODE = ("sitecustomize", "usercustomize")
_VENV_MARK = "pyvenv.cfg"  # what makes a directory a virtual environment (site.py reads it)
# Where what a refused run left is moved aside (quarantine.put_back), at a writable root: not
# walked (nothing there runs unless someone starts a tool inside it), read-only inside a run.
QUARANTINE = ".no-docker-quarantine"
QUARANTINE_BINDS = 16  # per root: read-only inside a run (Survey.protect)


def is_quarantine(name: str) -> bool:
    """A quarantine directory's name at a root (``.no-docker-quarantine-RUN-ID``)."""
    return name.startswith(QUARANTINE)


class WalkTooLarge(Exception):
    pass


class Survey:
    """What one walk of ROOT found: the fingerprint (``sources``) and what the plan protects."""

    def __init__(self, root: str, limit: int, own_venvs: tuple[str, ...] = ()) -> None:
        self.root = root
        self.limit = limit
        self.own_venvs = own_venvs  # venvs the caller gave as --rw: theirs to change
        self.entries = 0
        self.sources: dict[str, str] = {}
        self.gitdirs: list[str] = []  # directories git would accept as a repository
        self.dotgit_files: list[str] = []  # "gitdir:" files (any .git that is not a directory)
        self.venvs: list[str] = []
        self.site_dirs: list[str] = []  # site-packages of those venvs
        self.root_configs: list[str] = []  # pytest's / no-docker's config files at the root
        self.stanza_scripts: list[str] = []  # shell scripts that carry the stanza line
        self.quarantines: list[str] = []
        self.dirs: list[str] = []  # every directory walked (quarantine.put_back: was it there?)
        self.module_dirs: set[str] = set()  # import roots with modules of their own
        self.pycaches: list[str] = []  # their __pycache__, read-only inside (see prepare_pycaches)
        self.import_roots: list[str] = []  # directories Python imports from (besides the root)
        self.too_large: str | None = None

    def protect(self) -> list[str]:
        """The existing paths (no symlinks) that must be read-only inside the run: git's
        files, whole virtual environments (pip reads a pip.conf in the root, Python the .pth
        files, the shell the bin/), the project's own config files at the root and the
        scripts carrying the stanza line. (A config file deeper down is only audited: mutmut
        copies pyproject.toml and setup.cfg into its mutants/ on every session.)"""
        paths = [f for f in self.dotgit_files]
        for gitdir in self.gitdirs:
            paths += [os.path.join(gitdir, n) for n in (*_GIT_FILES, *_GIT_DIRS)]
        paths += self.venvs + self.root_configs + self.stanza_scripts
        # The newest quarantines only (their names sort by the run id's time): a run can make
        # a thousand directories of that name, and each read-only bind costs the next run ~5 ms
        # (red-team round 4, B2: 1000 decoys, 5.3 s). Every one is walked all the same.
        quarantines = sorted(q for q in self.quarantines if os.path.isdir(q) and not os.path.islink(q))
        paths += quarantines[-QUARANTINE_BINDS:]
        paths += self.pycaches
        return [p for p in dict.fromkeys(paths) if os.path.lexists(p) and not os.path.islink(p)]


def _key(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _is_git_directory(dir_fd: int, names: dict[str, os.DirEntry]) -> str:
    """Would git's is_git_directory() accept this directory? Said in words, since a change of
    it is what the user reads (cheap: called only for a directory with a HEAD and either
    objects/ + refs/ or a commondir)."""
    common_fd, close = dir_fd, False
    try:
        if "commondir" in names:
            try:
                fd = os.open("commondir", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=dir_fd)
                try:
                    named = _read_fd(fd, "commondir", 4096).decode("utf-8", "replace").strip()
                finally:
                    os.close(fd)
                # Git follows links here; this is only stat()s of directories, nothing opened.
                common_fd = os.open(as_git_reads_it(named) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                                    dir_fd=dir_fd)
                close = True
            except OSError as err:
                return f"not a repository (commondir unusable: {err.strerror})"
        for sub in ("objects", "refs"):
            try:
                if not stat.S_ISDIR(os.stat(sub, dir_fd=common_fd).st_mode):
                    return f"not a repository ({sub} is not a directory)"
            except OSError:
                return f"not a repository (no {sub})"
    finally:
        if close:
            os.close(common_fd)
    try:
        st = os.stat("HEAD", dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            ok = os.readlink("HEAD", dir_fd=dir_fd).startswith("refs/")
        elif stat.S_ISREG(st.st_mode):
            fd = os.open("HEAD", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                head = _read_fd(fd, "HEAD", 4096).decode("utf-8", "replace").strip()
            finally:
                os.close(fd)
            ok = (head.startswith("ref:") and head[4:].strip().startswith("refs/")) or (
                len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head))
        else:
            ok = False
    except OSError:
        ok = False
    return "a repository git would use" if ok else "not a repository (HEAD is not valid)"


def _walk(survey: Survey, dir_fd: int, rel: str, depth: int, mode: str) -> None:
    with os.scandir(dir_fd) as it:
        entries = list(it)
    survey.entries += len(entries) + 1
    if survey.entries > survey.limit or depth > WALK_DEPTH:
        raise WalkTooLarge(f"more than {survey.limit} files and directories" if depth <= WALK_DEPTH
                           else f"deeper than {WALK_DEPTH} directories at {rel}")
    names = {e.name: e for e in entries}
    sources = survey.sources
    path = f"{survey.root}/{rel}" if rel else survey.root
    survey.dirs.append(path)
    child_modes: dict[str, str] = {}
    dotgit = names.get(".git")
    if dotgit is not None and not dotgit.is_dir(follow_symlinks=False):
        sources[_key(rel, ".git")] = _kind_at(dir_fd, ".git")
        survey.dotgit_files.append(os.path.join(path, ".git"))
    if "HEAD" in names and ("commondir" in names or ("objects" in names and "refs" in names)):
        sources[_key(rel, "(git directory)")] = _is_git_directory(dir_fd, names)
        survey.gitdirs.append(path)
        for name in _GIT_FILES:
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
        for name in _GIT_DIRS:
            child_modes[name] = "all"
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
        for name in ("objects", "refs", "logs", "lfs"):  # git's own files, not the tools'
            child_modes.setdefault(name, "quiet")
    cfg = names.get(_VENV_MARK)
    if cfg is not None and not cfg.is_dir(follow_symlinks=False) and mode != "all" and (
            path not in survey.own_venvs):
        survey.venvs.append(path)
        sources[_key(rel, _VENV_MARK)] = _kind_at(dir_fd, _VENV_MARK)
        for name in tool_sources.VENV_CONFIGS:
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
        child_modes.update(bin="all", lib="venv-lib", lib64="venv-lib", Lib="venv-lib")
        mode = mode or "quiet"
    # Below a venv ("venv-lib", "site") or a git directory: read-only or git's own ("quiet").
    plain = "quiet" if mode in ("quiet", "venv-lib", "site") else ""
    if not mode:  # (in a git directory or a bin/ every file is a source already)
        _tool_sources(survey, dir_fd, rel, path, names)
    for entry in entries:
        if not rel and is_quarantine(entry.name) and entry.is_dir(follow_symlinks=False):
            # Walked like the rest (a run may plant one shaped as a repository); its files
            # are read-only in the runs after (they are what earlier runs left).
            survey.quarantines.append(os.path.join(path, entry.name))
        if mode in ("", "quiet"):  # most directories: only where to go next
            if entry.is_dir(follow_symlinks=False):
                _descend(survey, dir_fd, rel, entry.name, depth, child_modes.get(entry.name, plain))
            continue
        name = entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        site_code = name.endswith(".pth") or name.split(".", 1)[0] in _SITE_CODE
        if mode == "all" or (mode == "site" and site_code):
            sources[_key(rel, name)] = "dir" if is_dir else _kind_at(dir_fd, name)
        if not is_dir:
            continue
        child = child_modes.get(name, "all" if mode == "all" else plain)
        if mode == "venv-lib":
            child = "site" if name in ("site-packages", "dist-packages") else (
                "venv-lib" if name.startswith("python") else plain)
            if child == "site":
                survey.site_dirs.append(os.path.join(path, name))
        elif mode == "site" and site_code:
            child = "all"  # a sitecustomize package
        _descend(survey, dir_fd, rel, name, depth, child)


def _tool_sources(survey: Survey, dir_fd: int, rel: str, path: str, names: dict[str, os.DirEntry]) -> None:
    """The sources ``tool_sources`` names, in one directory of the walk: pytest's config files
    (any directory: a session may start in any), what ``python -m`` imports (every importable
    entry at the root; modules with a tool's or the standard library's name anywhere), the
    shell scripts that carry the stanza line."""
    sources = survey.sources
    for name in (*tool_sources.PYTEST_CONFIGS, *tool_sources.VERSION_FILES):
        entry = names.get(name)
        if entry is not None and not entry.is_dir(follow_symlinks=False):
            sources[_key(rel, name)] = kind = _kind_at(dir_fd, name)
            if not rel and kind.startswith("file:"):
                survey.root_configs.append(os.path.join(path, name))
    if not rel:
        _importable_sources(survey, dir_fd, rel, path, names, strict=True)
    else:
        # Only string tests on most directories' entries: the walk's cost is per entry.
        named = [n for n in names if tool_sources.named_module(n) or n.endswith(tool_sources.DIST_SUFFIXES)]
        if named:
            _importable_sources(survey, dir_fd, rel, path, {n: names[n] for n in named}, strict=False)
    for name in names:
        if name[-1:] == ":" and tool_sources.url_named(name):  # pip takes https:/... as a path
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
    if rel and not tool_sources.STANZA_SKIP_DIRS.isdisjoint(rel.split("/")):
        return  # a tool's cache (.hypothesis's examples: thousands of files without a suffix)
    for name in names:
        # d_type only (no stat): a regular file whose name could be a shell script's.
        if names[name].is_symlink():
            _startup_link(survey, dir_fd, rel, name)
        elif tool_sources.is_stanza_candidate(name) and names[name].is_file(follow_symlinks=False):
            _stanza_script(survey, dir_fd, rel, path, name)


def _startup_link(survey: Survey, dir_fd: int, rel: str, name: str) -> None:
    """A link that leads to a start-up file: a stanza script (``tests/run.sh -> real.sh``) or a
    virtual environment (``.venv -> /elsewhere/venv``). What it leads to is read-only inside
    the run, but the link lives in a writable directory and the run could point it at a script
    or a venv of its own (red-team round 4, B3/B4): the link itself (its readlink) is a source,
    so a re-pointed link is a change (moved aside, the old link put back). Only the first link
    is followed (the kernel follows the rest); never opened if it is not a regular file."""
    try:
        st = os.stat(name, dir_fd=dir_fd)
    except OSError:
        return  # dangling: it starts nothing
    leads = False
    if stat.S_ISDIR(st.st_mode):
        try:
            leads = stat.S_ISREG(os.stat(f"{name}/{_VENV_MARK}", dir_fd=dir_fd).st_mode)
        except OSError:
            leads = False
    elif stat.S_ISREG(st.st_mode) and tool_sources.is_stanza_candidate(name):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return
        try:
            leads = stat.S_ISREG(os.fstat(fd).st_mode) and tool_sources.has_stanza(
                _read_fd(fd, name, tool_sources.STANZA_HEAD))
        except OSError:
            leads = False
        finally:
            os.close(fd)
    if leads:
        survey.sources[_key(rel, name)] = _kind_at(dir_fd, name)


def prepare_pycaches(found: Survey) -> None:
    """Each import root with modules of its own gets a ``__pycache__`` (made when missing, as
    Python would at the first import) that is read-only inside the run: a .pyc planted there
    for a root module (a ``-p`` plugin: pytest checks it by the source's hash, which anyone can
    compute) would run instead of the source at the next session outside. Python and pytest
    take a cache they cannot write in their stride: they compile again."""
    for directory in sorted(found.module_dirs):
        cache = os.path.join(directory, "__pycache__")
        try:
            st = os.lstat(cache)
        except FileNotFoundError:
            try:
                parent = open_nofollow(directory, _WALK_DIR)
            except OSError:
                continue
            try:
                os.mkdir("__pycache__", 0o755, dir_fd=parent)
                owner = os.fstat(parent)
                try:
                    os.chown("__pycache__", owner.st_uid, owner.st_gid, dir_fd=parent, follow_symlinks=False)
                except OSError:
                    pass
            except OSError:
                continue
            finally:
                os.close(parent)
            st = os.lstat(cache)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            found.pycaches.append(cache)


def _stanza_script(survey: Survey, dir_fd: int, rel: str, path: str, name: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return
    try:
        head = _read_fd(fd, name, tool_sources.STANZA_HEAD)
    except OSError:
        return
    finally:
        os.close(fd)
    if tool_sources.has_stanza(head):
        key = _key(rel, name)
        survey.sources[key] = _kind_at(dir_fd, name)
        survey.stanza_scripts.append(os.path.join(path, name))


def _importable_sources(survey: Survey, dir_fd: int, rel: str, path: str, names: dict[str, os.DirEntry],
                        strict: bool) -> None:
    """What Python imports from this directory when it is on ``sys.path`` (the current
    directory of ``python -m``, a path a venv's .pth file names): module files, packages
    (``NAME/__init__.*``, and a namespace directory when its name is one a tool imports), and
    distributions (``*.dist-info``/``*.egg-info``: importlib.metadata reads their entry points,
    so pytest loads a ``pytest11`` plugin named there). STRICT (an import root): every entry,
    whatever its name; else only names ``tool_sources.named_module`` knows."""
    sources = survey.sources
    for name, entry in names.items():
        if strict and entry.is_symlink() and (name.isidentifier() or tool_sources.module_name(name)
                                              or name.endswith(tool_sources.DIST_SUFFIXES)):
            # A link named like a module, a package or a distribution imports what it leads to.
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
            continue
        if entry.is_dir(follow_symlinks=False):
            if name.endswith(tool_sources.DIST_SUFFIXES):  # read wherever Python starts
                for meta in tool_sources.DIST_FILES:
                    sources[f"{_key(rel, name)}/{meta}"] = _entry_kind(os.path.join(path, name, meta))
                continue
            if not name.isidentifier() or name == "__pycache__":
                continue
            if not (strict or tool_sources.named_module(name)):
                continue
            init, importable = _package_init(os.path.join(path, name))
            if init is not None:
                sources[_key(rel, f"{name}/{init}")] = _entry_kind(os.path.join(path, name, init))
                if strict:
                    survey.module_dirs.add(os.path.join(path, name))  # its __pycache__ too
            elif importable and tool_sources.named_module(name):
                # A namespace package of a name a tool imports (org/python/core.py): it imports
                # what is in it. (An empty one imports nothing: not a source.)
                sources[_key(rel, name)] = "dir"
            continue
        module = tool_sources.module_name(name)
        if module is not None and (strict or tool_sources.named_module(name)):
            sources[_key(rel, name)] = _kind_at(dir_fd, name)
            if strict:
                survey.module_dirs.add(path)


def _package_init(package: str) -> tuple[str | None, bool]:
    """(the ``__init__`` file that makes PACKAGE a regular package or None, whether it holds
    anything importable at all), read through no link."""
    try:
        fd = open_nofollow(package, _WALK_DIR)
    except OSError:
        return None, False
    try:
        listed = os.listdir(fd)
    except OSError:
        return None, False
    finally:
        os.close(fd)
    inits = sorted(n for n in listed
                   if n.startswith("__init__.") and tool_sources.module_name(n) == "__init__")
    importable = any(tool_sources.module_name(n) or n.isidentifier() for n in listed if n != "__pycache__")
    return (inits[0] if inits else None), importable


def _import_roots(found: Survey) -> list[str]:
    """Directories inside FOUND's root that Python puts on ``sys.path`` besides the current
    directory: the path lines of the .pth files of the venvs the walk found (an editable
    install names W/src: its sitecustomize.py would run at every start of that venv), and the
    entries of this interpreter's own path (the venv that runs no-docker)."""
    candidates = [p for p in sys.path if p.startswith("/")]
    for site in found.site_dirs:
        try:
            listed = sorted(n for n in os.listdir(site) if n.endswith(".pth"))[:200]
        except OSError:
            continue
        for name in listed:
            try:
                text = read_regular(os.path.join(site, name), 1 << 16).decode("utf-8", "replace")
            except OSError:
                continue
            for line in text.splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    candidates.append(os.path.join(site, line))  # site.addpackage: relative to it
    roots = []
    for candidate in candidates:
        real = realpath(candidate)
        if is_under(real, found.root) and real != found.root and os.path.isdir(real) and real not in roots \
                and not any(is_under(real, venv) for venv in found.venvs):  # read-only whole
            roots.append(real)
    return roots[:100]


def _descend(survey: Survey, dir_fd: int, rel: str, name: str, depth: int, mode: str) -> None:
    try:
        sub_fd = os.open(name, _WALK_DIR, dir_fd=dir_fd)
    except OSError:
        survey.sources[_key(rel, name)] = _kind_at(dir_fd, name).replace("dir", "unreadable dir", 1)
        return
    try:
        _walk(survey, sub_fd, f"{rel}/{name}" if rel else name, depth + 1, mode)
    finally:
        os.close(sub_fd)


def survey(root: str, limit: int = WALK_LIMIT, own_venvs: tuple[str, ...] = ()) -> Survey:
    """Walk ROOT (resolved), following no link, and fingerprint what runs later from it."""
    found = Survey(root, limit, own_venvs)
    try:
        root_fd = open_nofollow(root, _WALK_DIR)
    except OSError as err:
        root_fd = None
        walk_error = f"cannot open: {err.strerror}"
    # Start-up files at the root (DESIGN §7): an .envrc or .vscode/tasks.json the run creates.
    # A plain name is looked up in the root already open (not from / again, twice per run for
    # each name); one with a directory in it through _entry_kind, whose walk follows no link.
    # A name under a directory (.config/lefthook.yml: 14 of them) only when that directory is
    # one: _entry_kind, which follows no link, says "absent" for all of them otherwise.
    first_kinds: dict[str, str] = {}
    for name in STARTUP_FILES:
        if root_fd is not None and "/" not in name:
            found.sources[name] = _kind_at(root_fd, name)
            continue
        first = name.split("/", 1)[0]
        if root_fd is not None and first not in first_kinds:
            first_kinds[first] = _kind_at(root_fd, first)
        if root_fd is not None and first_kinds[first] != "dir":
            found.sources[name] = "absent"
        else:
            found.sources[name] = _entry_kind(os.path.join(root, name))
    if root_fd is None:
        found.sources["(walk)"] = walk_error
        return found
    try:
        _walk(found, root_fd, "", 0, "")
    except WalkTooLarge as err:
        found.too_large = str(err)
        found.sources["(walk)"] = f"stopped: {err}"
    except OSError as err:
        found.sources["(walk)"] = f"failed: {err.strerror}"
    finally:
        os.close(root_fd)
    for gitdir in found.gitdirs[:_CONFIGURED_LIMIT]:
        found.sources.update(_configured_sources(root, gitdir))
    for extra in _import_roots(found):
        found.import_roots.append(extra)
        try:
            extra_fd = open_nofollow(extra, _WALK_DIR)
        except OSError:
            found.sources[extra[len(root.rstrip("/")) + 1:] + "/(import root)"] = "cannot open"
            continue
        try:
            with os.scandir(extra_fd) as it:
                names = {e.name: e for e in it}
            _importable_sources(found, extra_fd, extra[len(root.rstrip("/")) + 1:], extra, names, strict=True)
        except OSError as err:
            found.sources[extra[len(root.rstrip("/")) + 1:] + "/(import root)"] = f"failed: {err.strerror}"
        finally:
            os.close(extra_fd)
    return found


_CONFIGURED_LIMIT = 1000  # git directories whose config is followed (then: past the walk's cost)


def _configured_sources(root: str, gitdir: str) -> dict[str, str]:
    """What GITDIR's config makes git run from inside ROOT: its core.hooksPath directory (each
    hook in it) and the files it includes, fingerprinted by their path relative to ROOT; an
    included file's own hooksPath and includes too (git follows them: include of include)."""
    worktree = os.path.dirname(gitdir) if os.path.basename(gitdir) == ".git" else gitdir
    sources: dict[str, str] = {}
    configs, seen = [os.path.join(gitdir, "config")], set()
    while configs and len(seen) < _INCLUDE_LIMIT:
        config = configs.pop(0)
        if config in seen:
            continue
        seen.add(config)
        try:
            hooks, includes = git_config_code_paths(_read_text(config))
        except OSError:
            continue
        for value, base, is_dir in ([(h, worktree, True) for h in hooks]
                                    + [(i, os.path.dirname(config), False) for i in includes]):
            if value.startswith("~"):
                continue  # under $HOME: not the run's to write (where its start-up links lead aside)
            path = os.path.normpath(os.path.join(base, value))
            if not is_dir:
                configs.append(path)
            if not is_under(path, root) or path == root:
                continue
            rel = path[len(root.rstrip("/")) + 1:]
            sources[rel] = kind = _entry_kind(path)
            if not (is_dir and kind == "dir"):
                continue
            try:
                dir_fd = open_nofollow(path, _WALK_DIR)
            except OSError:
                continue
            try:
                for name in sorted(os.listdir(dir_fd))[:200]:
                    sources[f"{rel}/{name}"] = _kind_at(dir_fd, name)
            finally:
                os.close(dir_fd)
    return sources


def later_code_sources(work: str, limit: int = WALK_LIMIT) -> dict[str, str]:
    """What, in WORK, decides which code git, Python and shells started there later run (see
    above): {relative name: fingerprint}."""
    return survey(work, limit).sources


class LaterCodeAudit:
    """The before/after comparison of one run: ``start`` (by ``build_policy``, before the
    sandbox exists) walks every writable root and fails closed when one is too large to walk;
    ``changes`` (once every process of the run has ended: nothing can race it) walks again."""

    def __init__(self, limit: int = WALK_LIMIT) -> None:
        self.limit = limit
        self.own_venvs: tuple[str, ...] = ()
        self.roots: list[str] = []
        self.watched: list[str] = []
        self.before: dict[str, str] = {}
        self.walked: set[str] = set()  # the directories the before-walk went through
        self.started_ns = 0

    def start(self, roots: list[str], watched: list[str], own_venvs: tuple[str, ...] = ()) -> list[Survey]:
        # Before the walk: a file changed during it (by no one: the sandbox does not exist yet)
        # still counts as touched, never the other way round.
        self.started_ns = time.time_ns()
        self.roots = list(dict.fromkeys(roots))
        self.watched = list(dict.fromkeys(watched))
        self.own_venvs = own_venvs
        surveys = [survey(root, self.limit, own_venvs) for root in self.roots]
        for found in surveys:
            if found.too_large:
                raise NotProven("P4", f"{found.root} holds {found.too_large}: the check for code left "
                                "to run later, outside, walks all of it on every run and must stop there",
                                "run in a smaller work dir (move generated trees out of it)")
            if "(walk)" in found.sources:  # never a partial walk: what it missed is unprotected
                raise NotProven("P4", f"{found.root} cannot be walked for code that runs later, outside: "
                                f"{found.sources['(walk)']}",
                                "make it readable, or choose another --work/--rw")
        self.before = self._combine(surveys)
        self.walked = {d for found in surveys for d in found.dirs}
        for found in surveys:
            prepare_pycaches(found)
        return surveys

    def _combine(self, surveys: list[Survey]) -> dict[str, str]:
        combined = {path: _entry_kind(path) for path in self.watched}
        for found in surveys:
            combined.update({os.path.join(found.root, k): v for k, v in found.sources.items()})
        return combined

    def changed(self) -> dict[str, tuple[str, str]]:
        """{path: (before, after)} for every source of later code the run added, changed or
        removed."""
        surveys = [survey(root, self.limit, self.own_venvs) for root in self.roots]
        after = self._combine(surveys)
        out = {}
        partial = [found.root for found in surveys if "(walk)" in found.sources]
        for name in changed_names(self.before, after):
            new = after.get(name, "absent")
            if _is_config_copy(name, new, self.before):
                continue
            if new == "absent" and any(is_under(name, root) for root in partial):
                continue  # not seen by a walk that stopped early: its "(walk)" line says so
            out[name] = (self.before.get(name, "absent"), new)
        return out

    def changes(self) -> list[str]:
        """One line per source of later code the run added, changed or removed."""
        return change_lines(self.changed())


def _content(fingerprint: str) -> str | None:
    """A regular file's fingerprint without its mode and owner (what a copy keeps), or None."""
    if not fingerprint.startswith("file:"):
        return None
    head, _, rest = fingerprint.partition("\0")
    if " ino=" in head:
        return None  # over 64 KiB: its content is not all known
    return head + "\0" + rest.partition("\0")[2]


def _is_config_copy(path: str, fingerprint: str, before: dict[str, str]) -> bool:
    """Is PATH mutmut's copy of the project's config, ROOT/mutants/NAME byte for byte equal to
    ROOT/NAME before the run? mutmut 3 copies pyproject.toml and setup.cfg into mutants/ on
    every session (mutmut/__main__.py, copy_also_copy_files): a copy decides nothing its
    original does not. Only there (a copy of another config to the root would replace the
    project's own), and not with a [tool.no-docker] table (its relative --rw/--ro paths would
    name other places from another directory)."""
    parent, name = os.path.split(path)
    if os.path.basename(parent) != "mutants" or name not in tool_sources.MUTMUT_COPIES:
        return False
    original = before.get(os.path.join(os.path.dirname(parent), name), "absent")
    content = _content(fingerprint)
    return content is not None and "tool.no-docker" not in content and content == _content(original)


def home_link_targets(home: str, names: tuple[str, ...], roots: tuple[str, ...]) -> list[str]:
    """Where $HOME's start-up files and directories (NAMES, relative to HOME) really are, when
    that is inside one of the writable ROOTS: a dotfiles checkout as the work dir links
    ~/.bashrc to ~/dotfiles/bash/.bashrc, which the run could then rewrite for the next shell."""
    if not home or home == "/":
        return []
    found = []
    parents: dict[str, str] = {}
    for name in names:
        path = os.path.join(home, name)
        head, tail = os.path.split(path)
        if os.path.lexists(path) or tail in ("", ".", ".."):
            real = realpath(path)
        else:
            # Most of them do not exist: realpath would resolve the parent each time (a few
            # dozen share ~ or ~/.config); resolved once each, the same answer.
            if head not in parents:
                parents[head] = realpath(head)
            real = os.path.join(parents[head], tail)
        if real != path and any(is_under(real, root) for root in roots):
            found.append(real)
    return list(dict.fromkeys(found))


def changed_names(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The sources of later code whose fingerprint the run changed, in the order they are
    shown (pure)."""
    names = []
    # A directory's files before its "(git directory)" verdict: the file is what to look at.
    for name in sorted(set(before) | set(after), key=lambda n: n.replace("(git directory)", "~")):
        old, new = before.get(name, "absent"), after.get(name, "absent")
        if old != new and not (name.endswith("/modules") and set(new.split()) <= set(old.split())):
            names.append(name)
    return names


def change_lines(changed: dict[str, tuple[str, str]]) -> list[str]:
    """One line per changed source: ``NAME: BEFORE -> AFTER`` (pure)."""
    lines = []
    for name, (old, new) in changed.items():
        shown_old, shown_new = old.split("\0", 1)[0], new.split("\0", 1)[0]
        if shown_old == shown_new:
            shown_new += " (content changed)"
        lines.append(f"{name}: {shown_old or 'none'} -> {shown_new or 'none'}")
    return lines


def later_code_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per source of later code that the run added, changed or removed (pure)."""
    return change_lines({n: (before.get(n, "absent"), after.get(n, "absent"))
                         for n in changed_names(before, after)})
