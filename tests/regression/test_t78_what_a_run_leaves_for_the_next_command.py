"""T-78: what a run leaves for the next command outside, part A (red-team pass 4: B1, B5, B7,
B8, B9, B10).

- B1, B5, B9: the caller's environment names start-up code or a config for the next command,
  which inherits it (``PYTHONUSERBASE``, ``GIT_CONFIG_GLOBAL``, ``BASH_ENV``,
  ``PYTHONPYCACHEPREFIX``, ``XDG_CONFIG_HOME``...): ``--rw`` of such a place is refused (exit
  2, one line naming the variable), as the caches are. The control: without the variable the
  same ``--rw`` runs; the same plant made without a run is run by the next ``git``/``bash``.
- B7: a run refused before CMD started walks nothing after: another's change to a start-up
  file during it is kept (not moved aside, not reverted); ``--rw`` of a shared sticky
  directory (``/tmp``) is refused.
- B8: lefthook's other config names (``lefthook-local.toml``, ``.config/lefthook-local.yml``)
  created by a run: found after it (125) and moved aside.
- B10: git's in-progress rebase state planted by a run (``.git/rebase-merge`` with an ``exec``
  line): found after it (125) and moved aside, so ``git rebase --continue`` outside runs
  nothing of it (the control: the same plant without a run is run by it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, git, repo


def _rw_env(**names: str) -> dict[str, str]:
    env = dict(os.environ, **names)
    for name in ("GIT_CONFIG_GLOBAL", "BASH_ENV", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX", "XDG_CONFIG_HOME"):
        if name not in names:
            env.pop(name, None)
    return env


@pytest.mark.parametrize("variable,named", [
    ("PYTHONUSERBASE", ""),  # B1: its lib/python3.X/site-packages/*.pth run at every python3
    ("GIT_CONFIG_GLOBAL", "gc"),  # B5: core.fsmonitor runs at the next `git status`
    ("BASH_ENV", "env.sh"),  # B5: read by every non-interactive bash
    ("PYTHONPYCACHEPREFIX", ""),  # B9: a forged stdlib .pyc runs at the next `import json`
    ("XDG_CONFIG_HOME", "cfg"),  # B5: git's config at $XDG_CONFIG_HOME/git/config
])
def test_rw_of_what_the_environment_names_is_refused(tmp_path: Path, variable: str, named: str) -> None:
    """B1, B5, B9: refused before anything starts (2), naming the variable; the control
    (the same --rw without the variable) runs."""
    require_bwrap()
    shared = tmp_path / "x"
    shared.mkdir()
    work = tmp_path / "w"
    work.mkdir()
    target = str(shared / named) if named else str(shared)
    refused = run(["--quiet", "--rw", str(shared), "--", "true"], cwd=work, env=_rw_env(**{variable: target}))
    assert refused.returncode == 2, refused.stderr
    assert variable in refused.stderr and "--ro" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    control = run(["--quiet", "--rw", str(shared), "--", "true"], cwd=work, env=_rw_env())
    assert control.returncode == 0, control.stderr


def test_git_config_global_plant_runs_outside_control(tmp_path: Path) -> None:
    """B5's control: the plant the refused run would have made, made without a run, is run
    by the next `git status` (so the refusal above guards a real route)."""
    marker = tmp_path / "MARK"
    gc = tmp_path / "gc"
    gc.write_text(f'[core]\n\tfsmonitor = "touch {marker}; false"\n')
    w = repo(tmp_path / "w")
    subprocess.run(["git", "status"], cwd=w, env={**GIT_ENV, "GIT_CONFIG_GLOBAL": str(gc)},
                   capture_output=True, timeout=60)
    assert marker.exists()


def _fake_bwrap(tmp_path: Path, edit: Path, content: str) -> Path:
    """A bubblewrap that, before it starts the sandbox, writes EDIT as someone else would
    (outside the run, after the before-walk) and shares the network namespace, so that the
    prover refuses the run (P2) and CMD never starts."""
    real = subprocess.run(["sh", "-c", "command -v bwrap"], capture_output=True, text=True,
                          timeout=10).stdout.strip()
    fake = tmp_path / "bwrap-editing"
    fake.write_text(f"#!{sys.executable}\nimport os, sys\nargv = sys.argv[1:]\n"
                    "if '--unshare-all' in argv:\n"
                    f"    open({str(edit)!r}, 'w').write({content!r})\n"
                    "    argv.insert(argv.index('--unshare-all') + 1, '--share-net')\n"
                    f"os.execv({real!r}, [{real!r}, *argv])\n")
    fake.chmod(0o755)
    return fake


def test_a_run_refused_before_cmd_undoes_nothing(tmp_path: Path) -> None:
    """B7: the user saves sub/pytest.ini while a run is being proven; the run is refused before
    CMD starts (125). Nothing of the run ran: the save is kept, no quarantine is made. The
    control: a run whose CMD starts and changes the same file has it moved aside (125)."""
    require_bwrap()
    work = tmp_path / "w"
    (work / "sub").mkdir(parents=True)
    ini = work / "sub" / "pytest.ini"
    ini.write_text("[pytest]\naddopts = -q\n")
    saved = "[pytest]\naddopts = -q -x\n"
    fake = _fake_bwrap(tmp_path, ini, saved)
    refused = run(["--quiet", "--", "true"], cwd=work, env=dict(os.environ, NO_DOCKER_BWRAP=str(fake)))
    assert refused.returncode == 125, refused.stderr
    assert "P2 not proven" in refused.stderr, refused.stderr
    assert "left code" not in refused.stderr, refused.stderr
    assert ini.read_text() == saved, "the user's save was undone by a run whose CMD never started"
    assert not [p for p in work.iterdir() if p.name.startswith(".no-docker-quarantine")]
    # control: the same change made by CMD is the run's, and undone
    ini.write_text("[pytest]\naddopts = -q\n")
    changed = run(["--quiet", "--", "sh", "-c", f"printf '{saved}' > sub/pytest.ini"], cwd=work)
    assert changed.returncode == 125 and "left code" in changed.stderr, changed.stderr
    assert ini.read_text() == "[pytest]\naddopts = -q\n"


def test_rw_of_a_shared_sticky_dir_is_refused(tmp_path: Path) -> None:
    """B7: --rw of a world-writable sticky directory (as /tmp is) is refused (2); a directory
    of one's own in it runs (the control)."""
    require_bwrap()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    own = shared / "mine"
    own.mkdir()
    work = tmp_path / "w"
    work.mkdir()
    refused = run(["--quiet", "--rw", str(shared), "--", "true"], cwd=work)
    assert refused.returncode == 2 and "sticky" in refused.stderr, refused.stderr
    assert run(["--quiet", "--rw", str(own), "--", "true"], cwd=work).returncode == 0


