"""``no-docker prove [--json]``: the main job, the core of the T-series on this machine.

Inside an outer guard (the canary on every real engine path, see ``outer_guard``), the pinned
``reach-engine`` mutant runs twice: once without isolation (the positive control: every
network route must reach the canary, or say why it is unavailable) and once under
``no-docker run`` (no route may reach it, persistence files must stay unchanged); around each
run the lifetime harness (``lifetime``) restarts and starts engines while the payload's
lifetime routes wait for them. A table
(route, reached without isolation, reached with isolation) goes to stdout, then one verdict
line. Exit 0 only when the control reaches every available network route and the isolated run
reaches none; 1 when either fails; 125 when a part could not run at all (incomplete): a
skipped part never counts as proven.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from ..errors import EXIT_NOT_PROVEN, NoDockerError, UsageError

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the source tree (editable install)
DEVENV = PACKAGE_ROOT / "tests" / "fixtures" / "devenv"
PAYLOAD_NAME = "mutants/payloads/reach-engine.sh"  # its name in mutants/pins.json
MUTANT_MARKER = "# no-docker: mutant here"  # the line of the fixture target the payload follows
EXIT_FAILED = 1
# What the payload's later-run routes leave in the work dir (issue 25): under `run` the audit
# finds them after the run, moves them aside and ends 125 with UNDONE_WORDS; they must be gone.
LATER_RUN_FILES = ("pytest.py", "pytest.ini", "no-docker-route-sub/pyproject.toml")
UNDONE_WORDS = "none of it runs later"
# Their routes: written in the work dir (which outlives the run), so "thrown away" would be wrong.
LATER_RUN_ROUTES = ("python-m-module", "pytest-config", "subdir-config")


def refused_to_start(status: int, stderr: str) -> bool:
    """Was the isolated run refused (125) for another reason than the code it left for later,
    which it undid (the expected end of a mutant that tries the persistence routes)? (pure)"""
    if status != EXIT_NOT_PROVEN:
        return False
    last = [line for line in stderr.strip().splitlines() if line.startswith("no-docker: P4 not proven")]
    return not (last and UNDONE_WORDS in last[-1])
# The fixture target, shipped inside the package for an installed no-docker without tests/:
# a unit test keeps it byte for byte equal to tests/fixtures/devenv/devenv.sh.
DEVENV_SCRIPT_NAME = "devenv.sh"
DEVENV_SCRIPT = r'''#!/usr/bin/env bash
# devenv: a developer's helper script, the fixture target that the T-series (T-03, T-05) and
# `no-docker prove` mutate with `no-docker mutants apply`: the pinned payload goes in at the
# marker line below, as a mutation tool's mutant would change one line of a real script.
# The script itself reaches for no engine, so every canary record comes from the payload.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() {
  printf 'devenv: %s\n' "$*"
}

say "checking the development environment in $here"
for tool in git python3; do
  if command -v "$tool" > /dev/null 2>&1; then
    say "$tool found"
  else
    say "$tool missing"
  fi
done
# no-docker: mutant here
say "done"
'''
RUN_TIMEOUT = 600.0
ROUTE_LOG = "no-docker-routes.log"  # the payload's default log, in its work dir (mutants/routes.py)

# --------------------------------------------------------------------------- pure parts

ROUTE_ID = re.compile(r"[a-z0-9-]+")
_SOCKET_IN_TEXT = re.compile(r"(/[\w./-]+\.sock)\b")
_TCP_IN_TEXT = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3}:\d+)\b")


def addresses_in(description: str) -> list[str]:
    """Canary listener addresses a route description names (``/var/run`` is ``/run`` inside)."""
    out = []
    for path in _SOCKET_IN_TEXT.findall(description):
        out.append("/run/" + path[len("/var/run/"):] if path.startswith("/var/run/") else path)
    return out + _TCP_IN_TEXT.findall(description)


SNI_SUFFIX = ".no-docker-route.invalid"


def record_route(record: Mapping, route_of: Callable[[Mapping], str | None],
                 sni_of: Callable[[bytes], str | None] | None = None) -> str | None:
    """The route id a record carries: the canary's ``route_of``, else a TLS hello's SNI.

    The payload's TLS routes put ``ID.no-docker-route.invalid`` in the SNI (the only place a
    ClientHello can carry it); the canary keeps the first bytes of such a raw record.
    """
    rid = route_of(record)
    if rid or sni_of is None or record.get("kind") != "raw" or record.get("raw_kind") != "tls":
        return rid
    try:
        sni = sni_of(base64.b64decode(str(record.get("bytes", "")), validate=True))
    except (ValueError, binascii.Error):
        return None
    if sni and sni.endswith(SNI_SUFFIX) and ROUTE_ID.fullmatch(sni[: -len(SNI_SUFFIX)]):
        return sni[: -len(SNI_SUFFIX)]
    return None


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the canary log says about one route."""

    by_id: int  # records that carry the route id
    by_listener: int  # records without any route id on a listener the route names


