"""The run's syscall filter (P5, P10): a classic-BPF program that bwrap applies (``--seccomp FD``).

bwrap 0.8.0 reads the program from FD (``read()`` from the current offset to EOF, a multiple
of 8 bytes) inside the new namespaces, closes FD, and applies it with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` in *both* processes it keeps there: its init
(pid 1, in ``do_init``) and the child, as the last step before ``execve`` of the probe
(bubblewrap.c: ``seccomp_program_new``, ``seccomp_programs_apply``). bwrap has set
``no_new_privs``, so no privilege is needed; every process of the run inherits the filter, and
a filter can never be removed (seccomp(2)). The probe proves it by trying (``probe.p5_filter``).

Standard library only (``errno``): ``run.Run.start`` imports this on every run.

Why each rule:
* a mode with S_ISUID/S_ISGID (chmod, fchmod, fchmodat(2), open/openat/creat, mknod(at)): as
  root, uid 0 inside is uid 0 outside, so `chmod 4755` in the work dir planted a setuid-root
  program that any local user could run after the run (found by the red-team review);
* io_uring_*: its OPENAT op carries a mode the filter cannot see; openat2: its mode is in a
  struct behind a pointer (ENOSYS: callers fall back to openat);
* keyctl/add_key/request_key: the session keyring is the caller's (bwrap makes no new one),
  and request_key makes the host kernel run /sbin/request-key as root;
* sendto/sendmsg/sendmmsg with MSG_FASTOPEN (P12): a TCP Fast Open send connects without
  connect(2), around the connect mediation;
* socket/socketpair with AF_VSOCK (P13): vsock is in no network namespace and reaches the
  hypervisor host and its VMs; the probe tries it (``probe.p13``);
* the rest is DESIGN §4's list: ptrace, process_vm_*, bpf, perf_event_open, userfaultfd,
  kernel modules, kexec;
* a nested user namespace (``USERNS_RULES``): unshare/clone with CLONE_NEWUSER, and setns to a
  user namespace, EPERM; clone3, whose flags lie in a struct behind a pointer that BPF cannot
  read, ENOSYS (glibc, musl and Rust then fall back to clone, as under Docker's default
  profile). Unmapped, such a namespace held every capability over its own mount and cgroup
  namespaces: it could mount cgroup2/v1 writable, lift ``--max-pids``, freeze the sandbox's
  init and leave cgroups behind (red-team review). bwrap's ``--disable-userns`` denies the same
  through the kernel's own limit (policy.py); this filter holds even where that flag is absent.
Syscalls of another ABI (i386 through int 0x80, x32) are refused outright: their numbers differ.
"""

from __future__ import annotations

