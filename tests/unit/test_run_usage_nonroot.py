"""The run's CPU time and peak memory as an ordinary user (uid 65534 via setpriv): no cgroup
counts them there, so they come from what the ending reaped as a child subreaper (bwrap, and
the sandbox's init it leaves to us, whose figures hold CMD's). Skipped with the reason where
an ordinary user's run cannot be tried (test_isolation_nonroot.py's prerequisites)."""

from __future__ import annotations

import json

from test_isolation_nonroot import as_nobody, world  # noqa: F401 - the fixture
from test_run_usage import BURN


def test_an_ordinary_user_s_run_reports_what_it_used(world):  # noqa: F811 - the fixture
    (world / "work" / "burn.py").write_text(BURN)
    result = as_nobody(world, ["run", "--report", "report.json", "--", "python3", "-I", "burn.py",
                               "0.4", "40"])
    assert result.returncode == 0, result.stderr
    usage = json.loads((world / "work" / "report.json").read_text())["usage"]
    assert usage["cpu_from"] == "reaped" and usage["cpu_ms"] >= 380, usage
    assert usage["memory_from"] == "reaped" and usage["peak_memory_bytes"] >= 40 << 20, usage
    assert "(largest process)" in result.stderr, result.stderr
