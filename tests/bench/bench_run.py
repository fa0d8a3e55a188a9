"""Start-up cost of ``no-docker run -- true`` next to its peers, wall and CPU (issue 14 item 3).

Every command runs once per round, rounds interleaved (the order rotates each round, so load on
this shared machine and cache effects hit all alike), after warm-up rounds. For each run: the
wall time from ``posix_spawn`` until ``wait4`` returned, and the CPU time (user + sys) of the
whole process tree, from the rusage ``wait4`` returns (the child and every descendant it
reaped). The bench is a child subreaper, so a descendant that outlives its parent is reaped
here and its CPU added to the run (and counted: ``orphans_reaped``). Not counted by anyone:
kernel workers acting for a run after it is gone (e.g. a network namespace's teardown).
stdin and stdout are /dev/null. Commands:

* ``no_docker``            ``no-docker run --quiet -- true`` from a **regular (non-editable)
                           install**: the console script of a venv holding the wheel of this
                           tree (tests/bench/regular_install.py; cached by content hash), started
                           with ``site`` as users get it; checked to load no editable finder and
                           no coverage hook;
* ``no_docker_direct``     the same run started as ``python -I -S`` with the package on sys.path
                           (no ``site`` at all: below what any install gets);
* ``no_docker_editable``   (``--editable``) the repo ``.venv``'s console script: setuptools'
                           editable finder and coverage's ``.pth`` hook at every start;
* ``bwrap_same_flags``     bare bwrap with the argv no-docker builds, ``true`` instead of the
                           probe (the floor);
* ``unshare``              ``unshare -n -p -f true`` (``-r`` added for an ordinary user);
* ``firejail``             ``firejail --quiet --noprofile --net=none true``;
* ``python_spawns_bwrap``  the regular install's interpreter, ``-I -S``, doing nothing but
                           ``posix_spawn`` of the bare bwrap above and ``waitpid``: the floor of
                           any supervisor that is a CPython process started for each run;
* ``no_docker_warm``       the same run as ``no_docker``, started in-process
                           (``run.main``) by one long-lived helper of the regular install that
                           has already made a run: no interpreter start and no import. Its CPU is
                           the helper's own (every thread) plus its children's, read with
                           ``getrusage`` around the call, plus what the run left to the bench
                           (bwrap's init, reaped here); its wall is the call's.

The last two are not targets: they say where a figure lies between the floor of a per-run
CPython process and the proof's own work (docs/performance.md, "Start-up, fifth pass").

stdout: one JSON document (medians, min/max, ratios to firejail and to bare bwrap, and the
``targets`` of issue 14: wall <= 30 ms, wall < firejail, CPU <= 1.5 x firejail; of issue 26: CPU
<= 4 x firejail, wall <= 6 x bare bwrap; each ``met``).
stderr: the same as a short Markdown table (``--markdown FILE`` writes it there too). Exit 1
when a command failed (its error is in the document), else 0: a slow machine fails nothing.

Usage: python tests/bench/bench_run.py [--runs N] [--warmup N] [--editable] [--cache-dir DIR]
                                       [--markdown FILE]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import regular_install  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NAMES = ("no_docker", "no_docker_direct", "no_docker_editable", "bwrap_same_flags", "unshare", "firejail",
         "python_spawns_bwrap", "no_docker_warm")
OURS = ("no_docker", "no_docker_direct", "no_docker_editable")
REFERENCES = ("firejail", "bwrap_same_flags")
# An ordinary user may make a network and pid namespace only inside a user namespace of its own
# (unshare -n as uid 1001: EPERM), so the peer maps it to root there, as bwrap does for it.
UNSHARE_ARGV = ["unshare", *(["-r"] if os.geteuid() != 0 else []), "-n", "-p", "-f", "true"]
LABELS = {
    "no_docker": "`no-docker run -- true`, regular install",
    "no_docker_direct": "same, `python -I -S` (no site)",
    "no_docker_editable": "same, editable .venv",
    "bwrap_same_flags": "bare bwrap, same flags (floor)",
    "unshare": f"`{' '.join(UNSHARE_ARGV)}`",
    "firejail": "`firejail --quiet --noprofile --net=none true`",
    "python_spawns_bwrap": "CPython only spawning that bare bwrap (per-run floor)",
    "no_docker_warm": "the run from a warm process (no start, no imports)",
}
# The in-process runs of ``no_docker_warm``: one helper of the regular install, asked for a run
# per line on the fd named by its first argument, answering on its second's with the run's exit
# status, wall, own CPU, children's CPU, user and sys, in ms.
WARM_HELPER = """
import os, resource, sys, time
from no_docker.supervisor.run import main

