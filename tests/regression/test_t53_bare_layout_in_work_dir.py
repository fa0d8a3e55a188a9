"""T-53: a run that turns the work dir into a bare repository is reported, never clean (issue
16, item 3). The run copies HEAD, objects/ and refs/ to the work dir, writes a `config` whose
core.pager runs a command, and breaks `.git` (its refs/ moved away): git's discovery then
takes the work dir itself as the repository, and the user's next `git branch` or `git log` there runs the
pager. In a work dir with no .git the same three entries are enough. The after-run audit walks
every directory of the work dir for what git would accept as a repository: 125, naming it."""

from __future__ import annotations

import json
import subprocess

import pytest
from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, evil_config, git_outside, repo

BREAK_DOT_GIT = "cp -r .git/objects .git/refs .git/HEAD . && mv .git/refs .git/refs.gone && "
NO_GIT = "mkdir -p objects refs/heads && echo 'ref: refs/heads/main' > HEAD && "


@pytest.mark.parametrize("layout", ["repo", "no-git"])
def test_a_bare_layout_left_in_the_work_dir_is_named(tmp_path, layout):
    require_bwrap()
    work = tmp_path / "work"
    if layout == "repo":
        repo(work)
    else:
        work.mkdir()
    marker = tmp_path / "pager-ran-outside"
    script = (BREAK_DOT_GIT if layout == "repo" else NO_GIT) + evil_config(marker, key="pager") + " > config"
    report = tmp_path / "report.json"
    result = run(["--quiet", "--report", str(report), "--", "sh", "-c", script], cwd=work, env=GIT_ENV)
    assert result.returncode == 125, (result.returncode, result.stderr)
    assert "P4 not proven: the run left code that runs later, outside" in result.stderr, result.stderr
    later = json.loads(report.read_text())["later_code"]
    assert f"{work}/(git directory): absent -> a repository git would use" in later, later
    assert any(line.startswith(f"{work}/config: absent -> file:[core]") for line in later), later
    # Moved aside (issue 25): git outside runs nothing of it.
    assert "moved aside to" in result.stderr, result.stderr
    git_outside(["branch"], work, tty=True)
    assert not marker.exists(), "git outside ran what the refused run left"
    # The route is real: the same plant made outside, in a fresh copy; git there runs the pager.
    control = tmp_path / "control"
    if layout == "repo":
        repo(control)
    else:
        control.mkdir()
    subprocess.run(["sh", "-c", script], cwd=control, env=GIT_ENV, timeout=60, check=True)
    git_outside(["branch"], control, tty=True)
    assert marker.exists(), "the planted layout was not git's repository after all"
