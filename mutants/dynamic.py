"""The dynamic check of ``mutants review`` (issue 17 A): run the payload against the canary.

The lint proves a payload read-only from its text; this check is the second witness, from
what the payload actually sends. It runs the reviewed bytes with ``bash`` inside the outer
guard (a mount + pid + network namespace whose tmpfs hides the host's engine paths, the
canary in answer mode on every one of them: a real engine can never be reached) and refuses
the payload when the canary recorded anything but a read:

* an HTTP request other than ``GET``/``HEAD`` without a body on a read-only endpoint
  (``lint_rules.READ_ONLY_PATHS``, after an optional ``/vN.N`` prefix);
* raw bytes (``raw`` records): only a TLS ClientHello and an HTTP/2 (gRPC) preface followed by
  connection-level frames alone (SETTINGS, PING, WINDOW_UPDATE) count as reads; a gRPC call
  (a HEADERS or DATA frame) cannot be shown to be a read from its HPACK-coded method here and
  is refused, like any other raw write;
* a file outside the run directory whose bytes changed, or a new one that is not empty
  (the persistence probes may create empty files: that is what the lint allows them).

It runs only after the static checks are clean: the outer guard keeps engines out of reach,
not the rest of the machine, so text the lint could not prove is never run. Static and
dynamic must both agree before ``review --accept`` writes a pin.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import lint_rules as R

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# What the payload sees of the review is drawn afresh each time from these (issue 27: a payload
# took a harmless branch when it saw `*/no-docker-review-work`, the guard's .bashrc text or a
# $PPID of 0). Words only a developer's machine would hold; never "review", "guard", "no-docker".
PROJECTS = ("api", "webapp", "backend", "billing", "inventory", "site", "tools", "worker", "gateway",
            "auth-service", "frontend", "etl", "platform", "payments", "reports", "scheduler")
RUNNERS = ("run-tests.sh", "test.sh", "check.sh", "ci.sh", "build.sh", "dev.sh", "setup.sh")
SCRIPT_DIRS = ("scripts", "bin", "tools", "ci", "hack", ".")
SCRIPTS = ("devenv.sh", "integration.sh", "e2e.sh", "bootstrap.sh", "smoke.sh", "db-setup.sh", "up.sh")
BASHRC_LINES = (
    "# ~/.bashrc: executed by bash(1) for non-login shells.",
    "case $- in *i*) ;; *) return;; esac", "HISTCONTROL=ignoreboth", "shopt -s histappend",
    "HISTSIZE=1000", "HISTFILESIZE=2000", "shopt -s checkwinsize", "alias ll='ls -alF'",
    "alias la='ls -A'", "alias gs='git status'", "export EDITOR=vim",
    "export PATH=\"$HOME/.local/bin:$PATH\"",
    "[ -f ~/.fzf.bash ] && source ~/.fzf.bash", "eval \"$(direnv hook bash)\"",
    "export GOPATH=$HOME/go", "alias k=kubectl", "export PS1='\\u@\\h:\\w\\$ '",
)
PROFILE_LINES = ("# ~/.profile: executed by the command interpreter for login shells.",
                 'if [ -n "$BASH_VERSION" ]; then', '    [ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"', "fi",
                 'if [ -d "$HOME/bin" ] ; then PATH="$HOME/bin:$PATH"; fi', "umask 022")
HISTORY = ("git status", "git pull", "make test", "ls", "cd ..", "vim README.md", "docker ps", "pytest -x",
           "git log --oneline", "npm install", "kubectl get pods", "ssh build01", "htop", "git push")
NAMES = ("alex", "sam", "jo", "kim", "lee", "max", "ana", "ravi", "mia", "tom")

# HTTP/2 frame types that carry no request (RFC 9113 §6): SETTINGS, PING, WINDOW_UPDATE.
H2_CONNECTION_FRAMES = frozenset({0x4, 0x6, 0x8})
RUN_TIMEOUT = 120.0


@dataclass
class Dynamic:
    """The outcome of the dynamic check."""

    ran: bool
    # what was recorded that is not a read, or why the check did not run
    problems: list[str] = field(default_factory=list)
    records: int = 0
    exit_status: int | None = None

    @property
    def ok(self) -> bool:
        return self.ran and not self.problems

    def render(self) -> list[str]:
        if not self.ran:
            return [f"  dynamic: not run: {'; '.join(self.problems) or 'static checks not clean'}"]
        head = (f"  dynamic: {'clean' if self.ok else f'{len(self.problems)} finding(s)'} "
                f"({self.records} canary records, payload exit {self.exit_status})")
        return [head, *(f"    {p}" for p in self.problems)]


def _outer_guard() -> tuple[type, type]:
    """(OuterGuard, GuardError): the one place this package imports the outer guard.

    The outer guard lives in the supervisor's proving room (``supervisor/proving/outer_guard.py``);
    imported lazily, so that the lint itself never loads the supervisor.
    """
    from no_docker.supervisor.proving.outer_guard import GuardError, OuterGuard

    return OuterGuard, GuardError


def read_only_path(path: str) -> bool:
    return R.API_VERSION_PREFIX.sub("", path) in R.READ_ONLY_PATHS


def h2_frames_problem(data: bytes) -> str | None:
    """Why the bytes after an HTTP/2 preface are not connection-level frames only, or None."""
    rest = data[len(H2_PREFACE):] if data.startswith(H2_PREFACE) else None
    if rest is None:
        return "HTTP/2 bytes that do not start with the client preface"
    while rest:
        if len(rest) < 9:
            return None  # the canary kept (or got) only part of a frame header: no request yet
        length = int.from_bytes(rest[:3], "big")
        kind = rest[3]
        if kind not in H2_CONNECTION_FRAMES:
            return f"an HTTP/2 frame of type {kind} (a gRPC call whose method cannot be shown to be a read)"
        rest = rest[9 + length:]
    return None


def judge_records(records: Iterable[Mapping]) -> list[str]:
    """Every canary record that is not a read (see the module doc), one line each."""
    problems: list[str] = []
    for record in records:
        kind = record.get("kind")
        where = record.get("listener", "?")
        if kind == "connection":
            continue
        if kind == "request":
            method, path = record.get("method", "?"), str(record.get("path", ""))
            if method not in ("GET", "HEAD") or not read_only_path(path) or record.get("body_len", 0):
                problems.append(f"{method} {path} on {where}: not a read of a read-only endpoint")
            continue
        if kind == "raw":
            raw_kind = record.get("raw_kind")
            try:
                data = base64.b64decode(str(record.get("bytes", "")), validate=True)
            except ValueError:
                data = b""
            if raw_kind == "tls" and data[:1] == b"\x16":
                continue  # a ClientHello: the canary hangs up after it, nothing else is sent
            if raw_kind == "h2-preface":
                why = h2_frames_problem(data)
                if why is None:
                    continue
                problems.append(f"raw {raw_kind} on {where}: {why}")
                continue
            problems.append(f"raw bytes ({raw_kind}) on {where}: {record.get('summary', '')!s}"[:200])
            continue
        problems.append(f"a canary record of kind {kind!r} on {where}")
    return problems


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every regular file under ``root`` (symlinks not followed)."""
    out: dict[str, str] = {}
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[str(path.relative_to(root))] = "unreadable"
    return out


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def judge_files(before: Mapping[str, str], after: Mapping[str, str], where: str) -> list[str]:
    """Files outside the run directory whose bytes changed, and new files that are not empty."""
    problems = []
    for rel, digest in sorted(after.items()):
        old = before.get(rel)
        if old is None and digest != EMPTY_SHA256:
            problems.append(f"{where}/{rel}: a new file with content")
        elif old is not None and old != digest:
            problems.append(f"{where}/{rel}: its bytes changed")
    problems += [f"{where}/{rel}: removed" for rel in sorted(set(before) - set(after))]
    return problems


