"""ending/left.py: the record of code a refused run could not undo (T-79, rt4 B2)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.supervisor.ending import left
from no_docker.supervisor.errors import NotProven

_part = st.sampled_from(["w", "w2", "sub", "x"])


@given(st.lists(_part, min_size=1, max_size=3), st.lists(_part, min_size=1, max_size=3))
def test_overlap_is_holding_or_lying_in(a, b):
    pa, pb = "/" + "/".join(a), "/" + "/".join(b)
    expect = pa == pb or pa.startswith(pb + "/") or pb.startswith(pa + "/")
    assert left.overlaps([pa], [pb]) == expect == left.overlaps([pb], [pa])


def test_a_record_stops_runs_that_overlap_it_and_only_those(tmp_path):
    state = str(tmp_path)
    left.write(state, "r1", ["/w"], ["/w/pytest.ini: Not a directory"], ["/w/.no-docker-quarantine-r1-ab"])
    for roots in (["/w"], ["/w/tests"], ["/"], ["/elsewhere", "/w/x"]):
        with pytest.raises(NotProven) as err:
            left.refuse_if_left(state, roots)
        assert "no-docker end r1" in str(err.value) and "/w/pytest.ini" in str(err.value)
        assert "/w/.no-docker-quarantine-r1-ab" in str(err.value)
    left.refuse_if_left(state, ["/w2", "/elsewhere"])  # no overlap: runs
    assert [d["run_id"] for d in left.read_all(state)] == ["r1"]
    assert left.clear(state, "r1") and not left.clear(state, "r1")
    left.refuse_if_left(state, ["/w"])


@pytest.mark.parametrize("content", ["{", "[]", '{"roots": "/w"}', ""])
def test_a_record_that_cannot_be_read_stops_every_run(tmp_path, content):
    (tmp_path / "left-r2.json").write_text(content)
    with pytest.raises(NotProven) as err:
        left.refuse_if_left(str(tmp_path), ["/anywhere"])
    assert "cannot be read" in str(err.value) and str(tmp_path / "left-r2.json") in str(err.value)


def test_the_record_is_written_whole_and_private(tmp_path):
    left.write(str(tmp_path), "r3", ["/w"], ["a", "b"], [])
    path = tmp_path / "left-r3.json"
    assert json.loads(path.read_text())["not_undone"] == ["a", "b"]
    assert (os.stat(path).st_mode & 0o777) == 0o600 and not (tmp_path / "left-r3.json.tmp").exists()
    assert "(+1 more)" in str(left.refusal(left.read_all(str(tmp_path))[0], str(tmp_path)))


class _AuditThatCannotRead:
    """A LaterCodeAudit whose after-run walk meets what it cannot read (T-85's NUL, or the next
    such thing): run.audit_and_undo must turn it into a recorded refusal."""

    roots = ["/w", "/w2"]

    def changed(self):
        raise ValueError("embedded null byte")


def test_an_audit_that_fails_is_a_recorded_refusal_never_a_traceback(tmp_path):
    from no_docker.supervisor.run import audit_and_undo, undo_words

    state = str(tmp_path)
    later_code, undo, not_undone, recorded = audit_and_undo(_AuditThatCannotRead(), True, None, "r9", state)
    line = ("(the after-run audit failed: ValueError: embedded null byte; what the run left in /w, /w2 "
            "is not known)")
    assert later_code == [line] and not_undone == [line] and undo is None and recorded == "r9"
    assert "new runs there refuse until: no-docker end r9" in undo_words(undo, not_undone, recorded)
    with pytest.raises(NotProven) as err:
        left.refuse_if_left(state, ["/w2/sub"])  # the next run there
    assert "no-docker end r9" in str(err.value)


def test_an_audit_that_fails_without_a_writable_state_dir_says_so(tmp_path):
    from no_docker.supervisor.run import audit_and_undo

    missing = str(tmp_path / "gone")
    later_code, _, not_undone, recorded = audit_and_undo(_AuditThatCannotRead(), True, None, "r9", missing)
    assert recorded is None and later_code and "could not be written" in not_undone[1], not_undone
