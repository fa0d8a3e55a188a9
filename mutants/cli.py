"""``no-docker mutants lint|verify|review|apply`` (DESIGN §3, §7)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from no_docker.supervisor.errors import UsageError

EXIT_OK, EXIT_FINDINGS = 0, 1


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"mutants: {message}")


def build_parser() -> Parser:
    parser = Parser(prog="no-docker mutants",
                    description="pinned read-only mutant payloads (docs/mutants.md)",
                    epilog="exit status: 0 clean, 1 findings or a refusal, 2 usage error")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    lint = sub.add_parser("lint", help="read-only lint; exit 1 with file:line:col reasons",
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          description="Accept a bash payload only when every command in it provably only "
                          "reads:\nengine subcommands from an allowlist (ps, images, version, info, "
                          "inspect...),\ncurl with GET/HEAD only, redirections into the run directory "
                          "only; `bash -c`,\n`sh -c` and `eval` strings are followed. Anything it cannot "
                          "prove (rm, mv, dd,\ndestructive subcommands, dynamic command names, decoded or "
                          "downloaded code) is a\nfinding: one `file:line:col: code: reason` line each, "
                          "and exit 1.\nThe rules and their reasons: docs/mutants.md, section \"The lint\".",
                          epilog="examples:\n"
                          "  no-docker mutants lint mutants/payloads/reach-engine.sh\n"
                          "  no-docker mutants lint mutants/payloads/*.sh\n\n"
                          "exit status: 0 every file is provably read-only; 1 findings (or a file "
                          "cannot be read or parsed); 2 usage")
    lint.add_argument("files", nargs="+", type=Path, metavar="FILE", help="bash payload to lint")
    sub.add_parser("verify", help="every payload and pinned helper matches its pin",
                   description="Check every file of mutants/pins.json against its sha256; exit 1 on "
                   "a mismatch.")
    review = sub.add_parser("review", help="lint, ShellCheck, routes, dynamic check, diff and hashes of FILE",
                            description="Show the lint verdict, ShellCheck findings, declared routes, the "
                            "dynamic check (a statically clean payload run with bash in the outer guard "
                            "against the canary: only reads may be recorded), the diff against the "
                            "pinned version and the old and new sha256.")
    review.add_argument("file", type=Path, metavar="FILE", help="a payload or pinned helper in this tree")
    review.add_argument("--accept", action="store_true",
                        help="write the pin (refused unless lint, ShellCheck and the dynamic check "
                        "are clean)")
    review.add_argument("--static-only", action="store_true",
                        help="skip the dynamic check (then --accept refuses)")
    apply = sub.add_parser("apply", help="write a mutant: TARGET with PAYLOAD inserted",
                           description="Write a copy of TARGET (bash, sh or Python) with the pinned, "
                           "lint-clean PAYLOAD inserted; by default after the shebang or the imports.")
    apply.add_argument("payload", type=Path, metavar="PAYLOAD", help="a pinned payload")
    apply.add_argument("target", type=Path, metavar="TARGET", help="the script to mutate (left unchanged)")
    apply.add_argument("--out", type=Path, required=True, metavar="FILE", help="where the mutant is written")
    apply.add_argument("--at", metavar="MARKER", help="insert after the one line holding MARKER")
    apply.add_argument("--name", metavar="PIN", help="the pin a payload copy outside the tree must match")
    return parser


def readable(path: Path) -> Path:
    if path.is_dir():
        raise UsageError(f"mutants: {path}: is a directory; name the files")
    if not path.is_file():
        what = "not a regular file" if path.exists() else "no such file"
        raise UsageError(f"mutants: {path}: {what}")
    return path


def cmd_lint(files: list[Path]) -> int:
    from .lint import lint_file
    from .pins import helper_hashes

    hashes = helper_hashes()
    status = EXIT_OK
    for path in files:
        try:
            findings = lint_file(readable(path), hashes)
        except OSError as err:  # it exists but cannot be read: permissions, EIO
            raise UsageError(f"mutants: {path}: cannot read: {err.strerror or err}") from None
        for finding in findings:
            print(finding)
        if findings:
            status = EXIT_FINDINGS
        else:
            print(f"no-docker: {path}: read-only (lint clean)", file=sys.stderr)
    return status


def cmd_verify() -> int:
    from .pins import load_pins, verify_all

    if not load_pins():
        print("no-docker: mutants: no pins at all (pins.json missing or empty)", file=sys.stderr)
        return EXIT_FINDINGS
    checks = verify_all()
    for check in checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}{'' if check.ok else ': ' + check.detail}")
    bad = sum(not c.ok for c in checks)
    print(f"no-docker: mutants: {len(checks) - bad}/{len(checks)} pins verified", file=sys.stderr)
    return EXIT_FINDINGS if bad else EXIT_OK


def cmd_review(path: Path, accept: bool, static_only: bool = False) -> int:
    from . import review as rv

    try:
        result = rv.review(readable(path), dynamic=not static_only)
    except OSError as err:
        raise UsageError(f"mutants: {path}: cannot read: {err.strerror or err}") from None
    print(rv.render(result))
    dynamic_failed = result.dynamic is not None and result.dynamic.ran and not result.dynamic.ok
    if not accept:
        return EXIT_OK if result.clean and not dynamic_failed else EXIT_FINDINGS
    if not result.acceptable:
        reasons = rv.refusal_reasons(result)
        print(f"no-docker: mutants: refusing to pin {result.name}: {len(reasons)} reason(s), "
              f"first: {reasons[0]}", file=sys.stderr)
        return EXIT_FINDINGS
    rv.accept(result)
    print(f"no-docker: mutants: pinned {result.name} = {result.new_sha256}", file=sys.stderr)
    return EXIT_OK


def cmd_apply(payload: Path, target: Path, out: Path, marker: str | None, name: str | None) -> int:
    from .apply import apply

    mutant = apply(readable(payload), readable(target), out, marker, name=name)
    print(f"no-docker: mutants: wrote {out} ({mutant.language} target, payload after line {mutant.line})",
          file=sys.stderr)
    return EXIT_OK


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "lint":
        return cmd_lint(args.files)
    if args.command == "verify":
        return cmd_verify()
    if args.command == "review":
        return cmd_review(args.file, args.accept, args.static_only)
    return cmd_apply(args.payload, args.target, args.out, args.at, args.name)
