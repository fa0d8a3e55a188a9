"""Run T-cases against a deliberately weakened build (a patch under ``weakened/``).

A weakening is ``weakened/<case>-<what>.patch``: header lines ``# breaks: PATH[::TEST] ...``
and ``# why: ONE LINE``, then a unified diff (``a/``/``b/`` prefixes, repo-relative). For each
one: the repository is copied (without .git, the venv, caches), ``git apply`` patches the
copy, and pytest runs the named cases *in the copy*, with a ``no_docker`` package made of
symlinks to the copy's ``supervisor/ canary/ mutants/ ci/`` first on ``PYTHONPATH``; a plugin
in the child asserts that the imported ``no_docker.*`` packages are the copy's before any test
runs, and writes each test's outcome to a JSON file. The weakening is *shown* when every
named case has at least one failed test and none of them was skipped.

Copies live under the repository's ``.pytest_cache/weakened/`` rather than /tmp: the outer
guard and ``no-docker run`` hide /tmp, and code under test must stay where it is visible.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PARTS = ("supervisor", "canary", "mutants", "ci")
# The copy keeps the tree's bytecode: without it every Python the weakened cases start (the
# child pytest, each `no-docker run` it makes) compiled the whole package from source again.
# A cached .pyc is used only when its source's mtime and size match (importlib's default
# check), and copytree keeps mtimes, so a file the patch rewrites is compiled afresh; its old
# .pyc is removed anyway (drop_stale_bytecode).
# Also what the running suite makes and removes while a copy is taken (the harness runs beside
# it): bytecode's temporary `X.pyc.<id>` and setuptools' release tree `no_docker-<version>/`.
IGNORE = shutil.ignore_patterns(".git", ".venv", ".pytest_cache", ".ruff_cache", ".hypothesis",
                                "*.egg-info", "build", "dist", "*.pyc.*", "no_docker-*")
CHILD_TIMEOUT = 240.0

PLUGIN = '''"""Loaded with -p in the weakened copy's pytest: refuse to run anything but the copy."""
import json, os, sys
import pytest

COPY = os.path.realpath(os.environ["NO_DOCKER_WEAKENED_COPY"])
OUTCOMES = os.environ["NO_DOCKER_WEAKENED_OUTCOMES"]
# Given: the `# breaks:` targets, and each stops at its first failing test (the suite's mode;
# the table of docs/regression-cases.md runs every test of every target).
TARGETS = json.loads(os.environ.get("NO_DOCKER_WEAKENED_STOP_AT_FIRST", "null"))
_results = {}
_shown = set()


def _target_of(nodeid):
    for target in TARGETS or ():
        if nodeid == target or nodeid.startswith(target + "[") or (
                "::" not in target and nodeid.split("::", 1)[0] == target):
            return target
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # A target with a failed test is shown; its other tests add no evidence, only minutes
    # (T-75's 28 cases all fail against one weakening). Nothing is reported for them: they are
    # neither passed nor skipped (judge() needs one failure per target and no skip).
    if TARGETS is not None and _target_of(item.nodeid) in _shown:
        # what the skipped protocol would have torn down before NEXTITEM (pytest's runner.py:
        # runtestprotocol ends with teardown_exact(nextitem)); else the next item's set-up
        # finds the stack of this one and errors
        item.session._setupstate.teardown_exact(nextitem)
        return True
    return None


def pytest_configure(config):
    import importlib
    for part in PARTS_PLACEHOLDER:
        module = importlib.import_module("no_docker." + part)
        where = os.path.realpath(module.__file__)
        if not where.startswith(COPY + os.sep):
            raise pytest.UsageError(f"no_docker.{part} is {where}, not the weakened copy in {COPY}")
    _results["__imported_from_copy__"] = "checked"


