"""T-67: a state dir shared with another pid namespace never judges a live owner "gone".

A CI container that shares /run or /tmp with its host, or two containers sharing a volume:
the runs of both write markers into one state dir, and a marker's owner pid is a number in
*its* pid namespace. Read from the other namespace, that pid is someone else's or nobody's,
so the owner looked gone, its run stale, and every run there refused (or, worse, acted on
pids that mean nothing there). Markers now record their owner's pid namespace; a run of
another one is never judged, never acted on, and never stops a run here (`runs`: elsewhere;
`end`: refused with a line, also with --force).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from ending_cases import kill_token, require_bwrap, settled_without, token


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "no_docker.supervisor.cli", *args]


def _runs() -> list[dict]:
    out = subprocess.run(_cli("runs", "--json"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_run_of_another_pid_namespace_is_left_alone(tmp_path):
    require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("needs root for a pid namespace with its own /proc (unshare --pid --mount-proc)")
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    tok = token()
    inner = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc",
         *_cli("run", "--", "sh", "-c", f"echo up; sleep {tok}")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True)
    try:
        assert inner.stdout.readline() == b"up\n", inner.stderr.read1()  # type: ignore[union-attr]
        [theirs] = _runs()
        assert theirs["status"] == "elsewhere", theirs
        assert "another pid namespace" in theirs["end_would"]
        # a run here is neither refused nor touches theirs
        for _ in range(2):
            mine = subprocess.run(_cli("run", "--", "true"), cwd=tmp_path, capture_output=True, text=True,
                                  timeout=60)
            assert mine.returncode == 0, mine.stderr
        assert [r["run_id"] for r in _runs()] == [theirs["run_id"]]
        assert settled_without(tok, 0.1), "the other namespace's run was ended from here"
        # `end` refuses it, --force too, and --all passes it by
        for args, code in ((["end", theirs["run_id"]], 1), (["end", "--force", theirs["run_id"]], 1),
                           (["end", "--all"], 0)):
            ended = subprocess.run(_cli(*args), capture_output=True, text=True, timeout=60)
            assert ended.returncode == code, (args, ended.stderr)
            assert "another pid namespace" in ended.stderr, ended.stderr
        assert settled_without(tok, 0.1)
        # its own supervisor ends it as usual, and removes its marker
        # (unshare forwards no signal: the supervisor itself, pid 1 of its namespace, whose
        # handler takes SIGTERM as anywhere else)
        os.kill(_inner_supervisor(inner.pid), signal.SIGTERM)
        inner.wait(timeout=30)
        assert _runs() == []
        assert settled_without(tok) == []
    finally:
        if inner.poll() is None:
            os.killpg(inner.pid, signal.SIGKILL)
            inner.wait(timeout=30)
        for stream in (inner.stdout, inner.stderr):
            stream.close()  # type: ignore[union-attr]
        kill_token(tok)


def _inner_supervisor(unshare_pid: int, timeout: float = 5) -> int:
    """The no-docker supervisor under ``unshare --fork`` (its child), by the outside pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            children = []
        if children:
            return children[0]
        time.sleep(0.02)
    raise AssertionError("no supervisor under unshare")
