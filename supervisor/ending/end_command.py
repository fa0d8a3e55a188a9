"""``no-docker end [RUN_ID...] [--all] [--force] [--timeout S]`` (also ``no-docker --end``).

Finishes runs whose supervisor is gone (SIGKILLed, or it gave up with 125): kill and prove as
the supervisor would (``ending.end_run``), then remove the marker directory and cgroups. A run
whose owner is alive belongs to someone; it is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import EXIT_NOT_PROVEN, UsageError
from . import markers
from .algorithm import DEFAULT_TIMEOUT, EndReport, end_run
from .cgroup import RunCgroup
from .lifecycle import cgroups_removed, target_of
from .procfs import ProcFS

EXIT_REFUSED = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"end: {message}")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="no-docker end", description="End leftover runs and prove every process gone.")
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to end (see: no-docker runs)")
    p.add_argument("--all", action="store_true", help="every run whose owner is gone")
    p.add_argument("--force", action="store_true", help="also end runs whose supervisor is alive")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"give up proving after this long (default {DEFAULT_TIMEOUT:g})")
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
        if not os.path.isdir(markers.marker_dir(state, run_id)):
            raise UsageError(f"end: no run {run_id} in {state} (no-docker runs lists them)")
    if not os.path.exists(state):
        print("no-docker: no runs", file=sys.stderr)
        return 0
    markers.ensure_state_dir(state)
    directories = ([markers.marker_dir(state, r) for r in args.run_ids] if args.run_ids
                   else markers.list_markers(state))
    procfs = ProcFS()
    status = 0
    for directory in directories:
        result = end_one(directory, procfs, force=args.force, timeout=args.timeout,
                         skip_live=args.all)
        status = max(status, result)
    return status


def end_one(directory: str, procfs: ProcFS, *, force: bool, timeout: float, skip_live: bool) -> int:
    run_id = os.path.basename(directory)
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
    if markers.owner_alive(record, procfs, boot) and not force:
        print(f"no-docker: run {run_id} is still supervised by pid {record.owner.pid}; not ended "
              f"(no-docker end --force {run_id} to end it anyway)", file=sys.stderr)
        return 0 if skip_live else EXIT_REFUSED
    if record.state == markers.CREATED:
        report = EndReport(run_id, clean=True, reason="nothing was started")
    else:
        record.state = markers.ENDING
        markers.write_record(directory, record)
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
    markers.write_record(directory, record)
    print(f"no-docker: run ended: not proven: {report.reason} (marker kept; retry: no-docker end {run_id})",
          file=sys.stderr)
    return EXIT_NOT_PROVEN
