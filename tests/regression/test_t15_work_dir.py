"""T-15: ``--work DIR`` is the writable work dir and the starting directory, wherever
no-docker was started; without it the current directory is."""

from __future__ import annotations

from isolation_cases import require_bwrap, run


def test_work_option_sets_where_the_run_starts_and_writes(tmp_path):
    require_bwrap()
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    script = f"pwd; touch made-here; touch {elsewhere}/not-here 2>/dev/null || echo ELSEWHERE-REFUSED"
    result = run(["--quiet", "--work", str(work), "--", "sh", "-c", script], cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(work), "ELSEWHERE-REFUSED"]
    assert (work / "made-here").exists()
    assert not (elsewhere / "not-here").exists() and not (elsewhere / "made-here").exists()


def test_default_work_dir_is_the_current_directory(tmp_path):
    require_bwrap()
    result = run(["--quiet", "--", "sh", "-c", "pwd; touch made-here"], cwd=tmp_path)
    assert result.stdout.strip() == str(tmp_path)
    assert (tmp_path / "made-here").exists()
