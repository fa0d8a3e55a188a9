"""The T-series harness: the outer guard fixture, shared helpers, and the completeness summary.

Every case that needs a real engine path runs inside an :class:`OuterGuard` (DESIGN §8): a
mount + pid + network namespace where tmpfs hides the host's engine paths and the canary,
and only the canary, answers on them. A part that is missing (the canary, ``no-docker run``,
the payload tools) makes a case *fail* with what it waits for; a prerequisite of the machine
that is missing (no unshare, no user namespaces) makes it *skip* with the reason, and then
the suite's summary says the T-series is INCOMPLETE: a skipped case never counts as passed.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = REPO / "mutants" / "payloads" / "reach-engine.sh"
PAYLOAD_NAME = "mutants/payloads/reach-engine.sh"  # its name in mutants/pins.json
MUTANT_MARKER = "# no-docker: mutant here"  # the line of the fixture target the payload follows
DEVENV = REPO / "tests" / "fixtures" / "devenv"
INCOMPLETE_KEY = "T-case(s) INCOMPLETE"  # shows in pytest's final summary line
T_CASE = re.compile(r"(?:^|/)tests/regression/test_t(\d\d)_\w+\.py")


# --------------------------------------------------------------------------- prerequisites


def require(module: str, what: str) -> ModuleType:
    """Import a part of no-docker, or FAIL (not skip) naming the part the case waits for."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        pytest.fail(f"waits for {what} ({module} is not importable: {err})", pytrace=False)


def skip_without_namespaces() -> None:
    """Skip (with the reason) when this machine cannot make the outer guard's namespaces."""
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}: install util-linux")
    if os.geteuid() != 0:
        with open("/proc/sys/user/max_user_namespaces") as fh:
            if int(fh.read().strip() or 0) == 0:
                pytest.skip("no user namespaces (user.max_user_namespaces = 0) and not root")
        probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "--net", "true"],
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"unprivileged user namespaces are disabled: {probe.stderr.strip()}")


def no_docker_argv(*args: str) -> list[str]:
    """``no-docker ARGS`` through the interpreter running the tests (a weakened copy's, too)."""
    return [sys.executable, "-m", "no_docker.supervisor.cli", *args]


# --------------------------------------------------------------------------- the outer guard


@pytest.fixture
def guard(tmp_path: Path) -> Iterator:
    """An outer guard for one test; ``tmp_path`` is visible inside at the same path."""
    skip_without_namespaces()
    outer_guard = require("no_docker.supervisor.proving.outer_guard", "supervisor/proving/outer_guard.py")
    require("no_docker.canary.cli", "the canary (canary/cli.py)")
    with outer_guard.OuterGuard(tmp_path / "canary.jsonl", share=[tmp_path]) as g:
        yield g


