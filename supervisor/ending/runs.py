"""``no-docker runs [--json]``: the runs on this machine (under the state dir) and what each is
doing: state, members, CPU time, memory (RSS), age, work dir, command.

The members are found by one pass of the ending's own scan (``snapshot.take_pass``), which
signals nothing; while a run's init is alive the count is a lower bound (members can fork during
the pass), exact once the init is dead. CPU and memory of those members come from psutil: this
listing is for people and may take its time. The proof scan that ends a run stays on raw /proc
(``procfs``, ``membership``): psutil costs 35-45 us per process there against 5-6 us for the
raw reads (measured, docs/supervision.md), and the proof needs pid + start time read around
each marker, which psutil's per-call reads do not give.

A run whose supervisor is gone is *stale*; the listing says so and what ``no-docker end`` will
do with it (kill the members left and prove them gone, or only remove the marker).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from ..errors import UsageError
from . import markers
from .membership import LiveTable
from .procfs import ProcFS, ProcfsError
from .snapshot import Identity, Verdict, take_pass, verdict

DESCRIPTION = """\
List the runs on this machine (the markers in the state dir) and what each is doing. Every run
that is not simply running gets a second line: what `no-docker end` will do with it. Nothing is
signalled: the members are found by one pass of the ending's own scan.

columns:
  RUN_ID   the run's id: what `no-docker end RUN_ID` takes
  STATUS   running   its supervisor is alive
           stale     its supervisor is gone (killed): processes of the run may be left, and
                     new runs refuse to start until `no-docker end` ends it
           unended   its supervisor could not show the ending (it exited 125 and printed
                     `no-docker end RUN_ID`)
           rebooted  from an earlier boot: nothing of it is left
           elsewhere started in another pid namespace (a state dir shared with a container)
           corrupt   its marker cannot be read
           left      it was refused for code it left to run later and could NOT undo it:
                     runs there refuse until `no-docker end RUN_ID` (after you have looked)
  MEMBERS  processes of the run seen now (? when that cannot be told; a lower bound while
           the run's init lives)
  CPU      CPU time (user + system) of those processes; RSS their resident memory
  AGE      since the run started; WORK its work dir; COMMAND what it runs"""

EPILOG = """\
examples:
  no-docker runs                      the table (nothing printed but "no runs" when there are none)
  no-docker runs --json | python3 -m json.tool

exit status: 0 listed (also when there are none); 125 the state dir cannot be trusted (the
line says why); 2 usage."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"runs: {message}")


def members_of(record: markers.RunRecord, procfs: ProcFS) -> list[Identity] | None:
    """Members seen by one non-killing pass; None when it cannot be told."""
    from .lifecycle import target_of

    target = target_of(record)
    if target.ns is None:
        if target.cgroup is not None and target.cgroup.path is not None:
            # every cgroup below the leaf too
            return [Identity(pid, 0) for pid in target.cgroup.tree_procs()]
        return [] if record.state == markers.CREATED else None
    try:
        result = verdict(take_pass(LiveTable(procfs, target.ns)), run_can_fork=True)
    except ProcfsError:
        return None
    if result.unknown and result.verdict != Verdict.MEMBERS:
        return None
    return list(result.members)


def usage_of(members: list[Identity]) -> tuple[float, int]:
    """(CPU seconds, RSS bytes) summed over MEMBERS, each checked by its start time (psutil's
    own create_time is in seconds; a pid reused since the pass is skipped by its ppid-free
    identity check: same pid, process still running, read once)."""
    import psutil

    cpu, rss = 0.0, 0
    for member in members:
        try:
            proc = psutil.Process(member.pid)
            with proc.oneshot():
                times = proc.cpu_times()
                cpu += times.user + times.system
                rss += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return cpu, rss


def end_would(row: dict[str, Any], directory: str) -> str:
    """What ``no-docker end`` does with this run, in words (for stale and unfinished runs)."""
    rid = row["run_id"]
    if row["status"] == "corrupt":
        return f"end refuses it (125); inspect {directory}, then remove it"
    if row["status"] == "rebooted":
        return f"ended with a reboot: `no-docker end {rid}` (or the next run) only removes the marker"
    if row["status"] == "elsewhere":
        return ("started in another pid namespace (a state dir shared with a container or its "
                "host): it never stops runs here; end it from there")
    if row["status"] == "running":
        return f"supervised by pid {row['owner_pid']}; `no-docker end --force {rid}` would end it anyway"
    members = row["members"]
    if members == 0:
        return f"no process left: `no-docker end {rid}` (or the next run) only removes the marker"
    if members is None:
        why = f" ({row['detail']})" if row.get("detail") else ""
        return (f"`no-docker end {rid}` will kill what is left of it, prove it gone and remove the "
                f"marker; how many processes are left cannot be told now{why}; until then new runs refuse")
    return (f"`no-docker end {rid}` will kill its {members} process{'es' if members != 1 else ''} left, "
            "prove them gone and remove the marker; until then new runs refuse")


def describe(state_dir: str, procfs: ProcFS, now: float | None = None) -> list[dict[str, Any]]:
    rows = []
    boot = procfs.boot_id()
    now = time.time() if now is None else now
    for directory in markers.list_markers(state_dir):
        try:
            rec = markers.read_record(directory)
        except markers.CorruptMarker as err:
            row: dict[str, Any] = {"run_id": os.path.basename(directory), "status": "corrupt",
                                   "state": "corrupt", "detail": str(err)}
            row["end_would"] = end_would(row, directory)
            rows.append(row)
            continue
        alive = markers.owner_alive(rec, procfs, boot)
        elsewhere = markers.owner_elsewhere(rec)
        members = None if elsewhere else members_of(rec, procfs) if rec.boot_id == boot else []
        cpu, rss = usage_of(members) if members else (0.0, 0)
        if rec.boot_id != boot:
            status = "rebooted"
        elif elsewhere:
            status = "elsewhere"  # another pid namespace's run: its pids mean nothing here
        elif alive:
            status = "running"
        else:
            status = "stale"  # its supervisor is gone (SIGKILLed, or it gave up with 125)
        row = {
            "run_id": rec.run_id, "status": status, "state": rec.state, "owner_pid": rec.owner.pid,
            "owner_alive": alive, "members": None if members is None else len(members),
            "cpu_seconds": round(cpu, 2), "rss_bytes": rss,
            "age_seconds": round(max(0.0, now - rec.created), 1),
            "work": rec.work, "init_pid": None if rec.init is None else rec.init.pid,
            "command": rec.command, "cgroup": rec.cgroup, "detail": rec.detail,
        }
        if status != "running" or rec.state == markers.NOT_PROVEN:
            row["end_would"] = end_would(row, directory)
        rows.append(row)
    from . import left

    for doc in left.read_all(state_dir):
        # A refused run's code it could not undo (ending/left.py): no process, a record.
        rows.append({"run_id": doc["run_id"], "status": "left", "state": "left", "owner_pid": None,
                     "owner_alive": False, "members": 0, "cpu_seconds": 0.0, "rss_bytes": 0,
                     "age_seconds": 0.0, "work": (doc.get("roots") or ["?"])[0], "init_pid": None,
                     "command": [], "cgroup": None, "detail": left.words(doc),
                     "end_would": f"{left.words(doc)}; new runs there refuse until you have looked and "
                                  f"run: no-docker end {doc['run_id']}"})
    return rows


def _status_word(row: dict[str, Any]) -> str:
    """The STATUS column and its hint say the same word: a run its supervisor could not show
    ended is ``unended``, whoever lists it."""
    if row.get("state") == markers.NOT_PROVEN and row["status"] in ("running", "stale"):
        return "unended"
    return row["status"]


def shown(text: str) -> str:
    """TEXT safe for a terminal: a run.json is data (a run may have chosen the command line),
    so control characters are escaped, never printed."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _size(n: int) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def main(argv: list[str]) -> int:
    p = _Parser(prog="no-docker runs", usage="no-docker runs [--json]", description=DESCRIPTION,
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    p.add_argument("--json", action="store_true", help="one JSON array on stdout, one object per run")
    p.add_argument("-h", "--help", action="help", help="this help")
    args = p.parse_args(argv)
    state = markers.state_dir()
    # An existing state dir is verified before its markers are believed (owner, 0700, no link).
    rows = describe(markers.ensure_state_dir(state), ProcFS()) if os.path.lexists(state) else []
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not rows:
        print("no runs", file=sys.stderr)
        return 0
    print(f"{'RUN_ID':<26} {'STATUS':<8} {'MEMBERS':>7} {'CPU':>7} {'RSS':>7} {'AGE':>5}  WORK  COMMAND")
    for row in rows:
        if row["status"] == "corrupt":
            print(f"{row['run_id']:<26} {'corrupt':<8} {'?':>7} {'-':>7} {'-':>7} {'-':>5}  "
                  f"{shown(row['detail'])}")
        else:
            members = "?" if row["members"] is None else str(row["members"])
            status = _status_word(row)
            print(f"{row['run_id']:<26} {status:<8} {members:>7} {row['cpu_seconds']:>6.2f}s "
                  f"{_size(row['rss_bytes']):>7} {_age(row['age_seconds']):>5}  {shown(row['work'] or '?')}  "
                  f"{shown(' '.join(row['command']))}")
        if "end_would" in row:
            print(f"  {_status_word(row)}: {shown(row['end_would'])}")
    return 0
