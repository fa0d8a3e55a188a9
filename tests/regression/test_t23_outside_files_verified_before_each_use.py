"""T-23: every file that runs outside the isolation — payload, helpers, the canary entry the
tests start — has a pin, and a use goes through a copy made from verified bytes.

`pins.verified_copy` reads the pinned file once, checks its sha256 and writes the private copy
from those same bytes; a file changed after the pin (or between two uses) is refused, and a
refusal leaves no copy behind to run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from no_docker.mutants import pins

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = ["mutants/payloads/reach-engine.sh", "mutants/helpers/rawsock.py",
           "mutants/helpers/dockerpy_route.py", "canary/__main__.py"]


def test_everything_that_runs_outside_is_pinned():
    pinned = pins.load_pins()
    assert [name for name in OUTSIDE if name not in pinned] == []


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    for name in OUTSIDE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, root / name)
    return root


@pytest.mark.parametrize("name", OUTSIDE)
def test_verified_copy_of_a_pinned_file_is_its_exact_bytes(tmp_path, tree, name):
    dest = tmp_path / "use"
    dest.mkdir()
    copy = pins.verified_copy(name, dest, root=tree)
    assert copy.read_bytes() == (REPO / name).read_bytes()
    assert not copy.stat().st_mode & 0o222, "the copy that runs is read-only"


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_file_changed_after_its_pin_is_refused_before_use(tmp_path, tree, name):
    (tree / name).write_bytes((tree / name).read_bytes() + b"\n# changed after the pin\n")
    dest = tmp_path / "use"
    dest.mkdir()
    with pytest.raises(pins.PinError, match="does not match the pin"):
        pins.verified_copy(name, dest, root=tree)
    assert list(dest.iterdir()) == [], "nothing may be left to run"


def test_each_use_checks_again(tmp_path, tree):
    """A first use passing says nothing about the second: the check runs on every use."""
    name = "mutants/helpers/rawsock.py"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    pins.verified_copy(name, first, root=tree)
    (tree / name).write_text((tree / name).read_text() + "# a second use finds this\n")
    with pytest.raises(pins.PinError):
        pins.verified_copy(name, second, root=tree)


def test_verify_command_lists_the_canary_entry():
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "mutants", "verify"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   canary/__main__.py" in done.stdout
