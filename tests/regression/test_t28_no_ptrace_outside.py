"""T-28: no ptrace and no process_vm_readv of a process outside the run."""

from __future__ import annotations

from isolation_cases import Sleeper, inside_python, require_bwrap, run

INSIDE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
    os.waitpid(pid, 0) if False else None
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    print("ptrace:attached")
else:
    print("ptrace:refused", ctypes.get_errno())
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iovec(ctypes.c_void_p(0x400000), 8)
n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
err = ctypes.get_errno()
print("vm_readv:" + ("refused %d" % err if n < 0 and err in (1, 3) else "reached"))
"""


def test_ptrace_and_vm_readv_of_outside_process_fail(tmp_path):
    require_bwrap()
    sleeper = Sleeper()
    try:
        result = run(["--quiet", "--", *inside_python(INSIDE), str(sleeper.pid)], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "ptrace:refused" in result.stdout, result.stdout
        assert "vm_readv:refused" in result.stdout, result.stdout
        assert sleeper.alive()
    finally:
        sleeper.close()
