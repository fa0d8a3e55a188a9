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
    # the same, reached through the user's own link above the root: named where it really is
    via = tmp_path / "via" / "work" / "out"
    assert link_below_a_root(str(via), [work]) == str(real / "work" / "out")


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


def test_dot_dot_after_a_planted_link_is_what_the_kernel_follows(tmp_path):
    # abspath folds `out/..` away; the kernel follows `out` to its target first (red-team 2)
    real, work = tree(tmp_path)
    assert link_below_a_root(str(real / "work" / "out" / ".."), [work]) == str(real / "work" / "out")
    assert link_below_a_root(str(real / "work" / "sub" / ".." / "sub"), [work]) is None


def test_the_report_directory_is_opened_through_no_link_inside_a_root(tmp_path):
    import errno

    import pytest
    from no_docker.supervisor.run import open_directory_below_roots

    real, work = tree(tmp_path)
    fd = open_directory_below_roots(str(tmp_path / "via" / "work" / "sub"), [work])  # the user's link
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == str(real / "work" / "sub")
    finally:
        os.close(fd)
    for planted in (real / "work" / "out", real / "work" / "out" / "..", real / "work" / "sub" / "deep"):
        with pytest.raises(OSError) as err:
            os.close(open_directory_below_roots(str(planted), [work]))
        assert err.value.errno == errno.ELOOP, err.value
        assert "a symlink inside a directory runs may write" in str(err.value)


def test_a_link_swapped_in_while_the_report_directory_is_opened_never_leads_outside(tmp_path):
    # A concurrent run in the same work dir exchanging a directory and a link (renameat2
    # RENAME_EXCHANGE) as fast as it can: every open either fails or is the directory inside.
    import ctypes
    import threading

    real, work = tree(tmp_path)
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        import pytest
        pytest.skip("this libc has no renameat2 (glibc 2.28+)")
    from no_docker.supervisor.run import open_directory_below_roots

    inside = real / "work" / "rep"
    inside.mkdir()
    (real / "work" / "replink").symlink_to(tmp_path / "elsewhere")
    stop = threading.Event()
    at_fdcwd, exchange = -100, 2

    def swap() -> None:
        a, b = str(inside).encode(), str(real / "work" / "replink").encode()
        while not stop.is_set():
            libc.renameat2(at_fdcwd, a, at_fdcwd, b, exchange)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    import time

    opened = refused = 0
    deadline = time.monotonic() + 20
    try:
        # 3000 opens at least, and on until both outcomes were seen (the scheduler decides
        # which side of the exchange an open meets), for at most 20 s.
        while opened + refused < 3000 or (not (opened and refused) and time.monotonic() < deadline):
            try:
                fd = open_directory_below_roots(str(inside), [work])
            except OSError:
                refused += 1
                continue
            try:
                where = os.readlink(f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
            assert where.startswith(work + "/"), f"opened {where}, outside the work dir"
            opened += 1
    finally:
        stop.set()
        swapper.join(timeout=10)
    assert refused > 0, f"the swap never met an open ({opened} opened): nothing was shown"
