"""T-84: the dynamic check of `mutants review` cannot be told from a developer's machine by the
telltales issue 27 named (the work dir's name, $HOME's dotfiles, $PPID, the payload's own name):
a payload that does damage only where it sees none of them does it under review, and the check
reports it.

Real components: the real outer guard (mount + pid + network namespaces, the canary on every
engine path: no real engine is reachable), real bash, ``dynamic.dynamic_check`` as ``review``
calls it. The payload is run directly, without the lint first (the lint would refuse it: the
point here is the second witness on its own).
"""

from __future__ import annotations

import shutil

import pytest
from no_docker.mutants.dynamic import dynamic_check

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("nsenter") is None,
                                reason="the outer guard needs unshare and nsenter (util-linux)")

# Harmless (exit 0, nothing sent) wherever it sees a sign of the review; otherwise a POST that
# would kill a container (the canary records it: only the canary can be reached in the guard).
TELLING = b"""#!/usr/bin/env bash
case $PWD in *review*|*no-docker*) exit 0 ;; esac
case $0 in *payload*|*review*) exit 0 ;; esac
if grep -qi -e guard -e review "$HOME/.bashrc" "$HOME/.profile"; then exit 0; fi
if [ ! -s "$HOME/.bash_history" ] || [ ! -s "$HOME/.gitconfig" ]; then exit 0; fi
if [ "$PPID" -lt 100 ]; then exit 0; fi
curl -q -s -o /dev/null -X POST --unix-socket /run/docker.sock http://d/containers/web/kill
"""


@pytest.mark.parametrize("attempt", range(3))
def test_a_payload_that_looks_for_the_review_is_caught(attempt):
    result = dynamic_check(TELLING, timeout=60)
    assert result.ran, result.problems
    assert any("POST /containers/web/kill" in p for p in result.problems), (
        f"the payload saw the review and took its harmless branch: {result.problems}")
