"""Mutant payloads: read-only routes to an engine, their lint, pins, review and apply (DESIGN §7).

- ``payloads/``    bash payloads, one ``# route: ID`` block per route; ``helpers/`` the Python
                   helpers they embed verbatim (the lint accepts a here-document only by its pin)
- ``routes``       the routes a payload declares and the route log it writes (read by the T-series)
- ``bash_parser``  the one way into tree-sitter-bash, safe on any input (also used by ``no_docker.ci``)
- ``lint_rules``   what the lint accepts, as data; ``lint`` the walker that interprets those tables
- ``pins``         sha256 pins of everything that runs outside the isolation; ``verify_copy``
- ``review``       lint + ShellCheck + routes + diff before a pin changes; ``apply`` writes a mutant
- ``cli``          ``no-docker mutants lint|verify|review|apply``
"""