import errno

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# arch -> {syscall number: index of its mode argument}
MODE_SYSCALLS = {
    "x86_64": {2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 257: 3, 259: 2, 268: 2, 452: 2},
    "aarch64": {56: 3, 33: 2, 52: 1, 53: 2, 452: 2},
}
# arch -> {syscall number: errno returned}
DENIED_SYSCALLS = {
    "x86_64": {425: errno.ENOSYS, 426: errno.ENOSYS, 427: errno.ENOSYS, 437: errno.ENOSYS,
               248: errno.EPERM, 249: errno.EPERM, 250: errno.EPERM, 101: errno.EPERM,
               310: errno.EPERM, 311: errno.EPERM, 321: errno.EPERM, 298: errno.EPERM,
               323: errno.EPERM, 175: errno.EPERM, 313: errno.EPERM, 176: errno.EPERM,
               246: errno.EPERM, 320: errno.EPERM},
    "aarch64": {425: errno.ENOSYS, 426: errno.ENOSYS, 427: errno.ENOSYS, 437: errno.ENOSYS,
                217: errno.EPERM, 218: errno.EPERM, 219: errno.EPERM, 117: errno.EPERM,
                270: errno.EPERM, 271: errno.EPERM, 280: errno.EPERM, 241: errno.EPERM,
                282: errno.EPERM, 105: errno.EPERM, 273: errno.EPERM, 106: errno.EPERM,
                104: errno.EPERM, 294: errno.EPERM},
}
# arch -> (socket, socketpair): AF_VSOCK refused (P13). vsock belongs to no network namespace:
# it reaches the hypervisor host and its VMs (Docker Desktop runs its engine in one). The
# domain is the first argument, in a register, so the filter sees exactly what the kernel will.
SOCKET_SYSCALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}
AF_VSOCK = 40
# arch -> {syscall: index of its flags argument}: sendto/sendmsg/sendmmsg with MSG_FASTOPEN
# refused (EOPNOTSUPP, what the kernel says when client TCP Fast Open is off). A Fast Open
# send *connects* without connect(2) (tcp_sendmsg_fastopen), so the connect mediation (P12)
# would never see it: an outside TCP socket passed in could reach the host's loopback.
FASTOPEN_SYSCALLS = {"x86_64": {44: 3, 46: 2, 307: 3}, "aarch64": {206: 3, 211: 2, 269: 3}}
MSG_FASTOPEN = 0x20000000
# arch -> {syscall number: (index of its flags argument, refuse when the flags are 0 too)}.
# setns(fd, 0) joins whatever namespace FD is, a user namespace included.
USERNS_RULES = {
    "x86_64": {56: (0, False), 272: (0, False), 308: (1, True)},  # clone, unshare, setns
    "aarch64": {220: (0, False), 97: (0, False), 268: (1, True)},
}
CLONE3 = 435  # the same number on both
CLONE_NEWUSER = 0x10000000
SETID_BITS = 0o6000
X32_SYSCALL_BIT = 0x40000000
# Classic BPF (linux/filter.h, linux/seccomp.h): struct seccomp_data is {int nr; u32 arch;
# u64 ip; u64 args[6]}; the low half of args[i] is at 16 + 8 i on little-endian machines.
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def program(arch: str, *, userns: bool = True) -> bytes:
    """The filter for ARCH as an array of ``struct sock_filter`` (8 bytes each): refuse setuid and
    setgid modes, and the DENIED_SYSCALLS (and ``userns_rules``); allow everything else. KeyError
    for an unknown ARCH (the run is then refused: it never runs unfiltered).

    ``userns=False`` leaves the user-namespace rules out: that variant is installed on bwrap
    itself before it starts (``mediation.spawn_filtered``), so that the run's prover, forked
    from the same thread, carries the very filter it proves; bwrap needs ``clone``/``unshare``
    with CLONE_NEWUSER to build the sandbox. The whole program follows through ``--seccomp``
    (applied after the proof) and ``--disable-userns`` denies nested namespaces before it."""
    audit_arch = AUDIT_ARCH[arch]
    insns: list[tuple[int, int, int, int]] = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, audit_arch),
                                              (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS), (_LD_ABS, 0, 0, 0)]
    if arch == "x86_64":
        insns += [(_JGE, 0, 1, X32_SYSCALL_BIT), (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for nr, code in sorted(DENIED_SYSCALLS[arch].items()):
        insns += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _RET_ERRNO | code)]
    if userns:
        insns += userns_rules(arch)
    for nr in SOCKET_SYSCALLS[arch]:
        # errno EAFNOSUPPORT: what a kernel without vsock says, which callers already handle.
        insns += [(_JEQ, 0, 4, nr), (_LD_ABS, 0, 0, 16), (_JEQ, 0, 1, AF_VSOCK),
                  (_RET, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT), (_RET, 0, 0, _RET_ALLOW)]
    for nr, arg in sorted(FASTOPEN_SYSCALLS[arch].items()):
        insns += [(_JEQ, 0, 4, nr), (_LD_ABS, 0, 0, 16 + 8 * arg), (_JSET, 0, 1, MSG_FASTOPEN),
                  (_RET, 0, 0, _RET_ERRNO | errno.EOPNOTSUPP), (_RET, 0, 0, _RET_ALLOW)]
    for nr, arg in sorted(MODE_SYSCALLS[arch].items()):
        insns += [(_JEQ, 0, 4, nr), (_LD_ABS, 0, 0, 16 + 8 * arg), (_JSET, 0, 1, SETID_BITS),
                  (_RET, 0, 0, _RET_ERRNO | errno.EPERM), (_RET, 0, 0, _RET_ALLOW)]
    insns.append((_RET, 0, 0, _RET_ALLOW))
    return b"".join(code.to_bytes(2, "little") + bytes((jt, jf)) + k.to_bytes(4, "little")
                    for code, jt, jf, k in insns)


def userns_rules(arch: str) -> list[tuple[int, int, int, int]]:
    """The instructions that refuse a nested user namespace (``USERNS_RULES``, clone3), for a
    program whose accumulator holds the syscall number; each rule either returns or falls
    through with the number reloaded."""
    insns = [(_JEQ, 0, 1, CLONE3), (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for nr, (arg, zero_too) in sorted(USERNS_RULES[arch].items()):
        # nr? load the flags' low half (CLONE_NEWUSER is bit 28); refuse; else reload nr.
        body = [(_LD_ABS, 0, 0, 16 + 8 * arg)]
        if zero_too:
            body.append((_JEQ, 1, 0, 0))
        body += [(_JSET, 0, 1, CLONE_NEWUSER), (_RET, 0, 0, _RET_ERRNO | errno.EPERM), (_LD_ABS, 0, 0, 0)]
        insns += [(_JEQ, 0, len(body), nr), *body]
    return insns
