"""cosmic-ray's ``no-docker`` distributor, and ``no-docker mutation-summary SESSION.sqlite``.

cosmic-ray reads any non-zero exit of its test command as "killed" (``cosmic_ray.testing.
run_tests``), so a test command ``no-docker run -- pytest`` that is refused (exit 125: the
isolation not proven, a stale marker, a state-dir problem, an ending not shown) scores a killed
mutant, and a session where every run was refused reports 100% complete and 0 survivors (issue
26, measured). The local distributor cannot tell the two apart; this one can: it runs each
job's test command in its own ``no-docker run --report FILE`` and reads the run's own report.

* exit 125, or no report at all (no-docker could not start): the job gets **no result** (it
  stays pending) and the session ends: one line on stderr, ``cosmic-ray exec`` exits 125.
  Not ``incompetent``: cosmic-ray's ``WorkResult.is_killed`` is ``test_outcome != SURVIVED``,
  so an incompetent (or an ``abnormal`` result with no outcome) counts as killed in ``cr-report``
  too. An exception out of the distributor would end the session as well, but with a
  traceback and exit 1, which reads as "tests failed".
* otherwise cosmic-ray's own rule: 0 survived, anything else killed; a timeout is killed
  ("timeout"), but the run is ended by its supervisor (SIGTERM: it ends every process of the
  run and proves it) instead of cosmic-ray's SIGKILL of the group, which would kill the
  supervisor and leave the run's processes to ``no-docker end``.
* the engine attempts of the run (the report's ``engine_attempts``, else ``connects_refused``,
  the same shape) are attached to the job's result, as the last line of its output
  (``ATTEMPTS_MARK`` + JSON): cosmic-ray's ``WorkResult`` has no field for them and its session
  database no column, but the output is kept, shown by ``cr-report --show-output`` and read back
  by ``no-docker mutation-summary``.

Configuration (``cosmic-ray.toml``)::

    [cosmic-ray]
    test-command = "python -B -m pytest -x -q"     # plain: the distributor wraps it

    [cosmic-ray.distributor]
    name = "no-docker"

    [cosmic-ray.distributor.no-docker]
    run-options = ["--rw", "/home/me/.cache/x"]     # optional: more `no-docker run` options

Registered as the ``no-docker`` entry of cosmic-ray's ``cosmic_ray.distributors`` entry point
(pyproject.toml). cosmic-ray is imported only when a session runs or is read: no-docker does not
depend on it.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

EXIT_NOT_PROVEN = 125  # no_docker.supervisor.errors.EXIT_NOT_PROVEN; not imported: keep this light
EXIT_USAGE = 2
ATTEMPTS_MARK = "no-docker engine attempts: "
# How long a timed-out run's supervisor gets to end and prove its run after SIGTERM: its own
# --end-timeout (default 10 s) plus the proof, with room to spare on a loaded machine.
END_GRACE = 60.0
NO_DOCKER = [sys.executable, "-m", "no_docker.supervisor.cli"]


class SessionStopped(Exception):
    """A job got no result: the session must end (the message is the one line shown)."""


def run_argv(test_command: str, report: str, options: Iterable[str] = ()) -> list[str]:
    """``no-docker run --quiet --report REPORT [OPTIONS] -- TEST_COMMAND...`` (pure). A test
    command that is itself a ``no-docker run`` would be a run inside a run (refused): the
    distributor does the wrapping, the command stays plain."""
    words = shlex.split(test_command)
    if not words:
        raise SessionStopped("the test command is empty (cosmic-ray.test-command)")
    if Path(words[0]).name == "no-docker" or words[1:3] == ["-m", "no_docker.supervisor.cli"]:
        raise SessionStopped("the test command starts with no-docker; with the no-docker distributor write "
                             "the plain command (test-command = \"python -m pytest ...\"): each job is "
                             "already a run of its own")
    return [*NO_DOCKER, "run", "--quiet", "--report", report, *options, "--", *words]


def attempts_of(report: dict) -> list[dict]:
    """The run's engine attempts, each ``{"target", "reason", "count", "callers": [{"pid",
    "command"}]}`` (pure): ``engine_attempts`` when the report has it, else ``connects_refused``
    (the older key, the same shape)."""
    found = report.get("engine_attempts")
    if found is None:
        found = report.get("connects_refused")
    return [a for a in found or [] if isinstance(a, dict) and a.get("count")]


def last_no_docker_line(output: str) -> str:
    """The last ``no-docker: ...`` status line of a run's output, without the prefix (pure)."""
    lines = [line[len("no-docker: "):] for line in output.splitlines() if line.startswith("no-docker: ")]
    return lines[-1] if lines else ""


def refusal(status: int | None, report: dict | None, output: str) -> str | None:
    """Why a run's outcome is no test result, or None when it is one (pure).

    A run is no result when no-docker exited 125 (``--report``'s ``exit_status`` says the same)
    or wrote no report at all: it could not start (a usage error, a state dir it cannot use)."""
    if report is None:
        tail = output.strip().splitlines()
        why = last_no_docker_line(output) or (tail[-1] if tail else "no output")
        return f"no-docker run wrote no report (exit {status}): {why}"
    if status == EXIT_NOT_PROVEN or report.get("exit_status") == EXIT_NOT_PROVEN:
        why = report.get("failed") or last_no_docker_line(output) or "exit 125"
        return f"no-docker run exited 125: {why}"
    return None


