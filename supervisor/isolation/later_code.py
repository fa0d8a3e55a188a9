"""Code that runs later, outside: protected before a run, audited after it (DESIGN §4 P4, §7).

A run may write its work dir, but some files there make code run *later, outside* the run:
git's hooks and config (and every place git's discovery takes them from: a ``.git`` file's
gitdir, ``commondir``, submodules), and shell or tool start-up files. Two halves:

- before: ``git_layout`` and ``STARTUP_FILES`` name what the plan re-binds read-only (or pins,
  so it cannot be renamed away);
- after: ``later_code_sources`` is taken before the run and again once every process of it has
  ended (nothing can race it then); ``later_code_changes`` names what the run added or changed,
  and ``run`` exits 125 naming it.

Every open of a path the run could write goes through ``read_regular`` (regular files only,
non-blocking, bounded).
"""

from __future__ import annotations

import os
import stat

from ..errors import NotProven
from .policy import SYSTEM_DIRS, is_under

ERRNO_EINVAL = 22  # errno.EINVAL, without importing errno on the run path

# Files in the work dir that run code later, outside (DESIGN §7): re-bound read-only when they
# exist. .git/hooks and .git/config are handled with the git layout below.
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
                 ".zshenv", ".zshrc", ".zprofile", ".zlogin", ".envrc", ".gitconfig", ".vscode",
                 ".idea", ".config/autostart", ".config/systemd",
                 # Hook managers run these at the next commit outside (the red-team review):
                 # pre-commit's `language: system` entries, lefthook commands, husky scripts;
                 # mise runs its hooks and env sources on entering the directory.
                 ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
                 ".husky", ".githooks", "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml")


