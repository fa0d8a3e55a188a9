"""The later-code walk (issue 16 part B, issue 18 item 1): what it takes for a git directory
agrees with git's own discovery; it follows no link, stays within its bound (and refuses past
it), and the supervisor's reads of run-writable paths open nothing but regular files."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.supervisor.errors import NotProven
from no_docker.supervisor.isolation import later_code

SHA = "0123456789abcdef0123456789abcdef01234567"


def layout(d, head=("file", "ref: refs/heads/main\n"), objects=True, refs=True, commondir=None):
    d.mkdir(parents=True)
    kind, value = head
    if kind == "file":
        (d / "HEAD").write_text(value)
    elif kind == "link":
        (d / "HEAD").symlink_to(value)
    if objects:
        (d / "objects").mkdir()
    if refs:
        (d / "refs" / "heads").mkdir(parents=True)
    if commondir is not None:
        (d / "commondir").write_text(commondir + "\n")


LAYOUTS = {
    "bare": {},
    "no-refs": {"refs": False},
    "no-objects": {"objects": False},
    "bad-head": {"head": ("file", "garbage\n")},
    "detached": {"head": ("file", SHA + "\n")},
    "head-link": {"head": ("link", "refs/heads/main")},
    "head-link-outside-refs": {"head": ("link", "/etc/passwd")},
    "commondir": {"objects": False, "refs": False, "commondir": "../common"},
    "commondir-missing": {"objects": False, "refs": False, "commondir": "../nowhere"},
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_walk_takes_a_directory_for_a_repository_exactly_when_git_does(tmp_path, name):
    top = tmp_path / "top"
    layout(top / "common", head=("none", ""))
    d = top / "d"
    layout(d, **LAYOUTS[name])
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CEILING_DIRECTORIES=str(tmp_path), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    found = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=d, env=env, capture_output=True,
                           text=True, timeout=30)
    git_says = found.returncode == 0 and found.stdout.strip() == str(d)
    verdict = later_code.later_code_sources(str(top)).get("d/(git directory)", "absent")
    assert (verdict == "a repository git would use") == git_says, (verdict, found.stdout, found.stderr)


def test_the_walk_follows_no_link(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    layout(outside / "bare")
    root.mkdir()
    (root / "link").symlink_to(outside)
    (root / ".git").symlink_to(outside / "bare")
    sources = later_code.later_code_sources(str(root))
    assert not any(k.startswith("link/") for k in sources), sources
    assert sources[".git"] == f"symlink:{outside / 'bare'}"


def test_past_its_bound_the_walk_refuses_before_and_reports_after(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for i in range(60):
        (root / f"f{i}").write_text("")
    with pytest.raises(NotProven, match="more than 50 files and directories"):
        later_code.LaterCodeAudit(limit=50).start([str(root)], [])
    audit = later_code.LaterCodeAudit(limit=100)
    audit.start([str(root)], [])
    assert audit.changes() == []
    for i in range(60, 120):
        (root / f"f{i}").write_text("")
    assert audit.changes() == [f"{root}/(walk): absent -> stopped: more than 100 files and directories"]


def test_nested_git_directories_and_venvs_are_found_and_protected(tmp_path):
    root = tmp_path / "root"
    layout(root / ".git")
    layout(root / ".git" / "modules" / "a" / "modules" / "b")
    (root / ".git" / "modules" / "a" / "modules" / "b" / "config").write_text("[core]\n")
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git/modules/a\n")
    site = root / ".tox" / "py" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / ".tox" / "py" / "bin").mkdir()
    (root / ".tox" / "py" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    found = later_code.survey(str(root))
    protect = found.protect()
    for path in (".git/HEAD", ".git/modules/a/modules/b/config", ".git/modules/a/modules/b/HEAD", "sub/.git",
                 ".tox/py"):  # a whole venv (pip reads a pip.conf in its root: issue 25)
        assert str(root / path) in protect, (path, protect)
    assert not any(p.endswith(("/objects", "/refs")) for p in protect)


def test_what_runs_later_from_a_venv_is_audited(tmp_path):
    root = tmp_path / "root"
    site = root / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    audit = later_code.LaterCodeAudit()
    audit.start([str(root)], [])
    (site / "pkg" / "module.py").write_text("x = 1\n")  # an ordinary package file: not implicit code
    assert audit.changes() == []
    (site / "zz.pth").write_text("import os\n")
    (site / "sitecustomize").mkdir()
    (site / "sitecustomize" / "__init__.py").write_text("import os\n")
    (root / ".venv" / "bin" / "pytest").write_text("#!/bin/sh\n")
    changed = [line.split(":", 1)[0] for line in audit.changes()]
    assert changed == [f"{root}/.venv/bin/pytest", f"{site}/sitecustomize",
                       f"{site}/sitecustomize/__init__.py", f"{site}/zz.pth"], changed


def test_an_own_venv_given_as_rw_is_the_callers_to_change(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert later_code.survey(str(venv), own_venvs=(str(venv),)).protect() == []
    assert later_code.survey(str(venv)).protect() == [str(venv)]


def test_read_regular_opens_only_regular_files_through_no_link(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert later_code.read_regular(str(tmp_path / "f"), limit=10) == b"x" * 10
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "dirlink").symlink_to(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    for bad in ("link", "dirlink/f", "fifo", "."):
        with pytest.raises(OSError):
            later_code.read_regular(str(tmp_path / bad))
    # A FIFO behind a link: never opened, so a writer blocked on it stays blocked.
    (tmp_path / "fifolink").symlink_to(tmp_path / "fifo")
    opened = threading.Event()

    def writer() -> None:
        fd = os.open(tmp_path / "fifo", os.O_WRONLY)
        opened.set()
        os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    with pytest.raises(OSError):
        later_code.read_regular(str(tmp_path / "fifolink"))
    assert not opened.wait(0.1)
    os.close(os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK))
    thread.join(5)


def test_home_link_targets_are_those_inside_a_writable_root(tmp_path):
    home, work, elsewhere = tmp_path / "home", tmp_path / "work", tmp_path / "elsewhere"
    for d in (home, work / "bash", elsewhere):
        d.mkdir(parents=True)
    (home / ".bashrc").symlink_to(work / "bash" / ".bashrc")  # dangling: the run could create it
    (home / ".zshrc").symlink_to(elsewhere / ".zshrc")
    (home / ".profile").write_text("")
    names = (".bashrc", ".zshrc", ".profile", ".missing")
    targets = later_code.home_link_targets(str(home), names, (str(work),))
    assert targets == [str(work / "bash" / ".bashrc")]
    assert later_code.home_link_targets("/", (".bashrc",), ("/",)) == []


def test_home_link_targets_resolve_each_missing_name_as_realpath_would(tmp_path):
    # Missing names are resolved through their parent once per parent: the same answers as
    # realpath of each, through a linked ~/.config, a missing ~/.ssh and a dangling link.
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "config").mkdir(parents=True)
    home.mkdir()
    (home / ".config").symlink_to(work / "config")
    (home / ".local").symlink_to(work / "nowhere")  # dangling directory link
    (home / ".bashrc").symlink_to(work / "rc")  # dangling file link
    names = (".config/git", ".config/git/config", ".config/fish", ".ssh/config", ".ssh/rc",
             ".local/bin", ".bashrc", ".profile")
    roots = (str(work),)
    expected = list(dict.fromkeys(
        real for real, path in ((later_code.realpath(str(home / n)), str(home / n)) for n in names)
        if real != path and later_code.is_under(real, str(work))))
    assert later_code.home_link_targets(str(home), names, roots) == expected
    assert str(work / "config" / "git") in expected and str(work / "rc") in expected


SOURCES = st.dictionaries(st.sampled_from(["a", "b/.git", "c/config", "(walk)"]), st.text(max_size=20),
                          max_size=4)


@settings(max_examples=200, deadline=None)
@given(SOURCES, SOURCES)
def test_changes_name_every_difference_once(before, after):
    lines = later_code.later_code_changes(before, after)
    differing = {k for k in set(before) | set(after) if before.get(k, "absent") != after.get(k, "absent")}
    assert sorted(line.split(":", 1)[0] for line in lines) == sorted(differing)
    assert later_code.later_code_changes(before, before) == []


def test_hooks_path_and_includes_of_every_repository_are_audited(tmp_path):
    root = tmp_path / "root"
    layout(root / "nested" / ".git")
    (root / "nested" / ".git" / "config").write_text(
        "[core]\n\thooksPath = .hooks\n[include]\n\tpath = ../../team.inc\n\tpath = ~/.elsewhere\n")
    (root / "nested" / ".hooks").mkdir()
    audit = later_code.LaterCodeAudit()
    audit.start([str(root)], [])
    (root / "nested" / ".hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (root / "team.inc").write_text("[core]\n\tfsmonitor = x\n")
    changed = [line.split(":", 1)[0] for line in audit.changes()]
    assert changed == [f"{root}/nested/.hooks/pre-commit", f"{root}/team.inc"], changed


def test_a_change_past_the_read_bound_of_a_large_hook_is_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(later_code, "_FILE_LIMIT", 64)
    root = tmp_path / "root"
    layout(root / ".git")
    (root / ".git" / "hooks").mkdir()
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(b"#!/bin/sh\n" + b"#" * 400)
    audit = later_code.LaterCodeAudit()
    audit.start([str(root)], [])
    assert audit.changes() == []
    with open(hook, "r+b") as f:  # same size, same first bytes (here: 64), a new tail
        f.seek(350)
        f.write(b"touch x\n")
    assert [line.split(":", 1)[0] for line in audit.changes()] == [str(hook)]


def test_a_walk_that_fails_part_way_refuses_the_run(tmp_path, monkeypatch):
    def broken(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(later_code, "_walk", broken)
    with pytest.raises(NotProven, match="cannot be walked for code that runs later, outside: failed: Input"):
        later_code.LaterCodeAudit().start([str(tmp_path)], [])


@given(st.lists(st.sampled_from(["a", "b", "..", ".", "link", "loop", "gone", "file", "nothere"]), min_size=1,
                max_size=6),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_realpath_is_os_path_realpath(tmp_path_factory, parts, relative):
    """later_code.realpath asks the kernel (O_PATH + /proc/self/fd) where posixpath lstats each
    component: the same answer for existing, missing, looping and relative paths."""
    from no_docker.supervisor.isolation.later_code import realpath

    root = tmp_path_factory.mktemp("real")
    (root / "a" / "b").mkdir(parents=True)
    (root / "file").write_text("")
    (root / "a" / "link").symlink_to(root / "a" / "b")
    (root / "link").symlink_to("a")
    (root / "a" / "b" / "loop").symlink_to("loop")
    (root / "gone").symlink_to(root / "missing")
    path = os.path.join(str(root), *parts)
    before = os.getcwd()
    try:
        if relative:
            os.chdir(root)
            path = os.path.join(*parts)
        assert realpath(path) == os.path.realpath(path), path
    finally:
        os.chdir(before)
