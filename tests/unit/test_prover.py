"""The prover (supervisor/isolation/prover.py): its pure parts, and the claims it rests on, tried.

* ``held_in_read`` / ``await_held``: the sandbox is taken as held only while it sleeps in
  read(2) on the block fd;
* ``session_problem``: P8 from outside;
* ``seal_imports``: nothing is imported from the run's view once the prover is inside;
* ``Keeper.fork``: a child forked from the spawning thread carries that thread's filters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from bounded import first_read
from hypothesis import given
from hypothesis import strategies as st
from isolation_helpers import BWRAP, bwrap_works, run_no_docker
from no_docker.supervisor.isolation import mediation, probe, prover
from no_docker.supervisor.isolation import syscall_filter as seccomp

ARCH = os.uname().machine
READ = prover.READ_SYSCALL.get(ARCH, b"0")


def test_held_only_in_read_on_the_block_fd():
    assert prover.held_in_read([READ, b"0x5", b"0x7ffd", b"0x1"], ARCH, 5)
    assert not prover.held_in_read([READ, b"0x6", b"0x7ffd", b"0x1"], ARCH, 5)  # another fd
    assert not prover.held_in_read([b"61", b"0x5"], ARCH, 5)  # wait4, not read
    assert not prover.held_in_read([b"running"], ARCH, 5)
    assert not prover.held_in_read([], ARCH, 5)
    assert not prover.held_in_read([READ, b"zz"], ARCH, 5)
    assert not prover.held_in_read([READ, b"0x5"], "sparc64", 5)  # no table: never held


@given(st.lists(st.binary(max_size=12), max_size=8), st.integers(min_value=0, max_value=4096))
def test_held_in_read_never_raises(fields, fd):
    held = prover.held_in_read(fields, ARCH, fd)
    assert held == (len(fields) >= 2 and fields[0] == READ and _hex(fields[1]) == fd)


def _hex(field: bytes) -> int | None:
    try:
        return int(field, 16)
    except ValueError:
        return None


def _stat(session: int, tty: int, comm: str = "bwrap") -> str:
    return f"123 ({comm}) S 100 123 {session} {tty} -1 4194560 0 0 0 0"


def test_session_problem_from_outside():
    assert prover.session_problem(_stat(555, 0), caller_session=777) is None
    assert "caller's session" in prover.session_problem(_stat(777, 0), caller_session=777)
    assert "controlling terminal" in prover.session_problem(_stat(555, 34816), caller_session=777)
    # A command name with spaces and parentheses: fields are taken after the last ')'.
    assert prover.session_problem(_stat(555, 0, comm="a) b (c"), caller_session=777) is None
    assert "cannot read" in prover.session_problem("123 (x) S", caller_session=777)


def test_await_held_returns_once_the_process_reads_the_fd_and_refuses_otherwise():
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", f"import os; os.read({r}, 1)"], pass_fds=(r,))
    try:
        prover.await_held(child.pid, r, timeout=10)  # it gets there: returns
        with pytest.raises(probe.NotProven, match="not held for the proof within"):
            prover.await_held(child.pid, r + 100, timeout=0.2)  # never reads that one
    finally:
        os.write(w, b"x")
        child.wait(timeout=30)
        os.close(r)
        os.close(w)
    with pytest.raises(probe.NotProven, match="gone before the proof"):
        prover.await_held(child.pid, r, timeout=1)


def test_sealed_imports_load_nothing_but_built_in_modules():
    code = textwrap.dedent("""
        import sys
        from no_docker.supervisor.isolation import prover
        prover.seal_imports()
        import os, fcntl  # loaded already (prover imports them): no finder is asked
        try:
            import xml.dom  # on sys.path, not loaded yet
        except ImportError:
            print("REFUSED")
        else:
            print("LOADED")
        builtin = next(n for n in sorted(sys.builtin_module_names) if n not in sys.modules)
        __import__(builtin)  # built-in: no file is read
        print("BUILTIN", builtin)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "REFUSED" and out.stdout.startswith("REFUSED\nBUILTIN "), out.stdout


@pytest.mark.skipif(os.uname().machine not in seccomp.AUDIT_ARCH, reason="no filter for this arch")
def test_a_child_forked_by_the_keeper_carries_the_runs_filters():
    """The prover tries the run's very filters: it is forked from the thread that installed
    them, which posix_spawned the sandbox (here: sleep)."""
    deny = seccomp.program(ARCH, userns=False)
    r, w = os.pipe()
    pid, listener, keeper = mediation.spawn_filtered(["/bin/sleep", "30"], dict(os.environ), pass_fds=(),
                                                     deny_filter=deny)
    child = -1
    try:
        def report() -> None:
            import _socket

            fields = probe.status_fields(probe.read_text("/proc/self/status"))
            try:
                _socket.socket(40, _socket.SOCK_STREAM)  # AF_VSOCK: refused by the deny filter
                vsock = "made"
            except OSError as err:
                vsock = str(err.errno)
            os.write(w, f"{fields.get('Seccomp_filters')} {vsock}".encode())

        child = keeper.fork(report)
        os.close(w)
        w = -1
        answer = first_read(r, 30, 100).decode()
        own = probe.status_fields(probe.read_text("/proc/self/status")).get("Seccomp_filters", "0")
        sleeper = probe.status_fields(probe.read_text(f"/proc/{pid}/status")).get("Seccomp_filters")
        assert answer.split()[0] == sleeper == str(int(own) + 2), (answer, sleeper, own)
        assert answer.split()[1] == str(97), answer  # EAFNOSUPPORT
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)
        if child > 0:
            os.waitpid(child, 0)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        keeper.release()
        os.close(listener)


