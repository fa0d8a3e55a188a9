"""What a run may see, and proving it in the run's own view before CMD starts (P1-P13).

- ``policy``          the ``Policy`` dataclass and the pure function that makes the bwrap argv.
- ``plan``            from the command line and this machine to a ``Policy``: mount math, the
                      toolchain, the git layouts and start-up files that run code later.
- ``listing``         the outside view before start: bound unix sockets, listening TCP ports.
- ``probe``           runs *inside* the sandbox (``python -I -S``, standard library only),
                      tries every route and ``exec``s CMD only when every property is proven.
- ``syscall_filter``  the classic-BPF filter bwrap applies to every process of the run.
- ``check``           ``no-docker check``: the probe's checks, standalone, from inside a run.
- ``diagnose``        one-line explanations from what the kernel shows: a nested run, a command
                      that tried the network.
- ``run_help``        ``no-docker run --help``.
- ``config``          ``[tool.no-docker]`` in the work dir's pyproject.toml: defaults for ``run``.
- ``publish``         ``--publish``: a host loopback port forwarded into the run's loopback.

May import: the standard library, ``supervisor.errors`` and ``supervisor.record``. Must not
import ``canary``, ``mutants``, ``ci``, ``proving`` or ``ending`` (the run path stays free of
aiohttp and tree-sitter). Doc: docs/isolation.md.
"""
