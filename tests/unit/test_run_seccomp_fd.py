"""``Run.start`` hands bwrap the run's syscall filter (``--seccomp FD``) and refuses without one.

No sandbox is started: ``spawn`` is replaced, and reads what bwrap would read.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from no_docker.supervisor import run as run_mod
from no_docker.supervisor.errors import NotProven
from no_docker.supervisor.isolation import syscall_filter as seccomp


class FakeLife:
    def __init__(self, directory: str | None = None) -> None:
        self.launched_pid: int | None = None
        self.directory = directory  # the marker dir: the sentinel socket (P12) is bound there

    @contextlib.contextmanager
    def into_cgroup(self):
        yield type("Into", (), {"fd": None, "enter": None})()

    def launched(self, pid: int) -> None:
        self.launched_pid = pid


class IdleMediator:
    """Stands in for the connect mediation: no filter is installed, nothing is started."""

    def __init__(self, listener: int, targets: object = None) -> None:
        os.close(listener)

    def start(self) -> None:
        pass


def _start(monkeypatch, tmp_path, machine: str | None = None) -> tuple[dict, run_mod.Run]:
    from no_docker.supervisor.isolation import mediation

    seen: dict = {}

    def argv_for(**fds: int) -> list[str]:
        seen["fds"] = {k: v for k, v in fds.items() if isinstance(v, int) and not isinstance(v, bool)}
        return ["/bin/true", "--seccomp", str(fds["seccomp_fd"]), "--", "gate"]

    def spawn(argv: list[str], env: dict, pass_fds: tuple[int, ...], **kw: object) -> tuple[int, int, None]:
        fd = seen["fds"]["seccomp_fd"]
        seen.update(argv=argv, pass_fds=pass_fds, offset=os.lseek(fd, 0, os.SEEK_CUR), spawn_kw=kw,
                    data=os.pread(fd, 1 << 16, 0), inheritable=os.get_inheritable(fd))
        return os.getpid(), os.open("/dev/null", os.O_RDONLY), None  # a live pid for pidfd_open; no start

    monkeypatch.setattr(mediation, "spawn_filtered", spawn)
    monkeypatch.setattr(mediation, "Mediator", IdleMediator)
    monkeypatch.setattr(run_mod.Run, "_start_prover", lambda self: None)  # nothing to prove here
    if machine is not None:
        real = os.uname()
        monkeypatch.setattr(run_mod.os, "uname", lambda: type(real)((*real[:4], machine)))
    run = run_mod.Run(argv_for, True, FakeLife(str(tmp_path)))
    try:
        run.start(b"plan\n", {"PATH": "/usr/bin:/bin"})
    finally:
        if run.bwrap_pidfd is not None:
            os.close(run.bwrap_pidfd)
        for fd in run.fds:
            os.close(fd)
        for fd in (run.block_w, run.go_w):
            if fd >= 0:
                os.close(fd)
        if run.sentinel is not None:
            run.sentinel.close()
    return seen, run


@pytest.mark.skipif(os.uname().machine not in seccomp.AUDIT_ARCH, reason="no filter for this arch")
def test_bwrap_gets_the_program_from_offset_zero_and_the_fd_is_closed_after(monkeypatch, tmp_path):
    seen, _ = _start(monkeypatch, tmp_path)
    fd = seen["fds"]["seccomp_fd"]
    assert fd in seen["pass_fds"] and seen["argv"][1:3] == ["--seccomp", str(fd)]
    # bwrap read()s it to EOF from the current offset (load_file_data, bubblewrap 0.8.0)
    assert seen["offset"] == 0 and seen["data"] == seccomp.program(os.uname().machine)
    assert len(set(seen["fds"].values())) == 4  # plan, seccomp, status, block
    # The same filter without its user-namespace rules rides on bwrap from its start (what the
    # prover tries); the gate's pipes go to the fixed numbers its script names.
    assert seen["spawn_kw"]["deny_filter"] == seccomp.program(os.uname().machine, userns=False)
    assert sorted(target for _, target in seen["spawn_kw"]["fixed_fds"]) == [3, 4]
    assert all(fd > 4 for fd in seen["pass_fds"])
    with pytest.raises(OSError):
        os.fstat(fd)  # closed once bwrap has it


def test_an_architecture_without_a_program_starts_nothing(monkeypatch, tmp_path):
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(NotProven) as info:
        _start(monkeypatch, tmp_path, machine="sparc64")
    assert info.value.prop == "P5" and "no syscall filter for sparc64" in str(info.value)
    assert sorted(os.listdir("/proc/self/fd")) == before  # no memfd, no pipe left open
