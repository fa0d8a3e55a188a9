"""The ``no-docker`` command line: a thin dispatcher.

Each subcommand lives in the module that owns it and exposes ``main(argv) -> int``. The
modules are imported only when their subcommand runs: ``no-docker run`` must not pay for
aiohttp or tree-sitter (DESIGN §2).
"""

from __future__ import annotations

import os
import sys

from . import EARLY_SIGNALS, defer_gc, release_early_signals, resume_gc
from .errors import EXIT_NOT_PROVEN, EXIT_USAGE, NoDockerError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs on every run's start
    from typing import TextIO

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("no_docker.supervisor.run", "run CMD with no route to any container engine"),
    "check": ("no_docker.supervisor.isolation.check",
              "prove the isolation from inside (exit 0 inside a run)"),
    "end": ("no_docker.supervisor.ending.end_command", "end leftover runs (alias: --end)"),
    "runs": ("no_docker.supervisor.ending.runs", "list runs and their state"),
    "prove": ("no_docker.supervisor.proving.prove",
              "the main job: canary, pinned mutant with and without isolation"),
    "canary": ("no_docker.canary.cli", "the fake engine: serve, show"),
    "mutants": ("no_docker.mutants.cli", "payloads: lint, verify, review, apply"),
    "guard": ("no_docker.ci.guard", "CI guard checks of a repository"),
    "stanza": ("no_docker.ci.stanza", "print the shell re-exec stanza for bash test suites"),
    "mutation-summary": ("no_docker.ci.cosmic_ray",
                         "after a cosmic-ray session: which mutants tried to reach an engine"),
}

ALIASES = {"--end": "end"}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("no-docker")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: no-docker COMMAND [ARG...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    lines += ["", "options:", "  --version   print no-docker's version", "  -h, --help  this help",
              "", "no-docker COMMAND --help shows the options of one command.",
              "Exit status: the command's own; 125 not proven; 126/127 not executable/not found; 2 usage."]
    return "\n".join(lines)


def did_you_mean(word: str) -> str:
    """`` (did you mean 'run'?)`` for a mistyped command, or nothing when none is close."""
    import difflib  # only on this error path

    close = difflib.get_close_matches(word, [*COMMANDS, "--version", "--help"], n=2, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    early = EARLY_SIGNALS[0] if EARLY_SIGNALS else None
    if args[:1] != ["run"]:
        # `run` takes the ending signals over from the early handlers (run._Signals); every other
        # command gets back Python's own (KeyboardInterrupt, below: 130).
        early = release_early_signals()
    if early is not None:
        return 128 + early  # a signal before anything was started
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else EXIT_USAGE
    if args[0] == "--version":
        print(f"no-docker {version()}")
        return 0
    name = ALIASES.get(args[0], args[0])
    if name not in COMMANDS:
        print(f"no-docker: unknown command {args[0]!r}{did_you_mean(args[0])}; try no-docker --help",
              file=sys.stderr)
        return EXIT_USAGE
    module_name = COMMANDS[name][0]
    if name == "run" and argv is None:
        # As the command only (a caller of main() in-process keeps its GC as it is): off until
        # the sandbox is started (supervisor/__init__.py), 1-2 ms of every run.
        defer_gc()
    try:
        return _main(name, module_name, args)
    finally:
        resume_gc(freeze=False)  # a run that never started its sandbox (or main called in-process)


def _main(name: str, module_name: str, args: list[str]) -> int:
    try:
        __import__(module_name)  # not importlib.import_module: importlib costs on every run
        module = sys.modules[module_name]
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as err:
        if err.name is None or not module_name.startswith(err.name):
            raise
        print(f"no-docker: {name}: this installation lacks {module_name}; reinstall no-docker",
              file=sys.stderr)
        return EXIT_NOT_PROVEN
    try:
        return int(module.main(args[1:]))
    except NoDockerError as err:
        print(f"no-docker: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout was closed early (`no-docker prove --help | head`): not an error of ours, and
        # never a traceback. Later flushes go to /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + 13  # as if SIGPIPE had ended us, as it ends other commands


def console_main() -> None:
    """The ``no-docker`` console script: ``main()``, then exit.

    ``run`` leaves without the interpreter's teardown (``os._exit`` once stdout and stderr are
    flushed): its status is final, it leaves no thread, file or atexit handler that needs it,
    and the teardown of the imported modules measured 4-5 ms of every ``run -- true``
    (DESIGN §10). Every other command exits normally. ``main()`` itself never exits early,
    so calling it in-process stays safe.
    """
    try:
        status = main()
    except BrokenPipeError:  # `no-docker --help | head -0` with PYTHONUNBUFFERED: at the print itself
        _drop_stream(sys.stdout)
        status = 128 + 13
    except SystemExit as leaving:  # argparse's own exits (--help, a usage error): flushed below too
        code = leaving.code
        if code is None or isinstance(code, int):
            status = code or 0
        else:
            print(code, file=sys.stderr)
            status = 1
    run = sys.argv[1:2] == ["run"]
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # the caller started us with that fd closed
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            # Its reader is gone (`no-docker prove --help | head -0`). On a pipe stdout is
            # block-buffered, so a short text meets the error only here, at the last flush;
            # left to the interpreter it prints "Exception ignored" and exits 120. Like a
            # command that SIGPIPE ended: 141, or a run's own status (CMD's, already final).
            _drop_stream(stream)
            if not run and status == 0:
                status = 128 + 13
        except (OSError, ValueError):
            sys.exit(status)  # let the interpreter report any other broken stream as usual
    if run:
        os._exit(status)
    sys.exit(status)


def _drop_stream(stream: TextIO) -> None:
    """Point STREAM's fd at /dev/null, so that no later flush (the interpreter's) fails again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    console_main()