asked, answer = int(sys.argv[1]), int(sys.argv[2])

def cpu(usage):
    return (usage.ru_utime + usage.ru_stime) * 1000

while os.read(asked, 16):
    s0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = main(["--quiet", "--", "true"])
    wall = (time.perf_counter() - t0) * 1000
    s1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    user = (s1.ru_utime - s0.ru_utime + c1.ru_utime - c0.ru_utime) * 1000
    system = (s1.ru_stime - s0.ru_stime + c1.ru_stime - c0.ru_stime) * 1000
    os.write(answer, b"%d %.4f %.4f %.4f %.4f %.4f\\n" % (code, wall, cpu(s1) - cpu(s0), cpu(c1) - cpu(c0),
                                                        user, system))
"""
SPAWN_AND_WAIT = "import os, sys; os.waitpid(os.posix_spawn(sys.argv[1], sys.argv[1:], {}), 0)"
TARGET_ORDER = ("wall_at_most_30_ms", "wall_below_firejail", "cpu_at_most_1_5x_firejail",
                "cpu_at_most_4x_firejail", "wall_at_most_6x_bwrap")
WALL_MAX_MS = 30.0
CPU_MAX_FIREJAIL = 1.5
CPU_MAX_FIREJAIL_26 = 4.0  # issue 26 item 3: CPU per run <= 4x firejail's
WALL_MAX_BWRAP_26 = 6.0  # issue 26 item 3: wall <= 6x bare bwrap's (the same sandbox shape)
PR_SET_CHILD_SUBREAPER = 36
SAMPLED = ("wall", "cpu", "user", "sys", "orphan_cpu")


# --- pure parts (tests/unit/test_bench_run.py) ------------------------------------------------


def cpu_ms(usage: object) -> tuple[float, float]:
    """(user, sys) in ms of an rusage (``os.wait4``'s or ``resource.getrusage``'s)."""
    return usage.ru_utime * 1000, usage.ru_stime * 1000  # type: ignore[attr-defined]


def cpu_delta_ms(before: object, after: object) -> float:
    """user + sys in ms between two ``getrusage(RUSAGE_CHILDREN)`` readings (never negative:
    the counters only grow, a negative difference means the readings were swapped)."""
    (u0, s0), (u1, s1) = cpu_ms(before), cpu_ms(after)
    delta = (u1 - u0) + (s1 - s0)
    if delta < 0:
        raise ValueError(f"rusage went backwards ({delta:.3f} ms): readings swapped?")
    return delta


def parse_warm_answer(line: bytes) -> dict[str, float]:
    """One answer of the warm helper (``WARM_HELPER``): ``code wall self children user sys``, in
    ms. ValueError, naming the line, when it is not six numbers or the run did not exit 0."""
    fields = line.split()
    try:
        code, wall, own, children, user, system = int(fields[0]), *map(float, fields[1:])
    except (ValueError, IndexError, TypeError):
        raise ValueError(f"the warm helper answered {line[:200]!r}, not six numbers") from None
    if code != 0:
        raise ValueError(f"the warm helper's run exited {code}")
    if min(wall, own, children) < 0:
        raise ValueError(f"the warm helper answered a negative time: {line[:200]!r}")
    return {"wall": wall, "cpu": own + children, "user": user, "sys": system, "orphan_cpu": 0.0,
            "orphans": 0}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "n": len(values)}


def ratios(medians: dict[str, float], references: tuple[str, ...] = REFERENCES) -> dict[str, float]:
    """``"a/ref": median_a / median_ref`` for every command a and every reference measured."""
    return {f"{name}/{ref}": round(medians[name] / medians[ref], 2)
            for ref in references if medians.get(ref, 0) > 0
            for name in medians if name != ref}


def targets(wall: dict[str, float], cpu: dict[str, float], unmeasured: dict[str, str]) -> dict[str, dict]:
    """Issue 14 item 3 on the medians: ``value``, ``goal`` and ``met`` (None, with ``why``, where
    a figure is missing). ``unmeasured`` names why a command has no figure."""
    def why(*names: str) -> str | None:
        gone = [f"{n}: {unmeasured.get(n, 'not measured')}" for n in names if n not in wall or n not in cpu]
        return "; ".join(gone) or None

    ours_w, ours_c = wall.get("no_docker"), cpu.get("no_docker")
    fire_w, fire_c = wall.get("firejail"), cpu.get("firejail")
    bwrap_w = wall.get("bwrap_same_flags")
    rows = {
        "wall_at_most_30_ms": {
            "goal": f"no-docker run -- true, wall median <= {WALL_MAX_MS:g} ms", "unit": "ms",
            "value": ours_w, "met": None if ours_w is None else ours_w <= WALL_MAX_MS,
            "why": why("no_docker")},
        "wall_below_firejail": {
            "goal": "wall median < firejail's (ratio < 1)", "unit": "x firejail",
            "value": None if ours_w is None or not fire_w else round(ours_w / fire_w, 2),
            "met": None if ours_w is None or not fire_w else ours_w < fire_w,
            "why": why("no_docker", "firejail")},
        "cpu_at_most_1_5x_firejail": {
            "goal": f"CPU median (user+sys of the tree) <= {CPU_MAX_FIREJAIL:g} x firejail's",
            "unit": "x firejail",
            "value": None if ours_c is None or not fire_c else round(ours_c / fire_c, 2),
            "met": None if ours_c is None or not fire_c else ours_c <= CPU_MAX_FIREJAIL * fire_c,
            "why": why("no_docker", "firejail")},
        "cpu_at_most_4x_firejail": {
            "goal": f"CPU median <= {CPU_MAX_FIREJAIL_26:g} x firejail's (issue 26)", "unit": "x firejail",
            "value": None if ours_c is None or not fire_c else round(ours_c / fire_c, 2),
            "met": None if ours_c is None or not fire_c else ours_c <= CPU_MAX_FIREJAIL_26 * fire_c,
            "why": why("no_docker", "firejail")},
        "wall_at_most_6x_bwrap": {
            "goal": f"wall median <= {WALL_MAX_BWRAP_26:g} x bare bwrap's (issue 26)", "unit": "x bwrap",
            "value": None if ours_w is None or not bwrap_w else round(ours_w / bwrap_w, 2),
            "met": None if ours_w is None or not bwrap_w else ours_w <= WALL_MAX_BWRAP_26 * bwrap_w,
            "why": why("no_docker", "bwrap_same_flags")},
    }
    for row in rows.values():
        if row["met"] is not None:
            del row["why"]
    return rows


def unmeasured(doc: dict) -> dict[str, str]:
    """Why each command of DOC has no figure: absent, or failed (a list of names in documents
    of the first version of this bench)."""
    out: dict[str, str] = {}
    for key in ("missing", "errors"):
        found = doc.get(key) or {}
        out.update(found if isinstance(found, dict) else dict.fromkeys(found, "absent"))
    return out


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def markdown(doc: dict) -> str:
    """The table the closing note pastes: medians, ratios, targets."""
    wall, cpu = doc.get("median_ms", {}), doc.get("cpu_median_ms", {})
    rw, rc = doc.get("ratios", {}).get("wall") or {}, doc.get("ratios", {}).get("cpu") or {}
    load = f"load {doc.get('load_average_start', '-')} -> {doc.get('load_average', '-')}"
    lines = [f"`no-docker run -- true` start-up: {doc.get('runs')} interleaved rounds, medians "
             f"({doc.get('cpus')} CPUs, {load})",
             "",
             "| command | wall ms | CPU ms (user+sys) | wall / firejail | CPU / firejail "
             "| wall / bwrap | CPU / bwrap |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in NAMES:
        if name in wall or name in cpu:
            cells = [LABELS[name], _ms(wall.get(name)), _ms(cpu.get(name))]
            cells += [_x(r.get(f"{name}/{ref}")) for ref in REFERENCES for r in (rw, rc)]
            lines.append("| " + " | ".join(cells) + " |")
    for name, reason in unmeasured(doc).items():
        lines.append(f"| {LABELS.get(name, name)} | not measured: {reason.splitlines()[0][:120]} | | | | | |")
    lines += ["", "| target | value | met |", "|---|---:|---|"]
    rows = doc.get("targets") or {}
    for row in (rows[key] for key in TARGET_ORDER if key in rows):  # the JSON's keys come back sorted
        value = "-" if row["value"] is None else f"{row['value']} {row['unit']}"
        met = {True: "yes", False: "**no**", None: f"not measured ({row.get('why')})"}[row["met"]]
        lines.append(f"| {row['goal']} | {value} | {met} |")
    return "\n".join(lines) + "\n"


# --- the commands -----------------------------------------------------------------------------


def package_farm(into: Path) -> Path:
    """A directory with ``no_docker/`` -> the repo's parts, for ``python -I -S`` runs."""
    pkg = into / "no_docker"
    pkg.mkdir(parents=True)
    for part in regular_install.PACKAGE_PARTS:
        if (REPO / part).is_dir():
            (pkg / part).symlink_to(REPO / part)
    return into


