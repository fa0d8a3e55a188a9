"""T-20: what a shell reads at start-up is read inside, never outside: BASH_ENV set outside does
not run, writes to ~/.bashrc, ~/.profile, ~/.zshenv from inside never reach the real files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from isolation_cases import require_bwrap, run


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def test_bash_env_and_startup_files(tmp_path):
    require_bwrap()
    # The start-up file outside the work dir (a writable root that holds what BASH_ENV names is
    # refused: T-78), visible inside read-only, so that a BASH_ENV that crossed would run it.
    work = tmp_path / "w"
    work.mkdir()
    (tmp_path / "ro").mkdir()
    marker = work / "bash-env-ran"
    evil = tmp_path / "ro" / "evil-bash-env.sh"
    evil.write_text(f"touch {marker}\n")
    home = Path(os.path.realpath(os.environ["HOME"]))
    files = [home / ".bashrc", home / ".profile", home / ".zshenv"]
    before = {p: digest(p) for p in files}
    saved = {p: p.read_bytes() for p in files if p.exists()}
    env = dict(os.environ, BASH_ENV=str(evil), ENV=str(evil))
    # Appends a harmless `touch` of the test's own marker; restored below if it ever lands.
    script = "; ".join(f"echo 'touch {marker}' >> {p}" for p in files) + "; bash -c true; sh -c true"
    try:
        result = run(["--quiet", "--ro", str(tmp_path / "ro"), "--", "bash", "-c", script], cwd=work, env=env)
        assert result.returncode == 0, result.stderr
        assert not marker.exists(), "BASH_ENV/ENV set outside ran inside the run"
        assert {p: digest(p) for p in files} == before, "a start-up file outside was changed"
    finally:
        for p in files:
            if digest(p) != before[p]:
                p.write_bytes(saved[p]) if p in saved else p.unlink()
