"""T-64: nothing a run can prepare runs with more than CMD has while the sandbox is proven,
and nothing of the proof outlives it (red-team review of the held sandbox and its prover).

Until issue 26 the prover tried ``sudo -n true`` inside the held sandbox, from the first
absolute PATH dir outside every writable place; a kept ``LD_LIBRARY_PATH`` into the work dir
made the real sudo load a library a previous run left there, whose code then ran while the
sandbox was held. Now the per-run proof executes no program (P5 rests on what the kernel
reports of the held process: docs/isolation.md, "Why P5 needs no sudo per run"). Here a
read-only tool dir (under /srv) holds a stand-in ``sudo`` that records what it was given and
leaves a process behind:

* a run never executes it (CMD starts, the run is proven, nothing is left after the ending);
* ``no-docker check`` inside a run, which keeps the try, gives it a fixed environment (not the
  run's) and no descriptor but 0-2, and waits for it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from isolation_cases import cli, require_bwrap, run

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
        os.execv("/bin/sleep", ["sleep", {pause!r}])
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
    sudo.write_text(STAND_IN.format(record=str(record), leave=leave, pause=PAUSE))
    sudo.chmod(0o755)
    return tools


def _env(tools: Path, work: Path) -> dict[str, str]:
    return dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", LD_LIBRARY_PATH=str(work / "lib"),
                T64_KEPT="kept")


# A duration nothing else uses, this session's own: the weakened t64 build, run beside the suite,
# leaves its stand-in's sleep too, in a pid namespace this process sees.
PAUSE = f"31.{os.getpid():07d}{time.time_ns() % 1000:03d}"


def _left_behind() -> list[str]:
    """The stand-in's leftover, found by its command line (a duration nothing else uses); ours
    (the test's stand-in) and never to be left: ended here, and the caller fails."""
    left = subprocess.run(["pgrep", "-f", f"^sleep {re.escape(PAUSE)}$"], capture_output=True, text=True,
                          timeout=120).stdout.split()
    for pid in left:
        os.kill(int(pid), signal.SIGKILL)
    return left


def test_the_proof_of_a_run_executes_no_sudo(tmp_path, tools_dir):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    record = work / "sudo-was-given"
    tools = _tools(tools_dir, record, leave=True)
    marker = work / "cmd-ran"
    try:
        result = run(["--report", str(tmp_path / "report.json"), "--", "sh", "-c", f"touch {marker}"],
                     cwd=work, env=_env(tools, work))
    finally:
        left = _left_behind()
    assert result.returncode == 0, result.stderr
    assert marker.exists(), "CMD did not run"
    assert '"P5"' in (tmp_path / "report.json").read_text(), "P5 is not among the proven properties"
    assert not record.exists(), f"the proof ran the sudo on PATH: {record.read_text()}"
    assert not left, "a process of the proof outlived the run"


def test_the_sudo_try_of_check_gets_a_fixed_environment_and_no_descriptor(tmp_path, tools_dir):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    record = work / "sudo-was-given"
    tools = _tools(tools_dir, record)
    read_end, write_end = os.pipe()  # a descriptor the caller lets no-docker inherit
    os.set_inheritable(write_end, True)
    try:
        result = run(["--keep-env", "LD_LIBRARY_PATH", "--keep-env", "T64_KEPT", "--", *cli("check")],
                     cwd=work, env=_env(tools, work), pass_fds=(write_end,))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 0, result.stdout + result.stderr
    assert record.exists(), f"check did not try the sudo on PATH: {result.stdout}"  # the try is real
    given = record.read_text()
    names = {line.split("=", 1)[0] for line in given.splitlines() if "=" in line}
    assert "LD_LIBRARY_PATH" not in names and "T64_KEPT" not in names, given
    fds = next(line for line in given.splitlines() if line.startswith("FDS ")).split()[1:]
    assert fds == ["0", "1", "2"], given


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
