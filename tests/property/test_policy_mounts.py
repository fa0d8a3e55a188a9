"""Hypothesis: the plan's mount model and the argv bwrap gets agree, and no outside socket
stays visible: every listed socket is hidden by a tmpfs or covered by /dev/null.

The argv is replayed by an independent little interpreter of bwrap's mount flags (in command
line order, a mount covering everything below its mount point), not by ``mount_sequence``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.isolation.plan import is_under, sockets_to_mask
from no_docker.supervisor.isolation.policy import Policy, bwrap_argv

DIRS = ["/usr", "/etc", "/var", "/var/lib", "/var/lib/x", "/run", "/tmp", "/tmp/a", "/tmp/a/b",
        "/home/u", "/home/u/proj", "/home/u/proj/sub", "/home/u/.pyenv", "/opt", "/srv/data",
        "/var/tmp", "/data", "/data/in"]
NAMES = ["engine.sock", "docker.sock", "x/podman.sock"]


def replay(argv: list[str]) -> list[tuple[str, str]]:
    """(mount point, source or kind) for every mount flag, in order."""
    opts = argv[1:argv.index("--")]
    mounts, i = [], 0
    arity = {"--ro-bind": 2, "--bind": 2, "--tmpfs": 1, "--proc": 1, "--dev": 1, "--ro-bind-data": 2,
             "--dir": 1, "--symlink": 2, "--perms": 1, "--remount-ro": 1, "--chdir": 1, "--setenv": 2,
             "--json-status-fd": 1, "--cap-drop": 1}
    while i < len(opts):
        flag = opts[i]
        n = arity.get(flag, 0)
        args = opts[i + 1:i + 1 + n]
        if flag in ("--ro-bind", "--bind"):
            mounts.append((args[1], args[0]))
        elif flag in ("--tmpfs", "--proc", "--dev"):
            mounts.append((args[0], flag))
        i += 1 + n
    return mounts


def shows_outside_file(argv: list[str], path: str) -> bool:
    alive: list[tuple[str, str]] = [("/", "--tmpfs")]
    for point, source in replay(argv):
        alive = [m for m in alive if not is_under(m[0], point)]
        alive.append((point, source))
    point, source = max((m for m in alive if is_under(path, m[0])), key=lambda m: len(m[0]))
    if source.startswith("--"):
        return False  # a tmpfs/proc/dev: fresh, not the outside file
    return source != "/dev/null" and is_under(path, source)  # binds here are at their own path


subset = st.lists(st.sampled_from(DIRS), unique=True, max_size=5).map(tuple)


@settings(max_examples=300, deadline=None)
@given(system=subset, hidden=subset, toolchain=subset, ro=subset, rw=subset,
       work=st.sampled_from(["/home/u/proj", "/tmp/a", "/srv/data", "/data"]),
       sockets=st.lists(st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES)), max_size=8))
def test_no_listed_socket_is_visible(system, hidden, toolchain, ro, rw, work, sockets):
    base = Policy(work=work, chdir=work, home="/home/u", system_ro=system, hidden=hidden,
                  toolchain_ro=toolchain, ro=ro, rw=rw, probe_source="/p/probe.py")
    paths = sorted({f"{d}/{n}" for d, n in sockets})
    policy = Policy(**{**base.__dict__, "masked": sockets_to_mask(base, paths)})
    argv = bwrap_argv(policy, ["true"], data_fd=3, block_fd=6)
    for path in paths:
        assert not shows_outside_file(argv, path), (path, argv)


@settings(max_examples=200, deadline=None)
@given(system=subset, hidden=subset, sockets=st.lists(st.sampled_from(DIRS), max_size=6))
def test_masking_only_what_is_visible(system, hidden, sockets):
    # Hidden sockets need no mask (and bwrap could not create a mount point for them).
    base = Policy(work="/home/u/proj", chdir="/home/u/proj", home="/home/u", system_ro=system,
                  hidden=hidden, probe_source="/p/probe.py")
    paths = [f"{d}/engine.sock" for d in sockets]
    masked = sockets_to_mask(base, paths)
    argv = bwrap_argv(base, ["true"], data_fd=3, block_fd=6)
    for path in paths:
        assert (path in masked) == shows_outside_file(argv, path), (path, masked)