@dataclass(frozen=True)
class Disguise:
    """What the payload can see of one review run, drawn at random (``disguise``)."""

    project: str  # the work dir's name
    runner: str  # the script in the work dir that runs the payload (its $PPID's command line)
    script: str  # the payload's own path, relative to the work dir
    home_files: dict[str, str]  # $HOME-relative path -> content
    last_pid: int  # the pid namespace's last pid before the runner starts: $PPID is last_pid + 1


def _pick_lines(rng: random.Random, lines: tuple[str, ...], low: int) -> str:
    chosen = [line for line in lines if rng.random() < 0.7] or list(lines[:low])
    return "\n".join(chosen) + "\n"


def disguise(rng: random.Random) -> Disguise:
    """A fresh, plausible developer's set-up for one run of the dynamic check.

    Pure (all randomness from ``rng``): the work dir's name, the runner script and the payload's
    path in it, $HOME's dotfiles (a .bashrc and .profile of lines typical ones hold, a history,
    a .gitconfig) and the pid the runner gets. A payload that looks for the review's telltales
    finds a different machine every time, and none of the words it could key on.
    """
    project = rng.choice(PROJECTS) + rng.choice(("", "", f"-{rng.randrange(2, 9)}", "-main", "-api"))
    name = rng.choice(NAMES)
    script_dir = rng.choice(SCRIPT_DIRS)
    script = rng.choice(SCRIPTS) if script_dir == "." else f"{script_dir}/{rng.choice(SCRIPTS)}"
    home_files = {
        ".bashrc": _pick_lines(rng, BASHRC_LINES, 6),
        ".profile": _pick_lines(rng, PROFILE_LINES, 4),
        ".bash_history": "\n".join(rng.choice(HISTORY) for _ in range(rng.randrange(5, 60))) + "\n",
        ".gitconfig": f"[user]\n\tname = {name.title()}\n\temail = {name}@example.com\n",
    }
    if rng.random() < 0.5:
        host = f"build{rng.randrange(1, 40):02d}"
        home_files[".ssh/known_hosts"] = f"{host} ssh-ed25519 AAAAC3Nza{rng.randrange(10**8)}\n"
    if rng.random() < 0.5:
        home_files[".config/git/ignore"] = ".idea/\n*.swp\n"
    return Disguise(project, rng.choice(RUNNERS), script, home_files, rng.randrange(900, 30000))