def evidence(route_id: str, description: str, records: Sequence[Mapping],
             route_of: object) -> Evidence:
    """Count the canary records that show ``route_id`` arrived (by id, else by listener).

    Some routes cannot carry their id (an HTTP/2 preface, a TLS ClientHello): for those a
    record with no id on the listener the route names is the evidence.
    """
    by_id = 0
    by_listener = 0
    named = set(addresses_in(description))
    for record in records:
        rid = route_of(record)  # type: ignore[operator]
        if rid == route_id:
            by_id += 1
        elif rid is None and record.get("kind") in ("raw", "request") and record.get("listener") in named:
            by_listener += 1
    return Evidence(by_id, by_listener)


@dataclasses.dataclass
class Row:
    """One route of the table. ``control`` and ``isolated`` are a few plain words for the
    screen; ``control_why`` and ``isolated_why`` say the rest, never cut (the notes under the
    table, and ``--json``)."""

    route: str
    kind: str  # network | persistence
    control: str  # what happened without isolation
    isolated: str  # what happened with isolation
    control_ok: bool | None  # None: unavailable here (does not count either way)
    isolated_ok: bool | None  # None: not attempted or not really tried inside (incomplete)
    tried: str = ""  # what the mutant tried: the route's description in the payload
    control_why: str = ""
    isolated_why: str = ""


# `timeout CMD` says this when CMD is not there (coreutils' timeout.c, exit 127): it reads like
# a timeout, but means "not installed".
_NOT_RUNNABLE = re.compile(r"timeout: failed to run command [‘'`\"]?(?P<cmd>[^’'\"]+)[’'\"]?: (?P<why>.+)")

_NOT_FOUND = re.compile(r"(\S+) not found")


def plain_reason(detail: str) -> str:
    """The payload's ``unavailable`` detail in plain words (a missing command says so)."""
    detail = detail.strip()
    missing = _NOT_FOUND.fullmatch(detail)
    if missing:  # the payload's `have` check: its tool is not on PATH
        return f"{missing.group(1)} is not installed on this machine (not on PATH)"
    if detail.startswith("docker-py not importable"):  # the pinned dockerpy_route helper's words
        return f"python3 on PATH cannot import docker-py ({detail.partition(': ')[2] or detail})"
    m = _NOT_RUNNABLE.search(detail)
    if m:
        why = m.group("why").strip()
        if why.lower().startswith("no such file"):
            return f"{m.group('cmd')} is not installed on this machine"
        return f"{m.group('cmd')} cannot be run here: {why}"
    return detail


def network_row(route_id: str, control_log: Mapping[str, tuple[str, str]], control_ev: Evidence,
                isolated_log: Mapping[str, tuple[str, str]], isolated_ev: Evidence,
                tried: str = "", cannot: str | None = None) -> Row:
    """One network route: the control must reach the canary, the isolated run must not.

    ``cannot``: why the control cannot take this route on this machine, as prove found by
    trying the route's precondition itself (``routes_the_control_cannot_take``): then a miss
    of the control is "unavailable", neither a pass nor a failure of the proof. The payload's
    own words never make a miss unavailable unless it said ``unavailable`` with a reason."""
    outcome, detail = control_log.get(route_id, ("not attempted", ""))
    said = f"{outcome}{': ' + detail if detail else ''}"
    control_ok: bool | None
    if control_ev.by_id:
        control, control_ok = "reached the canary", True
        control_why = ""
    elif control_ev.by_listener:
        # The canary's record is the evidence, whatever the client made of the answer (the
        # docker CLI's TLS handshake with a plain-text canary fails after its hello arrived).
        control, control_ok = "reached the canary", True
        control_why = ("seen on the listener the route names: this client cannot carry the route's "
                       "name (a TLS handshake, an HTTP/2 preface), so a record there is the evidence")
    elif cannot:
        control, control_ok, control_why = "unavailable here", None, cannot
    elif outcome == "unavailable" and detail.strip():
        control, control_ok, control_why = "unavailable here", None, plain_reason(detail)
    else:
        control, control_ok = "DID NOT REACH the canary", False
        control_why = f"the mutant said: {said}"
        if outcome == "not attempted":
            control_why = "the mutant never tried it"
    i_outcome, i_detail = isolated_log.get(route_id, ("not attempted", ""))
    i_said = f"the mutant said: {i_outcome}{': ' + i_detail if i_detail else ''}"
    reached = isolated_ev.by_id + isolated_ev.by_listener
    isolated_ok: bool | None
    if reached:
        isolated, isolated_ok = f"REACHED THE CANARY ({reached} record{'s' if reached != 1 else ''})", False
    elif i_outcome == "not attempted":
        isolated, isolated_ok, i_said = "NOT ATTEMPTED", None, "the mutant never tried it inside the run"
    elif i_outcome == "unavailable" and outcome != "unavailable":
        # The tool works outside but not inside: the run hid it, so the route was never tried.
        isolated, isolated_ok = "NOT TRIED (its tool is missing inside)", None
    else:
        isolated, isolated_ok = "did not reach it", True
    return Row(route_id, "network", control, isolated, control_ok, isolated_ok, tried, control_why, i_said)


