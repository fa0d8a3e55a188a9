"""The cosmic-ray ``no-docker`` distributor's logic (issue 26 item 1): what is a test result and
what is not, the engine attempts attached to a job, the summary; and the distributor itself, run
in-process over a real mutation of a real file, with a stand-in for ``no-docker run`` that
exits and reports as told (the real no-docker's refusals: test_mutation_refusal_shapes.py)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from no_docker.ci import cosmic_ray as cr

pytest.importorskip("cosmic_ray", reason="cosmic-ray is not installed (the test extra has it)")

ATTEMPT = {"target": "/run/docker.sock", "reason": "engine path", "count": 2,
           "callers": [{"pid": 12, "command": "python -m pytest"}]}

# A stand-in for `python -m no_docker.supervisor.cli`: `run --quiet --report FILE ... -- CMD`;
# what it does comes from the JSON file STUB_PLAN names (exit status, report or none, sleep).
STUB = r"""
import json, os, signal, sys, time
argv = sys.argv[1:]
assert argv[:3] == ["run", "--quiet", "--report"], argv
report = argv[3]
plan = json.load(open(os.environ["STUB_PLAN"]))
with open(os.environ["STUB_PLAN"] + ".calls", "a+") as log:
    log.seek(0)
    calls = len(log.readlines())
    log.write(json.dumps(argv) + "\n")
plan = plan["sequence"][calls] if "sequence" in plan else plan  # one plan per call, in order
def done(status):
    if plan.get("report") is not None:
        with open(report, "w") as f:
            json.dump(dict(plan["report"], exit_status=status), f)
    sys.exit(status)
