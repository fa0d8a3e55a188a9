"""Every cgroup below a run's leaves: listed deepest first, its processes counted, removed and
shown gone (issue 17 C: child cgroups made inside a run once outlived it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from no_docker.supervisor.ending import cgroup
from no_docker.supervisor.ending.algorithm import EndReport
from no_docker.supervisor.ending.lifecycle import cgroups_removed


def test_subtree_lists_children_before_parents_and_nothing_for_a_missing_root(tmp_path):
    for rel in ("a/b/c", "a/d", "e"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "a" / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "a")  # never followed
    order = [os.path.relpath(p, tmp_path) for p in cgroup.subtree(str(tmp_path))]
    assert sorted(order) == sorted([".", "a", "a/b", "a/b/c", "a/d", "e"])
    for path in order:
        parent = os.path.dirname(path) or "."
        if path != ".":
            assert order.index(path) < order.index(parent), order
    assert cgroup.subtree(str(tmp_path / "missing")) == []


def test_subtree_of_a_deep_tree_does_not_exhaust_the_stack(tmp_path):
    root = tmp_path / "deep"
    path = str(root)
    os.mkdir(path)
    for _ in range(1200):  # deeper than Python's recursion limit (os.makedirs would hit it)
        path += "/d"
        os.mkdir(path)
    order = cgroup.subtree(str(root))
    assert len(order) == 1201 and order[0] == path and order[-1] == str(root)
    for directory in order:  # deepest first: the order rmdir needs (tmp_path's clean-up recurses)
        os.rmdir(directory)


usable = cgroup.v2_parent() is not None


@pytest.mark.skipif(not usable, reason="needs a writable cgroup2 hierarchy")
def test_children_of_the_leaf_are_counted_removed_and_shown_gone():
    run_id = f"test-tree-{os.getpid()}-{time.monotonic_ns()}"
    cg = cgroup.create(run_id)
    assert cg is not None and cg.path is not None
    child = None
    try:
        nested = Path(cg.path, "child", "grandchild")
        nested.mkdir(parents=True)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        Path(nested, "cgroup.procs").write_text(str(child.pid))
        assert cg.tree_procs() == [child.pid]  # the leaf's own cgroup.procs alone shows nothing
        report = EndReport(run_id, clean=True)
        assert not cgroups_removed(cg, report)  # populated: rmdir is refused
        assert not report.clean and "grandchild" in report.reason, report
        cg.kill()  # cgroup.kill covers the whole subtree
        child.wait(timeout=10)
        assert cg.wait_empty(time.monotonic() + 5)
        report = EndReport(run_id, clean=True)
        assert cgroups_removed(cg, report) and report.clean
        assert cg.left() == [] and not os.path.lexists(cg.path)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        for directory in cgroup.subtree(cg.path):
            try:
                os.rmdir(directory)
            except OSError:
                pass


@pytest.mark.parametrize(("killed", "words"), [(0, "0 processes killed"), (1, "1 process killed"),
                                                (3, "3 processes killed")])
def test_the_status_line_counts_in_words(killed, words):
    line = EndReport("r1", clean=True, killed=killed, elapsed_ms=4.2).line()
    assert line == f"run r1 ended, {words}, 0 left, 4 ms"