def bare_bwrap_argv(work: Path) -> list[str]:
    """The argv no-docker would run, with ``true`` in place of the gate and no extra fds."""
    from no_docker.supervisor.isolation import listing, plan, policy

    request = plan.Request(command=("true",), work=str(work))
    built = plan.build_policy(request, listing.collect(), dict(os.environ),
                              probe_source=plan.probe_source_path())
    argv = policy.bwrap_argv(built, ["true"], bwrap=shutil.which("bwrap") or "bwrap", data_fd=0, block_fd=0)
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--ro-bind-data":  # needs a data fd; the plan file is no-docker's own cost
            i += 3
            continue
        if argv[i] == "--block-fd":  # the hold for the proof is no-docker's own cost too
            i += 2
            continue
        if argv[i] == "--":
            break
        out.append(argv[i])
        i += 1
    return [*out, "--", shutil.which("true") or "/bin/true"]


def commands(work: Path, farm: Path, installed: dict | None, editable: bool
             ) -> tuple[dict[str, list[str]], dict[str, str], dict[str, str]]:
    """(argv by name, why a command is absent, why a command could not be set up)."""
    cmds: dict[str, list[str]] = {}
    missing: dict[str, str] = {}
    errors: dict[str, str] = {}
    if installed is not None:
        cmds["no_docker"] = [installed["script"], "run", "--quiet", "--", "true"]
    direct = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
              "from no_docker.supervisor.cli import console_main; console_main()")
    cmds["no_docker_direct"] = [sys.executable, "-I", "-S", "-c", direct, str(farm), "run", "--quiet", "--",
                                "true"]
    if editable:
        script = Path(sys.executable).with_name("no-docker")
        if script.exists():
            cmds["no_docker_editable"] = [str(script), "run", "--quiet", "--", "true"]
        else:
            missing["no_docker_editable"] = f"{script} missing (make setup)"
    if shutil.which("bwrap"):
        try:
            cmds["bwrap_same_flags"] = bare_bwrap_argv(work)
        except Exception as err:  # the plan API moves with the run path; the rest still measures
            errors["bwrap_same_flags"] = f"no-docker's bwrap argv: {type(err).__name__}: {err}"
    else:
        missing["bwrap_same_flags"] = "bubblewrap not installed (apt-get install bubblewrap)"
    if "bwrap_same_flags" in cmds:
        python = installed["python"] if installed is not None else sys.executable
        cmds["python_spawns_bwrap"] = [python, "-I", "-S", "-c", SPAWN_AND_WAIT, *cmds["bwrap_same_flags"]]
    else:
        missing["python_spawns_bwrap"] = "no bare bwrap argv to spawn"
    if installed is not None:
        cmds["no_docker_warm"] = [installed["python"], "-c", WARM_HELPER]  # started once (WarmHelper)
    else:
        missing["no_docker_warm"] = "no regular install"
    for name, package, argv in (("unshare", "util-linux", UNSHARE_ARGV),
                                ("firejail", "firejail", ["firejail", "--quiet", "--noprofile", "--net=none",
                                                          "true"])):
        path = shutil.which(argv[0])
        if path:
            cmds[name] = [path, *argv[1:]]
        else:
            missing[name] = f"{argv[0]} not installed (apt-get install {package})"
    return cmds, missing, errors


