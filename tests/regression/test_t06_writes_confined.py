"""T-06: a run writes only into the work dir, its own tmp and ``--rw`` paths; the host's
/tmp, $HOME, /etc, .git/hooks and .git/config stay unchanged."""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
from pathlib import Path

from isolation_cases import require_bwrap, run


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def test_writes_land_only_where_allowed(tmp_path):
    require_bwrap()
    tag = uuid.uuid4().hex[:12]
    work, rw, sibling = tmp_path / "work", tmp_path / "rw", tmp_path / "sibling"
    for d in (work, rw, sibling):
        d.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=120)
    home = Path(os.path.realpath(os.environ["HOME"]))
    watched = [home / ".bashrc", home / ".profile", work / ".git" / "config",
               work / ".git" / "hooks" / "pre-commit"]
    before = {p: digest(p) for p in watched}
    saved = {p: p.read_bytes() for p in watched if p.exists()}
    try:
        _check_writes(tag, work, rw, sibling, home)
        assert {p: digest(p) for p in watched} == before
    finally:
        # A weakened build may really write there: put the user's files back, remove ours.
        for p in watched:
            if digest(p) != before[p]:
                p.write_bytes(saved[p]) if p in saved else p.unlink()


def _check_writes(tag: str, work: Path, rw: Path, sibling: Path, home: Path) -> None:
    targets = {
        "work": work / f"w-{tag}", "rw": rw / f"rw-{tag}", "tmp-inside": Path(f"/tmp/t06-{tag}"),
        "sibling": sibling / f"s-{tag}", "etc": Path(f"/etc/t06-{tag}"), "usr": Path(f"/usr/t06-{tag}"),
        "home": home / f".t06-{tag}", "bashrc": home / ".bashrc",
        "hook": work / ".git" / "hooks" / "pre-commit", "gitconfig": work / ".git" / "config",
    }
    script = "; ".join(f"(echo x >> {p}) 2>/dev/null && echo {name}=written || echo {name}=refused"
                       for name, p in targets.items())
    result = run(["--quiet", "--rw", str(rw), "--", "sh", "-c", script], cwd=work)
    assert result.returncode == 0, result.stderr
    said = dict(line.split("=") for line in result.stdout.split())
    # Inside: the work dir, --rw, and the run's own tmpfs (/tmp, the empty $HOME) take writes.
    assert said == {"work": "written", "rw": "written", "tmp-inside": "written", "sibling": "refused",
                    "etc": "refused", "usr": "refused", "home": "written", "bashrc": "written",
                    "hook": "refused", "gitconfig": "refused"}, said
    # Outside: only the work dir and --rw changed.
    assert targets["work"].exists() and targets["rw"].exists()
    leaked = [name for name in ("tmp-inside", "sibling", "etc", "usr", "home") if targets[name].exists()]
    for name in leaked:
        targets[name].unlink()
    assert not leaked, f"appeared outside: {leaked}"
