"""The environment the suite's git commands (and the runs beside them) get: the caller's, as it
is *when used*, with git's identity and configuration fixed.

A dict of ``os.environ`` taken at import time missed what each test sets first: the private
state dir (tests/conftest.py's ``NO_DOCKER_STATE_DIR``), so a run given it kept its records in
the machine's state dir (seen as an ordinary user: a T-53 run's record of what it could not undo
was left in /tmp/no-docker-1001 and listed by that user's ``no-docker runs``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

FIXED = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
         "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
         "GIT_ALLOW_PROTOCOL": "file"}
DROPPED = ("PAGER", "GIT_PAGER", "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")


class _GitEnv(Mapping[str, str]):
    def _now(self) -> dict[str, str]:
        env = {**os.environ, **FIXED}
        for name in DROPPED:
            env.pop(name, None)
        return env

    def __getitem__(self, key: str) -> str:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


GIT_ENV: Mapping[str, str] = _GitEnv()
