"""What the guard asks the repository about scripts, and the stanza check.

Until issue 17 this module also classified the commands of a ``run:`` script; that is
``script_rules`` now (default-deny). What stays: ``RepoView``, the questions the checks may ask
the repository (answered by ``repo.Repository``, or by a fake in tests), and
``has_stanza_first``. Nothing here touches the file system.
"""

from __future__ import annotations

from typing import Protocol


class RepoView(Protocol):
    def script_has_stanza(self, path: str) -> bool:
        """True when the tracked file ``path`` (relative to the repository) starts with the stanza."""
        ...

    def pytest_config_isolates(self) -> bool:
        """True when the pytest configuration sets ``no_docker = true`` and requires the plugin."""
        ...


def has_stanza_first(script_text: str, stanza: str) -> bool:
    """True when ``stanza`` is the script's first command: only a shebang, comments and blank
    lines may come before it, so nothing runs outside before the script isolates itself."""
    for line in script_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        return stripped == stanza.strip()
    return False
