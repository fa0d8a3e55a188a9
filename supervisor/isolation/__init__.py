"""What a run may see, and proving it in the run's own view before CMD starts (P1-P13).

- ``policy``          the ``Policy`` dataclass and the pure function that makes the bwrap argv.
- ``plan``            from the command line and this machine to a ``Policy``: mount math, the
                      toolchain, the git layouts and start-up files that run code later.
- ``listing``         the outside view before start: bound unix sockets, listening TCP ports.
- ``probe``           the checks (standard library only): every route tried, every property
                      proven in the run's own view.
- ``prover``          a child of the supervisor that joins the sandbox bwrap holds and runs
                      ``probe``'s checks there before anything else runs in it.
- ``mediation``       the connect mediation (P12): the filter, the spawn of bwrap under it, and
                      the mediator answering every connect of the run.
- ``syscall_filter``  the classic-BPF filter every process of the run carries.
- ``check``           ``no-docker check``: the same checks, from inside a run.
- ``diagnose``        one-line explanations from what the kernel shows: a nested run, a command
                      that tried the network.
- ``run_help``        ``no-docker run --help``.
- ``config``          ``[tool.no-docker]`` in the work dir's pyproject.toml: defaults for ``run``.
- ``publish``         ``--publish``: a host loopback port forwarded into the run's loopback.

May import: the standard library, ``supervisor.errors`` and ``supervisor.record``. Must not
import ``canary``, ``mutants``, ``ci``, ``proving`` or ``ending`` (the run path stays free of
aiohttp and tree-sitter). Doc: docs/isolation.md.
"""