def outcome_of(status: int, timed_out: bool) -> str:
    """cosmic-ray's own rule for a run that is a test result (pure): 0 survived, else killed."""
    if timed_out or status != 0:
        return "killed"
    return "survived"


def attempts_text(attempts: list[dict]) -> str:
    """``/run/docker.sock x2 (pid 12 python -m pytest)``, each target once (pure)."""
    parts = []
    for a in attempts:
        callers = ", ".join(f"pid {c.get('pid')} {c.get('command')}" for c in a.get("callers", [])[:3])
        parts.append(f"{a.get('target')} x{a.get('count')}" + (f" ({callers})" if callers else ""))
    return "; ".join(parts)


def with_attempts(output: str, attempts: list[dict]) -> str:
    """OUTPUT with the attempts appended as its last line (pure); ``attempts_in`` reads it back."""
    return f"{output.rstrip()}\n{ATTEMPTS_MARK}{json.dumps(attempts, sort_keys=True)}\n"


def attempts_in(output: str | None) -> list[dict] | None:
    """The attempts a job's output carries, or None when no no-docker run produced it (pure)."""
    for line in reversed((output or "").splitlines()):
        if line.startswith(ATTEMPTS_MARK):
            try:
                found = json.loads(line[len(ATTEMPTS_MARK):])
            except ValueError:
                return None
            return [a for a in found if isinstance(a, dict)] if isinstance(found, list) else None
    return None


def mutant_name(mutations: Iterable) -> str:
    """``engine.py core/ReplaceTrueWithFalse #0`` for each mutation of a job (pure)."""
    return " + ".join(f"{m.module_path} {m.operator_name} #{m.occurrence}" for m in mutations) or "baseline"


def summary(rows: list[tuple[str, str | None, list[dict] | None]], pending: int) -> list[str]:
    """The lines a user reads after a session (pure). ROWS: (mutant, test outcome, attempts or
    None when the result did not come from a no-docker run)."""
    ours = [r for r in rows if r[2] is not None]
    tried = [r for r in ours if r[2]]
    lines = []
    if len(ours) < len(rows):
        lines.append(f"{len(rows) - len(ours)} of {len(rows)} results did not come from no-docker runs "
                     "(another distributor): their engine attempts are unknown")
    lines.append(f"{len(tried)} of {len(ours)} mutants tried to reach a container engine"
                 + (":" if tried else ""))
    lines += [f"  {name} ({outcome}): {attempts_text(attempts or [])}" for name, outcome, attempts in tried]
    if pending:
        lines.append(f"{pending} mutant{'s' if pending != 1 else ''} without a result (never run, or a run "
                     "that was refused): rerun cosmic-ray exec")
    return lines


def _end(proc: subprocess.Popen) -> bytes:
    """A timed-out run: SIGTERM to its supervisor, which ends every process of the run and
    proves it (docs/supervision.md); SIGKILL to the group we started only when that hangs.
    The run's output so far."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=END_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out or b""


def run_job(argv: list[str], report_path: Path, timeout: float | None) -> tuple[int, dict | None, str, bool]:
    """Run one job's ``no-docker run``: (exit status, its report or None, output, timed out)."""
    report_path.unlink(missing_ok=True)  # only this run's report counts
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # as cosmic-ray's run_tests: no stale .pyc
    # start_new_session: as cosmic-ray's run_tests, a group of our own to kill as the last resort
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        out = b"timeout\n" + _end(proc)  # "timeout" first: cosmic-ray's own output for one
    except BaseException:
        # Ctrl-C (cosmic-ray turns SIGINT into SystemExit) or any other way out: the run is in a
        # session of its own and never saw the terminal's signal; end it before we go
        _end(proc)
        raise
    report = None
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        report = None
    if not isinstance(report, dict):
        report = None
    return proc.returncode, report, out.decode("utf-8", errors="replace"), timed_out


def _diff(path: Path, before: str, after: str) -> list[str]:
    return ["--- mutation diff ---", *difflib.unified_diff(before.split("\n"), after.split("\n"),
                                                           fromfile=f"a/{path}", tofile=f"b/{path}",
                                                           lineterm="")]


