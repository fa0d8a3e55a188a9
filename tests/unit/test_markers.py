"""Run markers: state dir rules, atomic run.json, owner liveness, the stale check before a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from no_docker.supervisor.ending import markers
from no_docker.supervisor.ending.lifecycle import refuse_if_stale
from no_docker.supervisor.ending.procfs import ProcFS
from no_docker.supervisor.ending.snapshot import Identity
from no_docker.supervisor.errors import NotProven


def test_state_dir_precedence(tmp_path):
    assert markers.state_dir({"NO_DOCKER_STATE_DIR": "/x", "XDG_RUNTIME_DIR": "/r"}) == "/x"
    assert markers.state_dir({"XDG_RUNTIME_DIR": "/r"}) == "/r/no-docker"
    assert markers.state_dir({"XDG_RUNTIME_DIR": "relative"}) != "relative/no-docker"  # XDG: ignored
    if os.geteuid() == 0:
        assert markers.state_dir({}) == "/run/no-docker"
    else:
        assert markers.state_dir({}) == f"/tmp/no-docker-{os.geteuid()}"


@pytest.mark.parametrize("value", ["state", ".state", "./x/../state"])
def test_relative_state_dir_is_refused(value):
    # issue 18 item 7: it would land in the work dir, where the run edits its own markers
    with pytest.raises(NotProven, match="NO_DOCKER_STATE_DIR=.* is a relative path"):
        markers.state_dir({"NO_DOCKER_STATE_DIR": value})


def test_state_dir_symlink_and_loose_parent_are_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(NotProven, match="symbolic link"):
        markers.ensure_state_dir(link)
    loose_parent = tmp_path / "shared"
    loose_parent.mkdir()
    loose_parent.chmod(0o777)  # writable by all, not sticky: anyone could swap our dir
    with pytest.raises(NotProven, match="writable by others and not sticky"):
        markers.ensure_state_dir(loose_parent / "state")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others cannot rename what is ours
    made = markers.ensure_state_dir(sticky / f"no-docker-{os.geteuid()}")
    assert os.lstat(made).st_mode & 0o777 == 0o700


def test_state_dir_inside_a_writable_root_is_refused(tmp_path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (work / "via-link").symlink_to(tmp_path / "elsewhere")
    assert markers.overlap(str(work / ".state"), [str(work)]) == str(work)
    assert markers.overlap(str(tmp_path / "elsewhere" / "s"), [str(work / "via-link")]) is not None
    assert markers.overlap(str(tmp_path / "state"), [str(tmp_path / "state" / "x")]) is not None
    assert markers.overlap(str(tmp_path / "work2"), [str(work)]) is None  # a prefix is not a parent
    with pytest.raises(NotProven, match=r"state dir: .*\.state is inside .*work, which the run can write"):
        markers.refuse_writable_state(str(work / ".state"), [str(tmp_path / "other"), str(work)])


def _checked(rec: markers.RunRecord, **changes) -> str | None:
    for name, value in changes.items():
        setattr(rec, name, value)
    return markers.check_record(rec, rec.run_id, cgroup2_mounts=["/sys/fs/cgroup/unified"])


def test_marker_fields_that_drive_actions_are_audited():
    """Red-team round 2, A1: run.json is data; only what no-docker writes is acted on."""
    own = markers.own_identity()
    rec = _record(own, ns_id=9, ns_inode=4026531836, ns_depth=1, init=Identity(50, 6))
    rid = rec.run_id
    good_v2 = f"/sys/fs/cgroup/unified/no-docker/{rid}"
    assert _checked(rec, cgroup={"v2": good_v2, "pids_v1": f"/sys/fs/cgroup/pids/no-docker/{rid}"}) is None
    assert _checked(rec, cgroup={"v2": "/sys/fs/cgroup/unified/user/victim", "pids_v1": None})
    assert _checked(rec, cgroup={"v2": f"{good_v2}/../../victim", "pids_v1": None})
    assert _checked(rec, cgroup={"v2": "/sys/fs/cgroup/unified/no-docker/other-run", "pids_v1": None})
    assert _checked(rec, cgroup={"v2": f"/tmp/no-docker/{rid}", "pids_v1": None})  # no cgroup2 mount
    assert _checked(rec, cgroup={"v2": f"/sys/fs/cgroup/unified/no-docker/x/no-docker/{rid}",
                                 "pids_v1": None})  # nested in another run's cgroup
    assert _checked(rec, cgroup={"v2": None, "pids_v1": "/sys/fs/cgroup/pids/victim"})
    assert _checked(rec, cgroup={"v2": good_v2, "pids_v1": None, "extra": "x"})
    assert _checked(rec, cgroup=None) is None
    assert _checked(rec, ns_depth=0)  # our own namespace: every process would be a member
    assert _checked(rec, ns_depth=1, ns_inode=None)
    assert _checked(rec, ns_inode=4026531836, ns_id="9")
    assert _checked(rec, ns_id=9, init=Identity(1, 0))
    assert _checked(rec, init=Identity(50, 6), state="whatever")
    assert markers.check_record(rec, "another-dir-name")


def test_planted_marker_is_refused_before_anything_acts(tmp_path):
    rec = _record(_dead_identity(), state=markers.RUNNING)
    rec.cgroup = {"v2": "/sys/fs/cgroup/unified/victim", "pids_v1": None}
    directory = tmp_path / rec.run_id
    directory.mkdir()
    markers.write_record(directory, rec)
    with pytest.raises(markers.CorruptMarker, match="not no-docker's own cgroup"):
        markers.read_record(directory)
    with pytest.raises(NotProven, match="earlier runs ended: .*not no-docker's own cgroup"):
        refuse_if_stale(tmp_path, ProcFS())
    assert directory.exists()  # refused, nothing removed


def test_marker_symlinks_are_not_followed(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / markers.new_run_id()).symlink_to(elsewhere)
    assert markers.list_markers(state) == []
    rec = _record(_dead_identity())
    directory = state / rec.run_id
    directory.mkdir()
    (directory / "run.json").symlink_to(tmp_path / "victim.json")
    with pytest.raises(markers.CorruptMarker):
        markers.read_record(directory)


def test_state_dir_is_made_private_and_a_shared_one_is_refused(tmp_path):
    made = markers.ensure_state_dir(tmp_path / "a" / "state")
    assert os.stat(made).st_mode & 0o777 == 0o700
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
    child.wait(timeout=30)
    return Identity(child.pid, start)


def _record(owner: Identity, **kw) -> markers.RunRecord:
    return markers.RunRecord(run_id=markers.new_run_id(), owner=owner, boot_id=ProcFS().boot_id(),
                             command=["true"], **kw)


def test_record_round_trips_and_is_written_atomically(tmp_path):
    rec = _record(markers.own_identity(), init=Identity(5, 6), ns_id=9, ns_inode=4026531836, ns_depth=1)
    rec.cgroup = {"v2": f"/sys/fs/cgroup/unified/no-docker/{rec.run_id}", "pids_v1": None}
    directory = Path(markers.create_marker(tmp_path, rec))
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
    directory = Path(markers.create_marker(tmp_path, _record(_dead_identity())))
    refuse_if_stale(tmp_path, ProcFS())
    assert not directory.exists()


def test_marker_of_a_live_owner_is_left_alone(tmp_path):
    directory = Path(markers.create_marker(tmp_path, _record(markers.own_identity(), state=markers.RUNNING)))
    refuse_if_stale(tmp_path, ProcFS())
    assert directory.exists()


def test_stale_marker_whose_run_cannot_be_shown_ended_refuses(tmp_path):
    # spawning, no namespace and no cgroup recorded: nothing can show it ended
    rec = _record(_dead_identity(), state=markers.SPAWNING)
    directory = Path(markers.create_marker(tmp_path, rec))
    with pytest.raises(NotProven, match=f"no-docker end {rec.run_id}"):
        refuse_if_stale(tmp_path, ProcFS())
    assert directory.exists()


def test_run_ids_are_validated():
    assert markers.valid_run_id(markers.new_run_id())
    for bad in ("", "../x", "-rf", "a/b", "x" * 65):
        assert not markers.valid_run_id(bad)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text()
JSON_VALUES = st.deferred(lambda: JSON_SCALARS | st.lists(JSON_VALUES, max_size=4)
                          | st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4))


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_hand_written_json_is_what_json_dumps_writes(value):
    text = markers.to_json_text(value)
    assert text == json.dumps(value, sort_keys=True)
    assert json.loads(text) == value


def test_run_json_has_every_field_in_declaration_order_then_the_version():
    # The explicit conversion that replaced dataclasses.asdict: same keys, same order, same values.
    rec = markers.RunRecord("r1", Identity(1, 2), "boot", ["a", "b"], state=markers.RUNNING, created=12.5,
                            ns_id=9, ns_inode=4026531836, ns_depth=1, init=Identity(5, 6),
                            launcher=Identity(7, 8), cgroup={"v2": "/x", "pids_v1": None}, detail="d")
    data = rec.to_json()
    assert data == {
        "run_id": "r1", "owner": {"pid": 1, "start_time": 2}, "boot_id": "boot", "command": ["a", "b"],
        "state": "running", "created": 12.5, "ns_id": 9, "ns_inode": 4026531836, "ns_depth": 1,
        "init": {"pid": 5, "start_time": 6}, "launcher": {"pid": 7, "start_time": 8},
        "cgroup": {"v2": "/x", "pids_v1": None}, "detail": "d", "work": "", "version": markers.VERSION,
    }
    assert list(data) == [*markers.RunRecord.__record_fields__, "version"]
    # copies, as asdict made: changing the JSON object leaves the record alone
    data["command"].append("c")
    data["cgroup"]["v2"] = "/y"
    assert rec.command == ["a", "b"] and rec.cgroup == {"v2": "/x", "pids_v1": None}
    bare = markers.RunRecord("r2", Identity(1, 2), "boot", []).to_json()
    assert (bare["init"], bare["launcher"], bare["cgroup"], bare["detail"]) == (None, None, None, "")
    assert markers.RunRecord.from_json(json.loads(markers.to_json_text(data))).command == ["a", "b", "c"]


def test_a_record_is_stamped_when_it_is_made_not_when_its_class_was():
    before = time.time()
    rec = markers.RunRecord("r1", Identity(1, 2), "boot", [])
    # a Factory default: called per record (a plain default would be the import time)
    assert isinstance(rec.created, float) and rec.created >= before - 1.0
    assert markers.RunRecord("r2", Identity(1, 2), "boot", [], created=5.0).created == 5.0


def test_a_marker_removed_between_listing_and_reading_is_skipped(tmp_path, monkeypatch):
    # Regression (8 concurrent runs, 1 of 27 exited 125 "no run.json"): the owner of a run that
    # ended cleanly removed its marker after our stale check listed it and before it read it.
    directory = Path(markers.create_marker(tmp_path, _record(markers.own_identity(), state=markers.RUNNING)))
    listed = markers.list_markers(tmp_path)
    markers.remove_marker(directory)
    monkeypatch.setattr(markers, "list_markers", lambda state: listed)
    refuse_if_stale(tmp_path, ProcFS())  # must not raise


def test_a_marker_without_its_record_still_refuses(tmp_path):
    directory = tmp_path / markers.new_run_id()
    directory.mkdir()
    with pytest.raises(NotProven, match="no run.json"):
        refuse_if_stale(tmp_path, ProcFS())


def test_removal_never_shows_a_listed_marker_without_its_record(tmp_path):
    # remove_marker renames first, so no listing sees the directory once run.json is gone.
    directory = Path(markers.create_marker(tmp_path, _record(markers.own_identity(), state=markers.RUNNING)))
    real_unlink = os.unlink
    seen: list[list] = []

    def watching_unlink(path, *args, **kwargs):
        seen.append(markers.list_markers(tmp_path))
        return real_unlink(path, *args, **kwargs)

    import unittest.mock

    with unittest.mock.patch.object(markers.os, "unlink", watching_unlink):
        markers.remove_marker(directory)
    assert seen and all(listing == [] for listing in seen), seen
    assert not directory.exists() and list(tmp_path.iterdir()) == []


def test_lock_marker_is_exclusive_and_reports_a_removed_marker(tmp_path):
    directory = tmp_path / "20990101T000000-0000abcd"
    directory.mkdir()
    first = markers.lock_marker(directory, wait=False)
    assert first is not None
    try:
        with pytest.raises(BlockingIOError):
            markers.lock_marker(directory, wait=False)
        markers.remove_marker(directory)  # renamed away while locked: the lock stays on the inode
    finally:
        os.close(first)
    assert markers.lock_marker(directory, wait=False) is None


def test_a_supervisor_whose_marker_was_removed_by_end_force_goes_on(tmp_path):
    """`no-docker end --force ID` of a live run removes the marker under its supervisor; the
    supervisor's next record write raised FileNotFoundError (a traceback at its end)."""
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    life = RunLifecycle(["x"], use_cgroup=False, check_stale=False, state=tmp_path / "state")
    with life:
        markers.remove_marker(life.directory)
        life.spawning()  # writes the record: the marker is gone
        assert life.directory is None