def read_regular(path: str, limit: int = 1 << 20) -> bytes:
    """Up to LIMIT bytes of PATH, which must be a regular file: the work dir may hold what the
    previous run left (a FIFO named .git/index would block a plain open() forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
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
    finally:
        os.close(fd)


def _read_text(path: str, limit: int = 1 << 20) -> str:
    return read_regular(path, limit).decode("utf-8", "replace")


def git_config_code_paths(text: str) -> tuple[list[str], list[str]]:
    """(core.hooksPath values, include/includeIf paths) of one git config file (pure; a line
    parser that is enough for these keys: sections, case-insensitive names, quoted values)."""
    hooks: list[str] = []
    includes: list[str] = []
    section = ""
    for raw in text.split("\n"):
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
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        key = key.strip().lower()
        if not eq or not value:
            continue
        if section == "core" and key == "hookspath":
            hooks.append(value)
        elif section in ("include", "includeif") and key == "path":
            includes.append(value)
    return hooks, includes


def _configured_code_paths(work: str, common: str, home: str) -> list[str]:
    """Paths in WORK that git configuration makes run code later: a core.hooksPath in the work
    tree (husky's `.husky`), a config file included from the work tree. Created empty when
    missing (as git init makes .git/hooks), so that they can be re-bound read-only."""
    found = []
    configs = [os.path.join(common, "config")]
    if home:
        configs += [os.path.join(home, ".gitconfig"), os.path.join(home, ".config", "git", "config")]
    for config in configs:
        try:
            hooks, includes = git_config_code_paths(_read_text(config))
        except OSError:
            continue
        for value, base, is_dir in ([(h, work, True) for h in hooks]
                                    + [(i, os.path.dirname(config), False) for i in includes]):
            if value.startswith("~/") and home:
                value = os.path.join(home, value[2:])
            path = os.path.realpath(os.path.join(base, value))
            if not is_under(path, work) or path == work:
                continue
            if not os.path.lexists(path):
                if is_dir:
                    os.makedirs(path, 0o755, exist_ok=True)
                elif os.path.isdir(os.path.dirname(path)):
                    open(path, "a").close()
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
        return os.path.realpath(os.path.join(gitdir, back)) == os.path.join(work, ".git")
    except OSError:
        pass
    try:
        text = _read_text(os.path.join(gitdir, "config"))
    except OSError:
        return False
    for raw in text.split("\n"):
        key, eq, value = raw.strip().partition("=")
        if eq and key.strip().lower() == "worktree":
            return os.path.realpath(os.path.join(gitdir, value.strip().strip('"'))) == work
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
            common = os.path.realpath(os.path.join(dotgit, named))
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
        gitdir = os.path.realpath(os.path.join(work, first[len("gitdir:"):].strip()))
        common = gitdir
        try:
            named = _read_text(os.path.join(gitdir, "commondir")).strip()
            common = os.path.realpath(os.path.join(gitdir, named))
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
    if os.path.isdir(common) and not os.path.exists(hooks):
        # A missing hooks dir could be created inside and then run outside; git init makes it.
        os.mkdir(hooks, 0o755)
    candidates = [hooks, os.path.join(common, "config"), os.path.join(common, "config.worktree"),
                  os.path.join(gitdir, "config.worktree"), os.path.join(gitdir, "hooks"),
                  os.path.join(gitdir, "config")]
    candidates += _configured_code_paths(work, common, home)
    modules = os.path.join(common, "modules")
    if os.path.isdir(modules):
        for sub in sorted(os.listdir(modules))[:200]:
            candidates += [os.path.join(modules, sub, "hooks"), os.path.join(modules, sub, "config")]
    for link in _gitlinks_of(gitdir, common)[:200]:
        # A submodule with its own .git directory (an "embedded" one): `git status` outside
        # recurses into it and reads its config, so that config runs code later as well.
        embedded = os.path.join(work, link, ".git")
        if os.path.isdir(embedded) and os.path.realpath(embedded) == embedded:
            pinned.append(embedded)  # cannot be renamed away and replaced
            candidates += [os.path.join(embedded, "hooks"), os.path.join(embedded, "config")]
    protected += [p for p in dict.fromkeys(candidates) if os.path.lexists(p) and not os.path.islink(p)]
    return pinned, protected, extra_rw


def _gitlinks_of(gitdir: str, common: str) -> list[str]:
    try:
        data = read_regular(os.path.join(gitdir, "index"), _INDEX_LIMIT + 1)
        if len(data) > _INDEX_LIMIT:
            return []
        return index_gitlinks(data, 32 if _object_format(common) == "sha256" else 20)
    except (OSError, ValueError):
        return []


# --- what runs later, outside: checked again once the run has ended ------------------------
# A read-only bind protects only what exists when the run starts. Git follows files the run
# can still create in the writable .git and work tree (found by the red-team review, each a
# `git status` outside that ran the run's code): ``.git/commondir`` moves the config and hooks
# git reads to a directory of the run's choosing; a gitlink in the (writable) index plus a new
# ``sub/.git`` file makes `git status` in the protected repo recurse into a submodule whose
# config sets ``core.fsmonitor``. New start-up files (.envrc...) and a new .git belong here too.
# So the supervisor takes ``later_code_sources`` before the run and again after every process
# of it has ended (nothing can race it then), and ``later_code_changes`` names what differs.
_GITLINK = 0o160000
_INDEX_LIMIT = 64 << 20  # an index larger than this is not parsed (and counts as a change)


def index_gitlinks(data: bytes, hash_len: int = 20) -> list[str]:
    """Paths of the gitlink (submodule) entries of a git index file (versions 2, 3 and 4;
    gitformat-index(5)). ValueError when DATA is not an index."""
    if len(data) < 12 or data[:4] != b"DIRC":
        raise ValueError("not a git index (no DIRC signature)")
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        raise ValueError(f"git index version {version} is not supported")
    pos, previous, links = 12, b"", []
    for _ in range(count):
        start = pos
        if pos + 40 + hash_len + 2 > len(data):
            raise ValueError("git index entry runs past the end of the file")
        mode = int.from_bytes(data[pos + 24:pos + 28], "big")
        flags = int.from_bytes(data[pos + 40 + hash_len:pos + 42 + hash_len], "big")
        pos += 42 + hash_len
        if version >= 3 and flags & 0x4000:
            pos += 2  # extended flags
        if version == 4:
            strip, shift = 0, 0
            while True:  # the offset varint of gitformat-index(5): 7 bits a byte, +1 per continuation
                if pos >= len(data):
                    raise ValueError("git index path prefix runs past the end of the file")
                byte = data[pos]
                pos += 1
                strip = (strip << 7) | (byte & 0x7F) if shift else byte & 0x7F
                shift += 1
                if not byte & 0x80:
                    break
                strip += 1
            end = data.find(b"\0", pos)
            if end < 0 or strip > len(previous):
                raise ValueError("bad git index path")
            name = previous[:len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.find(b"\0", pos)
            if end < 0:
                raise ValueError("git index path runs past the end of the file")
            name = data[pos:end]
            pos = start + ((end - start) // 8 + 1) * 8  # 1-8 NULs pad the entry to 8 bytes
        previous = name
        if mode == _GITLINK:
            links.append(name.decode("utf-8", "surrogateescape"))
    return links


def _entry_kind(path: str) -> str:
    """A fingerprint of PATH: "absent", "dir", "symlink:TARGET", "special:MODE" or
    "file:FIRST-LINE sha256:..." (the first line is what git follows in a .git file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return "absent"
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode):o}"  # a FIFO must never be opened: it would block
    try:
        data = read_regular(path)
    except OSError as err:
        return f"unreadable:{err.errno}"
    import hashlib  # only here: after a run, never on its start-up path

    return "file:" + data.split(b"\n", 1)[0][:200].decode("utf-8", "replace") + " sha256:" + hashlib.sha256(
        data).hexdigest()[:16]