def persistence_row(route_id: str, control_log: Mapping[str, tuple[str, str]],
                    isolated_log: Mapping[str, tuple[str, str]], changed: Sequence[str],
                    tried: str = "") -> Row:
    """One persistence route: checked as files that must be unchanged after the isolated run.

    What the payload says of its own write (written, blocked) is only context: inside a run a
    write to $HOME succeeds, in a throwaway $HOME; the verdict is whether the files outside
    changed."""
    outcome, detail = control_log.get(route_id, ("not attempted", ""))
    i_outcome, i_detail = isolated_log.get(route_id, ("not attempted", ""))
    control_ok: bool | None = outcome in ("written", "blocked")
    control_why = ""
    if outcome == "unavailable" and detail.strip():
        control, control_ok, control_why = "unavailable here", None, plain_reason(detail)
    else:
        control = {"written": "wrote the file", "blocked": "the write was refused"}.get(outcome, outcome)
        control_why = detail.strip()
    isolated_ok: bool | None
    isolated_why = ""
    if i_outcome == "not attempted":
        isolated, isolated_ok = "NOT ATTEMPTED", None
    elif changed:
        isolated, isolated_ok = f"FILES CHANGED OUTSIDE ({len(changed)})", False
        isolated_why = "; ".join(changed)
    else:
        written = ("written in the work dir, moved aside at the end" if route_id in LATER_RUN_ROUTES
                   else "written inside, thrown away")
        inside = {"written": written, "blocked": "the write was refused",
                  "unavailable": "unavailable inside too"}.get(i_outcome, i_outcome)
        isolated_why = plain_reason(i_detail) if i_outcome == "unavailable" else ""
        isolated, isolated_ok = f"outside unchanged ({inside})", True
    return Row(route_id, "persistence", control, isolated, control_ok, isolated_ok, tried, control_why,
               isolated_why)


def diff_digests(before: Mapping[str, str], after: Mapping[str, str],
                 words: tuple[str, str, str] = ("created", "removed", "changed")) -> list[str]:
    """Paths created, removed or changed between two ``tree_digest`` results (or any two
    {entry: what} listings; WORDS name the three kinds)."""
    out = []
    for path in sorted(set(before) | set(after)):
        if path not in before:
            out.append(f"{words[0]} {path}")
        elif path not in after:
            out.append(f"{words[1]} {path}")
        elif before[path] != after[path]:
            out.append(f"{words[2]} {path}")
    return out


@dataclasses.dataclass
class Verdict:
    status: str  # PROVEN | FAILED | INCOMPLETE
    line: str
    exit_status: int


def summary_of(rows: Sequence[Row], extra_records: int = 0) -> str:
    """What the rows add up to, every row counted: network and persistence, unavailable too."""
    network = [r for r in rows if r.kind == "network"]
    persistence = [r for r in rows if r.kind == "persistence"]

    def part(kind_rows: list[Row], noun: str, control: str, leaked: str) -> str:
        unavailable = sum(r.control_ok is None for r in kind_rows)
        available = len(kind_rows) - unavailable
        ok = sum(r.control_ok is True for r in kind_rows)
        bad = sum(r.isolated_ok is False for r in kind_rows)
        untried = sum(r.isolated_ok is None for r in kind_rows)
        text = (f"{len(kind_rows)} {noun} route{'s' if len(kind_rows) != 1 else ''}: without isolation "
                f"{ok} of {available} {control} ({unavailable} unavailable here, not counted), "
                f"under no-docker run {bad} {leaked}")
        return text + (f", {untried} not tried" if untried else "")

    parts = [part(network, "network", "reached the canary", "reached it"),
             part(persistence, "persistence", "tried their write", "changed a file outside")]
    return "; ".join(parts) + f"; {extra_records} canary records during the isolated run"


def _with_why(row: Row) -> str:
    """A missed route with what the control saw, so one line says why (a cold podman that ran
    out of time reads differently from a refused connect)."""
    return f"{row.route} ({row.control_why})" if row.control_why else row.route


