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

# What each property means (DESIGN §4; docs/isolation.md says how each is enforced and proven).
NAMES = {
    "P1": "own pid namespace: /proc shows only the run",
    "P2": "own network namespace: loopback only, no route out, host ports unreachable",
    "P3": "no engine socket reachable: every outside unix socket refuses connect()",
    "P4": "writes confined: only the work dir, the run's tmp and --rw paths",
    "P5": "no privileges: no capabilities, no_new_privs, the syscall filter, sudo fails",
    "P6": "environment allowlist: no DOCKER_*, KUBECONFIG, SSH_AUTH_SOCK, LD_PRELOAD...",
    "P7": "no file descriptor but 0-2 crosses in, none a socket to outside",
    "P8": "new session; its terminal is its own pty, never the caller's",
    "P9": "own IPC and UTS namespaces, no cgroup writable or mountable",
    "P10": "nothing outside can be signalled or traced",
    "P11": "shell start-up files are read inside, never outside",
    "P12": "sockets bound outside after the proof stay unreachable",
    "P13": "no AF_VSOCK socket (the hypervisor host)",
}

USAGE = "usage: no-docker check [--json]"

HELP = f"""{USAGE}

Prove the isolation from inside: every property is tried in this process's own view (the
pids /proc shows, capabilities, connect() refusing, writes failing), as the run's probe did
before the command started. Inside `no-docker run` it prints one row per property and exits 0;
anywhere else (outside a run, or inside a weaker sandbox) it exits 125 and names the first
property that failed. Nothing after a failure is tried.

options:
  --json      one JSON object on stdout: inside_run, proven, properties [{{id, name, state, detail}}];
              detail says what was tried and what the kernel answered (why, for a failure)
  -h, --help  this help

properties:
{chr(10).join(f"  {prop:<4} {NAMES.get(prop, '')}" for prop in probe.PROPERTIES)}

examples:
  no-docker run -- no-docker check          the table, exit 0
  no-docker check || echo "not isolated"    outside a run: exit 125, P1 named
  no-docker stanza                          the line a test script starts with: check, else re-run
                                            itself under no-docker run

exit status: 0 every property proven; 125 one is not (the line names it); 2 usage."""


def load_plan(path: str = PLAN_PATH) -> dict[str, list[str]]:
    """The run's plan, or an empty one when there is none (every comparison then fails)."""
    try:
        with open(path, "rb") as f:
            return probe.decode_plan(f.read())
    except (OSError, ValueError):
        return {}


def p5_detail(status_text: str) -> str:
    """What P5's checks read and tried, from the kernel's /proc/self/status (proc(5)); the
    tries themselves (setgroups, setuid modes, io_uring, openat2, keyctl, ptrace, the init's
    memory) only pass when each was refused."""
    lines = (line.partition(":") for line in status_text.splitlines())
    fields = {key: value.strip() for key, _, value in lines}
    caps = ", ".join(f"{name} {fields.get(name, '?')}" for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb"))
    return (f"{caps}; NoNewPrivs {fields.get('NoNewPrivs', '?')}; Seccomp {fields.get('Seccomp', '?')} "
            "(2: a filter); setgroups() refused; the run's syscall filter tried (setuid and setgid modes "
            "where a directory is writable, io_uring, openat2, keyctl, ptrace): each refused")


def render(rows: list[tuple[str, str, str]]) -> str:
    """The table: a proven row is its name only (``--json`` has what was tried), a failed or
    untried one says why."""
    width = max(len(state) for _, state, _ in rows)
    return "\n".join(f"{prop:<4} {state:<{width}}  {NAMES.get(prop, '')}"
                     f"{f' ({detail})' if detail and state != 'proven' else ''}".rstrip()
                     for prop, state, detail in rows)


def main(argv: list[str]) -> int:
    as_json = False
    for arg in argv:
        if arg == "--json":
            as_json = True
        elif arg in ("-h", "--help"):
            print(HELP)
            return 0
        else:
            raise UsageError(f"check: unknown argument {arg!r}; {USAGE} (no-docker check --help)")
    plan = load_plan()
    rows = probe.Probe(plan, gate=False).table()
    try:
        with open("/proc/self/status") as f:
            status = f.read()
    except OSError:
        status = ""
    rows = [(prop, state, p5_detail(status) if (prop, state, detail) == ("P5", "proven", "") and status
             else detail) for prop, state, detail in rows]
    failed = [row for row in rows if row[1] == "failed"]
    if as_json:
        import json

        doc = {"inside_run": bool(plan), "proven": not failed,
               "properties": [{"id": p, "name": NAMES.get(p, ""), "state": s, "detail": d}
                              for p, s, d in rows]}
        print(json.dumps(doc, indent=2))
    else:
        print(render(rows))
    if failed:
        prop, _, detail = failed[0]
        hint = "" if plan else " (run it inside `no-docker run -- ...`)"
        print(f"no-docker: {prop} not proven: {detail}{hint} [{prop}: {NAMES.get(prop, prop)}]",
              file=sys.stderr)
        return EXIT_NOT_PROVEN
    return 0