signal.signal(signal.SIGTERM, lambda *_: done(143))
print("the tests' own output")
print(plan.get("line", ""), file=sys.stderr)
time.sleep(plan.get("sleep", 0))
done(plan["status"])
"""


def test_a_run_that_exited_125_or_wrote_no_report_is_no_result():
    assert cr.refusal(125, {"exit_status": 125, "failed": "P1 not proven: x"}, "") == \
        "no-docker run exited 125: P1 not proven: x"
    shown = cr.refusal(125, {"exit_status": 125}, "no-docker: ending not shown\n")
    assert shown == "no-docker run exited 125: ending not shown"
    assert cr.refusal(2, None, "no-docker: --rw /nope: no such directory\n") == \
        "no-docker run wrote no report (exit 2): --rw /nope: no such directory"
    assert cr.refusal(1, None, "") == "no-docker run wrote no report (exit 1): no output"
    # a test result: 0 and any other status with a report
    assert cr.refusal(0, {"exit_status": 0}, "") is None
    assert cr.refusal(1, {"exit_status": 1}, "") is None
    assert cr.refusal(4, {"exit_status": 4}, "") is None


def test_outcomes_follow_cosmic_rays_own_rule():
    assert cr.outcome_of(0, False) == "survived"
    assert cr.outcome_of(1, False) == "killed"
    assert cr.outcome_of(0, True) == "killed"  # a timeout is killed, as cosmic-ray's run_tests says


def test_engine_attempts_come_from_the_report_with_the_older_key_as_fallback():
    assert cr.attempts_of({"engine_attempts": [ATTEMPT], "connects_refused": []}) == [ATTEMPT]
    assert cr.attempts_of({"connects_refused": [ATTEMPT]}) == [ATTEMPT]
    assert cr.attempts_of({"engine_attempts": [], "connects_refused": [ATTEMPT]}) == []
    assert cr.attempts_of({}) == []
    assert cr.attempts_of({"engine_attempts": [dict(ATTEMPT, count=0), "junk"]}) == []


@given(st.text(), st.lists(st.fixed_dictionaries({"target": st.text(), "count": st.integers(1, 99),
                                                  "callers": st.just([])}), max_size=3))
def test_attempts_attached_to_an_output_read_back_whatever_the_output(output, attempts):
    assert cr.attempts_in(cr.with_attempts(output, attempts)) == attempts


def test_an_output_no_run_produced_carries_no_attempts():
    assert cr.attempts_in(None) is None
    assert cr.attempts_in("tests failed\n") is None
    assert cr.attempts_in(cr.ATTEMPTS_MARK + "{not json\n") is None


def test_the_summary_names_each_mutant_that_tried_and_the_ones_without_result():
    rows = [("engine.py core/ReplaceTrueWithFalse #0", "killed", [ATTEMPT]),
            ("engine.py core/NumberReplacer #1", "survived", []),
            ("engine.py core/NumberReplacer #2", "killed", None)]
    lines = cr.summary(rows, pending=3)
    assert lines[0].startswith("1 of 3 results did not come from no-docker runs")
    assert lines[1] == "1 of 2 mutants tried to reach a container engine:"
    assert lines[2] == ("  engine.py core/ReplaceTrueWithFalse #0 (killed): /run/docker.sock x2 "
                        "(pid 12 python -m pytest)")
    assert lines[3].startswith("3 mutants without a result")
    assert cr.summary([], 0) == ["0 of 0 mutants tried to reach a container engine"]


def test_the_test_command_is_wrapped_and_a_wrapped_one_is_refused():
    assert cr.run_argv("python -m pytest -x", "r.json", ["--rw", "/c"])[-9:] == \
        ["run", "--quiet", "--report", "r.json", "--rw", "/c", "--", "python", "-m", "pytest", "-x"][-9:]
    for bad in ("no-docker run -- pytest", "/usr/local/bin/no-docker run -- pytest",
                f"{sys.executable} -m no_docker.supervisor.cli run -- pytest", ""):
        with pytest.raises(cr.SessionStopped):
            cr.run_argv(bad, "r.json")


# --- the distributor, in-process over a real mutation ------------------------------------------


@pytest.fixture
def stub(tmp_path, monkeypatch):
    script = tmp_path / "stub_no_docker.py"
    script.write_text(STUB)
    monkeypatch.setattr(cr, "NO_DOCKER", [sys.executable, str(script)])
    plan = tmp_path / "plan.json"
    monkeypatch.setenv("STUB_PLAN", str(plan))

    def set_plan(**kw):
        plan.write_text(json.dumps(kw))
        return plan
    return set_plan


def work_item(tmp_path: Path):
    from cosmic_ray.work_item import MutationSpec, WorkItem

    module = tmp_path / "mod.py"
    module.write_text("LIMIT = 10\n")
    return module, WorkItem.single("job1", MutationSpec(module, "core/NumberReplacer", 0, (1, 8), (1, 10)))


def distribute(items, test_command="python -m pytest", timeout=30.0, config=None):
    got = []
    cr.NoDockerDistributor()(items, test_command, timeout, config or {}, lambda job, r: got.append((job, r)))
    return got


def test_a_refused_run_ends_the_session_with_one_line_and_records_nothing(tmp_path, stub, capsys):
    module, item = work_item(tmp_path)
    stub(status=125, report={"failed": "P1 not proven: a fake bwrap"}, line="no-docker: P1 not proven")
    got = []
    with pytest.raises(SystemExit) as stop:
        cr.NoDockerDistributor()([item], "python -m pytest", 30.0, {}, lambda j, r: got.append(r))
    assert stop.value.code == 125
    assert got == [], "a refused run was recorded as a result"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "P1 not proven: a fake bwrap" in err[0] and "not killed" in err[0], err
    assert module.read_text() == "LIMIT = 10\n", "the mutant was left in the file"


def test_a_run_without_report_ends_the_session(tmp_path, stub, capsys):
    _, item = work_item(tmp_path)
    stub(status=2, report=None, line="no-docker: --rw /nope: no such directory")
    with pytest.raises(SystemExit) as stop:
        distribute([item])
    assert stop.value.code == 125
    assert "wrote no report (exit 2): --rw /nope" in capsys.readouterr().err


def test_a_test_result_is_recorded_with_its_attempts_and_the_summary_names_it(tmp_path, stub, capsys):
    module, item = work_item(tmp_path)
    plan = stub(status=0, report={"engine_attempts": [ATTEMPT]})
    ((job, result),) = distribute([item], config={"run-options": ["--max-pids", "100"]})
    assert job == "job1" and result.test_outcome.value == "survived"
    assert result.worker_outcome.value == "normal"
    assert cr.attempts_in(result.output) == [ATTEMPT]
    assert "the tests' own output" in result.output
    assert "-LIMIT = 10" in result.diff and "+LIMIT = 11" in result.diff
    assert module.read_text() == "LIMIT = 10\n"
    (call,) = [json.loads(line) for line in Path(str(plan) + ".calls").read_text().splitlines()]
    assert call[4:] == ["--max-pids", "100", "--", "python", "-m", "pytest"]
    err = capsys.readouterr().err
    assert "no-docker: 1 of 1 mutants tried to reach a container engine:" in err
    assert "/run/docker.sock x2 (pid 12 python -m pytest)" in err


def test_a_failing_run_is_killed_and_the_older_key_is_read(tmp_path, stub):
    _, item = work_item(tmp_path)
    stub(status=1, report={"connects_refused": [ATTEMPT]})
    ((_, result),) = distribute([item])
    assert result.test_outcome.value == "killed"
    assert cr.attempts_in(result.output) == [ATTEMPT]


def test_a_timeout_ends_the_run_through_its_supervisor_and_is_killed(tmp_path, stub):
    _, item = work_item(tmp_path)
    stub(status=0, report={}, sleep=60)
    ((_, result),) = distribute([item], timeout=1.0)
    assert result.test_outcome.value == "killed" and result.output.startswith("timeout")


def test_a_wrapped_test_command_stops_before_any_run(tmp_path, stub, capsys):
    _, item = work_item(tmp_path)
    plan = stub(status=0, report={})
    with pytest.raises(SystemExit) as stop:
        distribute([item], test_command="no-docker run --quiet -- python -m pytest")
    assert stop.value.code == 125
    assert "write the plain command" in capsys.readouterr().err
    assert not Path(str(plan) + ".calls").exists(), "a run was started"


def test_mutation_summary_refuses_bad_input_with_one_line(tmp_path, capsys):
    assert cr.main([]) == 2
    assert cr.main([str(tmp_path / "absent.sqlite")]) == 2
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    assert cr.main([str(junk)]) == 2
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    assert cr.main([str(empty)]) == 2
    assert not cr.is_session(str(empty)), "the summary wrote into the file it read"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("no-docker mutation-summary: ") for line in err), err


def test_the_closing_summary_counts_every_mutant_of_the_session(tmp_path, stub, capsys):
    from cosmic_ray.work_item import WorkItem

    _, item = work_item(tmp_path)
    other = WorkItem("job2", item.mutations)
    stub(sequence=[{"status": 1, "report": {"engine_attempts": [ATTEMPT]}}, {"status": 0, "report": {}}])
    got = distribute([item, other])
    assert [r.test_outcome.value for _, r in got] == ["killed", "survived"]
    err = capsys.readouterr().err
    assert "no-docker: 1 of 2 mutants tried to reach a container engine:" in err, err


def test_any_other_fault_ends_the_session_with_125_never_a_traceback(tmp_path, monkeypatch, capsys):
    module, item = work_item(tmp_path)
    monkeypatch.setattr(cr, "NO_DOCKER", [str(tmp_path / "absent-python")])
    with pytest.raises(SystemExit) as stop:
        distribute([item])
    assert stop.value.code == 125
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FileNotFoundError" in err[0], err
    assert module.read_text() == "LIMIT = 10\n"