def verdict(rows: Sequence[Row], incomplete: Sequence[str], extra_records: int = 0) -> Verdict:
    """One line. FAILED: something reached the canary from the isolated run, or the control
    missed an available route; INCOMPLETE: a part could not run or a route was not tried
    inside; PROVEN only when neither. An unavailable route (the control cannot take it here)
    is neither: it is counted and said, never a pass or a failure."""
    network = [r for r in rows if r.kind == "network"]
    available = [r for r in network if r.control_ok is not None]
    leaked = [r.route for r in rows if r.isolated_ok is False]
    untried = [r.route for r in rows if r.isolated_ok is None]
    missed = [_with_why(r) for r in available if not r.control_ok]
    summary = summary_of(rows, extra_records)
    if leaked or extra_records:
        what = ", ".join(leaked) or f"{extra_records} canary records during the isolated run"
        return Verdict("FAILED", f"no-docker prove: FAILED - the isolation did not hold: {what}; {summary}",
                       EXIT_FAILED)
    if incomplete:
        # A part could not run (a tool missing): what the control missed then says nothing
        # about the product, so the result is incomplete, not failed.
        reasons = [*incomplete] + ([f"the control did not reach: {', '.join(missed)}"] if missed else [])
        reasons += [f"not tried inside the run: {', '.join(untried)}"] if untried else []
        return Verdict("INCOMPLETE", f"no-docker prove: INCOMPLETE - {'; '.join(reasons)}; {summary}",
                       EXIT_NOT_PROVEN)
    if missed or not network:
        what = ", ".join(missed) or "no network routes declared"
        return Verdict("FAILED", f"no-docker prove: FAILED - the control did not reach: {what} (a route "
                       f"the control misses shows nothing about the isolation); {summary}", EXIT_FAILED)
    if untried:
        return Verdict("INCOMPLETE", f"no-docker prove: INCOMPLETE - not tried inside the run: "
                       f"{', '.join(untried)}; {summary}", EXIT_NOT_PROVEN)
    return Verdict("PROVEN", f"no-docker prove: PROVEN - {summary}", 0)


LEGEND = """\
The control: the same mutant, run first WITHOUT isolation. It shows that each route really
reaches an engine on this machine (the canary: a fake engine answering on every engine path,
in a private namespace that hides the real ones), so that "did not reach it" under
`no-docker run` means the isolation stopped it. A route the control cannot take here (a tool
not installed, sudo without rights) is "unavailable here": counted, neither a pass nor a
failure. Persistence routes write files that run code later ($HOME start-up files, .git
hooks, ...): under `no-docker run` the files outside must stay unchanged."""


