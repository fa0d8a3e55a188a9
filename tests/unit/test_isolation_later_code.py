"""Code a run leaves for later, outside, through git (found by the red-team review).

Mounts protect only what exists when a run starts; git follows files the run can still create
in the writable .git and work tree. ``later_code.later_code_sources`` is taken before a run and after
it has ended; ``later_code.later_code_changes`` names what the run added. Real git, real runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from git_env import GIT_ENV
from hypothesis import given, settings
from hypothesis import strategies as st
from isolation_helpers import bwrap_works, run_no_docker, weakened_probe
from no_docker.supervisor.isolation import later_code, plan

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def git(*args: str, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True, timeout=120).stdout


def test_changes_are_reported_one_line_each():
    before = {".git": "dir", ".git/commondir": "absent", ".git/modules": "a b", ".envrc": "absent"}
    after = {".git": "dir", ".git/commondir": "file:/x sha256:1", ".git/modules": "a", ".envrc": "absent",
             "sub/.git": "file:gitdir: ../e sha256:2"}
    assert later_code.later_code_changes(before, after) == [
        ".git/commondir: absent -> file:/x sha256:1", "sub/.git: absent -> file:gitdir: ../e sha256:2"]
    assert later_code.later_code_changes(before, before) == []


needs_bwrap = pytest.mark.skipif(bool(bwrap_works()), reason=str(bwrap_works()))

EVIL_CONFIG = "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch MARKER; false\"\\n'"
COMMONDIR = f"""
mkdir -p evil/hooks && cp -r .git/objects .git/refs .git/HEAD evil/
{EVIL_CONFIG} > evil/config
echo "$PWD/evil" > .git/commondir
"""
SUBMODULE = f"""
git init -q --bare evilgit && {EVIL_CONFIG} > evilgit/config && git config -f evilgit/config core.bare false
mkdir sub && echo "gitdir: ../evilgit" > sub/.git
git update-index --add --cacheinfo 160000,{EMPTY_TREE},sub
"""
# sub/.git/config is read-only and sub/.git cannot be renamed (a mount point), but sub can:
EMBEDDED = f"""
mv sub old-sub && mkdir sub && cp -r old-sub/.git sub/.git && {EVIL_CONFIG} > sub/.git/config
"""


@needs_bwrap
@pytest.mark.parametrize("route", ["commondir", "new-submodule", "embedded-submodule", "envrc"])
def test_what_a_run_leaves_for_git_outside_is_named(tmp_path, route):
    # Each route, unchecked, made a later `git status` outside run the run's command (the
    # marker file): shown here by running git outside after the run, then the audit names it.
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", str(repo), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    marker = tmp_path / "ran-outside"
    if route == "embedded-submodule":
        git("init", "-q", str(repo / "sub"), cwd=repo)
        git("commit", "-q", "--allow-empty", "-m", "s", cwd=repo / "sub")
        head = git("rev-parse", "HEAD", cwd=repo / "sub").strip()
        git("update-index", "--add", "--cacheinfo", f"160000,{head},sub", cwd=repo)
    script = {"commondir": COMMONDIR, "new-submodule": SUBMODULE, "embedded-submodule": EMBEDDED,
              "envrc": "echo 'touch MARKER' > .envrc"}[route].replace("MARKER", str(marker))
    before = later_code.later_code_sources(str(repo))
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=repo, env={**GIT_ENV})
    if route == "embedded-submodule":
        # Closed by mounts: sub/.git/config is read-only, sub/.git and sub are pinned (EBUSY).
        assert result.returncode != 0 and "busy" in result.stderr, result.stderr
        assert later_code.later_code_changes(before, later_code.later_code_sources(str(repo))) == []
        subprocess.run(["sh", "-c", script], cwd=repo, env=GIT_ENV, check=True,
                       timeout=120)  # the same, unsandboxed
    else:
        # run.py takes the same fingerprint before and after: the run is not reported clean,
        # and what it left is moved aside (issue 25: a 125 alone is walked past).
        assert result.returncode == 125, result.stderr
        assert "P4 not proven: the run left code that runs later, outside" in result.stderr, result.stderr
        assert "moved aside to" in result.stderr and "none of it runs later" in result.stderr, result.stderr
        left = later_code.later_code_changes(before, later_code.later_code_sources(str(repo)))
        assert [c for c in left if not c.startswith(".no-docker-quarantine-")] == [], left  # moved there
        if route != "envrc":
            subprocess.run(["git", "status"], cwd=repo, env=GIT_ENV, capture_output=True, timeout=60)
            assert not marker.exists(), "git outside ran what the refused run left"
        subprocess.run(["sh", "-c", "rm -rf sub evil evilgit; " + script], cwd=repo, env=GIT_ENV,
                       check=True, timeout=120)  # the control: the same, unsandboxed
    changes = later_code.later_code_changes(before, later_code.later_code_sources(str(repo)))
    assert changes, "the run left code for later and the audit did not see it"
    if route != "envrc":
        subprocess.run(["git", "status"], cwd=repo, env=GIT_ENV, capture_output=True, timeout=60)
        # The route is real: without the audit, git outside ran the run's command.
        assert marker.exists()


@needs_bwrap
def test_embedded_submodule_config_is_read_only_inside(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", str(repo), cwd=tmp_path)
    git("init", "-q", str(repo / "sub"), cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "s", cwd=repo / "sub")
    head = git("rev-parse", "HEAD", cwd=repo / "sub").strip()
    git("update-index", "--add", "--cacheinfo", f"160000,{head},sub", cwd=repo)
    code = ("import sys\ntry:\n    open('sub/.git/config', 'a')\n    print('WRITABLE')\n"
            "except OSError as e:\n    print('REFUSED', e.errno)\n")
    result = run_no_docker(["--quiet", "--", sys.executable, "-I", "-S", "-c", code], cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("REFUSED 30"), result.stdout


def test_pins_for_every_parent_between_a_writable_root_and_a_protected_path():
    assert plan.pins_for(["/w/a/b/c", "/w/x", "/elsewhere/y"], ("/w",)) == ["/w/a/b", "/w/a"]
    assert plan.pins_for(["/w"], ("/w",)) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=5), max_size=5))
def test_pins_are_strictly_between_root_and_path(parts):
    protected = ["/w/" + "/".join(p) for p in parts]
    for pin in plan.pins_for(protected, ("/w",)):
        assert pin.startswith("/w/") and any(p.startswith(pin + "/") for p in protected), (pin, protected)


def test_a_dot_git_with_a_commondir_protects_the_common_config_and_hooks(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    git("init", "-q", str(work), cwd=tmp_path)
    common = tmp_path / "common"
    common.mkdir()
    (common / "config").write_text("[core]\n")
    (work / ".git" / "commondir").write_text(f"{common}\n")
    pinned, protected, extra_rw = later_code.git_layout(str(work))
    assert str(common / "config") in protected
    # Its missing hooks dir is not made: the run cannot write there, and the commondir file
    # may be a run's own (T-81); one that exists is protected.
    assert not (common / "hooks").exists() and str(common / "hooks") not in protected
    (common / "hooks").mkdir()
    assert str(common / "hooks") in later_code.git_layout(str(work))[1]
    # A common dir outside the work dir is never made writable: the commondir file may be the
    # previous run's work (it could name /etc/cron.d).
    assert str(work / ".git" / "config") in protected and extra_rw == []


def test_a_hooks_dir_that_cannot_be_made_refuses_the_run_with_a_line(tmp_path, monkeypatch):
    # The work dir's own .git without hooks (a hooks dir made inside would run at the next
    # commit outside): when it cannot be made, the run is refused with P4 and what to do,
    # never a traceback (as uid 1001 a mkdir in a root-owned .git fails with EACCES).
    work = tmp_path / "w"
    work.mkdir()
    git("init", "-q", str(work), cwd=tmp_path)
    shutil.rmtree(work / ".git" / "hooks")

    def refuse(path, mode=0o777):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(later_code.os, "mkdir", refuse)
    with pytest.raises(later_code.NotProven) as caught:
        later_code.git_layout(str(work))
    text = str(caught.value)
    assert "P4" in text and f"{work}/.git/hooks is missing" in text and "Permission denied" in text, text


def test_git_config_code_paths_parser():
    text = ('[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n'
            '[Include]\n  path = "../shared.inc"\n[includeIf "gitdir:~/w/"]\n\tpath = local.cfg\n'
            '# hooksPath = no\n[alias]\n\thookspath = no\n')
    assert later_code.git_config_code_paths(text) == ([".husky/_"], ["../shared.inc", "local.cfg"])
    assert later_code.git_config_code_paths("") == ([], [])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_git_config_code_paths_never_crashes(text):
    hooks, includes = later_code.git_config_code_paths(text)
    assert all(isinstance(v, str) and v for v in hooks + includes)


@needs_bwrap
@pytest.mark.parametrize("build", ["real", "no-protect-no-P4-writes"])
def test_hooks_path_and_included_config_in_the_work_tree_are_read_only(tmp_path, build):
    # husky sets core.hooksPath to a directory of the work tree; a repository may include a
    # config file from it. Both run code at the next git command outside.
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", str(repo), cwd=tmp_path)
    git("config", "core.hooksPath", ".husky", cwd=repo)
    git("config", "include.path", "../team.gitconfig", cwd=repo)
    script = ("for f in .husky/pre-commit team.gitconfig; do "
              "(echo x >> $f) 2>/dev/null && echo WROTE $f || echo REFUSED $f; done")
    # The weakened build also turns the probe's write tries off: it would catch .git/hooks.
    extra = {} if build == "real" else {"weaken": ("no-protect",),
                                        "probe": weakened_probe(tmp_path, ("P4w",))}
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=repo, env=GIT_ENV, **extra)
    # Written in the weakened build: the after-run audit (hooksPath and includes of every
    # repository's config) still names it.
    assert result.returncode == (0 if build == "real" else 125), result.stderr
    if build != "real":
        assert ".husky/pre-commit: absent -> file" in result.stderr, result.stderr
    verdict = "REFUSED" if build == "real" else "WROTE"
    assert result.stdout.split("\n")[:2] == [f"{verdict} .husky/pre-commit", f"{verdict} team.gitconfig"]