@pytest.mark.parametrize("name", ["lefthook-local.toml", "lefthook-local.yaml", ".config/lefthook-local.yml",
                                  ".lefthook/pre-commit/x.sh"])
def test_lefthook_configs_a_run_creates_are_moved_aside(tmp_path: Path, name: str) -> None:
    """B8: a lefthook config the next `git commit` would merge (or a script of its source_dir),
    created by a run: 125, moved aside. The control: a file of another name is the run's."""
    require_bwrap()
    work = repo(tmp_path / "w")
    plant = (f"mkdir -p $(dirname {name}) && printf '[pre-commit]\\n[[pre-commit.jobs]]\\n"
             f"run = \"touch {tmp_path}/MARK\"\\n' > {name}")
    result = run(["--quiet", "--", "sh", "-c", plant + " && echo x > notes.txt"], cwd=work)
    assert result.returncode == 125 and "left code" in result.stderr, result.stderr
    assert not (work / name).exists(), f"{name} left for the next commit"
    assert (work / "notes.txt").exists()  # the control: the run's own output stays


REBASE = {"head-name": "refs/heads/main\n", "interactive": "", "msgnum": "0\n", "end": "1\n",
          "done": ""}


def _plant_rebase(gitdir: Path, head: str, marker: Path) -> str:
    files = {**REBASE, "onto": head + "\n", "orig-head": head + "\n",
             "git-rebase-todo": f"exec touch {marker}\n"}
    return "mkdir -p .git/rebase-merge && " + " && ".join(
        f"printf '{v.replace(chr(10), chr(92) + 'n')}' > .git/rebase-merge/{k}" for k, v in files.items())


def test_a_planted_rebase_is_moved_aside(tmp_path: Path) -> None:
    """B10: `.git/rebase-merge` with an `exec` line written by a run: 125, moved aside; the next
    `git rebase --continue` outside runs nothing. The control: the same plant without a run is
    run by it."""
    require_bwrap()
    work = repo(tmp_path / "w")
    head = git("rev-parse", "HEAD", cwd=work).strip()
    marker = tmp_path / "MARK"
    plant = _plant_rebase(work / ".git", head, marker)
    result = run(["--quiet", "--", "sh", "-c", plant], cwd=work)
    assert result.returncode == 125 and "rebase-merge" in result.stderr, result.stderr
    assert not (work / ".git" / "rebase-merge").exists()
    subprocess.run(["git", "rebase", "--continue"], cwd=work, env=GIT_ENV, capture_output=True, timeout=60)
    assert not marker.exists(), "the planted rebase's exec ran outside"
    # control: the plant made outside is what `git rebase --continue` runs
    subprocess.run(["sh", "-c", plant], cwd=work, check=True, timeout=30)
    subprocess.run(["git", "rebase", "--continue"], cwd=work, env=GIT_ENV, capture_output=True, timeout=60)
    assert marker.exists()
