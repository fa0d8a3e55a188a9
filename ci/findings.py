"""A guard finding and how it is printed: ``file:line: rule: message`` or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One problem the guard found; ``line`` is 1-based, ``file`` relative to the repository."""

    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"

    def as_json(self) -> dict[str, object]:
        return asdict(self)


# The T-19 rules (DESIGN §8): code under test only in the last steps of a job, no way for a
# failing step to leave its job green.
RULE_ORDER = "isolation-order"
RULE_MIXED = "mixed-step"
RULE_CONTINUE = "continue-on-error"
# Issue 17 B, default-deny: a step that may run the repository's code outside a run, environment
# that makes the shell load files, a shell: that is not plain, a job container or an engine service.
RULE_UNISOLATED = "unisolated-step"
RULE_ENV = "unsafe-env"
RULE_SHELL = "shell-not-plain"
RULE_CONTAINER = "engine-container"
# Issue 27/28: a cache restored from an earlier workflow run (it may hold what code under test wrote).
RULE_CACHE = "restored-cache"
# A step declared `# no-docker: unisolated: REASON`, while the caller did not pass --allow-declared.
RULE_DECLARED = "declared-unisolated"
