"""T-64: nothing a run can prepare runs with more than CMD has while the sandbox is proven,
and nothing of the proof outlives it (red-team review of the held sandbox and its prover).

The prover tries ``sudo -n true`` inside the held sandbox, from the first absolute PATH dir
outside every writable place. Here that is a read-only tool dir (under /srv) holding a stand-in
``sudo`` that records what it was given and, in the second case, leaves a process behind:

* it gets a fixed environment (not the run's: a kept ``LD_LIBRARY_PATH`` into the work dir
  made the real sudo load a library a previous run left there, whose code then ran while the
  sandbox was held, beside /proc/1/fd of bwrap's O_PATH /proc of the host and the gate's pipe)
  and no descriptor but 0-2 (not the supervisor's, nor one the caller let it inherit);
* a process it leaves behind is found before the verdict: the run is refused (125), CMD never
  starts, and nothing is left after the ending.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from isolation_cases import require_bwrap, run

STAND_IN = """#!/usr/bin/python3 -I
# A stand-in for sudo: what it was given goes to the work dir; it fails, as sudo must.
import os, sys
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
open_now = [fd for fd in fds if os.path.exists(f"/proc/self/fd/{{fd}}")]  # not listdir's own
with open({record!r}, "w") as f:
    f.write("\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items()) + "\\n")
    f.write("FDS " + " ".join(map(str, open_now)) + "\\n")
if {leave!r}:
    if os.fork() == 0:
        os.setsid()
        os.execv("/bin/sleep", ["sleep", "31.6417"])
sys.exit(1)
"""


@pytest.fixture
def tools_dir():
    """A tool dir the prover will take its sudo from: outside every place a run may write
    (not under /tmp: the run's /tmp is writable, and such PATH dirs are skipped), so under
    /srv, which the run sees read-only."""
    if not os.access("/srv", os.W_OK):
        pytest.skip("needs a writable /srv for a tool dir outside every writable place (run as root)")
    tools = Path(tempfile.mkdtemp(prefix="no-docker-t64-", dir="/srv"))
    os.chmod(tools, 0o755)
    try:
        yield tools
    finally:
        shutil.rmtree(tools, ignore_errors=True)


def _tools(tools: Path, record: Path, leave: bool = False) -> Path:
    sudo = tools / "sudo"
    sudo.write_text(STAND_IN.format(record=str(record), leave=leave))
    sudo.chmod(0o755)
    return tools


def _env(tools: Path, work: Path) -> dict[str, str]:
    return dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", LD_LIBRARY_PATH=str(work / "lib"),
                T64_KEPT="kept")


def test_the_sudo_try_gets_a_fixed_environment_and_no_descriptor(tmp_path, tools_dir):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    record = work / "sudo-was-given"
    tools = _tools(tools_dir, record)
    read_end, write_end = os.pipe()  # a descriptor the caller lets no-docker inherit
    os.set_inheritable(write_end, True)
    try:
        result = run(["--keep-env", "LD_LIBRARY_PATH", "--keep-env", "T64_KEPT", "--",
                      "sh", "-c", "echo CMD RAN"], cwd=work, env=_env(tools, work), pass_fds=(write_end,))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "CMD RAN\n"
    given = record.read_text()  # the stand-in ran: the try is real
    names = {line.split("=", 1)[0] for line in given.splitlines() if "=" in line}
    assert "LD_LIBRARY_PATH" not in names and "T64_KEPT" not in names, given
    fds = next(line for line in given.splitlines() if line.startswith("FDS ")).split()[1:]
    assert fds == ["0", "1", "2"], given


def test_a_process_the_proof_left_refuses_the_run(tmp_path, tools_dir):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    record = work / "sudo-was-given"
    tools = _tools(tools_dir, record, leave=True)
    marker = work / "cmd-ran"
    result = run(["--", "sh", "-c", f"touch {marker}"], cwd=work, env=_env(tools, work))
    assert record.exists(), result.stderr  # the stand-in ran
    assert result.returncode == 125, result.stderr
    assert "P1 not proven: processes" in result.stderr and "outlived it" in result.stderr, result.stderr
    assert not marker.exists(), "CMD ran although something of the proof lived on"
    # A duration nothing else uses: the stand-in's own leftover, found by its command line.
    left = subprocess.run(["pgrep", "-f", "^sleep 31.6417$"], capture_output=True, text=True,
                          timeout=120).stdout.split()
    for pid in left:  # ours (the test's stand-in) and never to be left: end it, then fail
        os.kill(int(pid), signal.SIGKILL)
    assert not left, "a process of the proof outlived the run"


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
