"""``no-docker run`` end to end with real bwrap: exit codes, stderr-only status, --report,
signals, fds, refusals, and what the run path imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounded import readline
from isolation_helpers import bwrap_works, no_docker_argv, run_no_docker
from no_docker.supervisor.run import parse_args, parse_status_line, userns_blocker

_why = bwrap_works()
needs_bwrap = pytest.mark.skipif(_why is not None, reason=_why or "")


@needs_bwrap
def test_true_prints_nothing_on_stdout_and_one_status_line(tmp_path):
    result = run_no_docker(["--", "true"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("no-docker: isolation proven in ")
    assert lines[1].startswith("no-docker: run ") and ", 0 left, " in lines[1]  # DESIGN §3
    assert lines[0].endswith("(13 properties)")


@needs_bwrap
def test_quiet_prints_nothing(tmp_path):
    result = run_no_docker(["--quiet", "--", "true"], cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@needs_bwrap
@pytest.mark.parametrize("script, status", [("exit 0", 0), ("exit 7", 7), ("exit 125", 125),
                                            ("kill -TERM $$", 128 + 15), ("kill -KILL $$", 128 + 9)])
def test_exit_status_is_the_commands(tmp_path, script, status):
    assert run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=tmp_path).returncode == status


@needs_bwrap
def test_not_found_127_and_not_executable_126(tmp_path):
    missing = run_no_docker(["--quiet", "--", "no-such-command-xyz"], cwd=tmp_path)
    assert missing.returncode == 127 and "command not found" in missing.stderr
    (tmp_path / "script").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "script").chmod(0o644)
    denied = run_no_docker(["--quiet", "--", "./script"], cwd=tmp_path)
    assert denied.returncode == 126 and "cannot execute" in denied.stderr


@needs_bwrap
def test_report_json(tmp_path):
    report = tmp_path / "report.json"
    result = run_no_docker(["--quiet", "--report", str(report), "--", "sh", "-c", "exit 3"], cwd=tmp_path)
    assert result.returncode == 3
    doc = json.loads(report.read_text())
    assert doc["proven"] is True and doc["exit_status"] == 3
    assert doc["properties"] == [f"P{i}" for i in range(1, 14)]
    assert doc["timings_ms"]["proven"] > 0 and doc["timings_ms"]["total"] >= doc["timings_ms"]["proven"]
    assert doc["command"] == ["sh", "-c", "exit 3"]


@needs_bwrap
def test_report_of_a_refused_run(tmp_path):
    fake = tmp_path / "fake-bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    report = tmp_path / "report.json"
    result = run_no_docker(["--report", str(report), "--", "true"], cwd=tmp_path,
                           env=dict(os.environ, NO_DOCKER_BWRAP=str(fake)))
    assert result.returncode == 125
    doc = json.loads(report.read_text())
    assert doc["proven"] is False and doc["failed"].startswith("P1 not proven")


@needs_bwrap
def test_only_fds_0_1_2_reach_the_command(tmp_path):
    r, w = os.pipe()
    os.set_inheritable(r, True)  # as a make jobserver fd would be
    try:
        result = run_no_docker(["--quiet", "--", sys.executable, "-c",
                                "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"],
                               cwd=tmp_path, pass_fds=(r,))
    finally:
        os.close(r)
        os.close(w)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [0, 1, 2, 3]  # 3: listdir's own


@needs_bwrap
def test_sigpipe_is_default_inside(tmp_path):
    result = run_no_docker(["--quiet", "--", "sh", "-c", "grep SigIgn /proc/self/status"], cwd=tmp_path)
    ignored = int(result.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), result.stdout


def _host_pids_with(arg: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if arg.encode() in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found


@needs_bwrap
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_signal_ends_the_run_and_every_process(tmp_path, sig):
    tag = f"{time.time_ns() % 10**9}.5"  # a unique sleep argument to find stragglers
    proc = subprocess.Popen(no_docker_argv(["--", "sh", "-c", f"sleep {tag} & setsid sleep {tag} & wait"]),
                            cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stderr is not None
        line = readline(proc.stderr, 60, "the proof's line").decode()
        assert "isolation proven" in line, line
        deadline = time.monotonic() + 10
        while len(_host_pids_with(tag)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_host_pids_with(tag)) == 2
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 128 + sig
        assert _host_pids_with(tag) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for pid in _host_pids_with(tag):
            os.kill(pid, signal.SIGKILL)


@needs_bwrap
def test_daemon_left_behind_by_the_command_is_gone_after_the_run(tmp_path):
    tag = f"{time.time_ns() % 10**9}.25"
    result = run_no_docker(["--quiet", "--", "sh", "-c", f"setsid sleep {tag} >/dev/null 2>&1 & exit 0"],
                           cwd=tmp_path)
    assert result.returncode == 0
    assert _host_pids_with(tag) == []


def test_run_imports_no_aiohttp_or_heavy_parts():
    code = ("import sys, no_docker.supervisor.run, no_docker.supervisor.cli; "
            "print(' '.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30).stdout.split()
    assert "no_docker.supervisor.run" in loaded
    for heavy in ("aiohttp", "asyncio", "tree_sitter", "yaml", "subprocess", "json", "no_docker.canary",
                  "no_docker.mutants"):
        assert heavy not in loaded, heavy


def test_the_endings_algorithm_is_imported_after_bwrap_starts_not_before():
    # Importing it (with membership) costs ~0.4 ms; lifecycle imports it where it is first
    # used, once bwrap builds the sandbox. Its default timeout is the lifecycle's, not a copy
    # that could drift.
    code = ("import sys, no_docker.supervisor.run, no_docker.supervisor.cli; "
            "from no_docker.supervisor.ending import lifecycle; "
            "print(' '.join(sorted(sys.modules))); "
            "from no_docker.supervisor.ending import algorithm; "
            "print(algorithm.DEFAULT_TIMEOUT == lifecycle.DEFAULT_TIMEOUT)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30).stdout
    loaded, same = out.split("\n")[:2]
    assert "no_docker.supervisor.ending.algorithm" not in loaded.split()
    assert "no_docker.supervisor.ending.membership" not in loaded.split()
    assert same == "True"


@pytest.mark.parametrize("argv, message", [
    ([], "no command given"),
    (["--"], "no command given"),
    (["--bogus", "--", "true"], "unknown option '--bogus'"),
    (["--work"], "--work needs a value"),
    (["--work", "a", "--work", "b", "--", "true"], "--work given twice"),
    (["--keep-env", "1BAD", "--", "true"], "not a variable name"),
])
def test_usage_errors(argv, message):
    from no_docker.supervisor.errors import UsageError

    with pytest.raises(UsageError, match=message):
        parse_args(argv)


def test_parse_args_accepts_both_option_forms():
    req = parse_args(["--work=/w", "--ro", "/a", "--ro=/b", "--rw", "/c", "--keep-env", "CI_X",
                      "--report", "/r.json", "--quiet", "--", "cmd", "--work", "x"])
    assert (req.work, req.ro, req.rw, req.keep_env, req.report, req.quiet) == (
        "/w", ("/a", "/b"), ("/c",), ("CI_X",), "/r.json", True)
    assert req.command == ("cmd", "--work", "x")


@pytest.mark.parametrize("args, message", [
    (["--keep-env", "DOCKER_HOST", "--", "true"], "--keep-env DOCKER_HOST: refused"),
    (["--work", "/nonexistent-dir-xyz", "--", "true"], "--work /nonexistent-dir-xyz: no such file"),
    (["--rw", "/usr", "--", "true"], "--rw /usr -> /usr: refused, system directories stay read-only"),
    (["--rw", "/", "--", "true"], "refused, system directories stay read-only"),
    (["--ro", "/nonexistent-xyz", "--", "true"], "--ro /nonexistent-xyz: no such file"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, message):
    result = run_no_docker(args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_status_line_parser():
    line = b'{ "child-pid": 10539, "cgroup-namespace": 4026532257, "pid-namespace": 4026532256 }'
    assert parse_status_line(line) == {"child-pid": 10539, "cgroup-namespace": 4026532257,
                                       "pid-namespace": 4026532256}
    assert parse_status_line(b'{ "exit-code": 3 }') == {"exit-code": 3}
    assert parse_status_line(b"garbage") == {}


@pytest.mark.parametrize("files, expected", [
    ({"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, "sysctl kernel.unprivileged_userns_clone=1"),
    ({"/proc/sys/user/max_user_namespaces": "0\n"}, "sysctl user.max_user_namespaces"),
    ({"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, "AppArmor"),
    ({"/proc/sys/user/max_user_namespaces": "1000\n"}, None),
])
def test_userns_blocker_names_the_setting(files, expected):
    def read(path: str) -> str:
        if path in files:
            return files[path]
        raise FileNotFoundError(path)

    found = userns_blocker(read)
    assert (found is None) if expected is None else (expected in found)


def test_missing_bwrap_says_how_to_install(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    env.pop("NO_DOCKER_BWRAP", None)
    bare = Path(sys.executable)
    code = ("import sys, no_docker.supervisor.run as r, no_docker.supervisor.cli as c; "
            "r.BWRAP_FALLBACK_DIRS = (); "
            "sys.exit(c.main(['run', '--', 'true']))")
    result = subprocess.run([str(bare), "-c", code],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 125
    assert result.stderr.strip() == ("no-docker: isolation: bubblewrap (bwrap) is not installed "
                                     "(install it: apt-get install bubblewrap)")


def test_help_goes_to_stdout_with_status_0(tmp_path):
    result = run_no_docker(["--help"], cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("usage: no-docker run")


def test_report_of_a_run_refused_before_start(tmp_path):
    report = tmp_path / "report.json"
    env = dict(os.environ, NO_DOCKER_BWRAP=str(tmp_path / "missing-bwrap"))
    result = run_no_docker(["--report", str(report), "--", "true"], cwd=tmp_path, env=env)
    assert result.returncode == 125
    doc = json.loads(report.read_text())
    assert doc["proven"] is False and "NO_DOCKER_BWRAP" in doc["failed"]
