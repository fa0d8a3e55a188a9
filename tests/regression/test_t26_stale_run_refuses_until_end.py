"""T-26: after a SIGKILLed supervisor left processes behind, new runs refuse until `end`.

The leftover run is made with the library as `no-docker run` makes runs, minus
``--die-with-parent`` (what the bwrap races #633/#692 amount to). Then: `no-docker run` refuses
with 125 and names the exact `no-docker end RUN_ID`; that command ends and proves the leftover;
the next run works. A stale marker whose processes are all gone is removed without a word.
"""

from __future__ import annotations

import subprocess

from ending_cases import (
    alive_with_token,
    cli,
    daemon,
    end_all,
    kill_token,
    orphaned_run,
    require_bwrap,
    run_to_end,
    runs_json,
    settled_without,
    token,
)


def test_leftover_processes_make_runs_refuse_until_end(tmp_path):
    require_bwrap()
    tok = token()
    try:
        run_id = orphaned_run(f"{daemon(tok)}; sleep {tok}")
        assert alive_with_token(tok), "the leftover run has no processes"
        refused = run_to_end(["--", "true"], cwd=tmp_path)
        assert refused.returncode == 125, refused.stderr
        assert f"no-docker end {run_id}" in refused.stderr
        assert alive_with_token(tok), "the stale-run check must not kill anything"
        ended = subprocess.run(cli("end", run_id), capture_output=True, text=True, timeout=60)
        assert ended.returncode == 0, ended.stderr
        assert settled_without(tok) == []
        assert run_to_end(["--", "true"], cwd=tmp_path).returncode == 0
        assert runs_json() == []
    finally:
        kill_token(tok)
        end_all()


def test_stale_marker_without_processes_is_removed_silently(tmp_path):
    require_bwrap()
    tok = token()
    try:
        run_id = orphaned_run(f"exec sleep {tok}")
        kill_token(tok)  # the leftover dies on its own (its init exits with its only child)
        assert any(r["run_id"] == run_id for r in runs_json())
        result = run_to_end(["--", "true"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert runs_json() == []
    finally:
        kill_token(tok)
        end_all()
