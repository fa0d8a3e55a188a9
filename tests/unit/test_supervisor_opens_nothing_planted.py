"""The supervisor opens nothing a run planted (issue 25): every open(2) it makes of a path in
the work dir, before and after a run, follows no link (O_NOFOLLOW) or only names the path
(O_PATH, which reads nothing and never opens a FIFO or a device). Shown with Python's own audit
hook on every ``open`` event of a real run whose work dir is full of links to a FIFO outside:
the previous run's pyproject.toml, pytest.ini, git's files, a venv's pip.conf, the stanza script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from isolation_helpers import bwrap_works

needs_bwrap = pytest.mark.skipif(bool(bwrap_works()), reason=str(bwrap_works()))

HOOKED = r"""
import json, os, sys
events = []
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.fsdecode(args[0])
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else -1
        events.append((path, flags))
sys.addaudithook(hook)
from no_docker.supervisor import cli
try:
    code = cli.main(["run", *sys.argv[1:]])
finally:
    with open(os.environ["EVENTS"], "w") as out:
        json.dump(events, out)
sys.exit(code)
"""

PLANTED = ("pyproject.toml", "pytest.ini", "setup.cfg", "sub/tox.ini", "t.sh", ".venv/pip.conf",
           ".git/commondir", "pytest.py")


@needs_bwrap
def test_every_open_of_a_work_dir_path_follows_no_link(tmp_path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / ".venv").mkdir()
    (work / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for name in PLANTED:
        (work / name).symlink_to(fifo)
    events = tmp_path / "events.json"
    writer = subprocess.Popen(["sh", "-c", f"exec 3>{fifo}; echo woken >&3"], stdout=subprocess.DEVNULL)
    try:
        done = subprocess.run([sys.executable, "-c", HOOKED, "--", "sh", "-c", "ln -sf /dev/zero setup.cfg"],
                              cwd=work, env={**os.environ, "EVENTS": str(events)}, capture_output=True,
                              text=True, timeout=120)
        assert writer.poll() is None, "the supervisor opened the FIFO's read end"
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 2 and "pyproject.toml: a symbolic link" in done.stderr, done.stderr
    # The same, without the linked pyproject.toml: the run starts and ends, and is audited.
    (work / "pyproject.toml").unlink()
    done = subprocess.run([sys.executable, "-c", HOOKED, "--", "sh", "-c", "ln -s /dev/zero sub/setup.cfg"],
                          cwd=work, env={**os.environ, "EVENTS": str(events)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 125 and "sub/setup.cfg: absent -> symlink:/dev/zero" in done.stderr, done.stderr
    opened = json.loads(events.read_text())
    real = os.path.realpath(work)
    inside = [(p, f) for p, f in opened
              if not p.startswith("/") or os.path.normpath(p).startswith(real + "/")]
    assert inside, "no open of a work-dir path was seen: the hook saw nothing"
    loose = [(p, f) for p, f in inside if f == -1 or not (f & (os.O_NOFOLLOW | os.O_PATH))]
    assert loose == [], loose
