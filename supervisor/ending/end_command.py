"""``no-docker end [RUN_ID...] [--all] [--force] [--timeout S]`` (also ``no-docker --end``).

Finishes runs whose supervisor is gone (SIGKILLed, or it gave up with 125): kill and prove as
the supervisor would (``ending.end_run``), then remove the marker directory and cgroups. A run
whose owner is alive belongs to someone; it is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..errors import EXIT_NOT_PROVEN, UsageError
from . import left, markers
from .algorithm import DEFAULT_TIMEOUT, EndReport, end_run
from .cgroup import RunCgroup
from .lifecycle import cgroups_removed, target_of
from .procfs import ProcFS
from .runs import shown

EXIT_REFUSED = 1

DESCRIPTION = """\
End leftover runs and prove every process of each gone: runs whose supervisor was killed, or
that it could not show ended (it then printed this command). The run's marker and cgroups are
removed once every process is shown gone. A run refused for code it left to run later and could
NOT undo (`no-docker runs` says `left`) has no process left, only a record that stops new runs
in its work dir: `no-docker end RUN_ID` says what is left and removes the record (--all only
names it)."""

EPILOG = """\
examples:
  no-docker runs                     list the runs, their state and members
  no-docker end 20261201T120633-bc9ddeb3
  no-docker end --all                every run whose supervisor is gone
  no-docker end --force RUN_ID       a run whose supervisor is alive: its command is killed,
                                     and that supervisor exits 137 (128 + SIGKILL)

exit status:
  0    every run named was ended and shown empty (also when another `no-docker end` ended
       it meanwhile, or --all found none)
  1    refused: the run's supervisor is alive (use --force), or another `no-docker end`
       of it is still busy
  2    usage: an unknown RUN_ID (it has ended, or the id is wrong), a bad option
  125  not proven: a process of the run could not be shown gone; the marker is kept
       (retry: no-docker end RUN_ID)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"end: {message}")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="no-docker end", usage="no-docker end [RUN_ID...] [--all] [--force] [--timeout SECONDS]",
                description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                add_help=False)
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to end (see: no-docker runs)")
    p.add_argument("--all", action="store_true", help="every run whose owner is gone")
    p.add_argument("--force", action="store_true", help="also end runs whose supervisor is alive")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"give up proving after this long (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("-h", "--help", action="help", help="this help")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if not args.run_ids and not args.all:
        raise UsageError("end: name a RUN_ID or --all (no-docker runs lists them)")
    if args.run_ids and args.all:
        raise UsageError("end: RUN_ID and --all exclude each other")
    if args.timeout <= 0:
        raise UsageError("end: --timeout must be positive")
    state = markers.state_dir()
    for run_id in args.run_ids:
        if not markers.valid_run_id(run_id):
            raise UsageError(f"end: {run_id!r} is not a run id")
        if not (os.path.isdir(markers.marker_dir(state, run_id))
                or os.path.lexists(left.record_path(state, run_id))):
            raise UsageError(f"end: no run {run_id} in {state}: it has ended, or the id is wrong "
                             "(no-docker runs lists the runs there are)")
    if not os.path.exists(state):
        print("no-docker: no runs", file=sys.stderr)
        return 0
    markers.ensure_state_dir(state)
    status = _end_left(state, args.run_ids)
    directories = ([markers.marker_dir(state, r) for r in args.run_ids
                    if os.path.isdir(markers.marker_dir(state, r))] if args.run_ids
                   else markers.list_markers(state))
    if args.run_ids and not directories:
        return status
    if not directories:
        print("no-docker: no runs to end", file=sys.stderr)
        return 0
    procfs = ProcFS()
    for directory in directories:
        result = end_one(directory, procfs, force=args.force, timeout=args.timeout,
                         skip_live=args.all)
        status = max(status, result)
    return status


def _end_left(state: str, run_ids: list[str]) -> int:
    """Records of code a refused run could not undo (ending/left.py): ``end RUN_ID`` says
    what is left and removes its record, which lets runs start there again; ``--all`` only
    names them (the user must have looked: an id is typed for each)."""
    for doc in left.read_all(state):
        rid = doc["run_id"]
        if run_ids and rid not in run_ids:
            continue
        if not run_ids:
            print(f"no-docker: run {rid} {shown(left.words(doc))}; runs there refuse until: "
                  f"no-docker end {rid}", file=sys.stderr)
            continue
        left.clear(state, rid)
        print(f"no-docker: run {rid} {shown(left.words(doc))}; its record is removed: runs there "
              "start again (restore what is listed yourself if you have not)", file=sys.stderr)
    return 0


