"""The canary's own errors: it is a neutral witness and imports nothing from the supervisor."""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_USAGE = 2


class CanaryError(Exception):
    """A failure the CLI reports as one line (``no-docker canary: ...``) and an exit status."""

    exit_status = EXIT_FAILURE


class CanaryUsageError(CanaryError):
    """A bad command line; the message names the flag."""

    exit_status = EXIT_USAGE
