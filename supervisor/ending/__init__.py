"""Ending every process of a run, and proving that none is left (DESIGN §5).

- ``procfs``        small pure parsers over ``/proc`` bytes, one boundary for OSError.
- ``snapshot``      one consistent pass over ``/proc`` and its verdict (CLEAN only when sound).
- ``membership``    which processes carry a run's marker (its pid namespace, nested ones).
- ``cgroup``        the run's cgroup v2 leaf (or v1 pids): entry, ``cgroup.kill``, removal.
- ``algorithm``     the ending algorithm: kill the init, kill the cgroup, prove, repeat.
- ``markers``       the state dir and ``run.json`` of each run.
- ``lifecycle``     one run's life: stale check, marker + cgroup before, ending + proof after.
- ``end_command``   ``no-docker end``; ``runs``: ``no-docker runs``.

May import: the standard library, ``supervisor.errors`` and ``supervisor.record``. Must not
import ``canary``, ``mutants``, ``ci``, ``proving`` or ``isolation``. Doc: docs/supervision.md.
"""