# --- measuring --------------------------------------------------------------------------------


def set_subreaper(on: bool = True) -> bool:
    """Become (or stop being) a child subreaper; False where the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


# Children of ours that are no run's orphans (the warm helper): neither waited for nor reaped here.
KEPT_CHILDREN: set[int] = set()


def our_children() -> set[int]:
    """Every child of this process, from each of its threads' /proc children list."""
    kids: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                kids.update(int(p) for p in f.read().split())
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return kids


def reap_orphans(grace_s: float) -> tuple[int, float, int]:
    """Reap the descendants re-parented to us (their parent exited without reaping them), waiting
    up to GRACE_S for those still running: (reaped, their CPU ms, still running). When the run's
    own process has been reaped, every orphan of its tree is already our child. A child in
    KEPT_CHILDREN is ours by design, not an orphan: it is waited on by pid only, never here (a
    ``wait4(-1)`` would reap it, dead, and charge its whole life to the run at hand)."""
    reaped, cpu = 0, 0.0
    deadline = time.monotonic() + grace_s
    while True:
        running = our_children() - KEPT_CHILDREN
        if not running:
            return reaped, cpu, 0
        for pid in list(running):
            try:
                got, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # reaped meanwhile by whoever waited on it by pid
                running.discard(pid)
                continue
            if got:
                reaped += 1
                cpu += sum(cpu_ms(usage))
                running.discard(pid)
        if running and time.monotonic() > deadline:
            return reaped, cpu, len(running)
        if running:
            time.sleep(0.0005)


