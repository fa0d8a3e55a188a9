"""The run's syscall filter (``seccomp.program``, which bwrap applies: ``--seccomp FD``), run
through a small classic-BPF interpreter: pure, no kernel involved; and what the probe expects
of it. The real filter is tried in ``test_isolation_redteam.py``."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.isolation import probe
from no_docker.supervisor.isolation import syscall_filter as seccomp

ALLOW = 0x7FFF0000


def errno_of(verdict: int) -> int | None:
    return None if verdict == ALLOW else verdict & 0xFFFF


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """Evaluate PROGRAM (struct sock_filter[]) over one struct seccomp_data, as the kernel does
    for the few opcodes a seccomp filter of ours uses; anything else is a test failure."""
    data = (nr.to_bytes(4, "little", signed=nr < 0) + arch.to_bytes(4, "little") + bytes(8)
            + b"".join(a.to_bytes(8, "little") for a in args))
    insns = [(int.from_bytes(program[i:i + 2], "little"), program[i + 2], program[i + 3],
              int.from_bytes(program[i + 4:i + 8], "little")) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns)):  # no loops in cBPF: every jump is forward
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = int.from_bytes(data[k:k + 4], "little")
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x} at {pc}")
    raise AssertionError("fell off the end of the program")


X86 = seccomp.AUDIT_ARCH["x86_64"]


@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
def test_program_is_whole_instructions_and_short(arch):
    program = seccomp.program(arch)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS


@pytest.mark.parametrize(("nr", "arg", "name"), [(90, 1, "chmod"), (91, 1, "fchmod"), (268, 2, "fchmodat"),
                                                 (452, 2, "fchmodat2"), (257, 3, "openat"), (2, 2, "open"),
                                                 (85, 1, "creat"), (133, 1, "mknod"), (259, 2, "mknodat")])
def test_setid_modes_refused_other_modes_allowed_x86_64(nr, arg, name):
    program = seccomp.program("x86_64")
    for mode, expected in ((0o4755, errno.EPERM), (0o2755, errno.EPERM), (0o6700, errno.EPERM),
                           (0o755, None), (0o1777, None), (0o644, None)):
        args = [0] * 6
        args[arg] = mode
        assert errno_of(run_bpf(program, nr, X86, tuple(args))) == expected, (name, oct(mode))


@pytest.mark.parametrize(("nr", "expected"), [(425, errno.ENOSYS), (426, errno.ENOSYS), (427, errno.ENOSYS),
                                              (437, errno.ENOSYS), (248, errno.EPERM), (249, errno.EPERM),
                                              (250, errno.EPERM), (101, errno.EPERM), (321, errno.EPERM),
                                              (0, None), (1, None), (59, None), (42, None), (56, None)])
def test_denied_and_ordinary_syscalls_x86_64(nr, expected):
    assert errno_of(run_bpf(seccomp.program("x86_64"), nr, X86)) == expected


def test_other_abis_refused():
    program = seccomp.program("x86_64")
    assert errno_of(run_bpf(program, 15, 0x40000003)) == errno.ENOSYS  # i386 through int 0x80
    assert errno_of(run_bpf(program, 0x40000000 | 90, X86)) == errno.ENOSYS  # x32 chmod


@settings(max_examples=300, deadline=None)
@given(arch=st.sampled_from(sorted(seccomp.AUDIT_ARCH)), mode=st.integers(0, 0xFFFFFFFF),
       high=st.integers(0, 0xFFFFFFFF), data=st.data())
def test_any_mode_is_refused_exactly_when_it_holds_setid_bits(arch, mode, high, data):
    nr, arg = data.draw(st.sampled_from(sorted(seccomp.MODE_SYSCALLS[arch].items())))
    args = [0] * 6
    args[arg] = mode | high << 32  # the kernel truncates mode_t to 32 bits: only the low half counts
    verdict = run_bpf(seccomp.program(arch), nr, seccomp.AUDIT_ARCH[arch], tuple(args))
    assert errno_of(verdict) == (errno.EPERM if mode & 0o6000 else None), (arch, nr, oct(mode))


@settings(max_examples=200, deadline=None)
@given(arch=st.sampled_from(sorted(seccomp.AUDIT_ARCH)), nr=st.integers(0, 600),
       args=st.tuples(*[st.integers(0, 2**64 - 1)] * 6))
def test_every_other_syscall_is_allowed_whatever_its_arguments(arch, nr, args):
    if (nr in seccomp.MODE_SYSCALLS[arch] or nr in seccomp.DENIED_SYSCALLS[arch]
            or nr in seccomp.USERNS_RULES[arch] or nr == seccomp.CLONE3
            or nr in seccomp.SOCKET_SYSCALLS[arch] or nr in seccomp.FASTOPEN_SYSCALLS[arch]):
        # Their rules: above, below (vsock, MSG_FASTOPEN: a random flags word has that bit half
        # the time; hypothesis drew aarch64's sendmsg with it) and test_syscall_filter_userns.py.
        return
    assert run_bpf(seccomp.program(arch), nr, seccomp.AUDIT_ARCH[arch], args) == ALLOW


@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
def test_checks_tries_are_denied_by_the_program_with_the_errno_it_expects(arch):
    # probe.FILTER_TRIES duplicates a few numbers (the probe runs as a script, `python -I -S`,
    # and cannot import this module): they must be the program's.
    assert sorted(probe.FILTER_TRIES) == sorted(seccomp.AUDIT_ARCH)
    names = [name for name, *_ in probe.FILTER_TRIES[arch]]
    assert names == ["io_uring_setup", "openat2", "keyctl", "ptrace"]
    for name, nr, _args, expected in probe.FILTER_TRIES[arch]:
        assert seccomp.DENIED_SYSCALLS[arch][nr] == expected, name
        assert errno_of(run_bpf(seccomp.program(arch), nr, seccomp.AUDIT_ARCH[arch])) == expected, name


def test_setid_tries_report_an_unfiltered_process(tmp_path):
    # No filter here (the test process): the first try succeeds and is named.
    assert probe.try_setid_modes(str(tmp_path)) == f"open(O_TMPFILE, 04700) in {tmp_path} succeeded"
    with pytest.raises(OSError):
        probe.try_setid_modes(str(tmp_path / "missing"))


GATE_P5 = """
import sys
sys.path.insert(0, sys.argv[1])
import probe
p = probe.Probe({}, gate=GATE)
p._status = {"Seccomp": "2"}
probe.init_seccomp_mode = lambda: "2"
probe.try_setid_modes = lambda directory: None
probe.try_open_rw = lambda path: 13
try:
    p.p5_filter()
