"""Run markers: state dir rules, atomic run.json, owner liveness, the stale check before a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.ending import markers
from no_docker.supervisor.ending.lifecycle import refuse_if_stale
from no_docker.supervisor.ending.procfs import ProcFS
from no_docker.supervisor.ending.snapshot import Identity
from no_docker.supervisor.errors import NotProven


def test_state_dir_precedence(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    assert markers.state_dir({"NO_DOCKER_STATE_DIR": "/x", "XDG_RUNTIME_DIR": str(runtime)}) == "/x"
    assert markers.state_dir({"XDG_RUNTIME_DIR": str(runtime)}) == f"{runtime}/no-docker"
    assert markers.state_dir({"XDG_RUNTIME_DIR": "relative"}) != "relative/no-docker"  # XDG: ignored
    # Not a private directory of ours (the XDG spec's MUST): ignored, e.g. XDG_RUNTIME_DIR=/tmp
    # would make /tmp/no-docker one name for every user, and the first one's (issue 24).
    for loose in ("/tmp", str(tmp_path / "missing")):
        assert markers.state_dir({"XDG_RUNTIME_DIR": loose}) == markers.state_dir({})
    runtime.chmod(0o755)
    assert markers.state_dir({"XDG_RUNTIME_DIR": str(runtime)}) == markers.state_dir({})
    if os.geteuid() == 0:
        assert markers.state_dir({}) == "/run/no-docker"
    else:
        assert markers.state_dir({}) == f"/tmp/no-docker-{os.geteuid()}"


def test_pick_fallback_takes_our_first_dir_else_the_first_free_name():
    p = "no-docker-1000"
    assert markers.pick_fallback(p, [], []) == p
    assert markers.pick_fallback(p, [p], []) == f"{p}.1"  # squatted: the next name
    assert markers.pick_fallback(p, [p, f"{p}.1", f"{p}.3"], []) == f"{p}.2"
    # Ours wins wherever it is: a squatter's entry that comes or goes moves nothing.
    assert markers.pick_fallback(p, [p, f"{p}.1", f"{p}.2"], [f"{p}.2"]) == f"{p}.2"
    assert markers.pick_fallback(p, [f"{p}.2"], [f"{p}.2"]) == f"{p}.2"
    assert markers.pick_fallback(p, [p, f"{p}.2", f"{p}.1"], [p, f"{p}.2"]) == p
    # Only canonical indexes count: these are neither ours nor in the way.
    odd = [f"{p}.01", f"{p}.0", f"{p}.+1", f"{p}.\u0661", f"{p}.1x", f"{p}."]
    assert markers.pick_fallback(p, [p, *odd], odd) == f"{p}.1"


@given(taken=st.sets(st.integers(0, 12)), mine=st.sets(st.integers(0, 12)),
       noise=st.sets(st.integers(0, 12)))
def test_pick_fallback_depends_on_our_dirs_alone(taken, mine, noise):
    """Another user can add or remove entries of any name; what they cannot make is a
    directory of ours. Once we have one, no change of theirs moves the state dir."""
    p = "no-docker-7"
    name = lambda i: p if i == 0 else f"{p}.{i}"  # noqa: E731
    ours = [name(i) for i in mine]
    chosen = markers.pick_fallback(p, [name(i) for i in taken | mine], ours)
    assert chosen == markers.pick_fallback(p, [name(i) for i in noise | mine], ours) or not mine
    if mine:
        assert chosen == name(min(mine))
    else:
        assert chosen not in {name(i) for i in taken}  # never a name someone else holds


def test_a_squatted_fallback_is_passed_over(tmp_path, monkeypatch):
    """The per-user default in a sticky dir someone else wrote first (their dir, a link, a
    file): the next name; it stays the state dir when the squatter leaves. As root, the user is
    a made-up uid whose directories root makes (root's own default is /run/no-docker)."""
    monkeypatch.setattr(markers, "FALLBACK_BASE", str(tmp_path))
    tmp_path.chmod(0o1777)
    uid = os.geteuid()
    if uid == 0:
        uid = 4242
        monkeypatch.setattr(markers.os, "geteuid", lambda: uid)
    primary = tmp_path / f"no-docker-{uid}"

    def made_by(path, owner):
        path.mkdir(mode=0o700)
        if os.getuid() == 0:  # not root: only our own uid is possible, and it is ours already
            os.chown(path, owner, owner)
        return str(path)

    (tmp_path / "elsewhere").mkdir()
    primary.symlink_to(tmp_path / "elsewhere")  # not a directory by lstat: never followed
    assert markers.state_dir({}) == f"{primary}.1"
    primary.unlink()
    primary.write_text("")  # a file (a hard link of one of ours is ours, and still no directory)
    assert markers.state_dir({}) == f"{primary}.1"
    primary.unlink()
    if os.getuid() == 0:
        made_by(primary, uid + 1)  # another user's directory
        assert markers.state_dir({}) == f"{primary}.1"
    else:
        primary.symlink_to(tmp_path / "elsewhere")
    (tmp_path / f"no-docker-{uid}.1").write_text("")  # a second squat
    made = made_by(tmp_path / f"no-docker-{uid}.2", uid)
    assert markers.state_dir({}) == made
    if primary.is_symlink():
        primary.unlink()
    else:
        primary.rmdir()
    (tmp_path / f"no-docker-{uid}.1").unlink()
    assert markers.state_dir({}) == made  # ours, found again: its markers stay found
    assert os.listdir(tmp_path / "elsewhere") == []


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
                            launcher=Identity(7, 8), cgroup={"v2": "/x", "pids_v1": None}, detail="d",
                            member_uid=1000, owner_ns_id=3, owner_ns_inode=4026531837)
    data = rec.to_json()
    assert data == {
        "run_id": "r1", "owner": {"pid": 1, "start_time": 2}, "boot_id": "boot", "command": ["a", "b"],
        "state": "running", "created": 12.5, "ns_id": 9, "ns_inode": 4026531836, "ns_depth": 1,
        "init": {"pid": 5, "start_time": 6}, "launcher": {"pid": 7, "start_time": 8},
        "cgroup": {"v2": "/x", "pids_v1": None}, "detail": "d", "work": "", "member_uid": 1000,
        "owner_ns_id": 3, "owner_ns_inode": 4026531837, "version": markers.VERSION,
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


def test_a_record_without_the_new_fields_reads_as_unknown_and_bad_values_are_corrupt():
    # written by an earlier no-docker: no member_uid, no owner namespace
    old = markers.RunRecord("r1", Identity(1, 2), "boot", []).to_json()
    for key in ("member_uid", "owner_ns_id", "owner_ns_inode"):
        del old[key]
    rec = markers.RunRecord.from_json(old)
    assert (rec.member_uid, rec.owner_ns_id, rec.owner_ns_inode) == (None, None, None)
    for bad in ("1000", 1.5, True, [1]):
        with pytest.raises(ValueError):
            markers.RunRecord.from_json({**old, "member_uid": bad})


def test_a_run_of_another_pid_namespace_is_told_apart_from_ours():
    rec = markers.RunRecord("r1", Identity(1, 2), "boot", [])
    assert not markers.owner_elsewhere(rec)  # no namespace recorded: judged as before
    ns_id, inode = markers.own_pid_namespace()
    assert inode is not None
    rec.owner_ns_id, rec.owner_ns_inode = ns_id, inode
    assert not markers.owner_elsewhere(rec)
    rec.owner_ns_id = None if ns_id is None else ns_id + 1
    rec.owner_ns_inode = inode + 1
    assert markers.owner_elsewhere(rec)
    # the id decides where both sides have one (an inode is reused, an id is not)
    assert markers.owner_elsewhere(rec, (7, inode)) and not markers.owner_elsewhere(
        markers.RunRecord("r", Identity(1, 2), "b", [], owner_ns_id=7, owner_ns_inode=1), (7, 99))
    # our own namespace unreadable: never act on a record that names one
    assert markers.owner_elsewhere(rec, (None, None))


# -- a full or read-only state dir (issue 24): one 125 line, never a traceback -------------------
# Real ENOSPC/EROFS file systems are T-72's (tests/regression); here the errors are injected where
# the kernel would return them, to cover every path of create/write/remove.

def _fail(monkeypatch, name, code, after=0):
    """os.NAME raises OSError(CODE) from its (AFTER+1)th call on."""
    real = getattr(os, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) > after:
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("name, code, says", [("mkdir", 28, "No space left on device"),
                                              ("mkdir", 30, "remount it read-write"),
                                              ("write", 28, "free space (or inodes) there"),
                                              ("replace", 122, "Disk quota exceeded"),
                                              ("rename", 5, "Input/output error")])
def test_a_marker_that_cannot_be_created_is_not_proven_naming_the_state_dir(tmp_path, monkeypatch,
                                                                            name, code, says):
    rec = _record(markers.own_identity())
    _fail(monkeypatch, name, code)
    with pytest.raises(NotProven) as caught:
        markers.create_marker(str(tmp_path), rec)
    monkeypatch.undo()
    text = str(caught.value)
    assert text.startswith(f"state dir: cannot create a run marker in {tmp_path}: ") and says in text, text
    assert "NO_DOCKER_STATE_DIR" in text
    assert os.listdir(tmp_path) == [], "the staging directory was left behind"


def test_a_short_write_is_completed(tmp_path, monkeypatch):
    # write(2) may take part of the buffer on a nearly full file system: run.json must be whole
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:7])))
    rec = _record(markers.own_identity())
    rec.command = ["x" * 500]
    directory = markers.create_marker(str(tmp_path), rec)
    monkeypatch.undo()
    assert markers.read_record(directory).command == ["x" * 500]


