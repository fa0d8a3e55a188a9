"""The filter's nested-user-namespace rules (``syscall_filter.userns_rules``), run through the
classic-BPF interpreter of test_probe_seccomp.py: pure, no kernel. That the real filter refuses
a real unshare/clone is T-48 (tests/regression/test_t48_nested_userns_denied.py)."""

from __future__ import annotations

import errno
import sys

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

    unshare, clone, clone3 = probe.USERNS_SYSCALLS[arch]
    assert (unshare, clone) == (NAMES[arch]["unshare"], NAMES[arch]["clone"]) and clone3 == seccomp.CLONE3
    assert probe.CLONE_NEWUSER == seccomp.CLONE_NEWUSER == NEWUSER
    assert sorted(probe.USERNS_SYSCALLS) == ARCHES


TRY = "import sys; sys.path.insert(0, sys.argv[1]); import probe; print(probe.try_nested_userns(sys.argv[2]))"


def _try_in_sandbox(flags: list[str], rules: dict[int, tuple[int, bool]] | None) -> str:
    """``probe.try_nested_userns`` in a bwrap sandbox with FLAGS and a filter whose user-namespace
    rules for this arch are RULES (None: no filter at all)."""
    import os
    import shutil
    import subprocess

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap)")
    arch = os.uname().machine
    if arch not in seccomp.AUDIT_ARCH:
        pytest.skip(f"no filter for {arch}")
    argv = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-all", *flags,
            "--cap-drop", "ALL"]
    pass_fds: tuple[int, ...] = ()
    fd = -1
    if rules is not None:
        saved = seccomp.USERNS_RULES[arch]
        seccomp.USERNS_RULES[arch] = rules
        try:
            program = seccomp.program(arch)
        finally:
            seccomp.USERNS_RULES[arch] = saved
        fd = os.memfd_create("filter", 0)
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        argv += ["--seccomp", str(fd)]
        pass_fds = (fd,)
    from no_docker.supervisor.isolation import probe

    argv += ["--", sys.executable, "-I", "-S", "-c", TRY, os.path.dirname(probe.__file__), arch]
    try:
        out = subprocess.run(argv, pass_fds=pass_fds, capture_output=True, text=True, timeout=60)
    finally:
        if fd >= 0:
            os.close(fd)
    if out.returncode != 0:
        pytest.skip(f"bwrap cannot make this sandbox here: {out.stderr.strip()}")
    return out.stdout.strip()


def test_the_probe_try_finds_each_way_in_that_is_left_open():
    arch = __import__("os").uname().machine
    clone = NAMES.get(arch, {}).get("clone")
    # Nothing denies: the first try succeeds. The run's rules but clone's: the next way in is
    # found (the clone's new process exits at once).
    assert _try_in_sandbox([], None) == "unshare(CLONE_NEWUSER) succeeded"
    rules = dict(seccomp.USERNS_RULES.get(arch, {}))
    assert _try_in_sandbox([], {k: v for k, v in rules.items() if k != clone}) == \
        "clone(CLONE_NEWUSER) succeeded"
    # the filter alone (clone3 ENOSYS), the kernel's limit alone (ENOSPC), and both
    assert _try_in_sandbox([], rules) == "None"
    assert _try_in_sandbox(["--unshare-user", "--disable-userns"], None) == "None"
    assert _try_in_sandbox(["--unshare-user", "--disable-userns"], rules) == "None"
