"""T-81: a ``.git`` file naming a directory outside the work dir makes no-docker write nothing there.

Found by the newcomer pass (uid 1001 on a machine where root's suite had run first): a run may
write ``.git`` = ``gitdir: /etc/cron.d`` into its work dir; the next run's plan did not bind that
directory writable (it does not point back at the work dir), but the supervisor still made the
"missing" ``hooks`` dir in it before the sandbox existed: as root ``/etc/cron.d/hooks`` and
``/var/spool/hooks`` appeared on the host, as an ordinary user the run died with a traceback.
A hooks dir is made only where the run may write (its own ``.git``, a gitdir that points back).

Here the named directory is one of the test's own, outside the work dir: after the run it holds
exactly what it held before, and the run itself is fine (exit 0, the directory not writable
inside).
"""

from __future__ import annotations

import os
import shutil
import subprocess

from isolation_cases import inside_python, require_bwrap, run


def test_a_gitdir_named_by_a_planted_dot_git_file_gets_no_hooks_dir(tmp_path):
    require_bwrap()
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (elsewhere / "kept").write_text("a file of the directory's own\n")
    (work / ".git").write_text(f"gitdir: {elsewhere}\n")
    before = sorted(os.listdir(elsewhere))
    code = (f"import os\ntry:\n    open({str(elsewhere / 'planted')!r}, 'x').close()\n    print('WRITABLE')\n"
            "except OSError as e:\n    print('REFUSED', e.errno)\n")
    result = run(["--quiet", "--", *inside_python(code)], cwd=work)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.split()[:1] == ["REFUSED"], result.stdout
    after = sorted(os.listdir(elsewhere))
    assert after == before, f"no-docker wrote into {elsewhere}: {after}"


def test_a_repositorys_own_missing_hooks_dir_is_still_made_and_read_only(tmp_path):
    # The other side of the rule: the work dir's own .git without hooks gets one, read-only
    # inside (a hooks dir made inside would run at the next commit outside).
    require_bwrap()
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=60, capture_output=True)
    shutil.rmtree(work / ".git" / "hooks")  # as a clone whose hooks dir was removed
    code = ("import os\ntry:\n    open('.git/hooks/pre-commit', 'x').close()\n    print('WRITABLE')\n"
            "except OSError as e:\n    print('REFUSED', e.errno)\n")
    result = run(["--quiet", "--", *inside_python(code)], cwd=work)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:1] == ["REFUSED"], result.stdout
    assert (work / ".git" / "hooks").is_dir() and not os.listdir(work / ".git" / "hooks")