def test_nothing_is_imported_once_the_prover_is_inside(tmp_path):
    """A real run, with an audit hook in the prover from the moment it has joined: no import
    event. (Shown to fail once with an `import json` added to probe.Probe.p8_held: the sealed
    prover then fails closed, 125.)"""
    log = tmp_path / "imports.log"
    code = textwrap.dedent(f"""
        import os, sys
        from no_docker.supervisor import cli
        from no_docker.supervisor.isolation import prover
        joined = prover.join
        def join(pid):
            joined(pid)
            fd = os.open({str(log)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            sys.addaudithook(lambda event, args: os.write(fd, (args[0] + "\\n").encode())
                             if event == "import" else None)
        prover.join = join
        sys.exit(cli.main(["run", "--quiet", "--", "true"]))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert log.exists()  # the hook was installed: the prover did join
    assert log.read_text() == "", log.read_text()


def test_a_prover_that_dies_without_a_verdict_refuses_the_run(tmp_path):
    """bwrap holds the sandbox until released: a prover gone without a word must not leave the
    run waiting forever (it did, before this test): 125, CMD never started. (Shown to hang,
    timeout, with the EOF check in Run.wait removed.)"""
    marker = tmp_path / "cmd-ran"
    code = textwrap.dedent(f"""
        import os, sys
        from no_docker.supervisor import cli
        from no_docker.supervisor.isolation import prover
        prover.prove = lambda *args: os._exit(3)  # dies after learning the pid, says nothing
        sys.exit(cli.main(["run", "--", "sh", "-c", "touch {marker}"]))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 125, out.stderr
    assert "P1 not proven: the prover ended without a verdict" in out.stderr, out.stderr
    assert not marker.exists()


FD_KEEPING_BWRAP = """#!{python} -I
# Real bubblewrap without its --seccomp FD: the fd stays open and crosses into the gate.
import os, sys
argv = sys.argv[1:]
i = argv.index("--seccomp")
del argv[i:i + 2]
os.execv({real!r}, [{real!r}, *argv])
"""

FORKING_BWRAP = """#!{python} -I
# Real bubblewrap as a child of this wrapper, not exec'd: the sandbox process bwrap names is
# then not the child of the process no-docker started.
import subprocess, sys
sys.exit(subprocess.call([{real!r}, *sys.argv[1:]], close_fds=False))
"""


def run_under_fake_bwrap(tmp_path, script: str, *options: str) -> tuple[subprocess.CompletedProcess, object]:
    """`no-docker run [OPTIONS] -- touch MARKER` with NO_DOCKER_BWRAP a wrapper made of SCRIPT
    around the real bwrap: (the finished run, MARKER's path). On a timeout the run's whole
    session is killed (run_no_docker)."""
    reason = bwrap_works()
    if reason:
        pytest.skip(reason)
    fake = tmp_path / "bwrap"
    fake.write_text(script.format(python=sys.executable, real=BWRAP))
    fake.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    marker = work / "cmd-ran"
    out = run_no_docker([*options, "--", "sh", "-c", f"touch {marker}"], cwd=work,
                        env=dict(os.environ, NO_DOCKER_BWRAP=str(fake)))
    return out, marker


def test_a_sandbox_process_that_cannot_be_taken_refuses_the_run(tmp_path):
    """bwrap names a sandbox process that is not its (the launcher's) live child: it is not
    proven, the prover is told so, and the run is refused at once, 125, CMD never started (a
    review of the second start-up pass found it waiting for ever: the prover was named only
    once the process was taken). Shown to hang (timeout) without the refusal in Run._hold_init."""
    started = time.monotonic()
    out, marker = run_under_fake_bwrap(tmp_path, FORKING_BWRAP)
    assert out.returncode == 125, out.stderr
    assert "P1 not proven: the sandbox process" in out.stderr, out.stderr
    assert "is not bwrap's child (a wrapper around bwrap must exec it)" in out.stderr, out.stderr
    assert not marker.exists()
    assert time.monotonic() - started < 20, "refused, but only after a wait"


def test_the_gates_refusal_is_the_runs_verdict(tmp_path):
    """The gate's last look finds an fd that crossed (a bwrap that keeps --seccomp's fd open):
    CMD never starts, 125, the refusal said once, no "isolation proven" line, and --report says
    proven false and names it (red-team review: it said proven, and later said both)."""
    import json

    report = tmp_path / "report.json"
    out, marker = run_under_fake_bwrap(tmp_path, FD_KEEPING_BWRAP, "--report", str(report))
    assert out.returncode == 125, out.stderr
    lines = [line for line in out.stderr.splitlines() if "not proven" in line or "proven in" in line]
    assert len(lines) == 1, out.stderr
    assert "P7 not proven: fd " in lines[0] and "crossed into the run" in lines[0], out.stderr
    assert not marker.exists()
    doc = json.loads(report.read_text())
    assert doc["proven"] is False and doc["exit_status"] == 125 and "P7 not proven" in doc["failed"], doc
