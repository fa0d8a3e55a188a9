"""pytest plugin: ``pytest --no-docker`` runs the whole session under ``no-docker run``.

Enabled by ``--no-docker`` or the ini option ``no_docker = true``. As soon as pytest has
registered this plugin (its ``pytest11`` entry point is loaded after pytest has found the ini
file and read the arguments, ``addopts`` and ``PYTEST_ADDOPTS`` included, so both are known),
and before pytest loads the rest of the environment's plugins, ``PYTEST_PLUGINS`` or a single
conftest.py (they import the code under test), the plugin decides whether this process already
runs inside a run:

- ``no-docker check`` exits 0: it does, proven from inside; the session goes on. (Without the
  run plan that bubblewrap puts at PLAN_PATH inside every run the check cannot pass, so where
  there is none, or an empty one, it is not started: the answer is known.)
- otherwise: pytest re-executes itself, same interpreter, options and arguments, as
  ``no-docker run -- python ... pytest ARGS`` (``exec``: the outside process is replaced, so a
  signal to it, e.g. a cancelled CI step, reaches ``no-docker run``, which ends every process
  of the run). The exit status is the inner session's own; 125 when the isolation cannot be
  proven, and then no test ran.

It never trusts a variable that *claims* isolation. ``NO_DOCKER_PYTEST_REEXEC``, passed into
the run, only says "this session was already re-executed": if ``check`` still fails there, the
session stops with 125 instead of nesting another run. A pytest started in-process by another
program (``pytest.main()`` from mutmut, an IDE) cannot be replaced; outside a run it stops with
125 and says to run that program under ``no-docker run`` instead.

``pytest_load_initial_conftests`` decides again on pytest's final reading of the arguments (all
plugins' options known), as it did before the registration point existed: for what the
registration could not read (a plugin object handed to ``pytest.main(plugins=...)`` is
registered before pytest has read its ini file).

When the option is off the plugin adds its option and ini key and does nothing else: no
process, no import beyond the standard library.
"""

from __future__ import annotations

import copy
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

REEXEC_VAR = "NO_DOCKER_PYTEST_REEXEC"
EXIT_NOT_PROVEN = 125
# pytest reads these; the run passes only an allowlist of variables, so they are named.
PASSED_VARS = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTHONPATH")
# supervisor/isolation/policy.py's PLAN_PATH (a unit test ties the two): `no-docker check` reads
# the run plan there and fails every property without it. Not imported: the plugin imports
# nothing of the supervisor.
PLAN_PATH = "/run/no-docker-run/plan.json"

# The proof is kept in this process's memory, never in the environment. A process forked from
# a proven one (mutmut forks one per mutant) inherits it soundly: fork cannot leave the pid and
# network namespaces, and setns() would need capabilities the run dropped.
_proven_by: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("no-docker", "no-docker isolation")
    group.addoption(
        "--no-docker",
        action="store_true",
        default=False,
        dest="no_docker",
        help="run the whole session under `no-docker run` (re-executes pytest unless `no-docker check` "
        "proves it already runs inside one); exit 125 when the isolation cannot be proven",
    )
    parser.addini(
        "no_docker",
        type="bool",
        default=False,
        help="same as --no-docker; add `required_plugins = no-docker` so a missing plugin fails",
    )


def _enabled(config: pytest.Config, namespace: object | None = None) -> bool:
    if getattr(config.known_args_namespace if namespace is None else namespace, "no_docker", False):
        return True
    try:
        return bool(config.getini("no_docker"))
    except (ValueError, pytest.UsageError) as err:
        raise pytest.UsageError(f"ini option no_docker: {err} (use true or false)") from None


def _no_docker(*args: str) -> list[str]:
    """The no-docker command line: the same interpreter, so the venv without it on PATH works.
    ``-I``: not the current directory first on the path (the project dir, which a previous run
    wrote: a ``no_docker`` package left there would run instead, outside, as us; red-team
    review), nor PYTHONPATH."""
    return [sys.executable, "-I", "-m", "no_docker.supervisor.cli", *args]


