"""``no-docker canary serve|show``: the fake engine, and the table of what reached it.

Errors are one line (``no-docker canary: ...``) and an exit status: 2 for a bad command
line, 1 when the canary cannot do its job (a socket it cannot bind, a log it cannot open).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from .errors import EXIT_USAGE, CanaryError, CanaryUsageError


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so every usage error goes through one path."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("no-docker canary").strip()
        raise CanaryUsageError(f"{command}: {message}" if command else message)


HELP_FLAG = {"action": "help", "help": "this help"}

CANARY_EPILOG = """\
examples:
  no-docker canary serve --unix /tmp/d.sock --log canary.jsonl --ready ready.json
  DOCKER_HOST=unix:///tmp/d.sock docker ps     (in another shell: the canary records it)
  no-docker canary show canary.jsonl

exit status: 0 done; 1 the canary cannot do its job (a socket it cannot bind, a log it cannot
open or read); 2 usage. docs/canary.md has the log's schema."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="no-docker canary", usage="no-docker canary serve|show ...",
                     description="A fake Docker/Podman engine that records every attempt before it\n"
                     "answers (it never runs, pulls or removes anything).", epilog=CANARY_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    parser.add_argument("-h", "--help", **HELP_FLAG)
    commands = parser.add_subparsers(dest="command", metavar="serve|show", parser_class=_Parser,
                                     title="commands")
    serve = commands.add_parser(
        "serve", prog="no-docker canary serve", help="listen on engine addresses and record every attempt",
        add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Listen on every given address in one process; write each record to --log before\n"
        "answering. Once every listener accepts, one line on stderr says so (where it listens, its\n"
        "pid, the log); nothing is printed on stdout.",
        epilog="example:\n  no-docker canary serve --unix /tmp/d.sock --tcp 127.0.0.1:0 --log canary.jsonl "
        "--ready ready.json\n\nexit status: 0 stopped (SIGINT, SIGTERM); 1 a listener or the log failed; "
        "2 usage.")
    serve.add_argument("--unix", action="extend", nargs="+", default=[], metavar="PATH",
                       help="unix socket path (parent directories are created)")
    serve.add_argument("--tcp", action="extend", nargs="+", default=[], metavar="HOST:PORT",
                       help="loopback TCP address; port 0 picks a free port (see --ready)")
    serve.add_argument("--abstract", action="extend", nargs="+", default=[], metavar="NAME",
                       help="abstract unix socket name (without the leading NUL or @)")
    serve.add_argument("--log", required=True, type=Path, metavar="FILE", help="JSON Lines log, appended to")
    serve.add_argument("--mode", choices=("answer", "refuse"), default="answer",
                       help="answer like an engine (default), or refuse every request with an error")
    serve.add_argument("--ready", type=Path, metavar="FILE",
                       help="written atomically (JSON: pid, listeners, real ports) once every "
                       "listener accepts")
    serve.add_argument("--idle-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="hang up on a connection silent this long (default 30)")
    serve.add_argument("-h", "--help", **HELP_FLAG)
    from .show import COLUMNS

    show = commands.add_parser(
        "show", prog="no-docker canary show", help="print what reached the canary as a table", add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A table of the requests and raw records of a canary log, then counts per\n"
        "listener and per route id.",
        epilog=f"{COLUMNS}\n\nexamples:\n  no-docker canary show canary.jsonl\n"
        "  no-docker canary show canary.jsonl --json | python3 -m json.tool\n\n"
        "exit status: 0 shown; 1 LOG cannot be read or holds no record; 2 usage.")
    show.add_argument("log", type=Path, metavar="LOG", help="a canary log (the --log of canary serve)")
    show.add_argument("--json", action="store_true", help="the rows and counts as one JSON object")
    show.add_argument("-h", "--help", **HELP_FLAG)
    return parser


def _serve(args: argparse.Namespace) -> int:
    from .server import parse_abstract, parse_tcp, parse_unix, serve

    specs = ([parse_unix(path) for path in args.unix] + [parse_tcp(addr) for addr in args.tcp]
             + [parse_abstract(name) for name in args.abstract])
    if not specs:
        raise CanaryUsageError("serve: give at least one listener (--unix, --tcp or --abstract)")
    seen = [spec.address for spec in specs]
    duplicate = next((address for address in seen if seen.count(address) > 1), None)
    if duplicate is not None:
        raise CanaryUsageError(f"serve: listener {duplicate!r} given twice")
    if not args.idle_timeout > 0:
        raise CanaryUsageError(f"--idle-timeout {args.idle_timeout}: must be more than 0")
    if args.log.is_dir():
        raise CanaryUsageError(f"--log {args.log}: is a directory")
    return asyncio.run(serve(specs, args.log, mode=args.mode, ready=args.ready,
                             idle_timeout=args.idle_timeout))


def _show(args: argparse.Namespace) -> int:
    from .records import parse_log
    from .show import read_wire, render, summarize

    try:
        with args.log.open("rb") as log:
            summary = summarize(parse_log(log), read_wire(args.log))
    except OSError as err:
        raise CanaryError(f"show {args.log}: cannot read: {err.strerror}") from None
    if summary.bad_lines and not summary.per_listener:
        # A torn last line is normal (docs/canary.md); a file without one record is not a log.
        raise CanaryError(f"show {args.log}: not a canary log: no line is a record "
                          f"({summary.bad_lines[0]})")
    if args.json:
        print(json.dumps(summary.as_json(), indent=1))
    else:
        sys.stdout.write(render(summary))
    return 0


def main(argv: list[str]) -> int:
    """Entry point of ``no-docker canary`` (and ``python -m no_docker.canary``)."""
    try:
        args = build_parser().parse_args(argv)
        if args.command == "serve":
            return _serve(args)
        if args.command == "show":
            return _show(args)
        build_parser().print_usage(sys.stderr)
        return EXIT_USAGE
    except CanaryError as err:
        print(f"no-docker canary: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        return 130
