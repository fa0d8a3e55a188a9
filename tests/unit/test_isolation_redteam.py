"""Routes found by the red-team review of the isolation, each with real bwrap and a real run.

Each case runs against the real build, a build the probe must catch (125, the command never
runs), and, where the route is closed by something the probe proves, a build without that
proof (the positive control: the route works, so the test can fail).
"""

from __future__ import annotations

import os
import stat
import sys

import pytest
from bounded import readline
from isolation_helpers import bwrap_works, no_docker_argv, run_no_docker, weakened_probe

pytestmark = pytest.mark.needs_bwrap

_why = bwrap_works()
if _why:
    pytest.skip(_why, allow_module_level=True)

SETUID = """
import os, shutil, sys
shutil.copy(sys.argv[1], "planted")
try:
    os.chmod("planted", 0o4755)
    print("CHMOD-OK")
except OSError as e:
    print("CHMOD-REFUSED", e.errno)
try:
    os.close(os.open("planted-at-birth", os.O_CREAT | os.O_WRONLY, 0o6755))
    print("CREATE-OK")
except OSError as e:
    print("CREATE-REFUSED", e.errno)
"""


@pytest.mark.parametrize("build", ["real", "filter-not-given-to-bwrap", "filter-and-its-check-off"])
def test_no_setuid_program_is_left_behind(tmp_path, build):
    # As root, uid 0 inside is uid 0 outside: a `chmod 4755` in the work dir left a setuid-root
    # program that any local user could run after the run. The run's syscall filter (bwrap
    # --seccomp) refuses setuid/setgid modes; the probe tries it before CMD runs.
    extra = {"real": {}, "filter-not-given-to-bwrap": {"weaken": ("no-seccomp",)},
             "filter-and-its-check-off": {"weaken": ("no-seccomp",),
                                          "probe": weakened_probe(tmp_path, ("P5f", "P13"))}}[build]
    work = tmp_path / "work"
    work.mkdir()
    result = run_no_docker(["--", sys.executable, "-I", "-S", "-c", SETUID, "/usr/bin/true"], cwd=work,
                           **extra)
    modes = {name: os.stat(work / name).st_mode for name in ("planted", "planted-at-birth")
             if (work / name).exists()}
    setid = {name for name, mode in modes.items() if mode & (stat.S_ISUID | stat.S_ISGID)}
    if build == "real":
        assert result.returncode == 0, result.stderr
        assert "CHMOD-REFUSED 1" in result.stdout and "CREATE-REFUSED 1" in result.stdout, result.stdout
        assert not setid
    elif build == "filter-not-given-to-bwrap":
        assert result.returncode == 125 and "P5 not proven" in result.stderr, result.stderr
        assert result.stdout == "" and not modes
    else:
        assert result.returncode == 0, result.stderr
        assert setid == {"planted", "planted-at-birth"}, result.stdout


@pytest.mark.parametrize(("build", "message"), [
    ("allow-all-seccomp", "open(O_TMPFILE, 04700) in /tmp succeeded"),
    ("setuid-only-seccomp", "fchmod(02700) of a file in /tmp succeeded"),
])
def test_a_filter_other_than_the_runs_is_refused(tmp_path, build, message):
    # bwrap given another program (`Seccomp: 2` all the same): the probe's tries show it is not
    # the run's filter, before CMD runs.
    result = run_no_docker(["--", "sh", "-c", "echo RAN"], cwd=tmp_path, weaken=(build,))
    assert result.returncode == 125, result.stderr
    assert f"P5 not proven: {message}" in result.stderr, result.stderr
    assert result.stdout == ""


CHECK = [sys.executable, "-m", "no_docker.supervisor.cli", "check"]


@pytest.mark.parametrize("build", ["real", "io-uring-allowed-seccomp"])
def test_check_tries_the_rest_of_the_filter(tmp_path, build):
    # Beyond the mode rules, the prover (before CMD) and `no-docker check` (inside a run) try
    # io_uring_setup, openat2, keyctl and ptrace (through _ctypes): a filter that lets io_uring
    # through is refused at the proof, CMD (here: check) never runs.
    weaken = (build,) if build != "real" else ()
    result = run_no_docker(["--quiet", "--", *CHECK], cwd=tmp_path, weaken=weaken)
    if build == "real":
        assert result.returncode == 0, result.stdout + result.stderr
        return
    assert result.returncode == 125, result.stdout + result.stderr
    assert "P5 not proven: io_uring_setup() answered EFAULT, not ENOSYS" in result.stderr, result.stderr


