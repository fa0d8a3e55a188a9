"""no-docker's supervisor: the CLI, ``run``, and three rooms below them.

How the parts fit (``no-docker run -- CMD``):

- ``cli``        parses the command line and imports each subcommand lazily, so ``run`` never
                 pays for the canary (aiohttp) or the lint (tree-sitter).
- ``run``        builds the policy (``isolation``), opens the run's marker and cgroup
                 (``ending``), starts bwrap, waits for CMD, then ends the run and proves it.
- ``isolation/`` what a run may see, and proving it before CMD starts (P1-P13):
                 policy -> plan -> bwrap argv, the outside listing, the probe, the syscall
                 filter, ``check``.                        Doc: docs/isolation.md
- ``ending/``    ending every process of a run and proving none is left: /proc parsing,
                 markers, snapshot and verdict, cgroup, the ending algorithm, a run's
                 lifecycle, ``end``, ``runs``.              Doc: docs/supervision.md
- ``proving/``   the outer guard and ``prove``: the only room that uses the canary and the
                 payloads.                                  Doc: docs/regression-cases.md
- ``errors``, ``record``: shared by every room (exit codes and domain errors; light records).

Dependency rules (DESIGN §2, tested by tests/unit/test_layout.py): ``isolation`` and ``ending``
import nothing of ``canary``, ``mutants``, ``ci`` or ``proving``; the ``run`` path imports
neither aiohttp nor tree-sitter.
"""

# The ending signals, taken from the package's first line when it starts as the ``no-docker``
# command (docs/supervision.md: 130 from the first moment). Until ``run`` installs its own
# handlers (run._Signals), or another command gets them back (``release_early_signals``), a
# signal is only recorded: Python's own SIGINT handler would raise KeyboardInterrupt in the
# middle of an import (a traceback and exit 1, measured in 59 + 24 of 200 early Ctrl-Cs).
# ``_signal``, not ``signal``: the wrapper imports enum, a measurable part of every run; it is
# built in and already imported by the interpreter, so this costs microseconds. Only as the
# command: a program that imports the package (pytest with our plugin) keeps its handlers.
import _signal
import sys

EARLY_SIGNALS: list[int] = []  # what arrived while the early handlers were in place
_EARLY_PREVIOUS: dict[int, object] = {}


def _record_early(signum: int, _frame: object) -> None:
    EARLY_SIGNALS.append(signum)


def _started_as_the_command(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether this interpreter runs ``no-docker`` (its console script, or ``python -m
    no_docker.supervisor.cli``, whose package is imported while ``argv[0]`` is still "-m")."""
    if argv and argv[0].rpartition("/")[2] == "no-docker":
        return True
    return bool(argv) and argv[0] == "-m" and "no_docker.supervisor.cli" in orig_argv[1:4]


if _started_as_the_command(getattr(sys, "argv", []), getattr(sys, "orig_argv", [])):
    for _sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
        if _signal.getsignal(_sig) is not _signal.SIG_IGN:  # ignored stays ignored (nohup's SIGHUP)
            _EARLY_PREVIOUS[_sig] = _signal.signal(_sig, _record_early)
    del _sig


def release_early_signals() -> int | None:
    """Give the ending signals back the handlers they had before the package was imported
    (for commands other than ``run``); the first that arrived meanwhile, or None."""
    for sig, handler in _EARLY_PREVIOUS.items():
        _signal.signal(sig, handler)
    _EARLY_PREVIOUS.clear()
    return EARLY_SIGNALS[0] if EARLY_SIGNALS else None


# `run`'s start-up allocates tens of thousands of objects (its imports, the policy) and frees few,
# so the cyclic GC would traverse all of them again and again before CMD starts (10 collections,
# 1-2 ms of CPU in every run, measured), and a collection in the prover forked from it would
# touch every page it shares with the supervisor. Off from before the imports until the sandbox
# is started (run.Run.wait), then on again for the run's life (the mediator and the relays
# allocate for as long as CMD runs), with what the start-up made frozen: never traversed again.
_GC_DEFERRED: list[bool] = []


def defer_gc() -> None:
    """Turn the cyclic GC off until ``resume_gc`` (it was on: nothing else's choice is undone)."""
    import gc

    if gc.isenabled():
        gc.disable()
        _GC_DEFERRED.append(True)


def resume_gc(freeze: bool = True) -> None:
    """Turn the GC on again if ``defer_gc`` turned it off; FREEZE: the objects that exist now
    move to the permanent generation first (gc.freeze: only what is made from now on is
    collected; start-up garbage in a cycle, if any, stays: bounded, once per run)."""
    if _GC_DEFERRED:
        import gc

        _GC_DEFERRED.clear()
        if freeze:
            gc.freeze()
        gc.enable()