def _gitdir_sources(gitdir: str, label: str) -> dict[str, str]:
    # commondir redirects config and hooks; config.worktree adds a config; modules/* are the
    # gitdirs of submodules (their config runs when git recurses into them).
    sources = {f"{label}/commondir": _entry_kind(os.path.join(gitdir, "commondir")),
               f"{label}/config.worktree": _entry_kind(os.path.join(gitdir, "config.worktree"))}
    try:
        modules = sorted(os.listdir(os.path.join(gitdir, "modules")))
    except OSError:
        modules = []
    sources[f"{label}/modules"] = " ".join(modules[:200])
    return sources


def later_code_sources(work: str) -> dict[str, str]:
    """What, in WORK, decides which code git and shells started there later run (see above):
    {name: fingerprint}. Cheap: a few stats, and the index only parsed for its gitlinks."""
    sources = {name: _entry_kind(os.path.join(work, name)) for name in (".git", *STARTUP_FILES)}
    dotgit = os.path.join(work, ".git")
    gitdir = dotgit
    kind = sources[".git"]
    if kind.startswith("file:gitdir:"):
        gitdir = os.path.join(work, kind[len("file:gitdir:"):].rsplit(" sha256:", 1)[0].strip())
    elif kind != "dir":
        return sources
    sources.update(_gitdir_sources(gitdir, ".git"))
    index = os.path.join(gitdir, "index")
    try:
        data = read_regular(index, _INDEX_LIMIT + 1)
        if len(data) > _INDEX_LIMIT:
            raise ValueError(f"larger than {_INDEX_LIMIT} bytes")
        links = index_gitlinks(data, 32 if _object_format(gitdir) == "sha256" else 20)
    except OSError:
        links = []
    except ValueError as err:
        sources[".git/index"] = f"unparsable: {err}"
        links = []
    for link in links[:200]:
        # A populated submodule: git status outside runs git inside it, with its own config.
        sources[f"{link}/.git"] = _entry_kind(os.path.join(work, link, ".git"))
        sources[f"{link}/.git/config"] = _entry_kind(os.path.join(work, link, ".git", "config"))
    return sources


def _object_format(gitdir: str) -> str:
    try:
        text = _read_text(os.path.join(gitdir, "config"))
    except OSError:
        return "sha1"
    return "sha256" if "objectformat = sha256" in text.replace("\t", " ").lower() else "sha1"


def later_code_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """One line per source of later code that the run added or changed (pure)."""
    lines = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, "absent"), after.get(name, "absent")
        if old != new and not (name.endswith("/modules") and set(new.split()) <= set(old.split())):
            lines.append(f"{name}: {old or 'none'} -> {new or 'none'}")
    return lines
