"""``no-docker runs [--json]``: the runs under the state dir, their owner, state, members.

The member count comes from one pass that signals nothing. While a run's init is alive the
count is a lower bound (members can fork during the pass); it is exact once the init is dead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import UsageError
from . import markers
from .membership import LiveTable
from .procfs import ProcFS, ProcfsError
from .snapshot import Verdict, take_pass, verdict


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"runs: {message}")


def count_members(record: markers.RunRecord, procfs: ProcFS) -> int | None:
    """Members seen by one non-killing pass; None when it cannot be told."""
    from .lifecycle import target_of

    target = target_of(record)
    if target.ns is None:
        if target.cgroup is not None and target.cgroup.path is not None:
            return len(target.cgroup.procs())
        return 0 if record.state == markers.CREATED else None
    try:
        result = verdict(take_pass(LiveTable(procfs, target.ns)), run_can_fork=True)
    except ProcfsError:
        return None
    if result.unknown and result.verdict != Verdict.MEMBERS:
        return None
    return len(result.members)


def describe(state_dir: Any, procfs: ProcFS) -> list[dict[str, Any]]:
    rows = []
    boot = procfs.boot_id()
    for directory in markers.list_markers(state_dir):
        try:
            rec = markers.read_record(directory)
        except markers.CorruptMarker as err:
            rows.append({"run_id": os.path.basename(directory), "state": "corrupt", "detail": str(err)})
            continue
        alive = markers.owner_alive(rec, procfs, boot)
        rows.append({
            "run_id": rec.run_id, "owner_pid": rec.owner.pid, "owner_alive": alive,
            "state": rec.state, "members": count_members(rec, procfs) if rec.boot_id == boot else 0,
            "init_pid": None if rec.init is None else rec.init.pid, "command": rec.command,
            "cgroup": rec.cgroup, "detail": rec.detail,
        })
    return rows


def main(argv: list[str]) -> int:
    p = _Parser(prog="no-docker runs", description="List runs and their state.")
    p.add_argument("--json", action="store_true", help="one JSON array on stdout")
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
    print(f"{'RUN_ID':<26} {'OWNER':<14} {'STATE':<11} {'MEMBERS':>7}  COMMAND")
    for row in rows:
        if row["state"] == "corrupt":
            print(f"{row['run_id']:<26} {'?':<14} {'corrupt':<11} {'?':>7}  {row['detail']}")
            continue
        owner = f"{row['owner_pid']} {'alive' if row['owner_alive'] else 'gone'}"
        members = "?" if row["members"] is None else str(row["members"])
        print(f"{row['run_id']:<26} {owner:<14} {row['state']:<11} {members:>7}  {' '.join(row['command'])}")
    return 0
