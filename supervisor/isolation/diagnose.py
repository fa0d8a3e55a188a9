"""Explanations for the user, from what the kernel shows: why a run could not start (it was
asked for inside another run), and whether its command tried to reach the network.

Nothing here decides what a run may do; these only turn a failure the user sees into one line
that says what happened and what to do. They read the kernel's own view (``/proc``), never a
variable or a file the run could have written, and they say nothing when unsure.
"""

from __future__ import annotations

import os

NESTED_LINE = ("already inside a no-docker run: a run cannot start another one (new user "
               "namespaces are denied inside); run the command directly, it is isolated already "
               "(no-docker check shows it)")


def looks_like_a_run(status: str, uid_map: str, pid1_comm: str) -> bool:
    """Does this process show the marks every process of a run carries? No capabilities,
    ``no_new_privs``, a seccomp filter, a user namespace that maps one id only (bwrap's), and
    pid 1 of its pid namespace is bwrap. Every one is set by the kernel and cannot be undone
    from inside; an environment variable proves none of them."""
    fields = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    maps = [line.split() for line in uid_map.splitlines() if line.strip()]
    return (fields.get("CapEff", "").strip("0") == "" and "CapEff" in fields
            and fields.get("NoNewPrivs") == "1" and fields.get("Seccomp") == "2"
            and len(maps) == 1 and maps[0][2:] == ["1"]
            and pid1_comm.strip() == "bwrap")


def inside_a_run(proc: str = "/proc") -> bool:
    """``looks_like_a_run`` for this process; False when any part cannot be read."""
    try:
        with open(f"{proc}/self/status", encoding="utf-8") as f:
            status = f.read()
        with open(f"{proc}/self/uid_map", encoding="utf-8") as f:
            uid_map = f.read()
        with open(f"{proc}/1/comm", encoding="utf-8") as f:
            comm = f.read()
    except OSError:
        return False
    return looks_like_a_run(status, uid_map, comm)


# -- the network ----------------------------------------------------------------------------
# A run's network namespace has loopback only, so every attempt to reach another address
# (a connect, a datagram sent, a DNS query to the resolver of /etc/resolv.conf) fails with
# ENETUNREACH, and the kernel counts each such failure in that namespace: Ip OutNoRoutes
# (/proc/PID/net/snmp) and Ip6OutNoRoutes (/proc/PID/net/snmp6). Loopback traffic inside the
# run never counts there.

def no_route_counts(snmp: str, snmp6: str | None) -> tuple[int, int | None] | None:
    """(IPv4, IPv6) OutNoRoutes from the two files' text; IPv6 None without snmp6; None when
    the IPv4 counter cannot be found."""
    lines = [line.split() for line in snmp.splitlines() if line.startswith("Ip: ")]
    v4 = None
    if len(lines) >= 2 and "OutNoRoutes" in lines[0]:
        index = lines[0].index("OutNoRoutes")
        if index < len(lines[1]) and lines[1][index].isdigit():
            v4 = int(lines[1][index])
    if v4 is None:
        return None
    v6 = None
    for line in (snmp6 or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "Ip6OutNoRoutes" and parts[1].isdigit():
            v6 = int(parts[1])
    return v4, v6


def unexplained_attempts(before: tuple[int, int | None], after: tuple[int, int | None]) -> int:
    """Attempts that found no route and that no proof made.

    The probe's P2 check (``no-docker check`` inside a run, which the pytest plugin and the
    stanza run) tries one IPv4 and one IPv6 address: one of each counter per check. Every pair
    is set aside; what is left can only come from something else, so the count is a lower bound
    and never claims an attempt that did not happen. Without the IPv6 counter no pair can be
    told apart from a check: nothing is claimed."""
    if before[1] is None or after[1] is None:
        return 0
    v4, v6 = max(0, after[0] - before[0]), max(0, after[1] - before[1])
    pairs = min(v4, v6)
    return v4 + v6 - 2 * pairs


def network_line(attempts: int) -> str:
    times = "once" if attempts == 1 else f"{attempts} times"
    return (f"the command tried to reach the network ({times}, no route): there is no network "
            "inside a run; install what it needs before the run, outside it")


class NetworkUse:
    """The run's counters, through files opened while its namespace init was alive: an open
    ``/proc/PID/net/*`` file keeps reading its network namespace after every process of the
    run is gone, so the count is read once the run has ended."""

    def __init__(self, init_pid: int) -> None:
        self.fds: list[int] = []
        self.before: tuple[int, int | None] | None = None
        try:
            for name in ("snmp", "snmp6"):
                self.fds.append(os.open(f"/proc/{init_pid}/net/{name}", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            pass  # no snmp6 (IPv6 off): read() then claims nothing

    def read(self) -> tuple[int, int | None] | None:
        texts = []
        for fd in self.fds:
            try:
                texts.append(os.pread(fd, 1 << 16, 0).decode("ascii", "replace"))
            except OSError:
                return None
        if not texts:
            return None
        return no_route_counts(texts[0], texts[1] if len(texts) > 1 else None)

    def mark(self) -> None:
        """The baseline, once the proof is done (the probe's own tries are before it)."""
        if self.before is None:
            self.before = self.read()

    def attempts(self) -> int:
        """Attempts since ``mark`` (0 when unknown), and the files closed."""
        after = self.read() if self.before is not None else None
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if self.before is None or after is None:
            return 0
        return unexplained_attempts(self.before, after)


# -- where to run -----------------------------------------------------------------------------

def repository_above(work: str) -> str | None:
    """The root of the git repository WORK is a subdirectory of (a parent holding ``.git``), or
    None when WORK is a repository's root or in none."""
    if os.path.lexists(os.path.join(work, ".git")):
        return None
    parent = os.path.dirname(work)
    while parent and parent != "/":
        if os.path.lexists(os.path.join(parent, ".git")):
            return parent
        parent = os.path.dirname(parent)
    return None


def subdirectory_hint(work: str, failure: str) -> str | None:
    """For a refusal that names a git path (P4: ``.../.git/hooks is writable inside the run``)
    of a run started in a subdirectory of a repository: run from the repository's root."""
    if not failure.startswith("P4") or "/.git" not in failure:
        return None
    root = repository_above(work)
    if root is None:
        return None
    return f"{work} is a subdirectory of the git repository {root}: run there, or pass --work {root}"