def test_a_record_that_cannot_be_rewritten_keeps_the_old_one(tmp_path, monkeypatch):
    rec = _record(markers.own_identity())
    directory = markers.create_marker(str(tmp_path), rec)
    rec.state = markers.RUNNING
    _fail(monkeypatch, "write", 28)
    with pytest.raises(NotProven, match=r"state dir: cannot write .*/run.json: No space left"):
        markers.write_record(directory, rec)
    monkeypatch.undo()
    assert sorted(os.listdir(directory)) == ["run.json"], "the temporary file was left"
    assert markers.read_record(directory).state == markers.CREATED
    os.rename(directory, directory + ".x")  # gone (end --force): still FileNotFoundError
    with pytest.raises(FileNotFoundError):
        markers.write_record(directory, rec)


def test_a_marker_that_cannot_be_removed_is_not_proven_and_stays(tmp_path, monkeypatch):
    directory = markers.create_marker(str(tmp_path), _record(markers.own_identity()))
    _fail(monkeypatch, "rename", 30)
    with pytest.raises(NotProven, match="cannot remove the run marker .*: Read-only file system"):
        markers.remove_marker(directory)
    monkeypatch.undo()
    assert markers.list_markers(str(tmp_path)) == [directory]


def test_the_ending_goes_on_when_the_marker_cannot_be_removed(tmp_path, monkeypatch):
    """The state dir goes read-only during a run: the ending still runs to its end (killing
    outranks recording), and the failure is kept for `run` to say (125)."""
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    life = RunLifecycle(["x"], use_cgroup=False, check_stale=False, state=tmp_path / "state")
    with life:
        _fail(monkeypatch, "rename", 30)
        report = life.end()
    monkeypatch.undo()
    assert report.clean, report.reason
    assert life.marker_failure is not None and "Read-only file system" in str(life.marker_failure)
    assert len(markers.list_markers(str(tmp_path / "state"))) == 1  # kept: it could not be removed


