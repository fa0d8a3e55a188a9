"""T-19, the workflow checks of the guard: parsed from YAML, with line numbers.

(a) In every job, once a step runs code under test isolated, every later step is isolated too:
code under test may have written into the workspace (a script, a hook, a cache), and a later
step that is not isolated would run what it wrote with the runner's full access. A step that
mixes isolated and plain commands fails for the same reason inside one step.
(b) No ``continue-on-error`` on any job or step: it lets a failing step, a security gate
included, leave its job green.

A step is *isolated* when it is marked ``# no-docker: isolated`` (a comment on the step's lines
or right above it), when it uses the no-docker composite action, or when its ``run:`` script
has at least one isolated command and no plain one (see ``shell_commands``).

The YAML is composed, not constructed: nodes keep their marks (line numbers), and keys stay
strings (YAML 1.1 would turn the ``on:`` key into ``True``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Protocol

import yaml

from .findings import RULE_CONTINUE, RULE_MIXED, RULE_ORDER, Finding
from .shell_commands import CommandKind, RepoView, commands_of

ISOLATED_MARK = re.compile(r"#\s*no-docker:\s*isolated\b")
# `OWNER/no-docker/ci@REF`: the composite action of this project, used from its repository.
REMOTE_ACTION = re.compile(r"[^/@\s]+/no-docker/ci@\S+\Z")
BASH_SHELLS = ("bash", "sh")


class WorkflowError(Exception):
    """A workflow file that is not YAML; ``str()`` is ``file:line: problem``."""

    def __init__(self, file: str, line: int, problem: str) -> None:
        self.file = file
        self.line = line
        self.problem = problem
        super().__init__(f"{file}:{line}: {problem}")


class WorkflowRepo(RepoView, Protocol):
    def is_no_docker_action(self, path: str) -> bool:
        """True when the local action at ``path`` (``ci`` for ``uses: ./ci``) is no-docker's."""
        ...


class StepKind(enum.Enum):
    ISOLATED = "isolated"
    MIXED = "mixed"
    PLAIN = "plain"


@dataclass(frozen=True)
class Step:
    line: int  # 1-based line of the step's first key
    label: str
    kind: StepKind
    detail: str  # why it is plain or mixed (for messages)


def parse_workflow(text: str, file: str) -> yaml.Node | None:
    """The composed document, or None for an empty file; WorkflowError when it is not YAML."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 1
        context = err.context or ""
        if context and err.context_mark is not None and err.context_mark.line + 1 != line:
            context += f" (line {err.context_mark.line + 1})"
        problem = ": ".join(str(part) for part in (context, err.problem) if part)
        raise WorkflowError(
            file, line, f"invalid YAML: {_one_line_text(problem) or 'cannot be parsed'}"
        ) from None
    except yaml.YAMLError as err:  # no mark: a stream of several documents, a forbidden character
        position = getattr(err, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else 1
        problem = str(err).split(' in "<', 1)[0]  # drop PyYAML's `in "<unicode string>", position N`
        raise WorkflowError(file, line, f"invalid YAML: {_one_line_text(problem)}") from None
    except RecursionError:
        # PyYAML's composer recurses once per nesting level: thousands of [ exhaust the stack.
        raise WorkflowError(file, 1, "YAML nested deeper than the guard can read") from None


def _one_line_text(text: str) -> str:
    return " ".join(text.split())


def _mapping(node: yaml.Node | None) -> list[tuple[yaml.Node, yaml.Node]]:
    return node.value if isinstance(node, yaml.MappingNode) else []


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    for k, v in _mapping(node):
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


def _scalar(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _last_row(node: yaml.Node) -> int:
    """0-based last line a node's content occupies (its end mark sits on the next token)."""
    end = node.end_mark
    return end.line if end.column > 0 else end.line - 1


def _step_lines(step: yaml.Node, lines: list[str]) -> list[str]:
    """The text lines that belong to a step: its own lines plus the comment lines right above it.

    The step's end mark sits on the next token, so comment lines between two steps fall in
    the span of the first; they are attributed to the step below them, as a reader would."""
    first = step.start_mark.line
    last = max([_last_row(v) for _, v in _mapping(step)] + [first])
    above = first - 1
    while above >= 0 and _is_comment(lines[above]):
        above -= 1
    return lines[above + 1 : last + 1]


def _label(step: yaml.Node, index: int) -> str:
    for key in ("name", "id", "uses"):
        value = _scalar(_get(step, key))
        if value:
            return value
    run = _scalar(_get(step, "run"))
    if run and run.strip():
        return run.strip().splitlines()[0][:60]
    return f"#{index + 1}"


def _defaults(node: yaml.Node | None, key: str) -> str | None:
    return _scalar(_get(_get(_get(node, "defaults"), "run"), key))


