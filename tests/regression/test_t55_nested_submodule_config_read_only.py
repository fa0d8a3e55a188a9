"""T-55: the config and hooks of a submodule's submodule are read-only inside (issue 16, item 5).

Only `.git/modules/*/{hooks,config}` used to be protected: `.git/modules/a/modules/b/config`
stayed writable, and a core.fsmonitor there runs at the next `git status` in a/b outside. The
walk finds every git directory at any depth and the plan re-binds its config, hooks, info/,
commondir and HEAD read-only."""

from __future__ import annotations

from isolation_cases import require_bwrap, run
from later_code_cases import GIT_ENV, nested_submodules

TRY = ("for f in config hooks/post-checkout HEAD info/exclude; do "
       "(echo x >> .git/modules/a/modules/b/$f) 2>/dev/null && echo WROTE $f || echo REFUSED $f; done")


def test_a_nested_submodule_gitdir_is_read_only_inside(tmp_path):
    require_bwrap()
    work = tmp_path / "work"
    gitdir_b = nested_submodules(work, tmp_path / "origins")
    config_before = (gitdir_b / "config").read_bytes()
    result = run(["--quiet", "--", "sh", "-c", TRY], cwd=work, env=GIT_ENV)
    assert result.stdout.split("\n")[:4] == ["REFUSED config", "REFUSED hooks/post-checkout", "REFUSED HEAD",
                                             "REFUSED info/exclude"], (result.stdout, result.stderr)
    assert result.returncode == 0, result.stderr
    assert (gitdir_b / "config").read_bytes() == config_before