def pytest_runtest_logreport(report):
    # "failed" only for a failing test body; a failing set-up or tear-down is an "error":
    # a weakened build that cannot even start the run demonstrates nothing.
    rank = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}
    outcome = report.outcome
    if report.failed and report.when != "call":
        outcome = "error"
    previous = _results.get(report.nodeid, "passed")
    _results[report.nodeid] = max(previous, outcome, key=rank.get)
    if report.failed and report.when == "call" and TARGETS is not None:
        target = _target_of(report.nodeid)
        if target is not None:
            _shown.add(target)
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None and report.nodeid + "#why" not in _results:
        _results[report.nodeid + "#why"] = crash.message[:300]
    if report.skipped and isinstance(report.longrepr, tuple) and report.nodeid + "#why" not in _results:
        _results[report.nodeid + "#why"] = str(report.longrepr[2])[:300]  # (path, line, reason)


def pytest_collectreport(report):
    # A module that skips itself (pytest.skip(allow_module_level=True)) has no test reports:
    # its reason is kept so that "not collected" and "skipped as this user" stay apart.
    if report.skipped and isinstance(report.longrepr, tuple):
        _results[report.nodeid + "#module-skipped#why"] = str(report.longrepr[2])[:300]


def pytest_sessionfinish(session, exitstatus):
    with open(OUTCOMES, "w") as fh:
        json.dump(_results, fh)
