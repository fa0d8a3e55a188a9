"""T-51: "N processes killed" counts what the ending ended, the kernel's kills included.

Issue 18 item 3: ``sh -c 'sleep 600 & sleep 601 & sleep 602 & exit 0'`` reported "1 processes
killed": only the signal to the sandbox's init was counted, not the members the kernel then
killed with the namespace. The count is now the run's processes alive when the ending began
(seen before the kill, the init and bwrap not counted) plus any a proof pass found later,
in the status line (singular for one) and in ``--report``.
"""

from __future__ import annotations

import pytest
from ending_cases import kill_token, report_of, require_bwrap, run_to_end, settled_without, token

CASES = {"three-left": (3, "3 processes killed"), "one-left": (1, "1 process killed"),
         "none-left": (0, "0 processes killed")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_count_is_what_was_left_to_kill(tmp_path, case):
    require_bwrap()
    tok = token()
    left, words = CASES[case]
    script = "".join(f"sleep {tok} & " for _ in range(left)) + "exit 0"
    report = tmp_path / "report.json"
    try:
        result = run_to_end(["--report", str(report), "--", "sh", "-c", script], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert f", {words}, 0 left," in result.stderr, result.stderr
        assert report_of(report)["ending"]["killed"] == left
        assert settled_without(tok) == []
    finally:
        kill_token(tok)