class NoDockerDistributor:
    """cosmic-ray's ``no-docker`` distributor: each job's tests in a ``no-docker run`` of their
    own, a refused run never scored (the module's docstring)."""

    def __call__(self, pending_work: Iterable, test_command: str, timeout: float | None,
                 distributor_config: dict, on_task_complete: Callable) -> None:
        options = [str(o) for o in (distributor_config or {}).get("run-options", [])]
        done, rows = 0, []
        with tempfile.TemporaryDirectory(prefix="no-docker-cosmic-ray-") as scratch:
            try:
                run_argv(test_command, "-", options)  # the command's own faults, before any mutant
                for item in pending_work:
                    result, attempts = self._one(item, test_command, timeout, options, Path(scratch))
                    on_task_complete(item.job_id, result)
                    done += 1
                    if result.test_outcome is not None:  # not a "no-test" (no mutation possible)
                        rows.append((mutant_name(item.mutations), result.test_outcome.value, attempts))
            except Exception as err:  # noqa: BLE001 - fail closed: every fault ends the session, 125
                stop = err if isinstance(err, SessionStopped) else f"{type(err).__name__}: {err}"
                print(f"no-docker: cosmic-ray session stopped, no result recorded for this mutant: {stop}; "
                      f"{done} mutant{'s' if done != 1 else ''} got a result in this session, the rest "
                      "none (not killed); fix that and rerun cosmic-ray exec to resume", file=sys.stderr)
                raise SystemExit(EXIT_NOT_PROVEN) from None
        if any(attempts for _, _, attempts in rows):
            for line in summary(rows, 0):
                print(f"no-docker: {line}", file=sys.stderr)

    def _one(self, item: object, test_command: str, timeout: float | None, options: list[str],
             scratch: Path) -> tuple[object, list[dict]]:
        """Apply ITEM's mutations (cosmic-ray restores the files after), run the tests in a run of
        their own; SessionStopped when the run is no test result."""
        from cosmic_ray.mutating import use_mutation
        from cosmic_ray.plugins import get_operator
        from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

        report_path = scratch / f"{item.job_id}.json"
        with contextlib.ExitStack() as stack:
            diffs: list[str] = []
            for mutation in item.mutations:
                operator = get_operator(mutation.operator_name)(**(mutation.operator_args or {}))
                before, after = stack.enter_context(use_mutation(mutation.module_path, operator,
                                                                 mutation.occurrence))
                if after is None:  # no mutation possible: cosmic-ray's own "no-test"
                    return WorkResult(worker_outcome=WorkerOutcome.NO_TEST), []
                diffs += _diff(mutation.module_path, before, after)
            status, report, output, timed_out = run_job(run_argv(test_command, str(report_path), options),
                                                        report_path, timeout)
        # the files are restored here, before the session can end
        report_path.unlink(missing_ok=True)
        why = refusal(status, report, output)
        if why is not None:
            raise SessionStopped(f"{mutant_name(item.mutations)}: {why}")
        attempts = attempts_of(report or {})
        return (WorkResult(output=with_attempts(output, attempts), diff="\n".join(diffs),
                           test_outcome=TestOutcome(outcome_of(status, timed_out)),
                           worker_outcome=WorkerOutcome.NORMAL), attempts)


SESSION_TABLES = {"mutation_specs", "work_items", "work_results"}


def is_session(path: str) -> bool:
    """Whether PATH is a cosmic-ray session database, read-only: cosmic-ray's ``use_db`` creates
    its tables in any SQLite file it opens, and a summary must not change the file it reads."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            names = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return names >= SESSION_TABLES


def read_session(path: str) -> tuple[list[tuple[str, str | None, list[dict] | None]], int]:
    """(rows for ``summary``, number of jobs without a result) of a cosmic-ray session file."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(path, mode=WorkDB.Mode.open) as db:
        rows = [(mutant_name(item.mutations), result.test_outcome.value if result.test_outcome else None,
                 attempts_in(result.output)) for item, result in db.completed_work_items]
        pending = db.num_work_items - db.num_results
    return rows, pending


USAGE = ("usage: no-docker mutation-summary [--json] SESSION.sqlite\n\n"
         "After a cosmic-ray session run through the no-docker distributor: which mutants tried to\n"
         "reach a container engine (target, count, pid, command), and how many have no result.")


def main(argv: list[str]) -> int:
    """``no-docker mutation-summary [--json] SESSION``: 0, or 2 on bad input (one line)."""
    args = list(argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if len(args) != 1 or args[0].startswith("-"):
        print(f"no-docker mutation-summary: expected one session file, got {args!r}", file=sys.stderr)
        return EXIT_USAGE
    path = args[0]
    if not Path(path).is_file():
        print(f"no-docker mutation-summary: {path}: no such session file", file=sys.stderr)
        return EXIT_USAGE
    if not is_session(path):
        print(f"no-docker mutation-summary: {path}: not a cosmic-ray session (no work_items table)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        rows, pending = read_session(path)
    except ImportError:
        print("no-docker mutation-summary: cosmic-ray is not installed here (pip install cosmic-ray)",
              file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # sqlalchemy's errors for a session it cannot read: one line, no traceback
        print(f"no-docker mutation-summary: {path}: cannot read the session ({type(err).__name__}: {err})",
              file=sys.stderr)
        return EXIT_USAGE
    if as_json:
        print(json.dumps({"results": [{"mutant": n, "test_outcome": o, "engine_attempts": a}
                                      for n, o, a in rows], "pending": pending}, indent=1))
    else:
        print("\n".join(summary(rows, pending)))
    return 0