'''.replace("PARTS_PLACEHOLDER", repr(PARTS))


@dataclasses.dataclass(frozen=True)
class Weakening:
    path: Path
    breaks: tuple[str, ...]  # repo-relative test files or node ids
    why: str


@dataclasses.dataclass
class Result:
    weakening: Weakening
    shown: bool  # every named case failed in the weakened copy
    detail: str
    seconds: float
    outcomes: dict[str, str] = dataclasses.field(default_factory=dict)


def parse_header(text: str) -> tuple[list[str], str]:
    """The ``# breaks:`` targets and the ``# why:`` line of a weakening patch (pure)."""
    breaks: list[str] = []
    why = ""
    for line in text.splitlines():
        if line.startswith("# breaks:"):
            breaks += line[len("# breaks:"):].split()
        elif line.startswith("# why:"):
            why = line[len("# why:"):].strip()
        elif line.startswith(("diff ", "--- ", "Index: ")):
            break
    return breaks, why


def load(path: Path) -> Weakening:
    breaks, why = parse_header(path.read_text())
    return Weakening(path, tuple(breaks), why)


def case_outcomes(target: str, outcomes: Mapping[str, str]) -> dict[str, str]:
    """The outcomes that belong to one ``# breaks:`` target (a file, or file::test[param])."""
    outcomes = {k: v for k, v in outcomes.items() if not k.endswith("#why")}
    if "::" in target:
        return {k: v for k, v in outcomes.items() if k == target or k.startswith(target + "[")}
    return {k: v for k, v in outcomes.items() if k.split("::", 1)[0] == target}


def skipped_here(weakening: Weakening, outcomes: Mapping[str, str]) -> str | None:
    """Why WEAKENING cannot be shown on this machine: when each of its targets either failed
    (shown) or could not run here (each of its tests skipped, or its module skipped itself),
    and at least one could not; else None (pure). A target that passed, erred or was not
    collected leaves the verdict to judge(). Only an ordinary user's run may take that for
    "shown elsewhere": root's CI runs them."""
    reasons = []
    for target in weakening.breaks:
        mine = case_outcomes(target, outcomes)
        module = outcomes.get(target.split("::", 1)[0] + "#module-skipped#why")
        if not mine and module is not None:
            reasons.append(f"{target}: {module}")
        elif mine and all(v == "skipped" for v in mine.values()):
            why = sorted({outcomes.get(k + "#why", "no reason given") for k in mine})
            reasons.append(f"{target}: {'; '.join(why)}")
        elif not (mine and any(v == "failed" for v in mine.values())
                  and all(v in ("failed", "passed") for v in mine.values())):
            return None
    return " | ".join(reasons) if reasons else None


def judge(weakening: Weakening, outcomes: Mapping[str, str], exit_status: int) -> tuple[bool, str]:
    """Shown when each target has a failed test and no skipped one (pure)."""
    if not weakening.breaks:
        return False, "the patch names no case (# breaks: line missing)"
    if outcomes.get("__imported_from_copy__") != "checked":
        return False, f"the child did not confirm it imported the copy (exit {exit_status})"
    problems = []
    for target in weakening.breaks:
        mine = case_outcomes(target, outcomes)
        if not mine:
            problems.append(f"{target}: not collected")
        elif any(v == "skipped" for v in mine.values()):
            skipped = [k for k, v in mine.items() if v == "skipped"]
            problems.append(f"{target}: skipped in the weakened build ({', '.join(skipped)}), so not shown")
        elif not any(v == "failed" for v in mine.values()):
            errors = [k for k, v in mine.items() if v == "error"]
            why = outcomes.get(errors[0] + "#why", "") if errors else ""
            problems.append(f"{target}: set-up errors only ({', '.join(errors)}: {why}), no failing case"
                            if errors else f"{target}: still passes against the weakened build")
    if problems:
        return False, "; ".join(problems)
    return True, ", ".join(f"{t}: failed" for t in weakening.breaks)


def make_copy(repo: Path, into: Path) -> Path:
    """A copy of the repository with a symlinked ``no_docker`` package for PYTHONPATH."""
    copy = into / "repo"
    shutil.copytree(repo, copy, ignore=IGNORE, symlinks=True)
    pkg = into / "path" / "no_docker"
    pkg.mkdir(parents=True)
    for part in PARTS:
        if (copy / part).is_dir():
            (pkg / part).symlink_to(copy / part)
    (into / "path" / "_nd_weakened_plugin.py").write_text(PLUGIN)
    return copy


def patched_paths(patch_text: str) -> list[str]:
    """The repo-relative paths a unified diff writes (its ``+++ b/`` lines; pure)."""
    return [line[6:].split("\t")[0].strip() for line in patch_text.splitlines() if line.startswith("+++ b/")]


def drop_stale_bytecode(copy: Path, paths: Iterable[str]) -> None:
    """Remove the cached bytecode of each patched module, so only its new source is run."""
    for rel in paths:
        source = copy / rel
        if source.suffix == ".py":
            for cached in (source.parent / "__pycache__").glob(source.stem + ".*.pyc"):
                cached.unlink()


def apply_patch(copy: Path, patch: Path) -> str | None:
    """``git apply`` the patch in the copy (its own repository); the error text, or None."""
    subprocess.run(["git", "init", "-q", str(copy)], check=True, capture_output=True, timeout=120)
    done = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=copy,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return done.stderr.strip() or f"git apply exited {done.returncode}"
    drop_stale_bytecode(copy, patched_paths(patch.read_text()))
    return None


def contained(argv: list[str]) -> list[str]:
    """argv in a pid namespace of its own, when we may make one (root).

    A weakened *ending* leaves processes behind by design, and a failing case may not reap
    them all; as pid 1 of its own namespace the child pytest takes every one of them with it
    when it exits (pid_namespaces(7)), and ``--kill-child`` does the same if the harness kills
    ``unshare`` on a timeout.
    """
    # setpriv --pdeathsig: the child is SIGKILLed when the thread that started it ends, so a
    # harness that is itself killed (the suite's run beside the tests, ended at the session's
    # end) takes its children with it (prctl(2) PR_SET_PDEATHSIG, kept across execve; no
    # privilege needed)
    death = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return [*death, *argv]
    return [*death, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
            sys.executable, "-I", "-S", "-c", REAPER, *argv]


# pid 1 of the child's namespace: runs argv and reaps every orphan until argv ends, so that the
# cases see no zombie that a real machine's init would have reaped (pid_namespaces(7)).
REAPER = """
import os, sys
child = os.fork()
if child == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
        sys.exit(code if code >= 0 else 128 - code)
"""


def run_one(repo: Path, weakening: Weakening, workroot: Path, timeout: float = CHILD_TIMEOUT,
            stop_at_first: bool = False) -> Result:
    """Apply the weakening to a copy and run its cases there. STOP_AT_FIRST: each target ends at
    its first failed test (enough to show it; the suite's mode), else every test runs (the
    table's counts)."""
    started = time.monotonic()
    try:
        return _run_one(repo, weakening, workroot, timeout, stop_at_first, started)
    except (OSError, shutil.Error, ValueError, subprocess.SubprocessError) as error:
        # one weakening's trouble (a copy of a tree that changed under it...) is its own result
        return Result(weakening, False, f"the harness could not run it: {type(error).__name__}: {error}",
                      time.monotonic() - started)


def _run_one(repo: Path, weakening: Weakening, workroot: Path, timeout: float, stop_at_first: bool,
             started: float) -> Result:
    workroot.mkdir(parents=True, exist_ok=True)
    into = Path(tempfile.mkdtemp(prefix=weakening.path.stem[:40] + "-", dir=workroot))
    try:
        copy = make_copy(repo, into)
        error = apply_patch(copy, weakening.path)
        if error:
            return Result(weakening, False, f"the patch no longer applies: {error}",
                          time.monotonic() - started)
        outcomes_file = into / "outcomes.json"
        env = dict(os.environ)
        path = os.pathsep.join([str(into / "path"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(PYTHONPATH=path,
                   NO_DOCKER_WEAKENED_COPY=str(copy), NO_DOCKER_WEAKENED_OUTCOMES=str(outcomes_file))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if stop_at_first:
            env["NO_DOCKER_WEAKENED_STOP_AT_FIRST"] = json.dumps(list(weakening.breaks))
        else:
            env.pop("NO_DOCKER_WEAKENED_STOP_AT_FIRST", None)
        argv = contained([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "_nd_weakened_plugin", "--rootdir", str(copy), *weakening.breaks])
        try:
            done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return Result(weakening, False, f"the weakened cases did not finish within {timeout:.0f} s",
                          time.monotonic() - started)
        outcomes = json.loads(outcomes_file.read_text()) if outcomes_file.exists() else {}
        shown, detail = judge(weakening, outcomes, done.returncode)
        if not outcomes:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            detail += f" [child exit {done.returncode}: {' | '.join(tail)}]"
        return Result(weakening, shown, detail, time.monotonic() - started, outcomes)
    finally:
        shutil.rmtree(into, ignore_errors=True)


def run_all(repo: Path, weakenings: Iterable[Weakening], workroot: Path,
            workers: int = 2, stop_at_first: bool = False, remove_leaves: bool = True) -> dict[Path, Result]:
    """Every weakening, WORKERS at a time; REMOVE_LEAVES: rmdir the empty run cgroups that
    appeared meanwhile (off where other runs start beside this one: their owner removes them)."""
    items = list(weakenings)
    leaves_before = run_cgroup_leaves()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda w: run_one(repo, w, workroot, stop_at_first=stop_at_first), items))
    if remove_leaves:
        remove_empty_leaves(run_cgroup_leaves() - leaves_before)
    return {r.weakening.path: r for r in results}


# --------------------------------------------------------------------------- beside the suite
#
# The suite runs the weakened builds in a process of their own, started when collection ends
# (tests/regression/conftest.py) and detached (nobody's child in the test process), while the
# other tests run, which leave part of the two cores idle (waits, bounds, sleeps): on a slow
# machine of this kind the suite went from 1140 s to 966 s, where the harness alone took
# 233-263 s. Its results reach test_weakened.py as one JSON file.

RESULTS_NAME = "results.json"
WEAKENED_TEST = "test_weakened_build_fails_its_cases"  # test_weakened.py's, one item per patch


def selected_patches(items: Iterable[object]) -> list[Path]:
    """The patches of the weakened tests among a session's items (``-k`` narrows them)."""
    return [item.callspec.params["patch"] for item in items  # type: ignore[attr-defined]
            if getattr(item, "originalname", "") == WEAKENED_TEST and hasattr(item, "callspec")
            and item.callspec.params.get("patch") is not None]  # type: ignore[attr-defined]


def result_doc(results: Mapping[Path, Result], leaves_before: Iterable[str]) -> dict:
    """What the background harness writes (pure): each weakening's verdict, and the run cgroups
    that existed before it started (the suite removes the empty ones that appeared after)."""
    return {"leaves_before": sorted(leaves_before),
            "results": {str(path): {"shown": r.shown, "detail": r.detail, "seconds": r.seconds,
                                    "outcomes": r.outcomes}
                        for path, r in results.items()}}


def results_of_doc(doc: Mapping) -> dict[Path, Result]:
    """The Results a background harness's document holds (pure; the inverse of result_doc)."""
    return {Path(path): Result(load(Path(path)), item["shown"], item["detail"], item["seconds"],
                               item["outcomes"])
            for path, item in doc["results"].items()}


class Background:
    """The harness running beside the suite: a pidfd on it (it is nobody's child here) and the
    directory its results land in."""

    def __init__(self, patches: list[Path], workers: int, parent: Path) -> None:
        from detached import start_detached  # tests/: the suite's helper, not the harness's

        self.patches, self.started = list(patches), time.monotonic()
        parent.mkdir(parents=True, exist_ok=True)
        # this session's own: another session in the same checkout has its own results and copies
        self.out = Path(tempfile.mkdtemp(prefix="weakened-bg-", dir=parent))
        self.pidfd = start_detached([sys.executable, str(Path(__file__).resolve()), "--background",
                                     str(self.out), str(workers), str(os.getpid()),
                                     *map(str, self.patches)])
        if self.pidfd is None:
            shutil.rmtree(self.out, ignore_errors=True)
            raise OSError("the weakened builds' harness did not start")

    def wait(self, timeout: float) -> dict[Path, Result]:
        """Its results, once it has exited (a pidfd is readable then, pidfd_open(2)); an error
        naming what went wrong if it wrote none or is still running after TIMEOUT seconds."""
        import select

        if not select.select([self.pidfd], [], [], timeout)[0]:
            raise TimeoutError(f"the weakened builds' harness still runs after {timeout:.0f} s")
        try:
            doc = json.loads((self.out / RESULTS_NAME).read_text())
        except (OSError, ValueError) as error:
            raise RuntimeError(f"the weakened builds' harness ended without results ({error})") from None
        if "error" in doc:
            raise RuntimeError(f"the weakened builds' harness stopped: {doc['error']}")
        self.leaves_before = set(doc["leaves_before"])
        return results_of_doc(doc)

    def stop(self) -> None:
        """End it if it still runs (the session ends first: a failure, -x, Ctrl-C); its children
        die with it (PDEATHSIG). The pidfd names this process and no other, whatever pid reuse."""
        import select
        import signal

        if self.pidfd is None:
            return
        try:
            if not select.select([self.pidfd], [], [], 0)[0]:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                select.select([self.pidfd], [], [], 10)
        except ProcessLookupError:
            pass
        finally:
            os.close(self.pidfd)
            self.pidfd = None
            shutil.rmtree(self.out, ignore_errors=True)  # its copies, which a killed harness left


BACKGROUND_KEY: pytest.StashKey[Background] = pytest.StashKey()  # config.stash: this session's


def _end_with(owner: int) -> None:
    """Exit when the test session OWNER ends however it ends (SIGKILL included, where its
    sessionfinish never runs): a thread waits on a pidfd of it, taken first thing (a pid already
    gone then is refused: we exit); PDEATHSIG then takes our children."""
    import select
    import threading

    try:
        fd = os.pidfd_open(owner)
    except OSError:
        os._exit(1)

    def watch() -> None:
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def background_main(argv: list[str]) -> int:
    """``weakened_harness.py --background OUT_DIR WORKERS OWNER_PID PATCH...``: run the
    weakenings (each target to its first failure) and write OUT_DIR/results.json whole (a
    rename), or the error that stopped it. Background.stop's SIGKILL or OWNER's end ends it,
    and with it (PDEATHSIG, contained) every child it started."""
    out, workers, owner, patches = Path(argv[0]), int(argv[1]), int(argv[2]), [Path(p) for p in argv[3:]]
    repo = Path(__file__).resolve().parents[2]
    _end_with(owner)
    leaves_before: set[str] = set()
    try:
        leaves_before = run_cgroup_leaves()
        results = run_all(repo, [load(p) for p in patches], out / "copies",
                          workers=workers, stop_at_first=True, remove_leaves=False)
        doc = result_doc(results, leaves_before)
    except Exception as error:  # the suite shows it as each weakened test's failure
        doc = {"leaves_before": sorted(leaves_before), "error": f"{type(error).__name__}: {error}"}
    part = out / (RESULTS_NAME + ".part")
    part.write_text(json.dumps(doc))
    part.rename(out / RESULTS_NAME)
    return 0


def run_cgroup_leaves() -> set[str]:
    """The run cgroups (``<our cgroup>/no-docker/<id>``, v2 and v1 pids) that exist now."""
    from no_docker.supervisor.ending import cgroup

    groups = [os.path.join(cgroup.V1_PIDS_ROOT, cgroup.GROUP_DIR)]
    try:
        parent = cgroup.v2_parent()
    except OSError:
        parent = None
    if parent is not None:
        groups.append(os.path.join(parent, cgroup.GROUP_DIR))
    leaves = set()
    for group in groups:
        try:
            leaves.update(entry.path for entry in os.scandir(group) if entry.is_dir())
        except OSError:
            continue
    return leaves


def remove_empty_leaves(leaves: Iterable[str], min_age: float = 2.0) -> None:
    """rmdir the run cgroups the weakened builds left (a weakened ending may drop its marker
    while its cgroup is still busy, so nothing else would ever remove them). Only leaves that
    appeared while the children ran, are at least MIN_AGE seconds old (a run of someone else
    that has just made its leaf and not yet spawned into it is younger) and empty: rmdir(2)
    refuses a cgroup with a member (EBUSY), so a live run's cgroup stays."""
    now = time.time()
    for leaf in leaves:
        try:
            if now - os.stat(leaf).st_mtime >= min_age:
                os.rmdir(leaf)
        except OSError:
            continue


T_FILE = re.compile(r"tests/regression/(test_t(\d\d)_\w+\.py)")
_NUMBERS = re.compile(r"^test_((?:t\d\d_)+)")


def case_numbers(file_name: str) -> list[str]:
    """``test_t14_t23_pins.py`` -> ``["14", "23"]``: the T-cases a test file covers (pure)."""
    match = _NUMBERS.match(file_name)
    return re.findall(r"\d\d", match.group(1)) if match else []


# DESIGN §8: T-00..T-39 (no 11, 21, 22) and the lifetime cases T-40..T-46; the issues number
# their cases on from T-47 (issue 16: "DESIGN §8 numbering goes on after T-46"): T-47 the
# state dir, T-48 nested user namespaces, T-49 a frozen init, T-50 child cgroups, T-51 the kill
# count, T-53.. code that runs later.
DESIGN_CASES = tuple(f"{n:02d}" for n in range(47) if n not in (11, 21, 22))
FIRST_ISSUE_CASE = 47


def uncovered_cases(test_files: Iterable[str], weakenings: Iterable[Weakening]) -> list[str]:
    """T-case files that no weakening names in its ``# breaks:`` lines (pure)."""
    named = {target.split("::", 1)[0] for w in weakenings for target in w.breaks}
    return sorted(f for f in test_files if f not in named)


# --------------------------------------------------------------------------- the documentation table

TABLE_BEGIN = "<!-- the table below is generated: python tests/regression/weakened_harness.py --doc -->"
TABLE_END = "<!-- end of the generated table -->"


def first_paragraph(docstring: str | None) -> str:
    """The first paragraph of a module docstring, on one line, without the ``T-NN:`` prefix."""
    text = (docstring or "").strip().split("\n\n", 1)[0]
    text = " ".join(text.split())
    return re.sub(r"^T-\d\d\s*[:\-]\s*", "", text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(cases: Mapping[str, str], results: Iterable[Result]) -> str:
    """Markdown rows: case, what it proves, how it was weakened, that it failed (pure)."""
    by_case: dict[str, list[Result]] = {}
    for result in results:
        for target in result.weakening.breaks:
            match = T_FILE.search(target)
            if match:
                rows = by_case.setdefault(match.group(1), [])
                if result not in rows:
                    rows.append(result)
    lines = ["| case | what it proves | how it was weakened | failed against it |", "|---|---|---|---|"]
    files_by_number: dict[str, list[str]] = {}
    for test_file in cases:
        for number in case_numbers(test_file):
            files_by_number.setdefault(number, []).append(test_file)
    for number in sorted(set(DESIGN_CASES) | set(files_by_number)):
        if number not in files_by_number:
            lines.append(f"| T-{number} | no test yet | - | - |")
        for test_file in sorted(files_by_number.get(number, [])):
            weakenings = by_case.get(test_file, [])
            how = "<br>".join(f"`{r.weakening.path.name}`: {_cell(r.weakening.why)}"
                              for r in weakenings) or "none yet"
            failed = "<br>".join(_result_cell(r, test_file) for r in weakenings) or "not shown"
            lines.append(f"| T-{number} `{test_file}` | {_cell(cases[test_file])} | {how} | {failed} |")
    return "\n".join(lines)


def _result_cell(result: Result, test_file: str) -> str:
    mine = {k: v for k, v in result.outcomes.items()
            if k.startswith(f"tests/regression/{test_file}") and not k.endswith("#why")}
    failed = sum(v == "failed" for v in mine.values())
    if result.shown:
        return f"yes: {failed} of {len(mine)} tests failed"
    return f"NOT SHOWN: {_cell(result.detail)[:200]}"


def _main(argv: list[str]) -> int:  # pragma: no cover - a maintenance command, run by hand
    import ast

    if argv != ["--doc"]:
        print("usage: python tests/regression/weakened_harness.py --doc", file=sys.stderr)
        return 2
    repo = Path(__file__).resolve().parents[2]
    cases = {}
    for path in sorted((repo / "tests" / "regression").glob("test_t[0-9][0-9]_*.py")):
        cases[path.name] = first_paragraph(ast.get_docstring(ast.parse(path.read_text())))
    patches = sorted((repo / "tests" / "regression" / "weakened").glob("*.patch"))
    results = run_all(repo, [load(p) for p in patches], repo / ".pytest_cache" / "weakened",
                      workers=int(os.environ.get("NO_DOCKER_WEAKENED_WORKERS", "2")))
    doc = repo / "docs" / "regression-cases.md"
    text = doc.read_text()
    start, end = text.index(TABLE_BEGIN) + len(TABLE_BEGIN), text.index(TABLE_END)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table = render_table(cases, results.values())
    doc.write_text(f"{text[:start]}\n\n_Last run of the harness: {stamp}._\n\n{table}\n\n{text[end:]}")
    print(table)
    return 0


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:2] == ["--background"]:
        sys.exit(background_main(sys.argv[2:]))
    sys.exit(_main(sys.argv[1:]))