def test_the_ending_goes_on_when_the_marker_cannot_be_rewritten(tmp_path, monkeypatch):
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    life = RunLifecycle(["x"], use_cgroup=False, check_stale=False, state=tmp_path / "state")
    with life:
        life.spawning()
        _fail(monkeypatch, "open", 28)  # 'ending' and then 'not-proven' cannot be written
        report = life.end()  # no namespace, no cgroup: not proven, but it ran to its end
    monkeypatch.undo()
    assert not report.clean and life.report is report
    assert "No space left on device" in str(life.marker_failure)
    directory = markers.list_markers(str(tmp_path / "state"))[0]
    assert markers.read_record(directory).state == markers.SPAWNING  # the last record written
    markers.remove_marker(directory)


def test_a_marker_write_that_fails_before_the_ending_stops_the_run(tmp_path, monkeypatch):
    from no_docker.supervisor.ending.lifecycle import RunLifecycle

    life = RunLifecycle(["x"], use_cgroup=False, check_stale=False, state=tmp_path / "state")
    with pytest.raises(NotProven, match="state dir: cannot write"), life:
        _fail(monkeypatch, "open", 28)
        life.spawning()  # nothing may be spawned unrecorded
    monkeypatch.undo()


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_hand_written_indented_json_is_what_json_dumps_writes(value):
    # --report's document, as json.dump(indent=2, sort_keys=True) wrote it
    assert markers.to_json_indented(value) == json.dumps(value, indent=2, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_hand_read_json_is_what_json_loads_reads(value):
    for text in (markers.to_json_text(value), json.dumps(value), json.dumps(value, indent=2)):
        assert markers.from_json_text(text.encode()) == json.loads(text) == value


# Bytes that decide how a JSON reader reads: structure, numbers in every form (json's own
# -Infinity, NaN), escapes, control characters, NUL (json.loads of bytes guesses UTF-16/32 from
# NULs), non-ASCII, a BOM.
_JSON_PIECES = st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b" ", b"\n", b'"', b'"a"', b'"k": ',
                                b"1", b"0", b"-", b".", b"5", b"e", b"E+", b"-2", b"01", b"1.5e3", b"true",
                                b"false", b"null", b"nul", b"NaN", b"-Infinity", b"\\", b"\\u00e9",
                                b"\x00", b"\x01", b"\x7f", b"\xc3\xa9", b"\xef\xbb\xbf", b"\t"])


