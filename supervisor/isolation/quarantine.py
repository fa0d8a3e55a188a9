"""After a refusal for code left to run later: move it aside and put back what it replaced.

A 125 that names ``pytest.py`` or a new ``.git/commondir`` is not enough on its own: a mutation
tool scores the 125 as a killed mutant and goes on, and the next ``git status`` or
``python -m pytest`` outside runs what the run left (measured: a planted core.fsmonitor ran 3 of
3 times after the refusal). So, once every process of the run is gone (nothing can race this),
each changed source is undone:

- what the run created or changed is *moved aside* into ``ROOT/.no-docker-quarantine-RUN-ID/``
  at its relative path (``renameat(2)`` within the writable root: atomic, nothing copied, and
  the user can look at it);
- what was there before is *put back* from the before-walk's fingerprint, which keeps the
  content of every file up to 64 KiB, its mode and owner (a directory comes back empty, a link
  as the same link);
- then the caller walks again: only a walk that equals the before-walk says "undone".

Every path is reached through no link (``later_code.open_nofollow`` per component): the run may
have turned a parent directory into a link to anywhere. The quarantine directory is 0700, a
dot-directory (pytest does not collect it, git shows it as untracked), owned like the root,
and new: made by this undo (``_quarantine_of``).
"""

from __future__ import annotations

import os
import stat

from .later_code import _NOFOLLOW_DIR, QUARANTINE, is_under, open_nofollow


class Undo:
    """What ``put_back`` did: paths moved aside, paths put back, what it could not do."""

    def __init__(self) -> None:
        self.moved: list[str] = []
        self.restored: list[str] = []
        self.failed: list[str] = []  # "PATH: why": what the run left may still be in place
        self.lost: list[str] = []  # moved aside, but what was there before could not be put back
        self.quarantines: list[str] = []
        self._dirs: dict[str, str] = {}  # root -> its quarantine for this run

    def to_json(self) -> dict:
        return {"moved_aside": self.moved, "put_back": self.restored, "not_undone": self.failed,
                "not_put_back": self.lost, "quarantine": self.quarantines}


_VERDICTS = ("(git directory)", "(walk)", "(import root)")


def restorable(before: str) -> tuple[str, ...] | None:
    """How a fingerprint (``later_code._fingerprint``) can be put back, or None (pure):
    ("absent",), ("dir",), ("symlink", TARGET), ("file", MODE, UID, GID, CONTENT)."""
    if before == "absent":
        return ("absent",)
    if before == "dir":
        return ("dir",)
    if before.startswith("symlink:"):
        return ("symlink", before[len("symlink:"):])
    if before.startswith("file:"):
        head, _, rest = before.partition("\0")
        if " ino=" in head:  # larger than what the walk keeps: only its inode and ctime are known
            return None
        owner, sep, content = rest.partition("\0")
        fields = owner.split(" ")
        if not sep or len(fields) != 3 or not all(f.isdigit() for f in fields):
            return None
        return ("file", fields[0], fields[1], fields[2], content)
    return None


def _root_of(path: str, roots: list[str]) -> str | None:
    inside = [r for r in roots if is_under(path, r) and path != r]
    return max(inside, key=len) if inside else None


def _open_parent(path: str) -> tuple[int, str]:
    head, name = os.path.split(path)
    return open_nofollow(head, _NOFOLLOW_DIR) if head != "/" else os.open("/", _NOFOLLOW_DIR), name


def _mkdirs_at(base_fd: int, rel: str, owner: tuple[int, int], mode: int = 0o700) -> int:
    """Open (creating, MODE) each directory of REL below BASE_FD, through no link."""
    fd = os.dup(base_fd)
    for part in [p for p in rel.split("/") if p]:
        try:
            os.mkdir(part, mode, dir_fd=fd)
            try:
                os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
            except OSError:
                pass
        except FileExistsError:
            pass
        try:
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def _quarantine_of(root: str, base_fd: int, run_id: str, owner: tuple[int, int], undo: Undo) -> str:
    """This run's quarantine at ROOT, relative to it: ``.no-docker-quarantine-RUN-ID-RANDOM``,
    made here with mkdir(2), which fails on anything already there: never a directory the run
    could have made and shaped (a repository whose config git would run). The run can read its
    own id (/proc/self/mountinfo names /run/no-docker/RUN-ID), so the name ends in 64 random
    bits made after the run has ended: it cannot be predicted, nor pre-filled by the thousand
    (red-team round 4, B2); a name taken is only retried with new bits (the bound is for a
    file system that answers EEXIST to everything, never reached by chance)."""
    if root in undo._dirs:
        return undo._dirs[root]
    for _ in range(1 << 16):
        name = f"{QUARANTINE}-{run_id}-{os.urandom(8).hex()}"
        try:
            os.mkdir(name, 0o700, dir_fd=base_fd)
        except FileExistsError:
            continue
        try:
            os.chown(name, *owner, dir_fd=base_fd, follow_symlinks=False)
        except OSError:
            pass
        undo._dirs[root] = name
        return name
    raise OSError(17, "no free quarantine directory name")


