"""How many of the pinned payload's network routes are named by ``no-docker run`` (issue 26
item 2): each route alone, under ``no-docker run --quiet --report``, in an outer guard whose
canary answers on every real engine path before the run starts (so every engine is *there*
and hidden by the mount plan). A route is named when its run's ``engine_attempts`` is not
empty. Before issue 26, 0 of 44 such runs printed anything (measured against a Podman API
service); the three lifetime routes need engines that move during the run (T-03) and are left
out here.

Not a test: a measurement, run by hand as root (the outer guard needs namespaces)::

    .venv/bin/python tests/bench/engine_attempts_by_route.py [--json FILE]

Another build's supervisor is measured with ``PYTHONPATH=DIR`` (DIR holding its ``no_docker``
package, in a place the outer guard shows, e.g. under this repository).

stdout: one line per route (route, the payload's outcome, what was named), then the count.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = REPO / "mutants" / "payloads" / "reach-engine.sh"


def split_payload(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(prelude, [(route id, kind, block)]): the payload's helper functions, and each route's
    block from its tag line to the next tag or section line. Pure."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("# route: ")]
    prelude = "".join(lines[:starts[0]])
    blocks = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = "".join(line for line in lines[start:end] if not line.startswith("# ----"))
        rid, kind = lines[start].split()[2], lines[start].split()[3].strip("()")
        blocks.append((rid, kind, body))
    return prelude, blocks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the per-route results there")
    args = parser.parse_args(argv)
    from no_docker.supervisor.proving.outer_guard import OuterGuard

    prelude, blocks = split_payload(PAYLOAD.read_text())
    routes = [(rid, body) for rid, kind, body in blocks
              if kind == "network" and not rid.startswith("lifetime-")]
    results = []
    with tempfile.TemporaryDirectory(prefix="nd-attempts-", dir=str(REPO / ".pytest_cache")) as tmp:
        base = Path(tmp)
        work = base / "work"
        work.mkdir()
        with OuterGuard(base / "canary.jsonl", share=[base]) as guard:
            for rid, body in routes:
                script = work / f"{rid}.sh"
                script.write_text(prelude + body)
                report = base / f"{rid}.json"
                done = guard.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", "--quiet",
                                  "--report", str(report), "--work", str(work), "--", "bash", str(script)],
                                 cwd=work, timeout=120)
                route_log = work / "no-docker-routes.log"
                log = route_log.read_text() if route_log.exists() else ""
                outcome = next((line.split()[2] for line in log.splitlines() if line.startswith(f"{rid} ")),
                               "?")
                route_log.unlink(missing_ok=True)
                doc = json.loads(report.read_text()) if report.exists() else {}
                named = [f"{a['target']} x{a['count']} ({(a['callers'] or [{'command': '?'}])[0]['command']})"
                         for a in doc.get("engine_attempts", [])]
                refused = [r["target"] for r in doc.get("connects_refused", [])]
                results.append({"route": rid, "outcome": outcome, "exit": done.returncode, "named": named,
                                "refused": refused, "records": len(guard.records())})
                shown = "; ".join(named) or "-"
                print(f"{rid:28} {outcome:11} exit {done.returncode:3}  {shown}", flush=True)
    count = sum(1 for r in results if r["named"])
    said = sum(1 for r in results if r["named"] or r["refused"])
    records = results[-1]["records"] if results else 0
    print(f"named: {count} of {len(results)} routes; named or refused (a status line printed): {said}; "
          f"canary records: {records}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
