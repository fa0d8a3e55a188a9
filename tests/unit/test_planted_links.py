"""run.link_below_a_root: a path named to a run (--report, --rw, --ro) whose way passes a
symlink inside a directory runs may write is refused; links above or beside those roots are
the user's own (T-85)."""

from __future__ import annotations

import os

from no_docker.supervisor.run import link_below_a_root


def tree(tmp_path):
    real = tmp_path / "real"
    (real / "work" / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "via").symlink_to(real)  # a link above the work dir: the user's
    (real / "work" / "out").symlink_to(tmp_path / "elsewhere")  # a link inside it: a run's?
    (real / "work" / "sub" / "deep").symlink_to(tmp_path / "elsewhere")
    return real, os.path.realpath(real / "work")


def test_a_link_inside_a_root_is_named_wherever_on_the_way_it_is(tmp_path):
    real, work = tree(tmp_path)
    assert link_below_a_root(str(real / "work" / "out"), [work]) == str(real / "work" / "out")
    assert link_below_a_root(str(real / "work" / "out" / "x" / "y"), [work]) == str(real / "work" / "out")
    deep = real / "work" / "sub" / "deep"
    assert link_below_a_root(str(deep), [work]) == str(deep)
    # the same, reached through the user's own link above the root
    via = tmp_path / "via" / "work" / "out"
    assert link_below_a_root(str(via), [work]) == str(via)


def test_links_above_or_beside_the_roots_and_plain_paths_pass(tmp_path):
    real, work = tree(tmp_path)
    assert link_below_a_root(str(tmp_path / "via" / "work" / "sub"), [work]) is None
    assert link_below_a_root(str(real / "work" / "sub" / "missing" / "x"), [work]) is None
    assert link_below_a_root(str(tmp_path / "elsewhere"), [work]) is None
    assert link_below_a_root(str(tmp_path / "via"), [work]) is None  # the link is above the root
    # A root given through a link is a root: the path into it is the user's.
    assert link_below_a_root(str(real / "work" / "out"), [work, os.path.realpath(tmp_path / "elsewhere")]) \
        == str(real / "work" / "out")  # ... but a link to it from inside another root still is not


def test_relative_paths_are_taken_from_the_current_directory(tmp_path, monkeypatch):
    real, work = tree(tmp_path)
    monkeypatch.chdir(real / "work")
    assert link_below_a_root("out/run.json", [work]) == os.path.join(os.getcwd(), "out")
    assert link_below_a_root("sub/run.json", [work]) is None