# Inside the guard: set the pid namespace's last pid (proc(5), /proc/sys/kernel/ns_last_pid;
# writable with CAP_SYS_ADMIN in the namespace's owner, which the guard's root has), then start
# the runner as a child (not exec'd): its pid, the payload's $PPID, is last_pid + 1, a number
# like a developer's shell has, not the guard's 0 or 2.
LAUNCH = 'printf %s "$1" > /proc/sys/kernel/ns_last_pid 2>/dev/null; bash "$2"; exit $?'


def dynamic_check(data: bytes, timeout: float = RUN_TIMEOUT, rng: random.Random | None = None) -> Dynamic:
    """Run the payload bytes with bash in the outer guard against the canary; judge what it sent."""
    missing = [tool for tool in ("unshare", "nsenter", "bash") if shutil.which(tool) is None]
    if missing:
        return Dynamic(False, [f"{', '.join(missing)} missing: the outer guard cannot be made"])
    try:
        outer_guard, guard_error = _outer_guard()
    except ImportError as err:
        return Dynamic(False, [f"the outer guard cannot be imported: {err}"])
    seen = disguise(rng or random.SystemRandom())
    with tempfile.TemporaryDirectory() as tmp:  # /tmp/tmpXXXXXXXX: the default name, like any
        base = Path(tmp)
        work = base / seen.project
        script = work / seen.script
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_bytes(data)
        runner = work / seen.runner
        runner.write_text(f"#!/bin/bash\n# {seen.runner}: the project's checks\nbash ./{seen.script}\n"
                          "status=$?\nexit $status\n")
        try:
            with outer_guard(base / ".canary.jsonl", share=[base]) as guard:
                home = Path(guard.home)
                for rel, content in seen.home_files.items():  # the persistence probes must leave these
                    (home / rel).parent.mkdir(parents=True, exist_ok=True)
                    (home / rel).write_text(content)
                before = snapshot(home)
                try:
                    done = guard.run(["bash", "-c", LAUNCH, seen.runner, str(seen.last_pid), str(runner)],
                                     cwd=work, timeout=timeout)
                except subprocess.TimeoutExpired:  # guard.run killed it; the guard ends the rest
                    return Dynamic(True, [f"the payload did not end within {timeout:g} s"],
                                   len(guard.records()))
                records = guard.settled_records()
                after = snapshot(home)
        except guard_error as err:  # type: ignore[misc]
            return Dynamic(False, [f"the outer guard could not be set up or ended badly: {err}"])
        except OSError as err:
            return Dynamic(False, [f"the dynamic check failed: {err}"])
    problems = judge_records(records) + judge_files(before, after, "$HOME")
    return Dynamic(True, problems, len(records), done.returncode)
