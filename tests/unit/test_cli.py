"""The dispatcher: usage errors are exit 2 with a message, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from bounded import read_until_eof
from no_docker.supervisor import cli


def no_docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", *args],
                          capture_output=True, text=True, timeout=60)


def test_help_lists_every_command():
    out = no_docker("--help")
    assert out.returncode == 0
    for name in cli.COMMANDS:
        assert f"  {name}" in out.stdout


def test_no_arguments_is_a_usage_error():
    out = no_docker()
    assert out.returncode == 2
    assert "usage: no-docker" in out.stderr


def test_unknown_command_names_it():
    out = no_docker("frobnicate")
    assert out.returncode == 2
    assert "'frobnicate'" in out.stderr
    assert "Traceback" not in out.stderr


def test_version():
    out = no_docker("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("no-docker ")


def test_help_names_the_version_option():
    """Issue 28.6: `--version` worked but `no-docker --help` did not say so."""
    out = no_docker("--help").stdout
    assert "  --version   print no-docker's version" in out.splitlines()

# Issue 28.6: these used argparse's own texts ("show this help message and exit", LOG undescribed).
STYLED = [("runs",), ("end",), ("canary",), ("canary", "serve"), ("canary", "show"), ("run",), ("check",),
          ("prove",)]


@pytest.mark.parametrize("command", STYLED, ids=" ".join)
def test_every_help_is_in_one_style(command):
    out = no_docker(*command, "--help")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith(f"usage: no-docker {' '.join(command)}")
    assert "show this help message and exit" not in text
    assert "exit status" in text and "example" in text
    assert any(line.split()[:2] == ["-h,", "--help"] and line.split()[2:] == ["this", "help"]
               for line in text.splitlines()), text


def test_canary_show_explains_its_columns():
    text = no_docker("canary", "show", "--help").stdout
    for column in ("SEQ", "TIME", "LISTENER", "PEER", "STATUS", "ROUTE", "REQUEST"):
        assert f"\n  {column} " in text, column
    assert "the pid of the client process" in text and "SEQ skips them" in text
    assert "LOG         a canary log" in text


def test_run_help_names_the_state_dir_fallback():
    assert "/tmp/no-docker-UID" in no_docker("run", "--help").stdout


FAST_EXIT = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("teardown ran\\n"))
sys.argv = ["no-docker", *sys.argv[1:]]
from no_docker.supervisor.cli import console_main
console_main()
"""


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", FAST_EXIT, *args], capture_output=True, text=True,
                          timeout=60)


def test_run_leaves_without_the_interpreter_teardown_but_flushes_its_output():
    # `run --help` prints to stdout through Python's buffer: os._exit must come after a flush.
    out = _console("run", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: no-docker run"), out.stdout
    assert "teardown ran" not in out.stderr  # atexit handlers are the teardown os._exit skips
    refused = _console("run", "--no-such-flag")
    assert refused.returncode == 2 and "--no-such-flag" in refused.stderr
    assert "teardown ran" not in refused.stderr


def test_other_commands_exit_normally():
    out = _console("--version")
    assert out.returncode == 0 and out.stdout.startswith("no-docker ")
    assert "teardown ran" in out.stderr


def test_a_mistyped_command_gets_did_you_mean():
    out = no_docker("chek")
    assert out.returncode == 2
    assert "unknown command 'chek' (did you mean 'check'?)" in out.stderr
    assert "did you mean" not in no_docker("frobnicate").stderr  # nothing close: no guess


def _options_in_usage(usage: str) -> list[str]:
    return sorted({word.strip("[]") for word in usage.split() if word.strip("[]").startswith("--")
                   and word.strip("[]") not in ("--", "--help")})


def test_run_help_explains_every_option_with_an_example():
    from no_docker.supervisor.run import USAGE

    out = no_docker("run", "--help")
    assert out.returncode == 0 and out.stderr == ""
    explained = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("  --")]
    assert set(_options_in_usage(USAGE)) <= set(explained), explained
    assert "examples:" in out.stdout and "exit status:" in out.stdout
    assert "thrown away" in out.stdout  # /tmp, /var/tmp and $HOME inside a run


