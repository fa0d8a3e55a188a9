"""no-docker's supervisor: the CLI, the isolation and the ending of every run.

How the parts fit:

- ``cli``       parses the command line and dispatches lazily, so ``no-docker run`` never
                pays for importing the canary (aiohttp) or the lint (tree-sitter).
- ``policy``    a ``Policy`` dataclass and the pure function that turns it into a bwrap argv.
- ``listing``   the outside view before start: listening unix sockets and TCP ports.
- ``probe``     runs *inside* the sandbox (stdlib only, ``python -I -S``), tries every
                route and ``exec``s CMD only when every property P1-P11 is proven.
- ``run``       ``no-docker run``: build the policy, start bwrap, wait, end the run.
- ``procfs``, ``snapshot``, ``cgroup``, ``markers``, ``ending``: identify every member of a
                run and prove, after a kernel-backed kill, that none is left.
- ``outer_guard``, ``prove``: the mount + network namespace that hides the host's engine
                paths, and the main job that shows the isolation route by route.

The canary (``no_docker.canary``) and the payloads (``no_docker.mutants``) are separate
parts; the canary imports nothing of this package (it is a neutral witness).
"""
