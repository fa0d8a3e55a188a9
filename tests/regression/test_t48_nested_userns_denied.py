"""T-48: no user namespace can be made inside a run, and the probe refuses a sandbox where one can.

Red-team finding (issue 16 item 10, issue 17 part C): inside a run,
``unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWCGROUP)`` without a uid map kept every capability
in the new namespace, and ``mount -t cgroup2`` then made child cgroups that outlived a run
that exited 0 (and lifted ``--max-pids``, froze the init...).

(1) Inside a real run, each way to a user namespace is tried, each with the cgroup attack
behind it should it succeed: ``unshare``, ``clone`` and ``clone3`` with CLONE_NEWUSER (plus
NEWNS and NEWCGROUP). Every one is refused (the filter's EPERM, clone3's ENOSYS, or the
kernel's ENOSPC from bwrap's ``--disable-userns``), nothing was mounted or made, and no cgroup
of the run is left after it.

(2) A bubblewrap that drops ``--disable-userns`` and hands over a syscall filter without the
user-namespace rules (a wrapper as ``NO_DOCKER_BWRAP``, which is never trusted): the probe
makes a user namespace itself (P9), refuses with 125 and CMD never runs.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from ending_cases import cgroups_left, report_of, require_bwrap
from isolation_cases import inside_python, run
from nonroot import pids_limit_args

# Each try in a child of its own; a namespace that was made is used at once as the red-team
# did (mount cgroup2, make a child cgroup), so a weak build shows the harm, not only the flag.
ATTACK = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NEWUSER, NEWNS, NEWCGROUP, SIGCHLD = 0x10000000, 0x20000, 0x2000000, 17
FLAGS = NEWUSER | NEWNS | NEWCGROUP
CLONE, CLONE3 = {"x86_64": (56, 435), "aarch64": (220, 435)}[os.uname().machine]
args3 = (ctypes.c_uint64 * 8)(FLAGS, 0, 0, 0, SIGCHLD, 0, 0, 0)
TRIES = {
    "unshare": lambda: libc.unshare(FLAGS),
    "clone": lambda: libc.syscall(ctypes.c_long(CLONE), ctypes.c_long(FLAGS | SIGCHLD),
                                  *(ctypes.c_long(0),) * 4),
    "clone3": lambda: libc.syscall(ctypes.c_long(CLONE3), ctypes.byref(args3), ctypes.c_long(64)),
}

def harm(name):
    os.makedirs(f"/tmp/cg-{name}", exist_ok=True)
    if libc.mount(b"none", f"/tmp/cg-{name}".encode(), b"cgroup2", 0, None) != 0:
        return "made, mount " + errno.errorcode[ctypes.get_errno()]
    os.mkdir(f"/tmp/cg-{name}/escaped-{name}")
    return "made, cgroup2 mounted, child cgroup made"

for name, call in TRIES.items():
    pid = os.fork()
    if pid == 0:
        ctypes.set_errno(0)
        result = call()
        if result == 0:  # unshare: in the new namespace; clone: its new child, in it
            line = f"{name}: {harm(name)}"
        elif result > 0:
            os.waitpid(result, 0)
            os._exit(0)  # the clone's child printed its line
        else:
            line = f"{name}: refused {errno.errorcode[ctypes.get_errno()]}"
        os.write(1, (line + "\n").encode())
        os._exit(0)
    os.waitpid(pid, 0)
"""
REFUSALS = {"unshare": {"EPERM", "ENOSPC"}, "clone": {"EPERM", "ENOSPC"},
            "clone3": {"ENOSYS", "EPERM", "ENOSPC"}}

# A bubblewrap that lets nested user namespaces through: the three flags dropped, and the run's
# filter replaced by the same program without its user-namespace rules.
WEAK_BWRAP = """#!{python}
import os, sys
from no_docker.supervisor.isolation import syscall_filter
argv, out, i = sys.argv[1:], [], 0
while i < len(argv):
    if argv[i] == "--":
        out += argv[i:]
        break
    if argv[i] in ("--unshare-user", "--disable-userns", "--assert-userns-disabled"):
        i += 1
        continue
    if argv[i] == "--seccomp":
        # The run's own program replaced, at its fd number (the one the prover expects there).
        syscall_filter.userns_rules = lambda arch: []
        fd = os.memfd_create("weak-filter", 0)
        os.write(fd, syscall_filter.program(os.uname().machine))
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, int(argv[i + 1]))
        os.close(fd)
        out += ["--seccomp", argv[i + 1]]
        i += 2
        continue
    out.append(argv[i])
    i += 1
os.execv({bwrap!r}, [{bwrap!r}, *out])
"""


def _remove_tree(path: Path) -> None:
    """Test clean-up, whatever happened: a cgroup and every cgroup below it, deepest first."""
    if not path.is_dir():
        return
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            _remove_tree(child)
    try:
        path.rmdir()
    except OSError:
        pass


def test_no_user_namespace_can_be_made_inside_a_run(tmp_path):
    require_bwrap()
    report = tmp_path / "report.json"
    # The limit is the red-team's target where this user can have one; the namespace refusals
    # do not rest on it.
    result = run([*pids_limit_args(64), "--report", str(report), "--", *inside_python(ATTACK)], cwd=tmp_path)
    run_id = report_of(report).get("run_id") if report.exists() else None
    try:
        assert result.returncode == 0, result.stderr
        lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
        assert sorted(lines) == sorted(REFUSALS), result.stdout + result.stderr
        for name, answer in lines.items():
            assert answer.startswith("refused "), f"{name}: {answer}"
            assert answer.split()[1] in REFUSALS[name], f"{name}: {answer}"
        assert run_id and cgroups_left(run_id) == [], "a cgroup of the run outlived it"
    finally:
        if run_id:
            for left in cgroups_left(run_id):
                _remove_tree(Path(left))


def test_the_probe_refuses_a_sandbox_where_one_can_be_made(tmp_path):
    bwrap = require_bwrap()
    weak = tmp_path / "weak-bwrap"
    weak.write_text(WEAK_BWRAP.format(python=sys.executable, bwrap=bwrap))
    weak.chmod(weak.stat().st_mode | stat.S_IXUSR)
    # The wrapper imports no_docker as the tests do (in a weakened copy, the copy's).
    env = {**os.environ, "NO_DOCKER_BWRAP": str(weak)}
    ran = tmp_path / "cmd-ran"
    result = run(["--", "sh", "-c", f"touch {ran}"], cwd=tmp_path, env=env)
    assert result.returncode == 125, result.stderr
    assert "P9 not proven" in result.stderr and "nested user namespace" in result.stderr, result.stderr
    assert not ran.exists(), "CMD ran although P9 was not proven"

