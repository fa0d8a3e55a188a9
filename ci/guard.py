"""``no-docker guard [REPO] [--json]``: the CI guard checks of a repository.

1. ShellCheck on every shell script git would commit (``git ls-files``, and untracked files
   that are not ignored; ``.sh``/``.bash`` or a sh/bash shebang);
2. actionlint on ``.github/workflows/*.yml|yaml`` (the same files: tracked, or untracked and
   not ignored);
3. T-19, the workflow checks (``workflow_rules``): code under test only in the last steps of
   each job, no step mixing isolated and plain commands, no ``continue-on-error``; default-deny
   on the environment (``environment``), install arguments and run paths (``runner_paths``).

Findings print as ``file:line: rule: message`` on stdout (or one JSON document with
``--json``) and make the exit status 1. A REPO that is not a git repository, a workflow that
is not YAML, a missing or failing tool: one line on stderr naming it, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .findings import RULE_DECLARED, Finding
from .repo import Repository
from .tools import run_actionlint, run_shellcheck
from .workflow_rules import WorkflowError, check_workflow, unisolated_declarations, workflow_notes

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

DESCRIPTION = """\
CI guard checks of a git repository (default: the one containing the current directory):
ShellCheck on every shell script and actionlint on every .github/workflows/*.yml|yaml that
git would commit (tracked, or untracked and not ignored: checked before `git add`), and
the workflow checks of T-19, default-deny: every step runs under `no-docker run` or the
no-docker action (recognised by its ref or by our own action.yml's bytes, never by its name),
or is on the allowlist of steps that cannot run the repository's code (actions/checkout,
setup-python/node/go/java, upload-artifact (also after isolated steps), download-artifact;
each with inputs the guard knows: one that runs code, like setup-python's pip-install, or one
it does not know refuses the step; a checkout other than the job's first of the reviewed
commit writes the workspace;
installs by NAME[==VERSION] from the index, never a path, archive, URL or pip/apt option that
reads a file; the guard itself), or is declared with a reviewed comment
`# no-docker: unisolated: REASON` right above it (reported on stderr, never silent). Once a
step ran isolated, every later step is isolated too; no step mixes isolated and plain
commands; no ${{ }} in run:, no shell: but bash or sh; environment default-deny (outside a
run only a short list: CI, FORCE_COLOR, NO_COLOR, TERM, LANG, LC_ALL, DEBIAN_FRONTEND...);
`no-docker run` paths (--rw, --work, --ro, the step's directory, [tool.no-docker]) resolved
and kept off the runner's file commands, _temp, tool cache, work dir and $HOME; a restored
cache is a finding; no job container or engine service; no continue-on-error."""

EPILOG = """\
output: one finding a line, `file:line: rule: message` (rules: shellcheck/SCnnnn,
actionlint/KIND, unisolated-step, declared-unisolated (without --allow-declared), isolation-order,
mixed-step, unsafe-env, shell-not-plain, engine-container, restored-cache, continue-on-error),
each saying what to do; notes (accepted with a caveat, e.g. a checkout that keeps its token)
and a summary on stderr.
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
        "--json", action="store_true",
        help="print one JSON document: repo, the files checked, findings, declared_unisolated, notes, ok"
    )
    p.add_argument(
        "--allow-declared",
        action="store_true",
        help="accept steps declared `# no-docker: unisolated: REASON` (each is still printed); "
        "without it every such declaration is a finding: the guard accepts only what it can prove",
    )
    return p


def workflow_findings(repo: Repository, workflows: list[str],
                      declared: list[str] | None = None, notes: list[str] | None = None) -> list[Finding]:
    """T-19 over every workflow; all files are parsed first so a broken one stops the guard
    before any tool runs (WorkflowError: exit 2). Steps declared unisolated go to ``declared``
    as ``file:line: job/step: reason``; what is accepted with a caveat to ``notes``."""
    findings: list[Finding] = []
    for rel in workflows:
        text = repo.read_text(rel)
        if text is None:
            raise WorkflowError(rel, 1, "cannot be read as UTF-8 text")
        findings += check_workflow(text, rel, repo)
        if declared is not None:
            declared += [f"{rel}:{line}: {label}: {reason}" for line, label, reason in
                         unisolated_declarations(text, rel)]
        if notes is not None:
            notes += workflow_notes(text, rel)
    return findings


def guard(repo: Repository, declared: list[str] | None = None,
          notes: list[str] | None = None) -> tuple[dict[str, list[str]], list[Finding]]:
    scripts = repo.shell_scripts()
    workflows = repo.workflows()
    findings = workflow_findings(repo, workflows, declared, notes)
    findings += run_shellcheck(repo.root, scripts)
    findings += run_actionlint(repo.root, workflows)
    untracked = set(repo.untracked)
    checked = {"shell_scripts": scripts, "workflows": workflows,
               "untracked": sorted(p for p in scripts + workflows if p in untracked)}
    return checked, sorted(set(findings))


def _one_line(name: str) -> str:
    """A file name on one line: a newline or a byte that is not UTF-8 (a lone surrogate) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def declared_finding(line: str) -> Finding:
    """``file:line: job/step: reason`` (a declaration) as a finding of its own rule."""
    file, number, rest = line.split(":", 2)
    return Finding(file, int(number), RULE_DECLARED,
                   f"declared unisolated ({rest.strip()}); the guard cannot prove it: pass --allow-declared "
                   "to accept reviewed declarations")


def main(argv: list[str]) -> int:
    from no_docker.supervisor.errors import UsageError

    args = parser().parse_args(argv)
    repo = Repository.open(Path(args.repo))
    declared: list[str] = []
    notes: list[str] = []
    try:
        checked, findings = guard(repo, declared, notes)
    except WorkflowError as err:
        raise UsageError(f"guard: {err}") from None
    if not args.allow_declared:
        # A declaration is the workflow speaking for itself: a claim, not a proof. Only the
        # caller of the guard can accept it (default-deny).
        findings = sorted(set(findings) | {declared_finding(line) for line in declared})
    if args.json:
        doc = {
            "repo": str(repo.root),
            "checked": checked,
            "findings": [f.as_json() for f in findings],
            "declared_unisolated": declared,
            "notes": notes,
            "ok": not findings,
        }
        print(json.dumps(doc, indent=2))
    else:
        for finding in findings:
            # a name: from the YAML may hold a lone surrogate ("\ud800" escape): never a traceback
            print(str(finding).encode("utf-8", "backslashreplace").decode("utf-8"))
    if checked["untracked"]:
        # The result covers files not committed yet: say which, so that a clean guard is not
        # mistaken for one about the commit alone (and a stray file explains a finding).
        names = ", ".join(_one_line(p) for p in checked["untracked"])
        print(f"no-docker: guard: not tracked by git yet, checked as they are on disk: {names}",
              file=sys.stderr)
    for line in declared:  # an exemption is never silent
        print(f"no-docker: guard: declared unisolated (reviewed exemption): {line}", file=sys.stderr)
    for line in notes:  # accepted, with a caveat the reviewer should know
        print(f"no-docker: guard: note: {line}", file=sys.stderr)
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
