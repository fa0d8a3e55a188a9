"""Every ``no-docker run`` option with hostile values: a usage error (2) of one line naming the
option and the value, before anything starts (issue 24: ``--report DIR`` was found only after
CMD ran, ``--rw /run``, ``--rw /proc``, ``--rw FILE`` and a huge ``--max-pids`` were late 125s
with advice that did not apply). The judge of a value's text is a pure function
(``value_refusal``), checked over every string by hypothesis; the file system's part
(``path_refusal``) by a table; the whole command line, and ``[tool.no-docker]``, end to end."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.run import (
    END_TIMEOUT_MAX,
    END_TIMEOUT_MIN,
    MAX_PIDS_MAX,
    MAX_PIDS_MIN,
    path_refusal,
    value_refusal,
)

VALUE_OPTIONS = ("--work", "--ro", "--rw", "--keep-env", "--publish", "--report", "--max-pids",
                 "--end-timeout", "--tmp-size", "--memory-max")
PATHS = ("--work", "--ro", "--rw", "--report")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VALUE_OPTIONS), st.text(max_size=40))
def test_every_value_is_accepted_or_refused_in_one_line(name, value):
    problem = value_refusal(name, value)
    if problem is None:
        assert value, "an empty value was accepted"
        if name == "--max-pids":
            assert value.isascii() and MAX_PIDS_MIN <= int(value) <= MAX_PIDS_MAX
        elif name == "--end-timeout":
            seconds = float(value)
            assert math.isfinite(seconds) and END_TIMEOUT_MIN <= seconds <= END_TIMEOUT_MAX
        elif name == "--keep-env":
            assert value.isascii() and value.replace("_", "a").isalnum() and not value[0].isdigit()
        elif name in PATHS:
            assert all(c.isprintable() or ord(c) >= 0xA0 for c in value), repr(value)
    else:
        assert problem and "\n" not in problem


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PATHS), st.text(min_size=1, max_size=20),
       st.sampled_from(["\n", "\r", "\t", "\x1b", "\x00", "\x7f", "\x85"]))
def test_a_path_with_a_control_character_is_refused(name, text, control):
    assert value_refusal(name, text + control) is not None


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_max_pids_bounds(n):
    accepted = value_refusal("--max-pids", str(n)) is None
    assert accepted == (MAX_PIDS_MIN <= n <= MAX_PIDS_MAX)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400", "0", "-1", "0.05", "1e-300",
                                   "3600.5", "", "ten", "１０"])
def test_end_timeout_refused(value):
    assert value_refusal("--end-timeout", value) is not None


@pytest.mark.parametrize("value", ["0.1", "1", "10", "3600", "2.5"])
def test_end_timeout_accepted(value):
    assert value_refusal("--end-timeout", value) is None


@pytest.mark.parametrize("value", ["100000000000000000000", "4194305", "７", "０８", "8.0", "-8", "1e3", ""])
def test_max_pids_refused(value):
    assert value_refusal("--max-pids", value) is not None


@pytest.mark.parametrize("flag, real, is_dir, refused", [
    ("--rw", "/proc", True, True), ("--rw", "/proc/1", True, True), ("--ro", "/proc", True, True),
    ("--work", "/sys/kernel", True, True), ("--rw", "/sys", True, True), ("--rw", "/dev", True, True),
    ("--ro", "/dev/null", False, True), ("--rw", "/dev/shm", True, False),
    ("--rw", "/dev/shm/x", True, False),
    ("--rw", "/run", True, True), ("--ro", "/run", True, True), ("--rw", "/run/user/0", True, False),
    ("--rw", "/etc/hostname", False, True), ("--work", "/w/file", False, True),
    ("--ro", "/w/file", False, False),
    ("--ro", "/", True, True), ("--ro", "/tmp", True, True), ("--ro", "/var/tmp", True, True),
    ("--rw", "/tmp", True, False), ("--ro", "/tmp/data", True, False), ("--rw", "/procfs", True, False),
    ("--rw", "/devices", True, False),
])
def test_path_refusal(flag, real, is_dir, refused):
    assert (path_refusal(flag, real, is_dir) is not None) == refused


def _run(args, cwd, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env)


def _cases(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    nl = tmp_path / "new\nline"
    nl.mkdir()
    return [
        (["--report", str(tmp_path / "dir")], "--report", "is a directory"),
        (["--report", "/proc/self/x"], "--report", "cannot write there"),
        (["--rw", "/run"], "--rw /run", "a /run of its own"),
        (["--rw", "/proc"], "--rw /proc", "kernel file system"),
        (["--ro", "/sys"], "--ro /sys", "kernel file system"),
        (["--rw", "/dev"], "--rw /dev", "kernel file system"),
        (["--rw", str(tmp_path / "file")], "--rw", "not a directory"),
        (["--ro", "/"], "--ro /", "name the directory"),
        (["--ro", "/tmp"], "--ro /tmp", "its own, fresh"),
        (["--ro", str(tmp_path / "dir"), "--rw", str(tmp_path / "dir")], "--ro", "also writable"),
        (["--max-pids", "100000000000000000000"], "--max-pids", "the kernel's limit"),
        (["--max-pids", "7"], "--max-pids", "from 8"),
        (["--end-timeout", "nan"], "--end-timeout", "seconds"),
        (["--end-timeout", "1e-300"], "--end-timeout", "seconds"),
        (["--end-timeout", "5", "--end-timeout", "6"], "--end-timeout", "given twice"),
        (["--ro", str(nl)], "--ro", "control character"),
        (["--keep-env", "É"], "--keep-env", "not a variable name"),
        (["--keep-env", ""], "--keep-env", "empty value"),
        (["--publish", "99999"], "--publish", "1-65535"),
        (["--tmp-size", "99999999999999999999G"], "--tmp-size", "at most"),
        (["--memory-max", "99999999999999999999999G"], "--memory-max", "at most"),
        (["--tmp-size", "nan"], "--tmp-size", "a size such as"),
        (["--work", "relative-missing"], "--work", "no such file"),
    ]


def test_each_hostile_value_is_a_usage_error_before_anything_starts(tmp_path):
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "NO_DOCKER_STATE_DIR": str(state)}
    for args, names, says in _cases(tmp_path):
        result = _run([*args, "--", "touch", str(work / "ran")], cwd=work, env=env)
        lines = result.stderr.splitlines()
        assert result.returncode == 2, (args, result.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"no-docker: {names}") and says in lines[0], \
            (args, result.stderr)
        assert not (work / "ran").exists(), args
        assert not state.exists(), f"{args}: the state dir was made: something started"


@pytest.mark.parametrize("body, says", [
    ('rw = ["/run"]', "rw: --rw /run: the run has a /run of its own"),
    ('ro = ["/proc"]', "ro: --ro /proc: /proc is a kernel file system"),
    ('rw = ["file"]', "rw: --rw "),
    ("max-pids = 100000000000000000000", "max-pids: --max-pids"),
    ("end-timeout = nan", "end-timeout: --end-timeout 'nan'"),
    ("end-timeout = inf", "end-timeout: --end-timeout 'inf'"),
    ('keep-env = ["É"]', "keep-env: --keep-env"),
    ('ro = ["."]', "ro: --ro "),
])
def test_the_same_values_in_pyproject_name_key_and_file(tmp_path, body, says):
    (tmp_path / "file").write_text("x")
    (tmp_path / "pyproject.toml").write_text(f"[tool.no-docker]\n{body}\n")
    env = {**os.environ, "NO_DOCKER_STATE_DIR": str(tmp_path.parent / f"{tmp_path.name}-state")}
    result = _run(["--", "touch", "ran"], cwd=tmp_path, env=env)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    where = f"no-docker: {tmp_path}/pyproject.toml [tool.no-docker] "
    assert len(lines) == 1 and lines[0].startswith(where), result.stderr
    assert says in lines[0], result.stderr
    assert not (tmp_path / "ran").exists()
