"""T-54: a new ``commondir`` in a submodule's gitdir is reported, never clean (issue 16, item 4).

The run writes `.git/modules/sub/commondir` naming a directory of its own whose config sets
core.fsmonitor: `git status` in the submodule, outside, then runs it. Only the top-level
commondir used to be audited; the walk fingerprints the commondir of every git directory."""

from __future__ import annotations

import json
import subprocess

from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, evil_config, git, git_outside, repo


def test_a_commondir_planted_in_a_submodule_gitdir_is_named(tmp_path):
    require_bwrap()
    work = repo(tmp_path / "work")
    origin = repo(tmp_path / "origin")
    git("submodule", "add", "-q", str(origin), "sub", cwd=work)
    git("commit", "-q", "-m", "sub", cwd=work)
    marker = tmp_path / "fsmonitor-ran-outside"
    # A common dir needs objects/, refs/ and a config, not a HEAD (that stays the gitdir's).
    script = ("mkdir evil && cp -r .git/modules/sub/objects .git/modules/sub/refs evil/ && "
              f"{evil_config(marker)} > evil/config && echo \"$PWD/evil\" > .git/modules/sub/commondir")
    report = tmp_path / "report.json"
    result = run(["--quiet", "--report", str(report), "--", "sh", "-c", script], cwd=work, env=GIT_ENV)
    assert result.returncode == 125, (result.returncode, result.stderr)
    later = json.loads(report.read_text())["later_code"]
    assert any(line.startswith(f"{work}/.git/modules/sub/commondir: absent -> file:{work}/evil")
               for line in later), later
    # Undone (issue 25): the commondir is moved aside, so git outside runs nothing of it.
    assert "none of it runs later" in result.stderr, result.stderr
    git_outside(["status"], work / "sub")
    assert not marker.exists(), "git outside ran what the refused run left"
    # The route is real: the same plant made outside, and git in the submodule runs it.
    subprocess.run(["sh", "-c", "rm -rf evil; " + script], cwd=work, env=GIT_ENV, timeout=60, check=True)
    git_outside(["status"], work / "sub")
    assert marker.exists(), "git in the submodule did not take the planted common dir"
