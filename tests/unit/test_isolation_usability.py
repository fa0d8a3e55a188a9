"""CMD's own toolchain works inside without extra flags (issue 3, item 7), with real bwrap:
the python running no-docker (pyenv under the hidden $HOME), a venv under /tmp, tools under
/usr and /usr/local, a git repo and a git worktree whose .git is a file (hooks and config stay
read-only), and $HOME hidden without breaking any of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_helpers import bwrap_works, run_no_docker, weakened_probe

_why = bwrap_works()
if _why:
    pytest.skip(_why, allow_module_level=True)
GIT = shutil.which("git")
ID = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *ID, *args], cwd=cwd, check=True, capture_output=True, text=True,
                          timeout=120).stdout


def test_the_python_running_no_docker_works_inside(tmp_path):
    base = os.path.realpath(sys.executable)
    code = "import sys, json, ssl; print(sys.prefix)"
    result = run_no_docker(["--quiet", "--", sys.executable, "-c", code], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == sys.prefix
    direct = run_no_docker(["--quiet", "--", base, "-c", "print('ok')"], cwd=tmp_path)
    assert direct.stdout.strip() == "ok", direct.stderr


def test_python_from_path_works_even_through_pyenv_shims(tmp_path):
    result = run_no_docker(["--quiet", "--", "python3", "-c", "print('ok')"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_venv_under_tmp_by_path_and_activated(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    work = tmp_path / "work"
    work.mkdir()
    code = "import sys; print(sys.prefix)"
    by_path = run_no_docker(["--quiet", "--", str(venv / "bin" / "python"), "-c", code], cwd=work)
    assert by_path.returncode == 0, by_path.stderr
    assert by_path.stdout.strip() == str(venv)
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    activated = run_no_docker(["--quiet", "--", "python", "-c", "import sys; print(sys.prefix)"], cwd=work,
                              env=env)
    assert activated.stdout.strip() == str(venv), activated.stderr


def test_tools_under_usr_and_usr_local(tmp_path):
    script = "ls /usr/bin/env >/dev/null && sh -c 'echo sh-ok'"
    if shutil.which("docker") and shutil.which("docker").startswith("/usr/local/"):
        script += " && docker --version >/dev/null && echo docker-cli-ok"
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "sh-ok" in result.stdout


def test_home_is_hidden_but_empty_and_writable(tmp_path):
    home = os.path.realpath(os.environ["HOME"])
    real_entries = set(os.listdir(home))
    script = ('echo "$HOME"; ls -A "$HOME"; echo inside > "$HOME/.no-docker-test-file" && echo wrote; '
              'test -e "$HOME/.bashrc" && echo BASHRC-VISIBLE || true')
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == home
    assert "wrote" in lines and "BASHRC-VISIBLE" not in lines
    assert not os.path.exists(os.path.join(home, ".no-docker-test-file"))
    visible = set(lines[1:-1])
    # Only toolchain roots (e.g. .pyenv) may show, never credentials or engine state.
    assert not visible & {".docker", ".kube", ".ssh", ".gnupg", ".config", ".bashrc", ".profile"}
    assert visible <= real_entries


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize("build", ["real", "weak-policy-and-probe"])
def test_git_repo_hooks_and_config_read_only(tmp_path, build):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    config_before = (repo / ".git" / "config").read_bytes()
    script = ("git -c user.email=t@x -c user.name=t commit -q --allow-empty -m inside && echo COMMITTED; "
              "echo 'touch /tmp/pwned' > .git/hooks/pre-commit && echo HOOK-WRITTEN; "
              "git config core.hooksPath /tmp/evil && echo CONFIG-WRITTEN; "
              "mv .git .git-old && echo GIT-MOVED; true")
    kwargs = {} if build == "real" else {"weaken": ("no-protect",),
                                         "probe": weakened_probe(tmp_path, ("P4w",))}
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=repo, **kwargs)
    assert "COMMITTED" in result.stdout
    if build == "real":
        assert result.returncode == 0, result.stderr
        assert "HOOK-WRITTEN" not in result.stdout and "CONFIG-WRITTEN" not in result.stdout
        assert "GIT-MOVED" not in result.stdout
        assert not (repo / ".git" / "hooks" / "pre-commit").exists()
        assert (repo / ".git" / "config").read_bytes() == config_before
        assert "inside" in git("log", "--format=%s", cwd=repo)
    else:  # the weakened build lets code that runs later, outside, be planted...
        assert "HOOK-WRITTEN" in result.stdout or "CONFIG-WRITTEN" in result.stdout
        # ...and the later-code audit after the run still refuses to call it clean (.git moved).
        assert result.returncode == 125 and "P4 not proven" in result.stderr, result.stderr


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_git_worktree_with_a_dot_git_file(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=main)
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    wt = tmp_path / "wt"
    dotgit_before = (wt / ".git").read_text()
    config_before = (main / ".git" / "config").read_bytes()
    script = ("git status --short && git -c user.email=t@x -c user.name=t commit -q --allow-empty -m in-wt "
              "&& echo COMMITTED; echo 'gitdir: /tmp/evil' > .git && echo DOTGIT-WRITTEN; "
              f"echo x > {main}/.git/hooks/pre-commit && echo HOOK-WRITTEN; "
              "git config core.fsmonitor 'touch /tmp/pwned' && echo CONFIG-WRITTEN; true")
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=wt)
    assert result.returncode == 0, result.stderr
    assert "COMMITTED" in result.stdout, result.stderr
    for bad in ("DOTGIT-WRITTEN", "HOOK-WRITTEN", "CONFIG-WRITTEN"):
        assert bad not in result.stdout
    assert (wt / ".git").read_text() == dotgit_before
    assert (main / ".git" / "config").read_bytes() == config_before
    assert not (main / ".git" / "hooks" / "pre-commit").exists()
    assert "in-wt" in git("log", "--all", "--format=%s", cwd=main)


def test_work_dir_option_and_default(tmp_path):
    work = tmp_path / "w"
    (work / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    from_sub = run_no_docker(["--quiet", "--", "sh", "-c", "pwd; touch here"], cwd=work / "sub")
    assert from_sub.stdout.strip() == str(work / "sub") and (work / "sub" / "here").exists()
    script = f"pwd; touch {outside}/x || true"
    explicit = run_no_docker(["--quiet", "--work", str(work), "--", "sh", "-c", script], cwd=outside)
    assert explicit.stdout.strip() == str(work)
    assert not (outside / "x").exists()


def test_ro_and_rw_paths(tmp_path):
    ro, rw, work = tmp_path / "ro", tmp_path / "rw", tmp_path / "work"
    for d in (ro, rw, work):
        d.mkdir()
    (ro / "in").write_text("data\n")
    script = f"cat {ro}/in; touch {ro}/new || echo RO-REFUSED; touch {rw}/new && echo RW-OK"
    result = run_no_docker(["--quiet", "--ro", str(ro), "--rw", str(rw), "--", "sh", "-c", script], cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["data", "RO-REFUSED", "RW-OK"]
    assert (rw / "new").exists() and not (ro / "new").exists()


def test_a_symlinked_dot_git_is_refused(tmp_path):
    real = tmp_path / "real-git"
    real.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").symlink_to(real)
    result = run_no_docker(["--", "sh", "-c", "echo CMD RAN"], cwd=work)
    assert result.returncode == 125
    assert "P4" in result.stderr and ".git is a symlink" in result.stderr
    assert "CMD RAN" not in result.stdout


def test_tool_root_above_home_does_not_uncover_home(tmp_path):
    # Found by T-03 in the outer guard: HOME=/tmp/g/home and /tmp/g/bin on PATH. Binding the
    # tool root /tmp/g read-only must not bring the real home (and its .bashrc) back.
    base = tmp_path / "g"
    (base / "home").mkdir(parents=True)
    (base / "home" / ".bashrc").write_text("echo outside rc\n")
    (base / "bin").mkdir()
    tool = base / "bin" / "mytool"
    tool.write_text("#!/bin/sh\necho tool-ok\n")
    tool.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, HOME=str(base / "home"), PATH=f"{base / 'bin'}:{os.environ['PATH']}")
    script = 'mytool; ls -A "$HOME"; echo end'
    result = run_no_docker(["--quiet", "--", "sh", "-c", script], cwd=work, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["tool-ok", "end"], result.stdout
