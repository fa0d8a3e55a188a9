"""``no-docker guard [REPO] [--json]``: the CI guard checks of a repository.

1. ShellCheck on every tracked shell script (``git ls-files``; ``.sh``/``.bash`` or a
   sh/bash shebang);
2. actionlint on ``.github/workflows/*.yml|yaml``;
3. T-19, the workflow checks (``workflow_rules``): code under test only in the last steps of
   each job, no step mixing isolated and plain commands, no ``continue-on-error``.

Findings print as ``file:line: rule: message`` on stdout (or one JSON document with
``--json``) and make the exit status 1. A REPO that is not a git repository, a workflow that
is not YAML, a missing or failing tool: one line on stderr naming it, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .findings import Finding
from .repo import Repository
from .tools import run_actionlint, run_shellcheck
from .workflow_rules import WorkflowError, check_workflow

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

DESCRIPTION = """\
CI guard checks of a git repository (default: the one containing the current directory):
ShellCheck on every tracked shell script, actionlint on .github/workflows/*.yml|yaml, and
the workflow checks of T-19: in every job, once a step runs code under test isolated
(`no-docker run ...`, `pytest --no-docker`, a script starting with the re-exec stanza, the
no-docker action, or a step marked `# no-docker: isolated`) every later step is isolated
too; no step mixes isolated and plain commands; no continue-on-error on any job or step."""

EPILOG = """\
output: one finding a line, `file:line: rule: message` (rules: shellcheck/SCnnnn,
actionlint/KIND, isolation-order, mixed-step, continue-on-error); a summary on stderr.
exit status: 0 clean, 1 findings, 2 usage error, REPO not a git repository, a workflow
that is not YAML, or ShellCheck/actionlint missing or failing. See docs/ci-guard.md."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="no-docker guard",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "repo",
        metavar="REPO",
        nargs="?",
        default=".",
        help="a directory inside the git repository to check (default: .)",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON document: repo, the files checked, findings, ok"
    )
    return p


def workflow_findings(repo: Repository, workflows: list[str]) -> list[Finding]:
    """T-19 over every workflow; all files are parsed first so a broken one stops the guard
    before any tool runs (WorkflowError: exit 2)."""
    findings: list[Finding] = []
    for rel in workflows:
        text = repo.read_text(rel)
        if text is None:
            raise WorkflowError(rel, 1, "cannot be read as UTF-8 text")
        findings += check_workflow(text, rel, repo)
    return findings


def guard(repo: Repository) -> tuple[dict[str, list[str]], list[Finding]]:
    scripts = repo.shell_scripts()
    workflows = repo.workflows()
    findings = workflow_findings(repo, workflows)
    findings += run_shellcheck(repo.root, scripts)
    findings += run_actionlint(repo.root, workflows)
    return {"shell_scripts": scripts, "workflows": workflows}, sorted(set(findings))


def main(argv: list[str]) -> int:
    from no_docker.supervisor.errors import UsageError

    args = parser().parse_args(argv)
    repo = Repository.open(Path(args.repo))
    try:
        checked, findings = guard(repo)
    except WorkflowError as err:
        raise UsageError(f"guard: {err}") from None
    if args.json:
        doc = {
            "repo": str(repo.root),
            "checked": checked,
            "findings": [f.as_json() for f in findings],
            "ok": not findings,
        }
        print(json.dumps(doc, indent=2))
    else:
        for finding in findings:
            # a name: from the YAML may hold a lone surrogate ("\ud800" escape): never a traceback
            print(str(finding).encode("utf-8", "backslashreplace").decode("utf-8"))
    by_rule: dict[str, int] = {}
    for f in findings:
        family = f.rule.split("/")[0]
        by_rule[family] = by_rule.get(family, 0) + 1
    detail = ", ".join(f"{rule} {n}" for rule, n in sorted(by_rule.items()))
    print(
        f"no-docker: guard: {len(findings)} finding{'s' * (len(findings) != 1)}"
        f"{f' ({detail})' if detail else ''} in {len(checked['workflows'])} workflows and "
        f"{len(checked['shell_scripts'])} shell scripts",
        file=sys.stderr,
    )
    return EXIT_FINDINGS if findings else EXIT_CLEAN
