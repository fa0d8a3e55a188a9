"""Proving the product end to end: the outer guard and ``no-docker prove``.

- ``outer_guard``  a mount + network namespace whose tmpfs hides the host's real engine paths,
                   so that the canary can take them and no real engine is ever reached.
- ``prove``        the main job: the canary on the real engine paths inside the guard, the
                   pinned mutant without and with isolation, a route table.

The only room that uses ``canary`` and ``mutants`` (lazily, inside functions). Nothing on the
``run`` path imports it. Doc: docs/regression-cases.md.
"""