def test_check_and_prove_help_speak_to_users():
    check = no_docker("check", "--help")
    assert check.returncode == 0 and "--json" in check.stdout and "examples:" in check.stdout
    assert "P1   own pid namespace" in check.stdout
    prove = no_docker("prove", "--help")
    assert prove.returncode == 0 and "examples:" in prove.stdout and "exit status:" in prove.stdout
    assert "``" not in prove.stdout and "outer_guard" not in prove.stdout  # not a raw docstring


def test_mutants_lint_help_cites_only_files_that_exist():
    import re
    from pathlib import Path

    out = no_docker("mutants", "lint", "--help")
    assert out.returncode == 0 and "DESIGN" not in out.stdout
    repo = Path(cli.__file__).resolve().parents[1]
    for cited in re.findall(r"docs/[\w.-]+\.md", out.stdout):
        assert (repo / cited).is_file(), cited


@pytest.mark.parametrize("unbuffered", [False, True])
@pytest.mark.parametrize("args", [["prove", "--help"], ["--help"], ["--version"],
                                  ["canary", "show", "--help"], ["end", "--help"], ["guard", "--help"]])
def test_a_closed_stdout_is_not_a_traceback(args, unbuffered):
    # Without PYTHONUNBUFFERED (a user's shell; the suite's may set it) stdout on a pipe is
    # block-buffered: a short text meets the closed pipe only at the last flush, where the
    # interpreter printed "Exception ignored ... BrokenPipeError" and exited 120 (found as
    # uid 1001, whose login shell has no PYTHONUNBUFFERED); argparse's --help exits from inside.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "no_docker.supervisor.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdout.close()  # the reader is gone before the first byte (`| head -0`)
        out, timed_out = read_until_eof(proc.stderr.fileno(), 60)
        assert not timed_out, out
        err = out.decode()
        # argparse's own --help swallows an OSError of its write (argparse._print_message): with
        # PYTHONUNBUFFERED that write is where the pipe breaks, and it exits 0 (nothing cut short
        # is claimed either way); every other path says 141, as SIGPIPE would.
        argparse_unbuffered = unbuffered and args[0] not in ("prove", "--help", "--version")
        expected = (0, 141) if argparse_unbuffered else (141,)
        status = proc.wait(timeout=60)
        assert status in expected and "Traceback" not in err and "Exception ignored" not in err, (status, err)
    finally:
        proc.stderr.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)


def test_run_as_the_command_defers_the_gc_and_always_turns_it_on_again(monkeypatch):
    import gc

    from no_docker.supervisor import run

    seen = []

    def fake_main(args):
        seen.append(gc.isenabled())
        return 2

    assert gc.isenabled()
    monkeypatch.setattr(run, "main", fake_main)
    monkeypatch.setattr(sys, "argv", ["no-docker", "run", "--", "true"])
    assert cli.main() == 2
    assert seen == [False]  # the start-up ran without the cyclic GC
    assert gc.isenabled()  # and a run that never reached its sandbox turned it on again
    assert cli.main(["run", "--", "true"]) == 2  # in-process, argv given: the caller's GC untouched
    assert seen == [False, True] and gc.isenabled()


def test_resume_gc_freezes_what_the_start_up_made():
    import gc

    from no_docker.supervisor import defer_gc, resume_gc

    before = gc.get_freeze_count()
    defer_gc()
    try:
        assert not gc.isenabled()
    finally:
        resume_gc()
    try:
        assert gc.isenabled() and gc.get_freeze_count() > before
        frozen = gc.get_freeze_count()
        resume_gc()  # a second call changes nothing: no second freeze
        assert gc.get_freeze_count() == frozen
        assert gc.isenabled()
    finally:
        gc.unfreeze()
