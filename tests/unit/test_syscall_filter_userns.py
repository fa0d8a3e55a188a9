"""The filter's nested-user-namespace rules (``syscall_filter.userns_rules``), run through the
classic-BPF interpreter of test_probe_seccomp.py: pure, no kernel. That the real filter refuses
a real unshare/clone is T-48 (tests/regression/test_t48_nested_userns_denied.py)."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.isolation import syscall_filter as seccomp
from test_probe_seccomp import errno_of, run_bpf

NEWUSER = 0x10000000
NAMES = {"x86_64": {"clone": 56, "unshare": 272, "setns": 308},
         "aarch64": {"clone": 220, "unshare": 97, "setns": 268}}
ARCHES = sorted(seccomp.AUDIT_ARCH)


def answer(arch: str, nr: int, args: tuple[int, ...]) -> int | None:
    return errno_of(run_bpf(seccomp.program(arch), nr, seccomp.AUDIT_ARCH[arch], args))


@pytest.mark.parametrize("arch", ARCHES)
def test_the_rule_table_names_the_syscalls_of_each_arch(arch):
    # Numbers from the kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl,
    # include/uapi/asm-generic/unistd.h): a wrong number would refuse nothing.
    assert {nr: arg for nr, (arg, _) in seccomp.USERNS_RULES[arch].items()} == {
        NAMES[arch]["clone"]: 0, NAMES[arch]["unshare"]: 0, NAMES[arch]["setns"]: 1}


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("call", ["clone", "unshare"])
def test_clone_and_unshare_refused_with_newuser_only(arch, call):
    nr = NAMES[arch][call]
    sigchld = 17
    assert answer(arch, nr, (NEWUSER | sigchld, 0, 0, 0, 0, 0)) == errno.EPERM
    assert answer(arch, nr, (NEWUSER | 0x00020000 | 0x02000000, 0, 0, 0, 0, 0)) == errno.EPERM
    # fork-like clone, threads, and unshare of what needs no user namespace stay allowed
    for flags in (sigchld, 0x003D0F00, 0x00020000, 0):
        assert answer(arch, nr, (flags, 0, 0, 0, 0, 0)) is None, hex(flags)


@pytest.mark.parametrize("arch", ARCHES)
def test_setns_refused_into_a_user_namespace_or_any_namespace(arch):
    nr = NAMES[arch]["setns"]
    assert answer(arch, nr, (3, NEWUSER, 0, 0, 0, 0)) == errno.EPERM
    assert answer(arch, nr, (3, 0, 0, 0, 0, 0)) == errno.EPERM  # 0: whatever fd 3 is
    assert answer(arch, nr, (3, 0x40000000, 0, 0, 0, 0)) is None  # CLONE_NEWNET


@pytest.mark.parametrize("arch", ARCHES)
def test_clone3_is_enosys_whatever_its_arguments(arch):
    assert answer(arch, seccomp.CLONE3, (0, 88, 0, 0, 0, 0)) == errno.ENOSYS


@settings(max_examples=300, deadline=None)
@given(arch=st.sampled_from(ARCHES), call=st.sampled_from(["clone", "unshare", "setns"]),
       low=st.integers(0, 0xFFFFFFFF), high=st.integers(0, 0xFFFFFFFF), other=st.integers(0, 2**64 - 1))
def test_refused_exactly_when_the_flags_ask_for_a_user_namespace(arch, call, low, high, other):
    nr = NAMES[arch][call]
    flags = low | high << 32  # the kernel's flags are unsigned long: CLONE_NEWUSER is in the low half
    args = (other, flags, 0, 0, 0, 0) if call == "setns" else (flags, other, 0, 0, 0, 0)
    # setns's nstype is an int: only the low half counts, and 0 joins whatever the fd is
    refused = bool(low & NEWUSER) or (call == "setns" and low == 0)
    assert answer(arch, nr, args) == (errno.EPERM if refused else None), (arch, call, hex(flags))


@pytest.mark.parametrize("arch", ARCHES)
def test_the_probe_tries_the_syscalls_the_filter_refuses(arch):
    # probe.py runs as a script (`python -I -S`) and keeps its own copy of the numbers.
    from no_docker.supervisor.isolation import probe

    clone, clone3 = probe.USERNS_SYSCALLS[arch]
    assert clone == NAMES[arch]["clone"] and clone3 == seccomp.CLONE3
    assert probe.CLONE_NEWUSER == seccomp.CLONE_NEWUSER == NEWUSER
    assert sorted(probe.USERNS_SYSCALLS) == ARCHES