except probe.NotProven as err:
    print("NOT-PROVEN", err)
print("ctypes" in sys.modules, "_ctypes" in sys.modules)
"""


@pytest.mark.parametrize("gate", [True, False])
def test_the_rest_of_the_filter_is_tried_through_ctypes_core_only(gate):
    # `import ctypes` alone was ~5 ms a run: the tries of io_uring, openat2, keyctl and ptrace
    # (check, and the held prover) go through `_ctypes`, which the supervisor loads anyway. A
    # gate without a held sandbox (the unit-level Probe) tries none of them.
    import os
    import subprocess
    import sys

    code = GATE_P5.replace("GATE", str(gate))
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code, os.path.dirname(probe.__file__)],
                         capture_output=True, text=True, timeout=30)
    if gate:
        assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr
    else:
        # outside any filter: the io_uring try is what fails, through _ctypes, not ctypes
        assert out.stdout.splitlines()[-1] == "False True", out.stdout + out.stderr
        assert "io_uring_setup() answered" in out.stdout, out.stdout


def test_unknown_arch_has_no_program():
    with pytest.raises(KeyError):
        seccomp.program("sparc")


def test_the_program_module_is_cheap_to_import():
    # Run.start imports it on every run: the standard library's errno, nothing else.
    import subprocess
    import sys

    code = ("import sys; before = set(sys.modules); import no_docker.supervisor.isolation.syscall_filter; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert set(out.stdout.split()) <= {"no_docker", "no_docker.supervisor", "no_docker.supervisor.isolation",
                                       "no_docker.supervisor.isolation.syscall_filter", "errno"}, out.stdout


@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
@given(domain=st.integers(0, 2**32 - 1), kind=st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_vsock_refused_every_other_domain_allowed(arch, domain, kind):
    # P13: socket() and socketpair() with AF_VSOCK get EAFNOSUPPORT, whatever the type; every
    # other domain (AF_UNIX, AF_INET, AF_NETLINK...) passes untouched.
    program = seccomp.program(arch)
    audit = seccomp.AUDIT_ARCH[arch]
    for nr in seccomp.SOCKET_SYSCALLS[arch]:
        expected = errno.EAFNOSUPPORT if domain == seccomp.AF_VSOCK else None
        assert errno_of(run_bpf(program, nr, audit, (domain, kind, 0, 0, 0, 0))) == expected
        vsock_args = (seccomp.AF_VSOCK, kind, 0, 0, 0, 0)
        assert errno_of(run_bpf(program, nr, audit, vsock_args)) == errno.EAFNOSUPPORT


@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
@given(flags=st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_fastopen_sends_refused_other_sends_allowed(arch, flags):
    # A TCP Fast Open send connects without connect(2): the mediation would never see it.
    program = seccomp.program(arch)
    audit = seccomp.AUDIT_ARCH[arch]
    for nr, arg in seccomp.FASTOPEN_SYSCALLS[arch].items():
        args = [0] * 6
        args[arg] = flags
        expected = errno.EOPNOTSUPP if flags & seccomp.MSG_FASTOPEN else None
        assert errno_of(run_bpf(program, nr, audit, tuple(args))) == expected
