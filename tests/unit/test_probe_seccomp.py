"""The probe's syscall filter (``probe.seccomp_program``), run through a small classic-BPF
interpreter: pure, no kernel involved. The real filter is tried in
``test_isolation_redteam.py``."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor import probe

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


X86 = probe.AUDIT_ARCH["x86_64"]


@pytest.mark.parametrize("arch", sorted(probe.AUDIT_ARCH))
def test_program_is_whole_instructions_and_short(arch):
    program = probe.seccomp_program(arch)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS


@pytest.mark.parametrize(("nr", "arg", "name"), [(90, 1, "chmod"), (91, 1, "fchmod"), (268, 2, "fchmodat"),
                                                 (452, 2, "fchmodat2"), (257, 3, "openat"), (2, 2, "open"),
                                                 (85, 1, "creat"), (133, 1, "mknod"), (259, 2, "mknodat")])
def test_setid_modes_refused_other_modes_allowed_x86_64(nr, arg, name):
    program = probe.seccomp_program("x86_64")
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
    assert errno_of(run_bpf(probe.seccomp_program("x86_64"), nr, X86)) == expected


def test_other_abis_refused():
    program = probe.seccomp_program("x86_64")
    assert errno_of(run_bpf(program, 15, 0x40000003)) == errno.ENOSYS  # i386 through int 0x80
    assert errno_of(run_bpf(program, 0x40000000 | 90, X86)) == errno.ENOSYS  # x32 chmod


@settings(max_examples=300, deadline=None)
@given(arch=st.sampled_from(sorted(probe.AUDIT_ARCH)), mode=st.integers(0, 0xFFFFFFFF),
       high=st.integers(0, 0xFFFFFFFF), data=st.data())
def test_any_mode_is_refused_exactly_when_it_holds_setid_bits(arch, mode, high, data):
    nr, arg = data.draw(st.sampled_from(sorted(probe.MODE_SYSCALLS[arch].items())))
    args = [0] * 6
    args[arg] = mode | high << 32  # the kernel truncates mode_t to 32 bits: only the low half counts
    verdict = run_bpf(probe.seccomp_program(arch), nr, probe.AUDIT_ARCH[arch], tuple(args))
    assert errno_of(verdict) == (errno.EPERM if mode & 0o6000 else None), (arch, nr, oct(mode))


@settings(max_examples=200, deadline=None)
@given(arch=st.sampled_from(sorted(probe.AUDIT_ARCH)), nr=st.integers(0, 600),
       args=st.tuples(*[st.integers(0, 2**64 - 1)] * 6))
def test_every_other_syscall_is_allowed_whatever_its_arguments(arch, nr, args):
    if nr in probe.MODE_SYSCALLS[arch] or nr in probe.DENIED_SYSCALLS[arch]:
        return
    assert run_bpf(probe.seccomp_program(arch), nr, probe.AUDIT_ARCH[arch], args) == ALLOW


def test_uid_map_parser():
    assert probe.maps_to_outside_root("         0          0          1\n")
    assert not probe.maps_to_outside_root("         0       1000          1\n")
    assert not probe.maps_to_outside_root("")


def test_unknown_arch_has_no_program():
    with pytest.raises(KeyError):
        probe.seccomp_program("sparc")
