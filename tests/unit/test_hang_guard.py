"""The suite's net under every wait (tests/hang_guard.py): a test that hangs fails with one line
naming it, and the suite goes on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hang_guard import DEFAULT_LIMIT, limit

TESTS = Path(__file__).resolve().parents[1]

HANGS = """
import os

def test_reads_a_pipe_it_holds_the_write_end_of():
    r, w = os.pipe()  # the write end never closed: no EOF, ever (the old test_sockdiag hang)
    os.read(r, 1)

def test_after_it():
    # the suite went on past the hang: leave a mark the outer test looks for
    with open(os.path.join(os.path.dirname(__file__), "after-ran"), "w") as f:
        f.write("ran")
"""


def test_a_hanging_test_fails_with_one_line_and_the_suite_goes_on(tmp_path):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from hang_guard import pytest_runtest_protocol  # noqa: F401\n")
    (tmp_path / "test_hangs.py").write_text(HANGS)
    started = time.monotonic()
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "NO_DOCKER_TEST_TIMEOUT": "1",
                               **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}})
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout, done.stdout
    assert ("test_reads_a_pipe_it_holds_the_write_end_of: still running after 1 s "
            "(NO_DOCKER_TEST_TIMEOUT)") in done.stdout, done.stdout
    assert took < 60, took
    assert (tmp_path / "after-ran").read_text() == "ran"  # the test after the hang really ran


def test_the_limit_is_read_from_the_environment():
    assert limit({}) == DEFAULT_LIMIT
    assert limit({"NO_DOCKER_TEST_TIMEOUT": "0"}) == 0
    assert limit({"NO_DOCKER_TEST_TIMEOUT": "2.5"}) == 2.5
    for bad in ("soon", "-1"):
        with pytest.raises(pytest.UsageError, match="NO_DOCKER_TEST_TIMEOUT"):
            limit({"NO_DOCKER_TEST_TIMEOUT": bad})
