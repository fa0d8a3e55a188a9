"""T-01: ``no-docker check`` fails outside a run (125, one line naming the property) and
proves every property inside one."""

from __future__ import annotations

import subprocess

from isolation_cases import cli, require_bwrap, run


def test_check_outside_exits_125_naming_the_property(tmp_path):
    result = subprocess.run(cli("check"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 125, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("no-docker: P1 not proven:"), result.stderr


def test_check_json_outside_says_not_proven(tmp_path):
    import json

    result = subprocess.run(cli("check", "--json"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 125
    doc = json.loads(result.stdout)
    assert doc["proven"] is False and doc["properties"][0]["state"] == "failed"


def test_check_inside_a_run_exits_0(tmp_path):
    require_bwrap()
    result = run(["--quiet", "--", *cli("check")], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["proven"] * 13  # P1-P13
