"""The dynamic check must not be tellable from a developer's machine (issue 27, `mutants review`).

The red-team payload took a harmless branch when it saw the review's fixed work dir
(`*/no-docker-review-work`), the guard's `.bashrc` text or a `$PPID` of 0, and did damage
otherwise. Here: what the payload can read is drawn afresh per run (``dynamic.disguise``),
shown by a probe payload run through the real outer guard; and the red-team payload itself is
refused by ``review`` (its damage is one the static lint now sees: the lint is the gate).
"""

from __future__ import annotations

import random
import shutil

import pytest
from no_docker.mutants import dynamic as D
from no_docker.mutants import review as rv

TELLTALES = ("no-docker", "review", "guard", "canary")

# The red-team payload of issue 27: harmless when it believes it is under review, else the
# newline-in-double-quotes bypass (`docker rm -f web db` hidden after a comment).
TELLING = """#!/usr/bin/env bash
# route: ok (network) fine
case $PWD in */no-docker-review-work) exit 0 ;; esac
if grep -q guard "$HOME/.bashrc"; then exit 0; fi
if [ "$PPID" = 0 ]; then exit 0; fi
bash -c "# note
docker rm -f web db"
"""


def test_two_reviews_look_like_two_different_machines():
    seen = [D.disguise(random.Random(seed)) for seed in range(20)]
    assert len({d.project for d in seen}) > 5
    assert len({d.last_pid for d in seen}) == 20
    assert len({d.home_files[".bashrc"] for d in seen}) > 10
    assert len({(d.runner, d.script) for d in seen}) > 10


@pytest.mark.parametrize("seed", range(50))
def test_nothing_the_payload_reads_names_the_review(seed):
    d = D.disguise(random.Random(seed))
    readable = [d.project, d.runner, d.script, *d.home_files, *d.home_files.values()]
    assert not [t for t in TELLTALES for text in readable if t in text.lower()]
    assert 900 <= d.last_pid < 30000


needs_guard = pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None,
                                 reason="the outer guard needs unshare and nsenter (util-linux)")

PROBE = (b"""parent=$(tr '\\0' ' ' < "/proc/$PPID/cmdline")\n"""
         b"""printf '%s|%s|%s|%s\\n' "$PWD" "$PPID" "$parent" "$(cat "$HOME/.bashrc")"\n""")


@needs_guard
def test_a_probe_in_the_real_guard_sees_a_fresh_work_dir_home_and_parent(monkeypatch):
    guard_class, guard_error = D._outer_guard()
    outputs: list[str] = []

    class Capturing(guard_class):  # type: ignore[misc, valid-type]
        def run(self, *args, **kwargs):
            done = super().run(*args, **kwargs)
            outputs.append(done.stdout.decode(errors="replace"))
            return done

    monkeypatch.setattr(D, "_outer_guard", lambda: (Capturing, guard_error))
    for seed in (7, 8):
        result = D.dynamic_check(PROBE, timeout=60, rng=random.Random(seed))
        assert result.ran and result.ok, result.problems
    assert len(outputs) == 2, outputs
    views = [out.split("|", 3) for out in outputs]
    for (pwd, ppid, parent, bashrc), seed in zip(views, (7, 8), strict=True):
        d = D.disguise(random.Random(seed))
        assert pwd.endswith("/" + d.project) and "review" not in pwd and "no-docker" not in pwd, pwd
        assert int(ppid) == d.last_pid + 1, (ppid, d.last_pid)  # not 0, not the guard's 2
        assert parent.strip() == f"bash {pwd}/{d.runner}", parent
        assert bashrc.strip() == d.home_files[".bashrc"].strip() and "guard" not in bashrc
    assert views[0][0] != views[1][0] and views[0][1] != views[1][1]


def test_the_red_team_payload_is_refused_by_review(tmp_path):
    path = tmp_path / "p.sh"
    path.write_text(TELLING)
    ran = []
    result = rv.review(path, "mutants/payloads/p.sh", tmp_path / "pins.json", dynamic=ran.append)
    assert any("destructive-engine-command" in f for f in result.lint), result.lint
    assert ran == [] and not result.acceptable
    with pytest.raises(ValueError):
        rv.accept(result, tmp_path / "pins.json")
