"""Helpers of the later-code T-cases (T-53..T-59): real git repositories laid out as users and
tools make them (submodules in submodules, linked worktrees, bare layouts), and git run
outside after a run, as the user would, to show that a route is real."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from git_env import GIT_ENV  # noqa: F401 - the T-cases take it from here


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=GIT_ENV,
                          check=True, capture_output=True, text=True, timeout=60).stdout


def repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(path), cwd=path.parent)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=path)
    return path


def nested_submodules(top: Path, origins: Path) -> Path:
    """TOP with submodule a, which has submodule b: TOP/.git/modules/a/modules/b is b's gitdir."""
    b = repo(origins / "b")
    a = repo(origins / "a")
    git("submodule", "add", "-q", str(b), "b", cwd=a)
    git("commit", "-q", "-m", "b", cwd=a)
    repo(top)
    git("submodule", "add", "-q", str(a), "a", cwd=top)
    git("commit", "-q", "-m", "a", cwd=top)
    git("submodule", "update", "-q", "--init", "--recursive", cwd=top)
    return top / ".git" / "modules" / "a" / "modules" / "b"


def git_outside(args: list[str], cwd: Path, *, tty: bool = False) -> None:
    """Run git outside, as the user would after the run; with a terminal when TTY (git starts
    its pager only on one). Output is not kept: only what git ran matters."""
    if not tty:
        subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, timeout=60)
        return
    primary, secondary = os.openpty()
    try:
        subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, stdin=secondary, stdout=secondary,
                       stderr=secondary, timeout=60, start_new_session=True)
    finally:
        os.close(secondary)
        os.close(primary)


def evil_config(marker: Path, *, key: str = "fsmonitor") -> str:
    """A shell command writing a git config whose KEY runs `touch MARKER`."""
    return (f"printf '[core]\\n\\trepositoryformatversion = 0\\n\\t{key} = \"touch {marker}; false\"\\n'")