def _loads_or_error(data: bytes) -> object:
    try:
        return ("value", json.loads(data))
    except ValueError:
        return ("error", None)


def _from_text_or_error(data: bytes) -> object:
    try:
        return ("value", markers.from_json_text(data))
    except ValueError:
        return ("error", None)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_JSON_PIECES, max_size=12).map(b"".join))
def test_hand_read_json_accepts_and_refuses_what_json_loads_does(data):
    # read_record's reader: never a record json.loads would refuse, never another value
    want = _loads_or_error(data)
    got = _from_text_or_error(data)
    if want[0] == "value" and want[1] != want[1]:  # NaN: equal to nothing, itself included
        assert got[0] == "value" and got[1] != got[1]
    else:
        assert got == want


def test_a_record_is_read_and_a_report_written_without_json(monkeypatch):
    # None in sys.modules makes `import json` raise ImportError: neither may need it.
    rec = markers.RunRecord("r1", Identity(1, 2), "boot", ["a", "b c"], created=12.5, ns_id=9)
    data = markers.to_json_text(rec.to_json()).encode()
    monkeypatch.setitem(sys.modules, "json", None)
    assert markers.RunRecord.from_json(markers.from_json_text(data)).to_json() == rec.to_json()
    assert markers.to_json_indented({"a": [1, {"b": None}], "c": 1.5}).startswith('{\n  "a": [\n    1,')