def _move_aside(path: str, root: str, run_id: str, owner: tuple[int, int], undo: Undo) -> bool:
    rel = path[len(root.rstrip("/")) + 1:]
    try:
        parent_fd, name = _open_parent(path)
    except FileNotFoundError:
        return True  # its directory is gone (moved away by the run): nothing there to move
    try:
        try:
            os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return True  # nothing there now (it was removed, or moved with its directory)
        base = open_nofollow(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            where = _quarantine_of(root, base, run_id, owner, undo)
            target_fd = _mkdirs_at(base, f"{where}/{os.path.dirname(rel)}", owner)
        finally:
            os.close(base)
        try:
            os.rename(name, name, src_dir_fd=parent_fd, dst_dir_fd=target_fd)
        finally:
            os.close(target_fd)
    finally:
        os.close(parent_fd)
    quarantine = os.path.join(root, undo._dirs[root])
    if quarantine not in undo.quarantines:
        undo.quarantines.append(quarantine)
    undo.moved.append(path)
    return True


def _put(path: str, how: tuple[str, ...], root: str, owner: tuple[int, int]) -> None:
    """Put PATH back as HOW says. Its directories are made again (0755, owned like the root)
    where the run moved them away (``mv examples/demo sub``): else the old place stays empty
    and the moved copy is what the next tool finds (red-team round 4, B2b)."""
    try:
        parent_fd, name = _open_parent(path)
    except FileNotFoundError:
        base = open_nofollow(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            rel = path[len(root.rstrip("/")) + 1:]
            parent_fd, name = _mkdirs_at(base, os.path.dirname(rel), owner, 0o755), os.path.basename(rel)
        finally:
            os.close(base)
    try:
        if how[0] == "dir":
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        elif how[0] == "symlink":
            os.symlink(how[1], name, dir_fd=parent_fd)
        else:
            _, mode, uid, gid, content = how
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=parent_fd)
            try:
                data = content.encode("latin-1")
                while data:
                    data = data[os.write(fd, data):]
                try:
                    os.fchown(fd, int(uid), int(gid))
                except OSError:
                    pass  # not root: the file is ours, as it was
                os.fchmod(fd, int(mode, 8))
            finally:
                os.close(fd)
    finally:
        os.close(parent_fd)


def put_back(changed: dict[str, tuple[str, str]], roots: list[str], run_id: str,
             started_ns: int = 0, kept: tuple[str, ...] = (), into: Undo | None = None,
             walked: frozenset[str] | set[str] | None = None) -> Undo:
    """Undo CHANGED ({path: (before, after)} from ``LaterCodeAudit.changed``) in ROOTS.
    STARTED_NS: when the before-walk began; what was not touched since (its ctime, which no
    process can set back, is older) is never moved: a source first named after the run (a
    path a planted git config includes: ``include.path = ../.venv``) is not the run's; nor is
    what the run saw read-only or pinned (KEPT), or a directory holding it (a directory's
    ctime moves with every entry made in it). WALKED: every directory the before-walk went
    through; a path whose directory was not one of them was put there by the run, whatever
    its ctime: files under a directory the run renamed keep theirs (rename(2) sets the ctime
    of the renamed directory only; red-team round 4, B2b)."""
    undo = into if into is not None else Undo()
    moved_dirs: list[str] = []
    for path in sorted(changed):
        if os.path.basename(path) in _VERDICTS:  # verdicts of the walk, not files
            continue
        before, _after = changed[path]
        root = _root_of(path, roots)
        if root is None:
            undo.failed.append(f"{path}: outside the writable roots (a start-up link's target)")
            continue
        if any(is_under(path, d) for d in moved_dirs):
            continue  # moved already, with its directory
        how = restorable(before)
        try:
            st = os.stat(root)
            owner = (st.st_uid, st.st_gid)
            if how == ("dir",) and _is_dir(path):
                continue  # a directory that is still one: its changed files are undone one by one
            if started_ns and _untouched_since(path, started_ns) and (
                    walked is None or os.path.dirname(path) in walked):
                continue
            if any(is_under(k, path) for k in kept):
                continue  # read-only or pinned inside the run (.git, a venv): never the run's
            # What the run left goes, whatever can be put back in its place.
            _move_aside(path, root, run_id, owner, undo)
            if _is_dir_in_quarantine(path, root, undo):
                moved_dirs.append(path)
            if how is None:
                undo.lost.append(f"{path}: its earlier content was not kept (over 64 KiB, or not a file)")
            elif how[0] != "absent":
                _put(path, how, root, owner)
                undo.restored.append(path)
        except OSError as err:
            undo.failed.append(f"{path}: {err.strerror or err}")
    return undo


def _untouched_since(path: str, started_ns: int) -> bool:
    try:
        return os.lstat(path).st_ctime_ns < started_ns
    except OSError:
        return False


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir_in_quarantine(path: str, root: str, undo: Undo) -> bool:
    rel = path[len(root.rstrip("/")) + 1:]
    return root in undo._dirs and _is_dir(os.path.join(root, undo._dirs[root], rel))


def describe(undo: Undo) -> str:
    """``moved aside to ROOT/.no-docker-quarantine-ID (2), put back (1)`` (pure)."""
    parts = []
    if undo.moved:
        parts.append(f"moved aside to {', '.join(undo.quarantines)} ({len(undo.moved)})")
    if undo.restored:
        parts.append(f"put back as it was ({len(undo.restored)})")
    return ", ".join(parts)


def lost_words(undo: Undo) -> str:
    """``; NOT put back (restore it yourself, e.g. git checkout): PATH (+N more)`` or "" (pure)."""
    if not undo.lost:
        return ""
    more = f" (+{len(undo.lost) - 1} more)" if len(undo.lost) > 1 else ""
    return f"; NOT put back (restore it yourself, e.g. git checkout): {undo.lost[0]}{more}"