@pytest.fixture(scope="module")
def module_guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One outer guard shared by the cases of a module (one mutant run, many per-route checks)."""
    skip_without_namespaces()
    outer_guard = require("no_docker.supervisor.proving.outer_guard", "supervisor/proving/outer_guard.py")
    require("no_docker.canary.cli", "the canary (canary/cli.py)")
    lifetime = require("no_docker.supervisor.proving.lifetime", "supervisor/proving/lifetime.py")
    base = tmp_path_factory.mktemp("guard")
    # /srv (where it exists) gets a tmpfs of its own: the lifetime harness's engines bind there.
    scratch = lifetime.scratch_dirs()
    with outer_guard.OuterGuard(base / "canary.jsonl", share=[base], scratch=scratch) as g:
        g.base = base
        g.lifetime = lifetime.Harness(g, base, scratch)
        yield g


# --------------------------------------------------------------------------- the pinned mutant


def declared_routes() -> list:
    """The routes the pinned payload declares (``# route: ID (kind) description``)."""
    routes = require("no_docker.mutants.routes", "mutants/routes.py (declared_routes)")
    return routes.declared_routes(PAYLOAD)


def declared_route_ids(kind: str) -> list[str]:
    """Route ids of one kind, read at collection time so that every route is its own case.

    Read with a plain regex here (collection must not depend on the mutants package); the
    cases themselves compare against ``declared_routes`` and fail on any difference.
    """
    if not PAYLOAD.exists():
        return ["<payload missing>"]
    tag = re.compile(r"^# route: ([a-z0-9-]+) \((network|persistence)\)", re.M)
    return [rid for rid, k in tag.findall(PAYLOAD.read_text()) if k == kind] or ["<no routes>"]


def lifetime_route_ids() -> list[str]:
    """The payload's lifetime routes: they reach an engine only while the harness moves one."""
    return [rid for rid in declared_route_ids("network") if rid.startswith("lifetime-")]


def lifetime_gap(phase, route: str) -> str | None:
    """Why the lifetime harness shows nothing about ``route`` in this phase (None: it did)."""
    if route in phase.unarmed:
        return f"the lifetime harness could not arm {route}: {phase.unarmed[route]}"
    if phase.problems:
        return "; ".join(phase.problems)
    return None


def verify_pins() -> None:
    """The T-series checks the pinned payload (and helpers) before each use (T-14/T-23)."""
    pins = require("no_docker.mutants.pins", "mutants/pins.py (verify_copy)")
    pins.verify_copy(PAYLOAD, PAYLOAD_NAME)


def make_mutant(work: Path) -> Path:
    """The fixture target copied into ``work`` (a git repository), the payload applied into it."""
    verify_pins()
    if not DEVENV.is_dir():
        pytest.fail(f"waits for the fixture target {DEVENV.relative_to(REPO)}", pytrace=False)
    shutil.copytree(DEVENV, work, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=120)
    target = sorted(p for p in work.iterdir() if p.suffix in (".sh", ".py") and p.is_file())
    if not target:
        pytest.fail(f"{DEVENV} holds no .sh or .py target", pytrace=False)
    out = work / f"mutant{target[0].suffix}"
    done = subprocess.run(no_docker_argv("mutants", "apply", str(PAYLOAD), str(target[0]), "--out", str(out),
                                        "--at", MUTANT_MARKER),
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"no-docker mutants apply failed ({done.returncode}): {done.stderr.strip()}",
                    pytrace=False)
    return out


def mutant_argv(mutant: Path) -> list[str]:
    return ["bash", str(mutant)] if mutant.suffix == ".sh" else ["python3", str(mutant)]


def parse_route_log(text: str) -> dict:
    routes = require("no_docker.mutants.routes", "mutants/routes.py (parse_route_log)")
    return routes.parse_route_log(text)


def route_of(record: dict) -> str | None:
    try:
        from no_docker.canary.records import route_of as canary_route_of
    except ImportError:
        canary = require("no_docker.canary", "the canary's route_of")
        canary_route_of = canary.route_of
    return canary_route_of(record)


# --------------------------------------------------------------------------- completeness summary


def t_case_of(nodeid: str) -> str | None:
    """``tests/regression/test_t03_x.py::test_y`` -> ``T-03``; None for other tests."""
    match = T_CASE.search(nodeid)
    return f"T-{match.group(1)}" if match else None


def incomplete_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """One line per skipped T-case: ``T-NN nodeid: reason`` (pure; the hook prints them)."""
    return [f"{t_case_of(nodeid)} {nodeid}: {reason}" for nodeid, reason in skipped if t_case_of(nodeid)]


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = terminalreporter.stats
    skipped = [(r.nodeid, _skip_reason(r)) for r in stats.get("skipped", []) if hasattr(r, "nodeid")]
    ran = {t_case_of(r.nodeid) for key in ("passed", "failed", "error", "skipped")
           for r in stats.get(key, []) if hasattr(r, "nodeid") and t_case_of(r.nodeid)}
    if not ran:
        return
    lines = incomplete_lines(skipped)
    if lines:
        terminalreporter.section("T-series INCOMPLETE", sep="=", red=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"T-series: INCOMPLETE - {len(lines)} T-case test(s) skipped; "
                                    "a skipped case never counts as passed")
        # And in the final "=== N passed, M skipped ... ===" line: one entry per T-case.
        incomplete_cases = sorted({line.split()[0] for line in lines})
        # Entries look like reports: other plugins' summaries (hypothesis) read every stats value.
        terminalreporter.stats.setdefault(INCOMPLETE_KEY, []).extend(
            SimpleNamespace(nodeid=case, when="call", outcome="skipped", longrepr=None,
                            count_towards_summary=True) for case in incomplete_cases)
    else:
        terminalreporter.write_line(f"T-series: complete - {len(ran)} T-cases ran, none skipped")


# --------------------------------------------------------------------------- weakened builds

# Beside the rest of the suite (weakened_harness.Background): two at a time, as the other tests
# use the cores too; NO_DOCKER_WEAKENED_BACKGROUND=0 runs them in their test, alone.
BACKGROUND_WORKERS = 2
WEAKENED_TEST = "test_weakened_build_fails_its_cases"  # weakened_harness.WEAKENED_TEST


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The weakened builds' tests last: they wait for the harness, which runs meanwhile."""
    weakened = [item for item in items if getattr(item, "originalname", "") == WEAKENED_TEST]
    if weakened:
        chosen = set(weakened)
        items[:] = [item for item in items if item not in chosen] + weakened


def pytest_collection_finish(session: pytest.Session) -> None:
    if (session.config.option.collectonly or os.environ.get("NO_DOCKER_WEAKENED_BACKGROUND", "1") == "0"
            or not any(getattr(item, "originalname", "") == WEAKENED_TEST for item in session.items)):
        return
    import weakened_harness as wh  # only here: copies of this conftest have no harness beside them

    patches = wh.selected_patches(session.items)
    if not patches:
        return
    workers = int(os.environ.get("NO_DOCKER_WEAKENED_WORKERS", str(BACKGROUND_WORKERS)))
    try:
        session.config.stash[wh.BACKGROUND_KEY] = wh.Background(patches, workers, REPO / ".pytest_cache")
    except OSError:
        pass  # the weakened tests then run the builds themselves (test_weakened.weakened_results)


def pytest_sessionfinish(session: pytest.Session) -> None:
    wh = sys.modules.get("weakened_harness")
    background = session.config.stash.get(wh.BACKGROUND_KEY, None) if wh is not None else None
    if background is not None:
        background.stop()
