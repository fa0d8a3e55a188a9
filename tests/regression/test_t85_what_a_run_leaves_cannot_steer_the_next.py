"""T-85: what a run leaves in its work dir cannot steer a later run's writes outside, nor stop
its audit (red-team of T-81's fix, 2026-12-03).

* ``--report``: a run replaced ``a/reports`` by a link to a directory outside; the next run's
  supervisor (root) wrote its report there (``/srv/rt81/out/run.json``, and would have replaced a
  file of that name). A ``--report``, ``--rw`` or ``--ro`` whose way passes a symlink inside the
  work dir or a ``--rw`` is refused now (exit 2, "give the real path").
* ``--rw`` nested in the work dir: its parent replaced by a link; the next run's command wrote
  through it outside, and the supervisor made its quarantine there.
* A NUL byte in a nested ``.git/commondir`` or in an ``include.path``: the after-run audit met
  ``ValueError: embedded null byte`` and the run exited 1 with a traceback, leaving a planted
  ``pytest.py`` in place (it ran at the next ``python -m pytest`` outside). Such a path is read
  as git reads it (a C string: the NUL ends it), and whatever the audit still cannot read is a
  recorded refusal, never a traceback.
* Red-team round 2: ``--rw out/cache/..`` with a planted ``out/cache`` was checked as ``out``
  (the path folded lexically) while the mount followed the link: the way is walked as the
  kernel walks it. And the report's directory is opened component by component, through no
  link inside a root at the moment of the open: a concurrent run swapping a link in between
  the check and the open had moved root's report outside (tests/unit/test_planted_links.py).
* Planted git files the plan could not read (``gitdir: <NUL>``, a ``core.hooksPath`` too long or
  through a file): a traceback and exit 1 before the run; one ``no-docker:`` line now.

Controls: the same ``--report`` and ``--rw`` without the link are written; the planted
``pytest.py`` runs when ``python -m pytest`` is started in the work dir without no-docker's undo.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from isolation_cases import require_bwrap, run


def snapshot(directory) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(directory)), p.lstat().st_mode) for p in directory.rglob("*"))


def test_a_report_named_through_a_planted_link_is_refused(tmp_path):
    require_bwrap()
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "a" / "reports").mkdir(parents=True)
    outside.mkdir()
    report = work / "a" / "reports" / "run.json"
    control = run(["--quiet", "--work", str(work), "--report", str(report), "--", "true"], cwd=work)
    assert control.returncode == 0 and report.is_file(), control.stderr  # the control: written there
    planted = run(["--quiet", "--work", str(work), "--", "sh", "-c",
                   f"mv a a.old && mkdir a && ln -s {outside} a/reports"], cwd=work)
    assert planted.returncode == 0, planted.stderr
    before = snapshot(outside)
    result = run(["--quiet", "--work", str(work), "--report", str(report), "--", "true"], cwd=work)
    assert result.returncode == 2, result.stderr
    assert f"its way passes {work}/a/reports, a symlink inside a directory runs may write" in result.stderr
    assert snapshot(outside) == before == [], snapshot(outside)


def test_a_nested_rw_through_a_planted_link_is_refused(tmp_path):
    require_bwrap()
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "a" / "cache").mkdir(parents=True)
    outside.mkdir()
    cache = work / "a" / "cache"
    control = run(["--quiet", "--work", str(work), "--rw", str(cache), "--", "touch", str(cache / "made")],
                  cwd=work)
    assert control.returncode == 0 and (cache / "made").exists(), control.stderr
    (work / "a").rename(work / "a.old")  # what the run could do: its parent is not pinned
    (work / "a").mkdir()
    (work / "a" / "cache").symlink_to(outside)
    result = run(["--quiet", "--work", str(work), "--rw", str(cache), "--", "touch", str(cache / "PWNED")],
                 cwd=work)
    assert result.returncode == 2, result.stderr
    assert "a symlink inside a directory runs may write" in result.stderr, result.stderr
    assert snapshot(outside) == [], snapshot(outside)


@pytest.mark.parametrize("flag", ["--rw", "--ro", "--report"])
def test_dot_dot_after_a_planted_link_is_refused(tmp_path, flag):
    # Red-team round 2: `--rw out/cache/..` was checked as `out` (abspath folds `cache/..`),
    # but bwrap's mount follows out/cache to its target and then goes up: the command wrote
    # in the target's parent, outside every root.
    require_bwrap()
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "out").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (work / "out" / "cache").symlink_to(outside / "deep")  # what a run left
    name = "out/cache/.." if flag != "--report" else "out/cache/../run.json"
    target = outside / ("evil" if flag != "--report" else "run.json")
    result = run(["--quiet", "--work", str(work), flag, name, "--", "sh", "-c", f"echo x > {target}"],
                 cwd=work)
    assert result.returncode == 2 and "a symlink inside a directory runs may write" in result.stderr, \
        (result.returncode, result.stderr)
    assert sorted(p.name for p in outside.iterdir()) == ["deep"]


@pytest.mark.parametrize("plant", [
    "mkdir -p z/.git && printf '\\000' > z/.git/commondir && echo 'ref: refs/heads/x' > z/.git/HEAD",
    "git init -q sub && printf '[include]\\n\\tpath = \\000\\n' >> sub/.git/config",
], ids=["nul-in-commondir", "nul-in-include-path"])
def test_a_nul_in_a_planted_git_file_does_not_stop_the_undo(tmp_path, plant):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    script = f"echo 'print(\"PLANTED pytest.py ran\")' > pytest.py; {plant}"
    result = run(["--quiet", "--work", str(work), "--", "sh", "-c", script], cwd=work)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 125 and "P4 not proven: the run left code that runs later" in result.stderr, \
        result.stderr
    assert not (work / "pytest.py").exists(), "the planted pytest.py was left in place"
    moved = [p for p in work.iterdir() if p.name.startswith(".no-docker-quarantine-")]
    assert moved and (moved[0] / "pytest.py").is_file(), sorted(p.name for p in work.iterdir())
    # The control: that file runs first at `python -m pytest` outside, where it is left.
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "pytest.py").write_text('print("PLANTED pytest.py ran")\n')
    ran = subprocess.run([sys.executable, "-m", "pytest"], cwd=tmp_path / "control", capture_output=True,
                         text=True, timeout=60)
    assert "PLANTED pytest.py ran" in ran.stdout, ran


@pytest.mark.parametrize("plant, words", [
    ("printf 'gitdir: \\000\\n' > .git", None),
    ("git init -q . && git config core.hooksPath $(printf 'a%.0s' $(seq 5000))", "cannot be made read-only"),
    ("git init -q . && touch sub && git config core.hooksPath sub/h",
     "cannot be made read-only: Not a directory"),
], ids=["nul-gitdir", "hookspath-too-long", "hookspath-through-a-file"])
def test_planted_git_files_the_plan_cannot_read_are_one_line_not_a_traceback(tmp_path, plant, words):
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["bash", "-c", plant], cwd=work, check=True, capture_output=True, timeout=60,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    result = run(["--quiet", "--work", str(work), "--", "true"], cwd=work)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 125), (result.returncode, result.stderr)
    if words is not None:
        lines = result.stderr.splitlines()
        assert result.returncode == 125 and len(lines) == 1 and words in lines[0], result.stderr
