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
