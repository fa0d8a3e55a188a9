"""T-56: a linked worktree as the work dir cannot hand the main checkout code (issue 16, item 6).

The main checkout's .git is the worktree's common dir, bound writable so that git works
inside. The run writes a `commondir` into it naming a directory whose config sets
core.fsmonitor: `git status` in the main checkout, outside, runs it. Its config, hooks and
HEAD are read-only inside; a new file there is named by the after-run audit, which walks
every writable root, that common dir included."""

from __future__ import annotations

import json
import subprocess

from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, evil_config, git, git_outside, repo


def test_a_worktree_run_cannot_redirect_the_main_checkout(tmp_path):
    require_bwrap()
    main = repo(tmp_path / "main")
    work = tmp_path / "wt"
    git("worktree", "add", "-q", str(work), cwd=main)
    marker = tmp_path / "fsmonitor-ran-outside"
    common = main / ".git"
    script = (f"(echo x >> {common}/config) 2>/dev/null && echo WROTE || echo REFUSED; "
              f"mkdir {common}/evil && cp -r {common}/objects {common}/refs {common}/evil/ && "
              f"{evil_config(marker)} > {common}/evil/config && echo evil > {common}/commondir")
    report = tmp_path / "report.json"
    result = run(["--quiet", "--report", str(report), "--", "sh", "-c", script], cwd=work, env=GIT_ENV)
    assert result.stdout.strip() == "REFUSED", result.stdout
    assert result.returncode == 125, (result.returncode, result.stderr)
    later = json.loads(report.read_text())["later_code"]
    assert any(line.startswith(f"{common}/commondir: absent -> file:evil") for line in later), later
    assert "none of it runs later" in result.stderr, result.stderr  # undone (issue 25)
    git_outside(["status"], main)
    assert not marker.exists(), "git outside ran what the refused run left"
    # The route is real: the same plant made outside, and git in the main checkout runs it.
    subprocess.run(["sh", "-c", f"rm -rf {common}/evil; " + script], cwd=work, env=GIT_ENV, timeout=60)
    git_outside(["status"], main)
    assert marker.exists(), "git in the main checkout did not take the planted common dir"
