"""The few domain errors every part turns OS failures into, their exit codes, and the escaping
of what their one line quotes (``printable``).

Exit codes follow DESIGN §3: the command's own status, 125 when the isolation or the
ending cannot be proven (or no-docker cannot start the command), 126/127 like ``env``,
2 for usage errors.
"""

from __future__ import annotations

EXIT_USAGE = 2
EXIT_NOT_PROVEN = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127


class NoDockerError(Exception):
    """Base class: carries the exit status the CLI returns for it."""

    exit_status = 1


class UsageError(NoDockerError):
    """Bad command line or bad input file; the message names the flag or file."""

    exit_status = EXIT_USAGE


class NotProven(NoDockerError):
    """A property could not be proven; the run must not start (or must not be called done).

    ``str()`` is the one line the CLI prints: which property, and what to do.
    """

    exit_status = EXIT_NOT_PROVEN

    def __init__(self, prop: str, detail: str, remedy: str = "") -> None:
        self.prop = prop
        self.detail = detail
        self.remedy = remedy
        text = f"{prop}: {detail}"
        if remedy:
            text += f" ({remedy})"
        super().__init__(text)


def printable(text: str) -> str:
    """TEXT with every non-printable character escaped (pure): a run names the sockets it
    tries, and a name with a newline or an escape sequence must not write lines of its own
    into ours (red-team review)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