def stderr_tail(err_fd: int) -> str:
    """The last of what was written to ERR_FD (a command's or the warm helper's stderr)."""
    return os.pread(err_fd, 4096, 0).decode(errors="replace")[-300:]


def run_once(argv: list[str], err_fd: int) -> dict[str, float]:
    """Wall and CPU (user, sys) of one run; RuntimeError if it did not exit 0."""
    os.ftruncate(err_fd, 0)
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_DUP2, err_fd, 2)]
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter() - started) * 1000
    user, system = cpu_ms(usage)
    orphans, orphan_cpu, _ = reap_orphans(grace_s=2.0)
    if os.waitstatus_to_exitcode(status) != 0:
        tail = stderr_tail(err_fd)
        raise RuntimeError(f"{' '.join(argv[:3])}... exited {os.waitstatus_to_exitcode(status)}: {tail}")
    return {"wall": wall, "cpu": user + system + orphan_cpu, "user": user, "sys": system,
            "orphan_cpu": orphan_cpu, "orphans": orphans}


class WarmHelper:
    """The long-lived process behind ``no_docker_warm``: started once, asked for one in-process
    run at a time, ended (and reaped) by ``close``, on every path out of ``measure``. A run of
    it leaves what the run's own process does not reap (bwrap's init, where the run has a
    cgroup and so is no subreaper: ending/lifecycle.py) to the nearest subreaper above, this
    bench: ``run_once`` reaps and counts those, as ``run_once`` of a command does."""

    ANSWER_TIMEOUT = 120.0  # one run, ended and proven: seconds even on a loaded machine
    CLOSE_GRACE = 10.0  # from EOF on its requests until it is killed

    def __init__(self, argv: list[str], err_fd: int) -> None:
        self._err_fd = err_fd
        self._closed = False
        self._to_r, self._to_w = os.pipe()
        self._from_r, self._from_w = os.pipe()
        try:
            with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
                self.proc = subprocess.Popen([*argv, str(self._to_r), str(self._from_w)], stdin=null_in,
                                             stdout=null_out, stderr=err_fd,
                                             pass_fds=(self._to_r, self._from_w))
        except BaseException:
            for fd in (self._to_r, self._to_w, self._from_r, self._from_w):
                os.close(fd)
            raise
        KEPT_CHILDREN.add(self.proc.pid)
        os.close(self._to_r)
        os.close(self._from_w)

    def _status(self) -> str:
        try:
            return str(self.proc.wait(self.CLOSE_GRACE))
        except subprocess.TimeoutExpired:  # it closed its answers and lives on: close() ends it
            return "still running"

    def run_once(self) -> dict[str, float]:
        answer = b""
        try:
            os.write(self._to_w, b"go\n")
            deadline = time.monotonic() + self.ANSWER_TIMEOUT
            while not answer.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._from_r], [], [], left)[0]:
                    raise RuntimeError(f"the warm helper gave no answer within {self.ANSWER_TIMEOUT:g} s: "
                                       f"{stderr_tail(self._err_fd)}")
                chunk = os.read(self._from_r, 4096)
                if not chunk:
                    raise BrokenPipeError
                answer += chunk
        except BrokenPipeError:  # gone before or while it was asked (EPIPE on the write, or EOF)
            raise RuntimeError(f"the warm helper ended (status {self._status()}) without an answer: "
                               f"{stderr_tail(self._err_fd)}") from None
        # The run's init, left to us: reaped before anything else, even when the answer is bad,
        # or it would be the next command's orphan.
        orphans, orphan_cpu, _ = reap_orphans(grace_s=2.0)
        try:
            got = parse_warm_answer(answer)
        except ValueError as err:
            raise RuntimeError(f"{err}: {stderr_tail(self._err_fd)}") from None
        got["cpu"] += orphan_cpu
        got["orphan_cpu"], got["orphans"] = orphan_cpu, orphans
        os.ftruncate(self._err_fd, 0)  # what it said of a good run is not the next one's error
        return got

    def close(self) -> None:
        """End the helper (EOF on its requests; killed if it does not go within CLOSE_GRACE, or if
        anything interrupts the wait) and reap it. Once; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        os.close(self._to_w)
        try:
            self.proc.wait(self.CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        except BaseException:  # interrupted: killed and reaped all the same, then on it goes
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            KEPT_CHILDREN.discard(self.proc.pid)
            os.close(self._from_r)


def measure(cmds: dict[str, list[str]], runs: int, warmup: int, errors: dict[str, str]
            ) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    names = list(cmds)
    samples = {name: {key: [] for key in SAMPLED} for name in names}
    orphans = dict.fromkeys(names, 0)
    with tempfile.TemporaryDirectory(prefix="bench-run-stderr-") as tmp:
        # O_APPEND: the child's writes land after the truncation, not at a stale shared offset
        fd = os.open(os.path.join(tmp, "stderr"), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        warm: WarmHelper | None = None
        try:
            if "no_docker_warm" in cmds and "no_docker_warm" not in errors:
                try:
                    warm = WarmHelper(cmds["no_docker_warm"], fd)
                    warm.run_once()  # its first run imports what the run path imports lazily
                except (RuntimeError, OSError) as failure:
                    errors["no_docker_warm"] = str(failure)
            for round_ in range(warmup + runs):
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    if name in errors:
                        continue
                    try:
                        warm_run = name == "no_docker_warm" and warm is not None
                        got = warm.run_once() if warm_run else run_once(cmds[name], fd)  # type: ignore[union-attr]
                    except (RuntimeError, OSError) as failure:
                        errors[name] = str(failure)
                        continue
                    if round_ >= warmup:
                        orphans[name] += int(got["orphans"])  # of the measured runs, as the rest
                        for key in SAMPLED:
                            samples[name][key].append(got[key])
        finally:
            if warm is not None:
                warm.close()
            os.close(fd)
    return samples, orphans


def collect(runs: int, warmup: int, editable: bool, cache_dir: Path | None) -> dict:
    load_start = round(os.getloadavg()[0], 2)
    subreaper = set_subreaper(True)
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        installed: dict | None = None
        try:
            installed = regular_install.ensure(REPO, cache_dir)
            report = regular_install.inspect(installed["python"], work)
            installed["problems"] = regular_install.problems(report, os.path.realpath(installed["venv"]))
            installed["modules_at_start"] = len(report.get("modules_at_start", []))
            installed["pth_files"] = report.get("pth_files")
            if installed["problems"]:
                errors["no_docker"] = "the regular install is not clean: " + "; ".join(installed["problems"])
        except (RuntimeError, OSError, StopIteration) as err:
            errors["no_docker"] = f"no regular install: {err}"
        cmds, missing, setup_errors = commands(work, package_farm(Path(tmp) / "farm"),
                                               None if "no_docker" in errors else installed, editable)
        errors.update(setup_errors)
        state = os.environ.get("NO_DOCKER_STATE_DIR")
        if state is None:  # standalone: the runs' markers stay out of the machine's state dir
            os.environ["NO_DOCKER_STATE_DIR"] = str(Path(tmp) / "state")
            os.mkdir(os.environ["NO_DOCKER_STATE_DIR"], 0o700)
        cwd = os.getcwd()
        os.chdir(work)  # posix_spawn has no cwd; the runs start in an empty work dir
        try:
            samples, orphans = measure(cmds, runs, warmup, errors)
            left_running = reap_orphans(grace_s=2.0)[2]
        finally:
            os.chdir(cwd)
            if state is None:
                del os.environ["NO_DOCKER_STATE_DIR"]
    measured = {n: s for n, s in samples.items() if s["wall"] and n not in errors}

    def medians(key: str) -> dict[str, float]:
        return {n: round(statistics.median(s[key]), 2) for n, s in measured.items()}

    wall, cpu = medians("wall"), medians("cpu")
    unmeasured = {**missing, **errors}
    return {
        "bench": "startup", "runs": runs, "warmup": warmup,
        "commands": {n: {"label": LABELS[n], "argv": argv} for n, argv in cmds.items()},
        "median_ms": wall, "cpu_median_ms": cpu,
        "wall_ms": {n: summary(s["wall"]) for n, s in measured.items()},
        "cpu_ms": {n: summary(s["cpu"]) for n, s in measured.items()},
        "cpu_user_median_ms": medians("user"), "cpu_sys_median_ms": medians("sys"),
        "cpu_orphans_median_ms": medians("orphan_cpu"),
        "ratios": {"wall": ratios(wall), "cpu": ratios(cpu)},
        "targets": targets(wall, cpu, unmeasured),
        "missing": missing, "errors": errors,
        "regular_install": installed,
        "orphans_reaped": orphans, "orphans_left_running": left_running, "subreaper": subreaper,
        "cpu_accounting": "user+sys of the spawned process and every descendant reaped in its tree "
                          "(wait4 rusage), plus orphans re-parented to the bench (a subreaper); "
                          "kernel workers acting after the run (e.g. netns teardown) are in no one's",
        "load_average_start": load_start, "load_average": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="measured rounds (default 40, ~10 s)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--editable", action="store_true", help="also time the repo .venv's editable install")
    parser.add_argument("--cache-dir", type=Path, help="where the regular-install venvs are cached "
                        f"(default {regular_install.default_cache_root()})")
    parser.add_argument("--markdown", type=Path, help="also write the Markdown table to FILE")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error(f"--runs must be >= 1 and --warmup >= 0, got --runs {args.runs} --warmup {args.warmup}")
    doc = collect(args.runs, args.warmup, args.editable, args.cache_dir)
    table = markdown(doc)
    sys.stderr.write(table)
    if args.markdown is not None:
        args.markdown.write_text(table)
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