def end_one(directory: str, procfs: ProcFS, *, force: bool, timeout: float, skip_live: bool) -> int:
    """End one run, holding its marker's lock: a concurrent ``end`` of the same run (two
    ``end ID``, or ``end --all`` racing ``end ID``) waits for this one and then reports what
    happened, instead of both writing and removing the same marker."""
    run_id = os.path.basename(directory)
    lock = _lock(directory, run_id, timeout)
    if lock is None:
        print(f"no-docker: run {run_id} was ended by another no-docker end meanwhile", file=sys.stderr)
        return 0
    if lock < 0:
        print(f"no-docker: run {run_id} is still being ended by another no-docker end; not ended "
              f"(try again: no-docker end {run_id})", file=sys.stderr)
        return EXIT_REFUSED
    try:
        return _end_locked(directory, run_id, procfs, force=force, timeout=timeout, skip_live=skip_live)
    except _MarkerGone:
        print(f"no-docker: run {run_id} was ended meanwhile (its marker is gone)", file=sys.stderr)
        return 0
    finally:
        os.close(lock)


class _MarkerGone(Exception):
    pass


def _write(directory: str, record: markers.RunRecord) -> None:
    try:
        markers.write_record(directory, record)
    except FileNotFoundError:
        # Removed under us all the same: the next run's stale check removes an empty stale
        # marker without taking the lock.
        raise _MarkerGone from None


def _lock(directory: str, run_id: str, timeout: float) -> int | None:
    """The marker's lock fd; None when the run is gone; -1 when another ``end`` still holds it
    after it had time to finish (its own --timeout and some)."""
    try:
        return markers.lock_marker(directory, wait=False)
    except BlockingIOError:
        pass
    print(f"no-docker: run {run_id} is being ended by another no-docker end; waiting for it",
          file=sys.stderr)
    deadline = time.monotonic() + max(timeout, DEFAULT_TIMEOUT) + 5.0
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            return markers.lock_marker(directory, wait=False)
        except BlockingIOError:
            continue
    return -1


def _end_locked(directory: str, run_id: str, procfs: ProcFS, *, force: bool, timeout: float,
                skip_live: bool) -> int:
    try:
        record = markers.read_record(directory)
    except markers.CorruptMarker as err:
        print(f"no-docker: {err} (inspect it, then remove {directory})", file=sys.stderr)
        return EXIT_NOT_PROVEN
    boot = procfs.boot_id()
    if record.boot_id != boot:
        markers.remove_marker(directory)
        print(f"no-docker: run {run_id} ended with the reboot; marker removed", file=sys.stderr)
        return 0
    if markers.owner_elsewhere(record):
        # Its pids are another pid namespace's: nothing here may be signalled, --force or not.
        print(f"no-docker: run {run_id} was started in another pid namespace (a state dir shared "
              f"with a container or its host); not ended: end it from there", file=sys.stderr)
        return 0 if skip_live else EXIT_REFUSED
    twin = markers.live_twin(os.path.dirname(directory), directory, record, procfs, boot)
    if twin is not None:
        # Never acted on, --force or not: ending it would end the live run it names.
        print(f"no-docker: run {run_id} names the sandbox of run {twin}, whose supervisor is alive "
              f"(a copy of its marker?); not ended: inspect {directory}", file=sys.stderr)
        return 0 if skip_live else EXIT_REFUSED
    if markers.owner_alive(record, procfs, boot) and not force:
        print(f"no-docker: run {run_id} is still supervised by pid {record.owner.pid}; not ended "
              f"(no-docker end --force {run_id} to end it anyway)", file=sys.stderr)
        return 0 if skip_live else EXIT_REFUSED
    if record.state == markers.CREATED:
        report = EndReport(run_id, clean=True, reason="nothing was started")
    else:
        record.state = markers.ENDING
        _write(directory, record)
        report = end_run(target_of(record), procfs=procfs, timeout=timeout)
    cg = RunCgroup.from_record(record.cgroup)
    if report.clean and cg is not None:
        cgroups_removed(cg, report)  # with every cgroup below them, or not proven
    if report.clean:
        markers.remove_marker(directory)
        print(f"no-docker: {report.line()}", file=sys.stderr)
        return 0
    record.state = markers.NOT_PROVEN
    record.detail = report.reason
    _write(directory, record)
    print(f"no-docker: run ended: not proven: {report.reason} (marker kept; retry: no-docker end {run_id})",
          file=sys.stderr)
    return EXIT_NOT_PROVEN