def _stop(message: str) -> None:
    sys.stdout.flush()
    print(f"no-docker: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_NOT_PROVEN)


def _is_pytest_main_program(config: pytest.Config) -> bool:
    """True when this process *is* pytest (``pytest ...`` or ``python -m pytest ...``), so it can
    be replaced; False for ``pytest.main()`` called by another program."""
    argv0 = Path(sys.argv[0]) if sys.argv else Path()
    is_pytest = argv0.name in ("pytest", "py.test") or (
        argv0.name == "__main__.py" and argv0.parent.name == "pytest"
    )
    return is_pytest and list(config.invocation_params.args) == sys.argv[1:]


def reexec_argv(
    orig_argv: list[str],
    argv: list[str],
    executable: str,
    passed: list[str],
    ro: list[str] | None = None,
    work: str | None = None,
) -> list[str]:
    """``no-docker run -- <this pytest command>``: the interpreter, its options and the script or
    ``-m pytest`` taken from ``sys.orig_argv``, the arguments from ``sys.argv``."""
    head = orig_argv[1 : len(orig_argv) - len(argv) + 1]
    keep = [opt for name in (REEXEC_VAR, *passed) for opt in ("--keep-env", name)]
    visible = [opt for path in ro or [] for opt in ("--ro", path)]
    return [
        executable,
        "-I",  # see _no_docker
        "-m",
        "no_docker.supervisor.cli",
        "run",
        *(["--work", work] if work else []),
        *keep,
        *visible,
        "--",
        executable,
        *head,
        *argv[1:],
    ]


def work_dir(rootdir: str, cwd: str, home: str) -> str | None:
    """The run's work dir: pytest's rootdir (where its ini file is, usually the project's root),
    so a session started from a subdirectory sees its whole project; None (the current directory,
    as ``no-docker run`` does) when the current directory is not inside it, or when it is $HOME
    or / (which a run refuses to write)."""
    root, here = os.path.realpath(rootdir), os.path.realpath(cwd)
    if root in ("/", os.path.realpath(home) if home else "/"):
        return None
    return root if here == root or here.startswith(root.rstrip("/") + "/") else None


def plugin_dirs(prefixes: list[str]) -> list[str]:
    """The re-executed pytest must import this plugin again. Installed normally it lies in the
    environment, which the run shows; an editable install maps it to a source tree that the run
    would not show, so that tree is made visible (read-only)."""
    here = str(Path(__file__).resolve().parent)
    inside_prefix = any(here == p or here.startswith(p.rstrip("/") + "/") for p in prefixes)
    return [] if inside_prefix else [here]


def certainly_outside(plan_path: str = PLAN_PATH) -> bool:
    """True when ``no-docker check`` cannot pass here: no run plan, or an empty one
    (check.load_plan reads it as this user, following links as open() does, and an empty
    plan fails P1, the first property). A bubblewrap sandbox that binds the host's / writable
    leaves an empty file there, the mount point of its ``--ro-bind-data``. Only ever used to
    skip a check whose answer would be "not inside", so a wrong True can only cost a re-exec
    into a nested run (refused there, 125); a plan with content proves nothing: the check runs."""
    try:
        found = os.stat(plan_path)
    except OSError:
        return True  # check.load_plan: what cannot be opened is an empty plan
    return stat.S_ISREG(found.st_mode) and found.st_size == 0


def session_args(addopts: list[str], env_addopts: str, args: list[str]) -> list[str]:
    """The arguments pytest's ``Config.parse`` ends up with: the ini's ``addopts``, then
    ``PYTEST_ADDOPTS``, then the command line (``_pytest/config/__init__.py``: each is put in
    front of what is there)."""
    return [*addopts, *shlex.split(env_addopts), *args]


def _check() -> tuple[bool, str]:
    import subprocess

    try:
        proof = subprocess.run(
            _no_docker("check"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"no-docker check could not run ({err})"
    lines = (proof.stderr or proof.stdout).strip().splitlines()
    return proof.returncode == 0, lines[-1] if lines else f"no-docker check exited {proof.returncode}"


def _early_namespace(config: pytest.Config) -> object | None:
    """pytest's reading of the arguments at this plugin's registration, with its options known;
    None when pytest has not read its arguments and ini file yet (a plugin registered before
    ``Config.parse``), or cannot read them here: the later hook decides then."""
    try:
        config.rootpath  # noqa: B018 - set by Config.parse once it has found the ini file
        args = session_args(
            list(config.getini("addopts")),
            os.environ.get("PYTEST_ADDOPTS", ""),
            list(config.invocation_params.args),
        )
        return config._parser.parse_known_args(args, namespace=copy.copy(config.option))
    except (AttributeError, ValueError, pytest.UsageError):
        return None


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    """This plugin's own registration: the earliest point it gets. pytest has found the ini file
    and the rootdir and read the arguments; it has not yet loaded the pytest11 entry points that
    come after this one, ``PYTEST_PLUGINS``, nor any conftest.py; its capture has not started."""
    if plugin is not sys.modules[__name__]:
        return  # a historic hook: called for every plugin, before and after this one
    config = manager.get_plugin("pytestconfig")
    namespace = None if config is None else _early_namespace(config)
    if config is not None and namespace is not None:
        _isolate(config, namespace)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before any conftest.py, before collection: pytest's final reading of the arguments, for
    what the registration could not decide."""
    _isolate(early_config, early_config.known_args_namespace)


def _isolate(config: pytest.Config, namespace: object) -> None:
    """Go on when the isolation is proven, else re-execute under ``no-docker run`` or refuse."""
    global _proven_by
    if _proven_by is not None or not _enabled(config, namespace):
        return
    # `--help` and `--version` are re-executed as a session is: pytest imports the initial
    # conftest.py files (`testpaths`' included) to list their options before it prints its help
    # (red-team pass 4, B6), and its own shortcut for the version is only a lone `--version` on
    # the command line: `-qV`, `-VV` or a `--version` from addopts/PYTEST_ADDOPTS import the
    # conftest.py files, or run the whole session (red-team pass 5)
    reexecuted, detail = bool(os.environ.get(REEXEC_VAR)), "no run plan here"
    if reexecuted or not certainly_outside():
        inside, detail = _check()
        if inside:
            _proven_by = "no-docker check passed inside this run"
            return
    # A refusal below raises SystemExit; from the late hook it goes through pytest's capture hook
    # wrapper, which writes what was captured (the message) out on its way.
    if reexecuted:
        _stop(
            f"pytest --no-docker: re-executed under no-docker run, but the isolation is not proven: {detail}"
        )
    if not _is_pytest_main_program(config):
        _stop(
            f"pytest --no-docker: pytest was started in-process by {(sys.argv or ['?'])[0]!r} outside "
            "no-docker run and cannot re-execute itself; run that program under `no-docker run -- ...`"
        )
    passed = [name for name in PASSED_VARS if name in os.environ]
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)]
    work = work_dir(str(config.rootpath), os.getcwd(), os.environ.get("HOME", ""))
    argv = reexec_argv(
        list(sys.orig_argv), list(sys.argv), sys.executable, passed, plugin_dirs(prefixes), work
    )
    # From the late hook, pytest's capture plugin (a hook wrapper around it) has already put
    # temporary files on fds 1 and 2; the new process must get the real ones back, or its output
    # is lost. At the registration capture has not started: this does nothing.
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, argv, {**os.environ, REEXEC_VAR: "1"})
    except OSError as err:
        _stop(f"pytest --no-docker: cannot start no-docker run ({err})")


def pytest_report_header(config: pytest.Config) -> str | None:
    if _proven_by is None:
        return None
    return f"no-docker: isolated ({_proven_by})"
