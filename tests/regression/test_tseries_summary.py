"""The suite's summary says INCOMPLETE when a T-case was skipped, with the reasons."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import incomplete_lines, t_case_of

HERE = Path(__file__).resolve().parent


def test_t_case_of_names_only_t_series_files():
    assert t_case_of("tests/regression/test_t03_mutant.py::test_x[a]") == "T-03"
    assert t_case_of("tests/regression/test_weakened.py::test_y") is None
    assert t_case_of("tests/unit/test_t03_lookalike.py::test_z") is None


def test_incomplete_lines_keep_the_reason():
    lines = incomplete_lines([("tests/regression/test_t18_x.py::test_a", "no user namespaces"),
                              ("tests/unit/test_u.py::test_b", "irrelevant")])
    assert lines == ["T-18 tests/regression/test_t18_x.py::test_a: no user namespaces"]


def _suite(tmp_path: Path, body: str) -> str:
    """A tiny suite under tests/regression/ with this conftest; its terminal output."""
    reg = tmp_path / "tests" / "regression"
    reg.mkdir(parents=True)
    shutil.copy(HERE / "conftest.py", reg / "conftest.py")
    (reg / "test_t98_demo.py").write_text(textwrap.dedent(body))
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests/regression"]
    done = subprocess.run(argv,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return done.stdout


def test_a_skipped_t_case_makes_the_summary_incomplete(tmp_path):
    out = _suite(tmp_path, """
        import pytest

        def test_ran():
            pass  # a T-case that runs and passes

        def test_skipped():
            pytest.skip("no user namespaces on this machine")
    """)
    assert "T-series: INCOMPLETE - 1 T-case test(s) skipped" in out, out
    final = [line for line in out.splitlines() if " in " in line and "passed" in line][-1]
    assert "1 skipped" in final and "1 T-case(s) INCOMPLETE" in final, final
    assert "T-98 tests/regression/test_t98_demo.py::test_skipped: no user namespaces on this machine" in out


def test_no_skip_means_complete(tmp_path):
    out = _suite(tmp_path, """
        def test_ran():
            pass  # a T-case that runs and passes
    """)
    assert "T-series: complete - 1 T-cases ran, none skipped" in out, out
    assert "INCOMPLETE" not in out


def test_every_design_case_has_a_test_file():
    """Each T-case of DESIGN §8 exists as tests/regression/test_tNN_*.py (none invented: no 11/21/22)."""
    import weakened_harness as wh

    present = {n for p in HERE.glob("test_t[0-9][0-9]_*.py") for n in wh.case_numbers(p.name)}
    assert wh.case_numbers("test_t14_t23_pins_before_use.py") == ["14", "23"]
    missing = [f"T-{n}" for n in wh.DESIGN_CASES if n not in present]
    invented = sorted(f"T-{n}" for n in present - set(wh.DESIGN_CASES) if int(n) < wh.FIRST_ISSUE_CASE)
    assert not invented, f"T-cases that DESIGN §8 does not list: {invented}"
    assert not missing, f"T-cases of DESIGN §8 without a test file yet: {missing}"