def render_table(rows: Sequence[Row]) -> str:
    """The table, then numbered notes: every reason in full (a cell never cuts one). The
    description of what was tried is the last column, so a long one only wraps at its end."""
    notes: list[str] = []

    def cell(words: str, why: str) -> str:
        if not why:
            return words
        if why not in notes:
            notes.append(why)
        return f"{words} [{notes.index(why) + 1}]"

    head = ("route", "kind", "without isolation (the control)", "under no-docker run",
            "what the mutant tried")
    cells = []
    for r in rows:
        # The isolated side's own words matter only when it is not a plain "did not reach it".
        isolated_why = r.isolated_why if r.isolated_ok is not True else ""
        cells.append((r.route, r.kind, cell(r.control, r.control_why), cell(r.isolated, isolated_why),
                      r.tried))
    widths = [max([len(head[i])] + [len(c[i]) for c in cells]) for i in range(4)]

    def line(c: Sequence[str]) -> str:
        return "  ".join([*(c[i].ljust(widths[i]) for i in range(4)), c[4]]).rstrip()

    lines = [line(head), "  ".join("-" * w for w in widths) + "  " + "-" * len(head[4])]
    lines += [line(c) for c in cells]
    if notes:
        lines.append("")
        lines += [f"[{n}] {why}" for n, why in enumerate(notes, start=1)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- running it


def tree_digest(*roots: Path) -> dict[str, str]:
    """{path: sha256 | 'dir' | 'special' | 'absent'} for everything under roots."""
    out = {}
    for root in roots:
        if not root.exists():
            out[str(root)] = "absent"
            continue
        for dirpath, _, filenames in os.walk(root):
            out[dirpath] = "dir"
            for name in filenames:
                path = Path(dirpath) / name
                regular = path.is_file() and not path.is_symlink()
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if regular else "special"
    return out


def _payload() -> Path:
    from no_docker import mutants

    return Path(mutants.__file__).resolve().parent / "payloads" / Path(PAYLOAD_NAME).name


def _no_docker(*args: str) -> list[str]:
    return [sys.executable, "-m", "no_docker.supervisor.cli", *args]


# The engine clients the payload runs. A fresh machine has read none of them from its disk
# yet: the first `podman --remote ps` here took 5.1 s (0.07 s once read) and the first docker
# 1.5 s, against the payload's 3 s bound per attempt, and the control missed podman-cli on CI.
# One sequential read of each binary first (readahead, not 4 KiB page faults) makes the
# control measure routes, not the disk. The payload also gives podman 15 s (CPU-starved runs).
ENGINE_CLIENTS = ("docker", "podman", "ctr", "crictl", "nerdctl", "curl", "socat", "nc")


def warm_engine_clients(which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """Read each installed engine client's executable once, so its first start in the control
    is not a cold one; returns the paths read. Unreadable ones are skipped: the control then
    says what it saw."""
    read = []
    for name in ENGINE_CLIENTS:
        path = which(name)
        if not path:
            continue
        try:
            with open(path, "rb", buffering=0) as exe:
                while exe.read(1 << 20):
                    pass
        except OSError:
            continue
        read.append(path)
    return read


def _make_mutant(work: Path, payload: Path) -> Path:
    """The fixture target in ``work`` (a fresh git repository), the payload applied at its marker."""
    if DEVENV.is_dir():
        shutil.copytree(DEVENV, work)
    else:
        work.mkdir(parents=True)
        (work / DEVENV_SCRIPT_NAME).write_text(DEVENV_SCRIPT)
    subprocess.run(["git", "init", "-q", str(work)], check=True, capture_output=True)
    target = work / DEVENV_SCRIPT_NAME
    out = work / "mutant.sh"
    done = subprocess.run(_no_docker("mutants", "apply", str(payload), str(target), "--out", str(out),
                                     "--at", MUTANT_MARKER),
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()  # its last line names the error (a traceback's too)
        said = lines[-1] if lines else f"exit {done.returncode}"
        raise NoDockerError(f"no-docker mutants apply failed: {said}")
    return out


def _argv(mutant: Path) -> list[str]:
    return ["bash", str(mutant)] if mutant.suffix == ".sh" else ["python3", str(mutant)]


def _route_log(work: Path) -> dict[str, tuple[str, str]]:
    from no_docker.mutants.routes import parse_route_log

    path = work / ROUTE_LOG
    return dict(parse_route_log(path.read_text())) if path.exists() else {}


SUDO_TIMEOUT = 20.0
# What the control needs to take a route at all, tried by prove itself where the control runs:
# when it is missing the route is "unavailable here" (never a failure of the proof). The
# payload's own failure words never decide that: a control that misses a route whose
# precondition holds is a failed proof.
PRECONDITIONS = {
    "sudo": "passwordless sudo for this user (`sudo -n true` succeeds in the outer guard)",
    "abs-usr-bin": "/usr/bin/docker exists",
    "abs-usr-local-bin": "/usr/local/bin/docker exists",
}
_ABSOLUTE_CLI = {"abs-usr-bin": "/usr/bin/docker", "abs-usr-local-bin": "/usr/local/bin/docker"}


def sudo_refusal(returncode: int, stderr: str, uid: int) -> str | None:
    """Why ``sudo -n true`` (exit RETURNCODE, STDERR) says the control cannot use sudo, or None."""
    if returncode == 0:
        return None
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = lines[-1] if lines else f"exit {returncode}"
    return (f"sudo -n does not run commands for uid {uid} here ({said}): without passwordless sudo "
            "the control cannot take this route")


def control_cannot_take(guard: object, route_ids: Sequence[str]) -> dict[str, str]:
    """route id -> why the control cannot take it on this machine, tried where the control runs."""
    out = {}
    docker = shutil.which("docker")
    for route, path in _ABSOLUTE_CLI.items():
        if route in route_ids and not os.access(path, os.X_OK):
            elsewhere = f" (the docker CLI here is {docker})" if docker else ""
            out[route] = f"{path} does not exist on this machine{elsewhere}"
    if "sudo" in route_ids:
        if shutil.which("sudo") is None:
            out["sudo"] = "sudo is not installed on this machine"
        else:
            try:
                done = guard.run(["sudo", "-n", "true"], timeout=SUDO_TIMEOUT)  # type: ignore[attr-defined]
            except subprocess.TimeoutExpired:
                out["sudo"] = f"`sudo -n true` did not answer within {SUDO_TIMEOUT:g} s"
            else:
                why = sudo_refusal(done.returncode, done.stderr.decode(errors="replace"), os.getuid())
                if why:
                    out["sudo"] = why
    return out


class Progress:
    """What prove is doing, on stderr: on a terminal one line that updates in place; elsewhere
    (CI, a log) one plain line per stage and per route."""

    def __init__(self, stream: object = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._open = False

    def __call__(self, text: str, *, transient: bool = False) -> None:
        """TEXT as a stage (kept on screen) or TRANSIENT (a route: overwritten on a terminal)."""
        if self.tty:
            # \r and erase-line (ECMA-48 EL): the next text replaces this one on a terminal. A
            # transient line is cut to the terminal's width (a wrapped one could not be erased);
            # a stage is kept whole.
            width = max(20, shutil.get_terminal_size().columns - 1)
            self.stream.write("\r\033[K" + (text[:width] if transient else text))  # type: ignore[attr-defined]
            self._open = transient
            if not transient:
                self.stream.write("\n")  # type: ignore[attr-defined]
        else:
            self.stream.write(text + "\n")  # type: ignore[attr-defined]
        self.stream.flush()  # type: ignore[attr-defined]

    def close(self) -> None:
        if self._open:
            self.stream.write("\r\033[K")  # type: ignore[attr-defined]
            self.stream.flush()  # type: ignore[attr-defined]
            self._open = False


def new_routes(text: str, seen: int) -> list[str]:
    """The route ids of complete lines of a route log after the first SEEN ones."""
    from no_docker.mutants.routes import LOG_LINE

    lines = text.split("\n")[:-1]  # the last piece is a line still being written, or ""
    out = []
    for line in lines[seen:]:
        m = LOG_LINE.match(line)
        out.append(m.group("id") if m else "?")
    return out


@contextlib.contextmanager
def watching(log: Path, total: int, label: str, say: Callable[..., None],
             interval: float = 0.2) -> Iterator[None]:
    """Say each route the mutant logs while the body runs (a thread polls LOG; it is stopped
    and joined when the body ends, whatever way)."""
    stop = threading.Event()

    def poll() -> None:
        seen = 0
        while True:
            ended = stop.wait(interval)
            try:
                text = log.read_text(errors="replace")
            except OSError:
                text = ""
            for route in new_routes(text, seen):
                seen += 1
                say(f"no-docker: {label}: route {seen} of {total} tried ({route})", transient=True)
            if ended:
                return

    thread = threading.Thread(target=poll, name="prove-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


@dataclasses.dataclass
class Runs:
    """What the two runs of the mutant left: route logs, canary records, changed files."""

    control_log: dict[str, tuple[str, str]]
    isolated_log: dict[str, tuple[str, str]]
    control_records: list[dict]
    isolated_records: list[dict]
    changed: list[str]
    isolated_exit: int
    isolated_stderr: str
    # The lifetime harness: what went wrong while it moved the engines, and the routes it
    # could not arm on this machine (route -> why). Both make the proof incomplete.
    lifetime_problems: list[str] = dataclasses.field(default_factory=list)
    lifetime_unarmed: dict[str, str] = dataclasses.field(default_factory=dict)
    # route -> why the control cannot take it on this machine (control_cannot_take)
    cannot: dict[str, str] = dataclasses.field(default_factory=dict)


def run_both(guard: object, base: Path, payload: Path, figures: dict, harness: object,
             declared: Sequence = (), say: Callable[..., None] = lambda text, **kw: None) -> Runs:
    """The control (no isolation) then the isolated run, in the outer guard, each with the
    lifetime harness moving engines around it."""
    control_work, isolated_work = base / "control", base / "isolated"
    say("no-docker: making the mutant (the pinned payload applied to the fixture script)")
    control_mutant = _make_mutant(control_work, payload)
    isolated_mutant = _make_mutant(isolated_work, payload)
    cannot = control_cannot_take(guard, [route.id for route in declared])
    total = len(declared)
    warm_engine_clients()
    say(f"no-docker: the control: the mutant tries {total} routes without isolation")
    started = time.monotonic()
    with harness.phase(control_work, "control") as control_phase, \
            watching(control_work / ROUTE_LOG, total, "without isolation", say):  # type: ignore[attr-defined]
        guard.run(_argv(control_mutant), cwd=control_work, timeout=RUN_TIMEOUT)  # type: ignore[attr-defined]
    figures["control_s"] = round(time.monotonic() - started, 3)
    # The canary caught up; the lifetime engines wrote everything when they stopped.
    control_records = guard.settled_records()  # type: ignore[attr-defined]
    control_extra = control_phase.records()
    say(f"no-docker: the control is done: {len(control_records) + len(control_extra)} canary records")
    # Persistence: files that exist (appended to) and files that do not (created) both count.
    home = Path(guard.home)  # type: ignore[attr-defined]
    for name in (".bashrc", ".profile"):
        (home / name).write_text(f"# {name} of the outer guard's developer\n")
    roots = [home, isolated_work / ".git"]
    before = tree_digest(*roots)
    say(f"no-docker: the isolated run: the same {total} routes under no-docker run")
    started = time.monotonic()
    argv = _no_docker("run", "--work", str(isolated_work), "--", *_argv(isolated_mutant))
    with harness.phase(isolated_work, "isolated") as isolated_phase, \
            watching(isolated_work / ROUTE_LOG, total, "under no-docker run", say):  # type: ignore[attr-defined]
        isolated = guard.run(argv, cwd=isolated_work, timeout=RUN_TIMEOUT)  # type: ignore[attr-defined]
    figures["isolated_s"] = round(time.monotonic() - started, 3)
    figures["lifetime_move_s"] = [p.figures.get("move_s") for p in (control_phase, isolated_phase)]
    return Runs(
        control_log=_route_log(control_work),
        isolated_log=_route_log(isolated_work),
        control_records=control_records + control_extra,
        isolated_records=guard.records()[len(control_records):] + isolated_phase.records(),  # type: ignore[attr-defined]
        changed=diff_digests(before, tree_digest(*roots))
        + [f"{isolated_work / name}: left in the work dir" for name in LATER_RUN_FILES
           if os.path.lexists(isolated_work / name)],
        isolated_exit=isolated.returncode,
        isolated_stderr=isolated.stderr.decode(errors="replace"),
        lifetime_problems=control_phase.problems + isolated_phase.problems,
        lifetime_unarmed=dict(harness.unarmed),  # type: ignore[attr-defined]
        cannot=cannot,
    )


def lifetime_incomplete(declared: Sequence, unarmed: Mapping[str, str], problems: Sequence[str]) -> list[str]:
    """Why the lifetime routes prove nothing here: a declared one the harness could not arm (the
    payload then says ``unavailable``, which must not pass as a route this machine lacks), or a
    phase the harness could not play out."""
    ids = {route.id for route in declared}
    out = [f"the lifetime harness could not arm {route}: {why}"
           for route, why in unarmed.items() if route in ids]
    return out + list(problems)


def table_rows(declared: Sequence, runs: Runs, route_of: Callable[[Mapping], str | None]) -> list[Row]:
    rows = []
    for route in declared:
        if route.kind == "network":
            rows.append(network_row(
                route.id,
                runs.control_log, evidence(route.id, route.description, runs.control_records, route_of),
                runs.isolated_log, evidence(route.id, route.description, runs.isolated_records, route_of),
                tried=route.description, cannot=runs.cannot.get(route.id)))
        else:
            rows.append(persistence_row(route.id, runs.control_log, runs.isolated_log, runs.changed,
                                        tried=route.description))
    return rows


def prove(say: Callable[..., None] = lambda text, **kw: None) -> tuple[list[Row], Verdict, dict]:
    """Run the whole proof; returns the rows, the verdict and the figures. SAY gets the
    progress: stages, and each route as the mutant tries it (``transient=True``)."""
    import importlib.util

    figures: dict[str, object] = {}
    blocking = [f"{tool} is missing (make setup installs it)"
                for tool in ("unshare", "nsenter", "bwrap") if shutil.which(tool) is None]
    # `no-docker mutants apply` parses the payload with tree-sitter: without it no mutant is made.
    blocking += [f"the Python module {name} is missing (pip install -e . installs it)"
                 for name in ("tree_sitter", "tree_sitter_bash") if importlib.util.find_spec(name) is None]
    # Without the docker CLI its routes are `unavailable`: the proof still runs, but is incomplete.
    incomplete = [] if shutil.which("docker") else ["no docker CLI: its routes could not be tried"]
    try:
        from no_docker.canary.records import route_of as canary_route_of
        from no_docker.canary.sniff import client_hello_sni
        from no_docker.mutants import pins, routes

        from . import lifetime
        from .outer_guard import GuardError, OuterGuard
    except ImportError as err:
        blocking.append(f"a part of no-docker is missing: {err}")
    if blocking:
        return [], verdict([], blocking + incomplete), figures
    payload = _payload()
    try:
        pins.verify_copy(payload, PAYLOAD_NAME)
    except Exception as err:  # any mismatch or read error refuses the payload: never run it
        return [], verdict([], [f"the payload does not match its pin: {err}"]), figures
    declared = routes.declared_routes(payload)
    say("no-docker: starting the outer guard: the canary on every engine path, in a private namespace")
    with tempfile.TemporaryDirectory(prefix="no-docker-prove-") as tmp:
        base = Path(tmp)
        started = time.monotonic()
        try:
            scratch = lifetime.scratch_dirs()
            with OuterGuard(base / "canary.jsonl", share=[base], scratch=scratch) as guard:
                figures["guard_setup_s"] = round(time.monotonic() - started, 3)
                say(f"no-docker: outer guard up: the canary (pid {guard.canary_pid}) "
                    f"alone answers on {len(guard.listeners)} listeners")
                runs = run_both(guard, base, payload, figures, lifetime.Harness(guard, base, scratch),
                                declared, say)
        except GuardError as err:
            return [], verdict([], [f"the outer guard could not be set up: {err}"]), figures
        except NoDockerError as err:  # the mutant could not be made: nothing was proven
            return [], verdict([], [str(err)]), figures
    say(f"no-docker: the isolated run is done: exit {runs.isolated_exit}, "
        f"{len(runs.isolated_records)} canary records")
    incomplete += lifetime_incomplete(declared, runs.lifetime_unarmed, runs.lifetime_problems)
    if refused_to_start(runs.isolated_exit, runs.isolated_stderr):
        last = runs.isolated_stderr.strip().splitlines()
        incomplete.append("no-docker run refused to start (125): " + (last[-1] if last else ""))
    rows = table_rows(declared, runs, lambda record: record_route(record, canary_route_of, client_hello_sni))
    figures.update(routes=len(declared), control_records=len(runs.control_records),
                   isolated_records=len(runs.isolated_records), files_changed=runs.changed,
                   unavailable_here=runs.cannot)
    return rows, verdict(rows, incomplete, extra_records=len(runs.isolated_records)), figures


USAGE = "usage: no-docker prove [--real-engine] [--json]"

HELP = f"""{USAGE}

Show, on this machine, that a mutant that tries every known route to a container engine
reaches one without no-docker and none under `no-docker run`.

A fake engine (the canary) answers on the real engine paths (/var/run/docker.sock,
/run/containerd/containerd.sock, 127.0.0.1:2375, ...) inside a private mount and network
namespace that hides this machine's real engines: nothing here can reach a real engine. The
pinned read-only mutant (mutants/payloads/reach-engine.sh, checked against its pin first) then
runs twice: without isolation, where every available network route must reach the canary,
and under `no-docker run`, where none may, and files that run later ($HOME start-up files,
.git hooks and config, autostart, systemd user units, crontab) must stay unchanged outside,
and what the next pytest would read from the work dir (a pytest.py, a pytest.ini, a
subdirectory's pyproject.toml) must be moved aside when the run ends (exit 125, undone).
During each run an engine in /srv restarts and new ones start (in /srv and in a directory of
the work dir made during the run): the lifetime routes must reach them only without isolation.

The first run is the control: it shows that each route really reaches an engine here, so that
"did not reach it" under `no-docker run` means the isolation stopped it.

Prints progress on stderr (each stage and route; one updating line on a terminal), then on
stdout a legend, a table (route, kind, without isolation (the control), under no-docker run,
what the mutant tried), numbered notes with every reason in full, and one verdict line that
counts every row. A route the control cannot take on this machine (its tool not installed,
sudo without rights, no /usr/bin/docker) is "unavailable here": counted, neither a pass nor a
failure. Needs: bubblewrap, unshare and nsenter (util-linux); the docker CLI for its routes.
Root or unprivileged user namespaces. Takes about 10 s.

options:
  --real-engine  the same claim against a real engine: a throwaway Podman API service
                 (apt-get install podman; root) in the outer guard, destructive docker CLI
                 mutants (rm -f, rmi -f, volume rm -f) per route; see docs/canary.md
  --json         the rows (every reason in full), the verdict and the timings as one JSON
                 object on stdout
  -h, --help     this help

examples:
  no-docker prove                 what `make prove` runs
  no-docker prove --json | jq .verdict

exit status:
  0    PROVEN: the control reached every network route it can take here, the isolated run
       none, and no file outside changed
  1    FAILED: the isolated run reached the canary or changed a file (or the control missed
       an available route: the proof shows nothing)
  125  INCOMPLETE: a part could not run (a tool missing, the run refused to start); a part
       that did not run never counts as proven
  2    usage"""


def main(argv: list[str]) -> int:
    if any(arg in ("-h", "--help") for arg in argv):
        print(HELP)
        return 0
    unknown = [arg for arg in argv if arg not in ("--json", "--real-engine")]
    if unknown:
        raise UsageError(f"prove: unknown argument {unknown[0]!r}; {USAGE}")
    if "--real-engine" in argv:
        from .real_engine import cli

        return cli("--json" in argv)
    progress = Progress()
    try:
        rows, result, figures = prove(progress)
    finally:
        progress.close()
    if "--json" in argv:
        # Every text in full: the rows' words and reasons are never cut (a reader's tool does that).
        print(json.dumps({"rows": [dataclasses.asdict(r) for r in rows], "status": result.status,
                          "verdict": result.line, "figures": figures}, indent=1))
    else:
        if rows:
            print(LEGEND)
            print()
            print(render_table(rows))
            print()
        print(result.line)
    return result.exit_status
