"""T-57: where $HOME's start-up links lead is read-only when the run could write it (issue 16,
item 7). A dotfiles checkout as the work dir: ~/.bashrc -> dotfiles/bash/.bashrc and
~/.gitconfig -> dotfiles/git/.gitconfig; a run appending to them would run code at the next
shell and the next git command outside. Protected where the links lead, not only at $HOME."""

from __future__ import annotations

import json

from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV

TARGETS = ("bash/.bashrc", "git/.gitconfig", "zsh/.zshenv")


def test_dotfiles_link_targets_are_read_only_inside(tmp_path):
    require_bwrap()
    home, work = tmp_path / "home", tmp_path / "dotfiles"
    home.mkdir()
    for target in TARGETS:
        (work / target).parent.mkdir(parents=True, exist_ok=True)
        (work / target).write_text("# mine\n")
        (home / target.split("/")[1]).symlink_to(work / target)
    script = "; ".join(f"(echo 'touch /tmp/x' >> {t}) 2>/dev/null && echo WROTE {t} || echo REFUSED {t}"
                       for t in TARGETS)
    result = run(["--quiet", "--", "sh", "-c", script], cwd=work, env={**GIT_ENV, "HOME": str(home)})
    assert result.stdout.split("\n")[:3] == [f"REFUSED {t}" for t in TARGETS], (result.stdout, result.stderr)
    assert result.returncode == 0, result.stderr
    assert all((work / t).read_text() == "# mine\n" for t in TARGETS)


def test_a_start_up_file_created_where_a_home_link_leads_is_named(tmp_path):
    # ~/.zshrc -> dotfiles/zsh/.zshrc, which does not exist yet: nothing to re-bind, so the
    # after-run audit watches the place; the run creating it is reported (125).
    require_bwrap()
    home, work = tmp_path / "home", tmp_path / "dotfiles"
    home.mkdir()
    (work / "zsh").mkdir(parents=True)
    (home / ".zshrc").symlink_to(work / "zsh" / ".zshrc")
    report = tmp_path / "report.json"
    result = run(["--quiet", "--report", str(report), "--", "sh", "-c", "echo 'touch /tmp/x' > zsh/.zshrc"],
                 cwd=work, env={**GIT_ENV, "HOME": str(home)})
    assert result.returncode == 125, (result.returncode, result.stderr)
    later = json.loads(report.read_text())["later_code"]
    assert later == [f"{work}/zsh/.zshrc: absent -> file:touch /tmp/x (13 bytes)"], later
