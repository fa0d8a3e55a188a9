"""Paths a ``no-docker run`` in a workflow may make writable (or readable), judged against the
GitHub-hosted runner's layout (issue 27, guard part).

What a run may write must not hold anything that runs later outside: the runner's file
commands (``$GITHUB_ENV``, ``$GITHUB_PATH``, ``$GITHUB_OUTPUT``, ``$GITHUB_STEP_SUMMARY``, all in
``$RUNNER_TEMP/_runner_file_commands``), ``$RUNNER_TEMP`` itself, the downloaded actions
(``_actions``, whose post steps run at the job's end), the tool cache (``setup-python``'s
interpreters, on PATH), the runner's work dir and its parent, and ``$HOME`` (dotfiles that git,
bash and pip read). Issue 27: ``--rw /home/runner/work/proj/..`` passed a textual check.

So a path is normalised first (``..`` resolved, ``~`` and relative paths placed against the
step's directory in the workspace), and then, default-deny:

* ``--rw`` and ``--work`` (and a step's start directory, the run's default work dir): only
  inside the job's workspace ``/home/runner/work/R/R`` or inside ``~/.cache``;
* ``--ro``: anything but the runner's own dirs above (whose files hold values of earlier steps);
* a path inside the workspace must not pass through a link the repository holds (git keeps
  links: ``sub -> /home/runner`` would make ``--rw sub`` the home), and, once an earlier run could
  write somewhere, nothing strictly below that place counts (the run may have left a link
  there: the supervisor resolves links when it binds, so ``--rw x`` would become its target).

Pure functions; ``posixpath`` only (never the guard machine's file system).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable

HOME = "/home/runner"
WORK = f"{HOME}/work"
RUNNER_TEMP = f"{WORK}/_temp"
FILE_COMMANDS = f"{RUNNER_TEMP}/_runner_file_commands"
ACTIONS = f"{WORK}/_actions"
TOOL_CACHE = "/opt/hostedtoolcache"
RUNNERS = f"{HOME}/runners"  # the runner's own install (hosted images)
# Every place whose content runs, or is read as commands, later outside.
RUNNER_DIRS = (HOME, WORK, RUNNER_TEMP, FILE_COMMANDS, ACTIONS, f"{WORK}/_tool", TOOL_CACHE, RUNNERS)
CACHE = f"{HOME}/.cache"
# The workspace the guard assumes: GitHub checks a repository R out to /home/runner/work/R/R.
DEFAULT_WORKSPACE = f"{WORK}/repo/repo"


def is_under(path: str, top: str) -> bool:
    """``path`` is ``top`` or below it (both normalised, absolute)."""
    return path == top or path.startswith(top.rstrip("/") + "/")


def place(path: str, cwd: str) -> str:
    """``path`` as an absolute normalised path: ``~`` is the runner's home, a relative path is
    placed in ``cwd``. ``..`` is resolved textually: what a link in the path does is the
    business of ``through_link``."""
    if path == "~" or path.startswith("~/"):
        path = HOME + path[1:]
    joined = path if path.startswith("/") else posixpath.join(cwd, path)
    normal = posixpath.normpath(joined)
    return "/" + normal.lstrip("/")  # normpath keeps a leading `//`


def in_workspace(path: str) -> str | None:
    """``path`` relative to the job's workspace ``/home/runner/work/R/R`` (R the repository's
    name, the same twice, not starting with ``_`` like the runner's own dirs), or None."""
    parts = path.split("/")
    if len(parts) < 6 or "/".join(parts[:4]) != WORK or parts[4] != parts[5] or parts[4].startswith("_") \
            or parts[4] in ("", ".", ".."):
        return None
    return "/".join(parts[6:]) or "."


def through_link(rel: str, has_link: Callable[[str], bool]) -> str | None:
    """The first leading part of ``rel`` (relative to the workspace) that the repository holds as
    a link, or None."""
    if rel in ("", "."):
        return None
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if has_link(prefix):
            return prefix
    return None


def writable_problem(path: str, has_link: Callable[[str], bool],
                     written: Iterable[str] = ()) -> str | None:
    """Why a run may not write ``path`` (absolute, normalised), or None."""
    rel = in_workspace(path)
    if rel is None and is_under(path, CACHE) and path != CACHE:
        # The supervisor refuses a cache whose content runs later (pip's wheels, uv, pre-commit):
        # the guard says so first, in the same words (supervisor/isolation/tool_sources.py).
        from no_docker.supervisor.isolation.tool_sources import cache_refusal

        why = cache_refusal(path, HOME, {})
        if why:
            return f"refused by no-docker run itself: {why}"
    if rel is None and not (is_under(path, CACHE) and path != CACHE):
        runs_later = _what_runs_later(path)
        what = f"{runs_later}, whose content runs later outside" if runs_later else \
            "it lies outside the workspace, where the guard cannot tell what reads it later"
        return f"{what}; only the workspace ({WORK}/R/R) and {CACHE}/NAME may be writable"
    return _relative_problem(path, rel, has_link, written, writes=True)


def _what_runs_later(path: str) -> str | None:
    """Which runner dir ``path`` holds (the deepest, the file commands first) or lies in."""
    held = [d for d in RUNNER_DIRS if is_under(d, path)]
    if held:
        deepest = max(held, key=len)
        note = " ($GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT...)" if deepest == FILE_COMMANDS else ""
        return f"it holds the runner's {deepest}{note}"
    inside = [d for d in RUNNER_DIRS if is_under(path, d)]
    return f"it is inside the runner's {max(inside, key=len)}" if inside else None


def readable_problem(path: str, has_link: Callable[[str], bool],
                     written: Iterable[str] = ()) -> str | None:
    """Why ``--ro path`` is refused, or None: the runner's own dirs hold the values of earlier
    steps' file commands (tokens among them), and a link or a place an earlier run wrote may
    lead anywhere."""
    rel = in_workspace(path)
    if rel is None:
        for d in (RUNNER_TEMP, FILE_COMMANDS, ACTIONS, RUNNERS, WORK):
            if is_under(path, d) or is_under(d, path):
                return f"it holds or is inside the runner's {d}"
    return _relative_problem(path, rel, has_link, written)


def _relative_problem(path: str, rel: str | None, has_link: Callable[[str], bool],
                      written: Iterable[str], *, writes: bool = False) -> str | None:
    if rel is not None and writes and ".git" in rel.split("/"):
        # git runs hooks and reads config from there outside (checkout's post step, later git)
        return "it is in a .git directory, whose hooks and config git runs outside"
    if rel is not None:
        link = through_link(rel, has_link)
        if link is not None:
            return f"it passes through {link!r}, a link in the repository (it may lead anywhere)"
    for root in written:
        if is_under(path, root) and path != root:
            return ("an earlier run or step (a download, a cache, a checkout of other "
                    f"content) could write {root} and leave a link there; pass the paths "
                    "before the first run, or give every run the same paths")
    return None
