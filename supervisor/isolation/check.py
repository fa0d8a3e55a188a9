"""``no-docker check [--json]``: the probe's checks, standalone (DESIGN §3, §4).

Inside a run it exits 0 and prints a table of properties; anywhere else (outside, or inside a
weaker sandbox such as ``bwrap --ro-bind / /``) it exits 125 and names the first property that
failed. The run plan at ``/run/no-docker-run/plan.json`` (written by bwrap from the
supervisor's memfd) only says what to try and which outside namespaces to differ from; every
verdict comes from trying.
"""

from __future__ import annotations

import sys

from ..errors import EXIT_NOT_PROVEN, UsageError
from . import probe
from .policy import PLAN_PATH


def load_plan(path: str = PLAN_PATH) -> dict[str, list[str]]:
    """The run's plan, or an empty one when there is none (every comparison then fails)."""
    try:
        with open(path, "rb") as f:
            return probe.decode_plan(f.read())
    except (OSError, ValueError):
        return {}


def render(rows: list[tuple[str, str, str]]) -> str:
    width = max(len(state) for _, state, _ in rows)
    return "\n".join(f"{prop:<4} {state:<{width}}  {detail}".rstrip() for prop, state, detail in rows)


def main(argv: list[str]) -> int:
    as_json = False
    for arg in argv:
        if arg == "--json":
            as_json = True
        elif arg in ("-h", "--help"):
            print("usage: no-docker check [--json]")
            return 0
        else:
            raise UsageError(f"check: unknown argument {arg!r}; usage: no-docker check [--json]")
    plan = load_plan()
    rows = probe.Probe(plan, gate=False).table()
    failed = [row for row in rows if row[1] == "failed"]
    if as_json:
        import json

        doc = {"inside_run": bool(plan), "proven": not failed,
               "properties": [{"id": p, "state": s, "detail": d} for p, s, d in rows]}
        print(json.dumps(doc, indent=2))
    else:
        print(render(rows))
    if failed:
        prop, _, detail = failed[0]
        hint = "" if plan else " (run it inside `no-docker run -- ...`)"
        print(f"no-docker: {prop} not proven: {detail}{hint}", file=sys.stderr)
        return EXIT_NOT_PROVEN
    return 0
