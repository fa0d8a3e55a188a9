"""T-58: every virtual environment under the work dir is read-only where it runs code later
(issue 18, item 1). `.venv` (not the activated one), `.tox/py311`, `.nox/tests`, any directory
with a pyvenv.cfg: a .pth file or sitecustomize written into its site-packages, a script in
its bin/, a changed pyvenv.cfg run at its next use outside."""

from __future__ import annotations

import os
import subprocess
import sys

from isolation_cases import require_bwrap, run

VENVS = (".venv", ".tox/py311", ".nox/tests", "envs/custom")
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def fake_venv(path) -> None:
    """A venv as `python -m venv` lays it out (without pip: fast), run by this interpreter."""
    (path / SITE).mkdir(parents=True)
    (path / "bin").mkdir()
    (path / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    (path / "pyvenv.cfg").write_text(f"home = {os.path.dirname(os.path.realpath(sys.executable))}\n"
                                     "include-system-site-packages = false\n")


def test_every_venv_in_the_work_dir_is_read_only_inside(tmp_path):
    require_bwrap()
    work = tmp_path / "work"
    for venv in VENVS:
        fake_venv(work / venv)
    tries = [f"{v}/{f}" for v in VENVS for f in (f"{SITE}/zz.pth", f"{SITE}/sitecustomize.py", "bin/pytest",
                                                  "pyvenv.cfg")]
    script = "; ".join(f"(echo 'import os' >> {t}) 2>/dev/null && echo WROTE {t} || echo REFUSED {t}"
                       for t in tries)
    result = run(["--quiet", "--", "sh", "-c", script], cwd=work)
    assert result.stdout.split("\n")[:len(tries)] == [f"REFUSED {t}" for t in tries], (result.stdout,
                                                                                         result.stderr)
    assert result.returncode == 0, result.stderr
    # The route is real: the same .pth written outside runs at the venv's next start.
    marker = tmp_path / "pth-ran"
    (work / ".venv" / SITE / "zz.pth").write_text(f"import os; open({str(marker)!r}, 'w').close()\n")
    subprocess.run([str(work / ".venv" / "bin" / "python"), "-c", "pass"], check=True, timeout=60)
    assert marker.exists()