def classify_step(
    step: yaml.Node,
    index: int,
    lines: list[str],
    repo: WorkflowRepo,
    *,
    shell: str | None,
    workdir: str | None,
) -> Step:
    line = step.start_mark.line + 1
    label = _label(step, index)
    if any(ISOLATED_MARK.search(text) for text in _step_lines(step, lines)):
        return Step(line, label, StepKind.ISOLATED, "marked # no-docker: isolated")
    uses = _scalar(_get(step, "uses"))
    if uses is not None:
        if REMOTE_ACTION.match(uses) or (uses.startswith("./") and repo.is_no_docker_action(uses[2:])):
            return Step(line, label, StepKind.ISOLATED, "uses the no-docker action")
        return Step(line, label, StepKind.PLAIN, f"uses {uses}")
    run = _scalar(_get(step, "run"))
    if run is None:
        return Step(line, label, StepKind.PLAIN, "neither run: nor uses:")
    shell = _scalar(_get(step, "shell")) or shell
    if shell is not None and shell.split()[0] not in BASH_SHELLS:
        return Step(line, label, StepKind.PLAIN, f"runs a {shell.split()[0]} script")
    step_workdir = _scalar(_get(step, "working-directory")) or workdir or ""
    if "${{" in step_workdir:
        step_workdir = ""
    commands = commands_of(run, repo, step_workdir)
    if commands is None:
        return Step(line, label, StepKind.PLAIN, "its run: script cannot be parsed as bash")
    isolated = [c for c in commands if c.kind is CommandKind.ISOLATED]
    plain = [c for c in commands if c.kind is CommandKind.PLAIN]
    if isolated and plain:
        return Step(line, label, StepKind.MIXED, f"plain command `{_one_line(plain[0].text)}`")
    if isolated:
        return Step(line, label, StepKind.ISOLATED, "every command is isolated")
    what = f"plain command `{_one_line(plain[0].text)}`" if plain else "no isolated command"
    return Step(line, label, StepKind.PLAIN, what)


def _one_line(text: str, width: int = 60) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 3] + "..."


def _continue_on_error(node: yaml.Node, file: str, what: str) -> list[Finding]:
    """A finding for a ``continue-on-error`` key of a job or step, whatever its value: ``false``
    is the default, so the key can only add a way for a failing step to leave its job green."""
    return [
        Finding(file, key.start_mark.line + 1, RULE_CONTINUE,
                f"{what} has continue-on-error: a failing step could leave the job green")
        for key, _ in _mapping(node)
        if _scalar(key) == "continue-on-error"
    ]


def check_job(
    job_id: str, job: yaml.Node, lines: list[str], file: str, repo: WorkflowRepo, workflow: yaml.Node
) -> list[Finding]:
    findings = _continue_on_error(job, file, f"job '{job_id}'")
    shell = _defaults(job, "shell") or _defaults(workflow, "shell")
    workdir = _defaults(job, "working-directory") or _defaults(workflow, "working-directory")
    steps = _get(job, "steps")
    if not isinstance(steps, yaml.SequenceNode):
        return findings
    first_isolated: Step | None = None
    for index, node in enumerate(steps.value):
        findings += _continue_on_error(node, file, f"step '{_label(node, index)}' of job '{job_id}'")
        if not isinstance(node, yaml.MappingNode):
            continue
        step = classify_step(node, index, lines, repo, shell=shell, workdir=workdir)
        if step.kind is StepKind.MIXED:
            findings.append(
                Finding(
                    file,
                    step.line,
                    RULE_MIXED,
                    f"step '{step.label}' of job '{job_id}' mixes isolated commands with a "
                    f"{step.detail}; run every command under no-docker run or split the step",
                )
            )
        elif step.kind is StepKind.PLAIN and first_isolated is not None:
            findings.append(
                Finding(
                    file,
                    step.line,
                    RULE_ORDER,
                    f"step '{step.label}' of job '{job_id}' is not isolated ({step.detail}) but "
                    f"runs after the isolated step '{first_isolated.label}' (line "
                    f"{first_isolated.line}); move it before, isolate it, or use another job",
                )
            )
        if step.kind is not StepKind.PLAIN and first_isolated is None:
            first_isolated = step
    return findings


def check_workflow(text: str, file: str, repo: WorkflowRepo) -> list[Finding]:
    """T-19 findings of one workflow file; WorkflowError when it is not YAML."""
    root = parse_workflow(text, file)
    lines = text.splitlines()
    findings: list[Finding] = []
    for key, job in _mapping(_get(root, "jobs")):
        findings += check_job(_scalar(key) or "?", job, lines, file, repo, root)
    return sorted(findings)