def test_an_architecture_without_a_filter_is_refused(tmp_path):
    result = run_no_docker(["--", "sh", "-c", "echo RAN"], cwd=tmp_path, weaken=("unknown-arch",))
    assert result.returncode == 125, result.stderr
    assert result.stdout == ""
    line = ("no-docker: P5: no syscall filter for sparc64 (only x86_64, aarch64) "
            "(the run would leave setuid files and io_uring open)")
    assert result.stderr.splitlines() == [line], result.stderr


INIT_AND_CMD = """
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(425, 1, None)  # io_uring_setup(1, NULL)
print("io_uring_setup", "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()], flush=True)
sys.stdin.read()  # until the test is done looking from outside
"""


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in os.listdir(f"/proc/{parent}/task"):
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86_64")
@pytest.mark.parametrize("build", ["real", "filter-not-given-to-bwrap-and-unchecked"])
def test_the_sandbox_init_and_cmd_carry_the_filter(tmp_path, build):
    # Read from outside, where no mount of the sandbox can stand in for the kernel's view: the
    # namespace's init is the run's process whose innermost pid is 1 (NSpid).
    import subprocess

    extra = {"real": {}, "filter-not-given-to-bwrap-and-unchecked": {
        "weaken": ("no-seccomp",), "probe": weakened_probe(tmp_path, ("P5f", "P13"))}}[build]
    argv = no_docker_argv(["--quiet", "--", sys.executable, "-I", "-S", "-c", INIT_AND_CMD], **extra)
    proc = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = readline(proc.stdout, 60, "the command's first line")
        statuses = {pid: _status(pid) for pid in _descendants(proc.pid)}
        init = [s for s in statuses.values() if s.get("NSpid", "").split()[-1:] == ["1"]
                and len(s["NSpid"].split()) > 1]
        cmd = [s for s in statuses.values() if s.get("Name") == os.path.basename(sys.executable)[:15]]
        out, err = proc.communicate("", timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    assert proc.returncode == 0, line + out + err
    assert len(init) == 1 and len(cmd) >= 1, statuses
    own = _status(os.getpid())  # a CI container may have a filter of its own: the baseline
    # Every build carries the connect mediation's filter (P12); the real one the deny filter too.
    assert init[0]["Seccomp"] == "2" and {s["Seccomp"] for s in cmd} == {"2"}, statuses
    if "Seccomp_filters" in own:  # Linux >= 5.9: the mediation's filter, and the deny filter
        # twice: on bwrap from its start (without the user-namespace rules), and via --seccomp
        more = 3 if build == "real" else 1
        assert int(init[0]["Seccomp_filters"]) == int(own["Seccomp_filters"]) + more, statuses
    # Unfiltered, io_uring_setup(1, NULL) gets as far as reading its parameters: EFAULT.
    assert line.strip() == ("io_uring_setup ENOSYS" if build == "real" else "io_uring_setup EFAULT"), line


IO_URING_AND_KEYS = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, nr, args in (("io_uring_setup", 425, (1, None)), ("keyctl", 250, (0, -3, 0)),
                       ("request_key", 249, (b"user", b"x", None, 0))):
    r = libc.syscall(nr, *args)
    print(name, "OK" if r >= 0 else errno.errorcode[ctypes.get_errno()])
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86_64")
def test_io_uring_and_the_callers_keyrings_are_refused(tmp_path):
    # io_uring's OPENAT carries a mode the filter cannot see; the session keyring is the
    # caller's (bwrap makes no new one) and request_key makes the host kernel run a program.
    result = run_no_docker(["--", sys.executable, "-I", "-S", "-c", IO_URING_AND_KEYS], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["io_uring_setup ENOSYS", "keyctl EPERM", "request_key EPERM"]


PLANT = """
import os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
try:
    with open(os.path.join(site, "planted.pth"), "w") as f:
        f.write("import os; open(os.environ['PLANT_MARKER'], 'w').close()\\n")
    print("PLANTED")
except OSError as e:
    print("REFUSED", e.errno)
try:
    os.rename(".venv", "old-venv")
    os.rename("old-venv", ".venv")
    print("RENAMED")
except OSError as e:
    print("RENAME-REFUSED", e.errno)
"""


def venv_in_work_dir(work) -> str:
    """A venv at WORK/.venv that runs no-docker (this checkout's editable install copied in)."""
    import shutil
    import subprocess
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")], check=True,
                   timeout=120)
    ours = sysconfig.get_paths()["purelib"]
    python = str(work / ".venv" / "bin" / "python")
    theirs = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    for name in os.listdir(ours):
        if name.startswith("__editable__"):
            shutil.copy(os.path.join(ours, name), theirs)
    return python


@pytest.mark.parametrize("build", ["real", "venv-not-protected"])
def test_a_venv_in_the_work_dir_cannot_be_given_code_for_the_next_run(tmp_path, build):
    # The console script of a venv in the work dir runs the next `no-docker run` outside, with
    # site processing: a .pth file planted there by a run would be code for the next supervisor.
    work = tmp_path / "work"
    work.mkdir()
    python = venv_in_work_dir(work)
    marker = tmp_path / "ran-outside"
    code = "import sys\nimport no_docker.supervisor.cli as cli\n"
    if build == "venv-not-protected":
        # Neither the supervisor's own environment nor the walk's venvs protected, nor audited.
        code += ("import no_docker.supervisor.isolation.plan as plan\nplan.python_roots = lambda *paths: []\n"
                 "import no_docker.supervisor.isolation.later_code as lc\n"
                 "lc.Survey.protect = lambda self: []\nlc.LaterCodeAudit.changed = lambda self: {}\n")
    code += f"sys.exit(cli.main(['run', '--quiet', '--', {python!r}, '-c', {PLANT!r}]))\n"
    import subprocess

    env = {**os.environ, "PLANT_MARKER": str(marker)}
    result = subprocess.run([python, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    subprocess.run([python, "-c", "pass"], cwd=tmp_path, env=env, timeout=60)  # "the next run"
    if build == "real":
        assert result.stdout.split() == ["REFUSED", "30", "RENAME-REFUSED", "16"], result.stdout
        assert not marker.exists()
    else:
        assert result.stdout.startswith("PLANTED"), result.stdout
        assert marker.exists()


def test_runs_later_in_home_names_what_must_stay_read_only():
    from no_docker.supervisor.isolation.plan import runs_later_in_home

    home = "/home/u"
    for path in ("/home/u/.config", "/home/u/.config/git", "/home/u/.local/bin", "/home/u/.bashrc",
                 "/home/u/.ssh", "/home/u/.cargo", "/home/u/bin"):
        assert runs_later_in_home(path, home), path
    for path in ("/home/u/.cache", "/home/u/src/project", "/home/u", "/tmp/x", "/home/ux/.config"):
        assert runs_later_in_home(path, home) is None, path
    assert runs_later_in_home("/home/u/.config", "") is None


def test_rw_of_a_home_dir_that_runs_code_later_is_refused(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "HOME": str(home)}
    result = run_no_docker(["--rw", str(home / ".config"), "--", "true"], cwd=work, env=env)
    assert result.returncode == 2 and "~/.config holds what runs later" in result.stderr, result.stderr


@pytest.mark.parametrize("build", ["real", "path-not-protected"])
def test_a_path_dir_in_the_work_dir_cannot_get_new_commands(tmp_path, build):
    # A PATH entry inside the work dir (./bin, an activated .venv/bin): a run could put its own
    # `git` there for the caller's next shell. Read-only; a venv's bin protects the whole venv.
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    (work / "venv" / "bin").mkdir(parents=True)
    (work / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (work / "venv" / "lib").mkdir()
    env = {**os.environ, "PATH": f"{work / 'bin'}:{work / 'venv' / 'bin'}:{os.environ['PATH']}"}
    script = ("for f in bin/git venv/bin/git venv/lib/planted.pth; do "
              "(echo x > $f) 2>/dev/null && echo WROTE $f || echo REFUSED $f; done")
    weaken = ("path-not-protected",) if build != "real" else ()
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=work, env=env, weaken=weaken)
    assert result.returncode == 0, result.stderr
    verdict = "REFUSED" if build == "real" else "WROTE"
    assert result.stdout.split("\n")[:3] == [f"{verdict} bin/git", f"{verdict} venv/bin/git",
                                             f"{verdict} venv/lib/planted.pth"], result.stdout


REPORT_REDIRECT = """
pid=$(grep '^supervisor_pid ' /run/no-docker-run/plan.json | cut -d' ' -f2)
ln -s "$1" "report.json.tmp$pid"
"""


def test_the_report_cannot_be_redirected_onto_a_file_outside(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    work = tmp_path / "work"
    work.mkdir()
    result = run_no_docker(["--quiet", "--report", str(work / "report.json"), "--", "sh", "-c",
                            REPORT_REDIRECT, "sh", str(victim)], cwd=work)
    assert result.returncode in (0, 125), result.stderr
    assert victim.read_text() == "precious\n", "the supervisor wrote its report through the run's symlink"


def test_a_run_that_redirects_git_is_not_reported_clean(tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True, timeout=120)
    repo = tmp_path / "repo"
    result = run_no_docker(["--quiet", "--", "sh", "-c", "mkdir evil && echo \"$PWD/evil\" > .git/commondir"],
                           cwd=repo)
    assert result.returncode == 125 and ".git/commondir" in result.stderr, (result.returncode, result.stderr)


@pytest.mark.parametrize("build", ["real", "no-protect", "no-protect-and-no-P4-writes"])
def test_a_rw_repository_keeps_its_hooks_read_only(tmp_path, build):
    # `--rw ../other-checkout`: its .git/hooks run at the next commit there, outside. The probe
    # finds the git layout of every writable root itself, so a policy that forgot it is caught.
    import subprocess

    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True, timeout=120)
    work = tmp_path / "work"
    work.mkdir()
    hook = other / ".git" / "hooks" / "pre-commit"
    script = f"(echo 'touch /tmp/x' > {hook}) 2>/dev/null && echo WROTE || echo REFUSED"
    extra = {"real": {}, "no-protect": {"weaken": ("no-protect",)},
             "no-protect-and-no-P4-writes": {"weaken": ("no-protect",),
                                             "probe": weakened_probe(tmp_path, ("P4w",))}}[build]
    result = run_no_docker(["--quiet", "--rw", str(other), "--", "sh", "-c", script], cwd=work, **extra)
    if build == "no-protect":
        assert result.returncode == 125 and "hooks is writable" in result.stderr, result.stderr
        assert result.stdout == ""
        return
    if build != "real":
        # The hook was written: the after-run audit (the third line of defence) still names it,
        # and moves it aside (issue 25).
        assert result.stdout.strip() == "WROTE", result.stdout
        assert result.returncode == 125 and "hooks/pre-commit: absent -> file" in result.stderr, result.stderr
        assert "none of it runs later" in result.stderr and not hook.exists(), result.stderr
        return
    assert not hook.exists()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "REFUSED", result.stdout


INIT_MEM = """
import os
try:
    os.close(os.open("/proc/1/mem", os.O_RDWR))  # opened, never written
    print("OPENED")
except OSError as e:
    print("REFUSED", e.errno)
"""


@pytest.mark.parametrize("build", ["real", "init-mem-writable", "init-mem-writable-and-unchecked"])
def test_the_init_cannot_be_given_code(tmp_path, build):
    # Code written into the memory of bwrap's pid 1 through /proc/1/mem would run as the run's
    # init. It carries the run's syscall filter now (bwrap --seccomp); the mask stays as a
    # second wall (red-team review: before --seccomp the init had no filter at all).
    extra = {"real": {}, "init-mem-writable": {"weaken": ("init-mem-writable",)},
             "init-mem-writable-and-unchecked": {"weaken": ("init-mem-writable",),
                                                 "probe": weakened_probe(tmp_path, ("P5f",))}}[build]
    argv = ["--quiet", "--", sys.executable, "-I", "-S", "-c", INIT_MEM]
    result = run_no_docker(argv, cwd=tmp_path, **extra)
    if build == "init-mem-writable":
        assert result.returncode == 125 and "/proc/1/mem is writable" in result.stderr, result.stderr
        assert result.stdout == ""
        return
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == ("REFUSED" if build == "real" else "OPENED"), result.stdout


def test_a_missing_path_dir_in_the_work_dir_is_refused(tmp_path):
    # It could be created by the run and filled with commands (e.g. a `bwrap` that the next
    # `no-docker run` finds on PATH).
    env = {**os.environ, "PATH": f"{tmp_path / 'node_modules' / '.bin'}:{os.environ['PATH']}"}
    result = run_no_docker(["--quiet", "--", "true"], cwd=tmp_path, env=env)
    assert result.returncode == 125, result.stderr
    assert "does not exist and the run could create" in result.stderr, result.stderr


@pytest.mark.parametrize("target", ["/etc/cron.d", "/var/spool"])
@pytest.mark.parametrize("build", ["real", "gitdir-trusted"])
def test_a_planted_dot_git_file_cannot_make_a_directory_writable(tmp_path, build, target):
    # A work dir without .git: a run writes `.git` = "gitdir: /etc/cron.d"; the next run used
    # to bind that directory writable (a cron job is code run later, as root). Now a gitdir
    # outside the work dir must point back at it; the probe refuses writable mounts in /etc.
    if not os.path.isdir(target):
        pytest.skip(f"{target} does not exist here")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").write_text(f"gitdir: {target}\n")
    code = (f"import os\ntry:\n    os.close(os.open({target!r}, os.O_WRONLY | os.O_TMPFILE, 0o600))\n"
            "    print('WRITABLE')\nexcept OSError as e:\n    print('REFUSED', e.errno)\n")
    weaken = ("gitdir-trusted",) if build != "real" else ()
    hooks = os.path.join(target, "hooks")
    had_hooks = os.path.lexists(hooks)
    try:
        result = run_no_docker(["--quiet", "--", sys.executable, "-I", "-S", "-c", code], cwd=work,
                               weaken=weaken)
    finally:
        made = not had_hooks and os.path.isdir(hooks) and not os.path.islink(hooks)
        if made:
            os.rmdir(hooks)  # the host stays as it was, also when a build made one (the weakened plan does)
    if build == "real":
        # Nor does the supervisor write there itself (T-81: it made /etc/cron.d/hooks as root).
        assert not made, f"{hooks} was made (and is removed again)"
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[0] == "REFUSED", result.stdout
    elif target.startswith("/etc"):
        # Refused by the probe; or, for a user who may not write TARGET, already by the plan:
        # the hooks dir the weakened plan wants there cannot be made (P4).
        words = ("inside a system directory",) if os.access(target, os.W_OK) else (
            "inside a system directory", "cannot be made read-only")
        assert result.returncode == 125 and any(w in result.stderr for w in words), result.stderr
    else:
        # /var is left to the plan (work dirs live there): the weakened plan makes it writable.
        if not os.access(target, os.W_OK):
            pytest.skip(f"{target} is not writable by this user even when bound writable: the "
                        "weakened build shows nothing here (shown as root)")
        assert result.returncode == 0 and result.stdout.startswith("WRITABLE"), (result.stdout, result.stderr)


@pytest.mark.parametrize("fifo", [".git/index", ".git/commondir", ".envrc"])
def test_a_fifo_left_by_a_run_does_not_hang_the_next(tmp_path, fifo):
    # The previous run can leave a FIFO where the supervisor reads (the index is writable for
    # commits): a plain open() would block the next `no-docker run` forever.
    import subprocess

    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=120)
    target = work / fifo
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    result = run_no_docker(["--quiet", "--", "true"], cwd=work, timeout=60)
    assert result.returncode in (0, 125), result.stderr


def test_a_sudo_left_in_the_work_dir_is_never_run_by_the_probe(tmp_path):
    # With a relative PATH entry ("bin"), the probe's `sudo -n true` check ran bin/sudo from
    # the work dir, before the probe installed the syscall filter: unfiltered code of the
    # previous run. (bwrap applies the filter before the probe starts now; still never run.)
    (tmp_path / "bin").mkdir()
    marker = tmp_path / "sudo-ran"
    (tmp_path / "bin" / "sudo").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (tmp_path / "bin" / "sudo").chmod(0o755)
    env = {**os.environ, "PATH": f"bin:{os.environ['PATH']}"}
    result = run_no_docker(["--quiet", "--", "true"], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert not marker.exists()


SUPERVISOR_WRITE = """
import os
for rel in ("supervisor/run.py", "supervisor/isolation/plan.py", "supervisor/new.py"):
    try:
        with open(rel, "a") as f:
            f.write("# planted")
        print("WRITTEN", rel)
    except OSError as e:
        print("REFUSED", rel, e.errno)
"""


def test_working_on_no_docker_itself_the_whole_supervisor_package_stays_read_only(tmp_path):
    # The package that builds the next run's policy lies in the work dir (a clone of no-docker):
    # every room of it, not only the probe's own folder, must be read-only inside. The probe is
    # taken from a copy laid out as the package is (supervisor/isolation/probe.py).
    probe = weakened_probe(tmp_path, ())
    work = probe.parents[2]
    (work / "supervisor" / "run.py").write_text("# the next run's code\n")
    result = run_no_docker(["--quiet", "--work", str(work), "--", sys.executable, "-I", "-S", "-c",
                            SUPERVISOR_WRITE], cwd=work, probe=probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["REFUSED supervisor/run.py 30",
                                             "REFUSED supervisor/isolation/plan.py 30",
                                             "REFUSED supervisor/new.py 30"], result.stdout
    assert (work / "supervisor" / "run.py").read_text() == "# the next run's code\n"
