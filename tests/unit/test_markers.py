"""Run markers: state dir rules, atomic run.json, owner liveness, the stale check before a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from no_docker.supervisor import markers
from no_docker.supervisor.errors import NotProven
from no_docker.supervisor.lifecycle import refuse_if_stale
from no_docker.supervisor.procfs import ProcFS
from no_docker.supervisor.snapshot import Identity


def test_state_dir_precedence(tmp_path):
    assert markers.state_dir({"NO_DOCKER_STATE_DIR": "/x", "XDG_RUNTIME_DIR": "/r"}) == markers.Path("/x")
    assert markers.state_dir({"XDG_RUNTIME_DIR": "/r"}) == markers.Path("/r/no-docker")
    if os.geteuid() == 0:
        assert markers.state_dir({}) == markers.Path("/run/no-docker")


def test_state_dir_is_made_private_and_a_shared_one_is_refused(tmp_path):
    made = markers.ensure_state_dir(tmp_path / "a" / "state")
    assert made.stat().st_mode & 0o777 == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(NotProven, match="chmod 700"):
        markers.ensure_state_dir(loose)
    if os.geteuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 65534, 65534)
        with pytest.raises(NotProven, match="belongs to uid 65534"):
            markers.ensure_state_dir(foreign)


def _dead_identity() -> Identity:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = ProcFS().stat(child.pid).start_time
    child.wait()
    return Identity(child.pid, start)


def _record(owner: Identity, **kw) -> markers.RunRecord:
    return markers.RunRecord(run_id=markers.new_run_id(), owner=owner, boot_id=ProcFS().boot_id(),
                             command=["true"], **kw)


def test_record_round_trips_and_is_written_atomically(tmp_path):
    rec = _record(markers.own_identity(), init=Identity(5, 6), ns_id=9, ns_inode=4026531836, ns_depth=1,
                  cgroup={"v2": "/sys/fs/cgroup/unified/no-docker/x", "pids_v1": None})
    directory = markers.create_marker(tmp_path, rec)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert sorted(os.listdir(directory)) == ["run.json"]  # no temporary file left behind
    back = markers.read_record(directory)
    assert back == rec
    data = json.loads((directory / "run.json").read_text())
    assert data["owner"]["pid"] == os.getpid() and data["version"] == markers.VERSION


def test_corrupt_record_is_reported(tmp_path):
    directory = tmp_path / markers.new_run_id()
    directory.mkdir()
    (directory / "run.json").write_text("{not json")
    with pytest.raises(markers.CorruptMarker, match="run.json"):
        markers.read_record(directory)


def test_owner_alive_uses_start_time_and_boot_id():
    fs = ProcFS()
    me = markers.own_identity(fs)
    assert markers.owner_alive(_record(me), fs)
    assert not markers.owner_alive(_record(_dead_identity()), fs)
    assert not markers.owner_alive(_record(Identity(me.pid, me.start_time + 1)), fs)  # pid reused
    other_boot = _record(me)
    other_boot.boot_id = "00000000-0000-0000-0000-000000000000"
    assert not markers.owner_alive(other_boot, fs)


def test_stale_marker_with_nothing_started_is_removed(tmp_path):
    directory = markers.create_marker(tmp_path, _record(_dead_identity()))
    refuse_if_stale(tmp_path, ProcFS())
    assert not directory.exists()


def test_marker_of_a_live_owner_is_left_alone(tmp_path):
    directory = markers.create_marker(tmp_path, _record(markers.own_identity(), state=markers.RUNNING))
    refuse_if_stale(tmp_path, ProcFS())
    assert directory.exists()


def test_stale_marker_whose_run_cannot_be_shown_ended_refuses(tmp_path):
    # spawning, no namespace and no cgroup recorded: nothing can show it ended
    rec = _record(_dead_identity(), state=markers.SPAWNING)
    directory = markers.create_marker(tmp_path, rec)
    with pytest.raises(NotProven, match=f"no-docker end {rec.run_id}"):
        refuse_if_stale(tmp_path, ProcFS())
    assert directory.exists()


def test_run_ids_are_validated():
    assert markers.valid_run_id(markers.new_run_id())
    for bad in ("", "../x", "-rf", "a/b", "x" * 65):
        assert not markers.valid_run_id(bad)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_hand_written_json_is_what_json_dumps_writes(value):
    text = markers.to_json_text(value)
    assert text == json.dumps(value, sort_keys=True)
    assert json.loads(text) == value
