"""``no-docker stanza``: the one line a bash test suite puts at its top to isolate itself.

The line re-executes the script under ``no-docker run`` unless ``no-docker check`` proves that
the script already runs inside a run. It never trusts a variable that *claims* isolation: the
only variable it sets, ``NO_DOCKER_REEXEC``, is passed into the run (``--keep-env``) so that a
re-executed script whose ``check`` still fails stops with 125 instead of nesting runs forever;
it never lets anything skip the check.

Why each piece is there:

- ``no-docker check >/dev/null 2>&1``: the proof, from inside (exit 0 only inside a run). Its
  property table is not the script's output, so it is silenced.
- ``exec``: the isolated copy *replaces* the outside process, so nothing of the script runs
  outside after the line, and signals sent to the script (a cancelled CI step) reach
  ``no-docker run``, which ends every process of the run.
- ``--work "$w"``: the script's git repository root (``git rev-parse --show-toplevel`` from the
  script's directory) when the current directory is inside it, so a suite started from a
  subdirectory sees its whole repository (and its ``.git`` stays protected); else, or when git
  finds no repository or finds ``$HOME``, the current directory, as ``no-docker run`` would.
- ``"${BASH:-bash}" "$0" "$@"``: the same interpreter, the same script, the same arguments;
  ``$0`` works whether the script was started as ``./t.sh`` or ``bash t.sh``.
- when ``no-docker`` is not installed, ``exec`` fails with 127: the script never runs outside.

The guard (``no-docker guard``) recognises a script as isolated when this exact line is its
first command (only a shebang, comments and blank lines may come before it).
"""

from __future__ import annotations

import argparse

#: Bumped when the line changes; the guard accepts only the current one.
STANZA_TAG = "# no-docker: re-exec stanza v2"

STANZA = (
    "no-docker check >/dev/null 2>&1 || { "
    '[ -z "${NO_DOCKER_REEXEC-}" ] || { '
    "echo 'no-docker: re-executed script is still not isolated (no-docker check failed)' >&2; exit 125; }; "
    'if w=$(git -C "$(dirname -- "$0")" rev-parse --show-toplevel 2>/dev/null) && [ "$w" != "${HOME-}" ]; '
    'then case "$(pwd -P)/" in "$w"/*) ;; *) w=$PWD ;; esac; else w=$PWD; fi; '
    'NO_DOCKER_REEXEC=1 exec no-docker run --work "$w" --keep-env NO_DOCKER_REEXEC -- '
    '"${BASH:-bash}" "$0" "$@"; }  ' + STANZA_TAG
)

DESCRIPTION = """\
Print the shell re-exec stanza: one line to put at the top of a bash test suite (right
after the shebang). It re-executes the script under `no-docker run` unless `no-docker
check` proves that the script already runs inside a run; a script started outside thus
never runs a command outside. `no-docker guard` recognises a CI step that runs a script
carrying this line as isolated. See docs/ci-guard.md."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="no-docker stanza",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--script",
        action="store_true",
        help="print a complete example script (shebang, stanza, `set -euo pipefail`) instead of the line",
    )
    return p


def example_script() -> str:
    return "\n".join(["#!/usr/bin/env bash", STANZA, "set -euo pipefail", 'echo "isolated: $0"', ""])


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    print(example_script() if args.script else STANZA, end="" if args.script else "\n")
    return 0
