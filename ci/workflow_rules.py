"""T-19, the workflow checks of the guard: parsed from YAML, with line numbers (default-deny,
issue 17 B; docs/ci-guard.md states exactly what is accepted).

(a) Every step of every job is *isolated* (a ``run:`` script with ``no-docker run`` and nothing
plain, see ``script_rules``; or the no-docker action, recognised by its ref or by the bytes of
our own ``ci/action.yml``), *allowed* (cannot run the repository's code: checkout and setup
actions, installs by name, the guard itself), or *declared* unisolated by a reviewed
``# no-docker: unisolated: REASON`` comment line right above it (reported, never silent).
Anything else is ``unisolated-step``. Once a step ran isolated, every later step is isolated
too (``isolation-order``): code under test may have written into the workspace. A step that
mixes isolated and plain commands is ``mixed-step``.
(b) Around the scripts: ``env:`` that makes a shell or program load files (``unsafe-env``),
``shell:`` other than plain bash/sh (``shell-not-plain``), job containers and engine services
(``engine-container``), ``${{ }}`` in ``run:``, keys given twice, reusable workflows of other
repositories.
(c) No ``continue-on-error`` on any job or step: it lets a failing step, a security gate
included, leave its job green.

The YAML is composed, not constructed: nodes keep their marks (line numbers), and keys stay
strings (YAML 1.1 would turn the ``on:`` key into ``True``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Protocol

import yaml

from .environment import before_no_docker_problem, outside_problem
from .findings import (
    RULE_CACHE,
    RULE_CONTAINER,
    RULE_CONTINUE,
    RULE_ENV,
    RULE_MIXED,
    RULE_ORDER,
    RULE_SHELL,
    RULE_UNISOLATED,
    Finding,
)
from .known_actions import Effects, effects
from .runner_paths import DEFAULT_WORKSPACE, in_workspace, place, through_link, writable_problem
from .script_rules import EarlierRun, Kind, RunContext, judge_run_options, judge_script, requirement_problem
from .shell_commands import RepoView

# `# no-docker: unisolated: REASON` on the comment lines right above a step: a reviewed,
# reported exemption (the step runs the repository's code outside a run, on purpose).
UNISOLATED_MARK = re.compile(r"#\s*no-docker:\s*unisolated:\s*(\S.{7,})")
# `OWNER/no-docker/ci@REF`: the composite action of this project, used from its repository, by
# a ref (a tag or, better, a commit).
NO_DOCKER_ACTION = re.compile(r"[A-Za-z0-9_.-]+/no-docker/ci@[A-Za-z0-9_.-]+")
PLAIN_SHELLS = frozenset({"bash", "sh"})
# Actions that cannot run the repository's code (they fetch it, set up a toolchain, move files
# as data); `OWNER/NAME@REF` pinned by owner and name, any ref. Everything else is default-deny.
# actions/checkout: runs git on the repository it fetches (no hook of the checkout runs: git
#   clones without them); with persist-credentials (its default) the token stays in .git/config,
#   readable by code under test: a note says so. Only the job's first checkout of the reviewed
#   commit leaves the workspace as reviewed; any other writes its path (_foreign_checkout).
# setup-*: only with inputs the guard knows (known_actions: pip-install runs code, setup-go's
#   cache is on by default from v4).
# actions/upload-artifact: zips files as data (what code under test wrote is uploaded as is);
#   it may also come after isolated steps, it runs nothing from the workspace.
# actions/download-artifact: writes files (only inside the workspace, checked), runs none.
ALLOWED_ACTIONS = frozenset({"actions/checkout", "actions/setup-python", "actions/setup-node",
                             "actions/setup-go", "actions/setup-java", "actions/upload-artifact",
                             "actions/download-artifact"})
AFTER_ISOLATED_ACTIONS = frozenset({"actions/upload-artifact"})
# A cache restores files that an earlier workflow run saved after its code under test ran (the
# save is a post step): a poisoned ~/.cache/pip, a venv, a tool on PATH. Each is a finding that
# says so; setup-* actions with a `cache:` input restore the same way.
CACHE_ACTIONS = frozenset({"actions/cache", "actions/cache/restore", "actions/cache/save"})
SETUP_CACHE_ACTIONS = frozenset({"actions/setup-python", "actions/setup-node", "actions/setup-go",
                                 "actions/setup-java"})
# `if:` with one of these runs the step after a failed one (docs: "status check functions").
AFTER_FAILURE = re.compile(r"\b(always|failure|cancelled)\s*\(")
ENGINE_IMAGE = re.compile(r"docker|dind|podman|buildkit|containerd|kind|k3s|k8s|kube|sysbox|cri-o|crio",
                          re.IGNORECASE)


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

    def has_link(self, path: str) -> bool:
        """True when the repository holds a symbolic link at ``path`` (relative to its root)."""
        ...

    def run_config(self, directory: str) -> list[tuple[str, str]] | None:
        """The ``rw``/``ro`` paths of ``[tool.no-docker]`` in ``directory/pyproject.toml`` as
        ``(--rw|--ro, path)``; [] without one, None when it cannot be read."""
        ...


class StepKind(enum.Enum):
    ISOLATED = "isolated"
    MIXED = "mixed"
    ALLOWED = "allowed"  # cannot run the repository's code (checkout, setup, installs by name)
    DECLARED = "declared unisolated"  # a reviewed `# no-docker: unisolated: REASON` exemption
    PLAIN = "plain"


@dataclass(frozen=True)
class Step:
    line: int  # 1-based line of the step's first key
    label: str
    kind: StepKind
    detail: str  # why it is plain or mixed (for messages)
    outside: bool = True  # a program other than no-docker runs outside (its env: the short list)


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


def _defaults_node(node: yaml.Node | None, key: str) -> yaml.Node | None:
    return _get(_get(_get(node, "defaults"), "run"), key)


def _scalar_rows(root: yaml.Node | None) -> set[int]:
    """0-based rows a scalar's text occupies: a `#` line there is text, never a comment."""
    rows: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            rows.update(range(node.start_mark.line, _last_row(node) + 1))
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack += [k, v]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return rows


def declared_unisolated(step: yaml.Node, lines: list[str], scalar_rows: set[int]) -> str | None:
    """The REASON of a ``# no-docker: unisolated: REASON`` comment right above the step.

    Only full comment lines directly above the step's first line count, and only when no
    scalar (a ``run: |`` block) covers them: the same text inside a string is not a comment.
    """
    above = step.start_mark.line - 1
    while above >= 0 and _is_comment(lines[above]) and above not in scalar_rows:
        m = UNISOLATED_MARK.fullmatch(lines[above].strip())
        if m:
            return m.group(1).strip()
        above -= 1
    return None


def _env_findings(node: yaml.Node | None, file: str, what: str, *, outside: bool = True) -> list[Finding]:
    """``env:`` keys default-deny (``environment``): where programs other than no-docker run
    outside (the workflow's and a job's env reach every step and action), only the short list
    of ``environment.ALLOWED``; before no-docker only, nothing bash, python or no-docker reads."""
    env = _get(node, "env")
    if env is not None and not isinstance(env, yaml.MappingNode):
        return [Finding(file, env.start_mark.line + 1, RULE_ENV,
                        f"{what}: env: is an expression the guard cannot check; list the variables")]
    findings = []
    for key, value in _mapping(env):
        name = _scalar(key)
        if name is None:
            problem: str | None = "a key that is not a name"
        else:
            problem = outside_problem(name, _scalar(value)) if outside else before_no_docker_problem(name)
        if problem is not None:
            findings.append(Finding(file, key.start_mark.line + 1, RULE_ENV,
                                    f"{what}: {problem}; drop it, or set it inside the run "
                                    "(no-docker run -- env NAME=VALUE CMD)"))
    return findings


def _shell_findings(node: yaml.Node | None, file: str, what: str) -> list[Finding]:
    """``shell:`` must be a plain known shell: ``bash --rcfile ./x -i {0}`` sources a file."""
    if node is None:
        return []
    value = _scalar(node)
    if value is None or value.strip() not in PLAIN_SHELLS:
        return [Finding(file, node.start_mark.line + 1, RULE_SHELL,
                        f"{what} has shell: {value!r}; only {', '.join(sorted(PLAIN_SHELLS))} (a command "
                        "line of its own can source files or start an interactive shell)")]
    return []


def _container_findings(job: yaml.Node, file: str, job_id: str) -> list[Finding]:
    """A job container runs every step in an image the guard cannot inspect; a service whose
    image or options look like a container engine gives the job one (docker-in-docker)."""
    findings: list[Finding] = []
    container = _get(job, "container")
    if container is not None:
        findings.append(Finding(file, container.start_mark.line + 1, RULE_CONTAINER,
                                f"job '{job_id}' runs in a container: its steps run in an image the "
                                "guard cannot inspect, often with the runner's engine socket"))
    services = _get(job, "services")
    if services is not None and not isinstance(services, yaml.MappingNode):
        findings.append(Finding(file, services.start_mark.line + 1, RULE_CONTAINER,
                                f"job '{job_id}': services: is an expression the guard cannot check"))
    for key, service in _mapping(services):
        image = _scalar(service) if isinstance(service, yaml.ScalarNode) else _scalar(_get(service, "image"))
        extra = [k for k in ("options", "volumes", "entrypoint", "command") if _get(service, k) is not None]
        if image is None or "${{" in image or ENGINE_IMAGE.search(image) or extra:
            findings.append(Finding(file, key.start_mark.line + 1, RULE_CONTAINER,
                                    f"service '{_scalar(key)}' of job '{job_id}' may run a container "
                                    f"engine (image {image!r}{', ' + '/'.join(extra) if extra else ''})"))
    return findings


def classify_step(
    step: yaml.Node,
    index: int,
    lines: list[str],
    repo: WorkflowRepo,
    *,
    shell: str | None,
    workdir: str | None,
    scalar_rows: set[int] | None = None,
    workspace_clean: bool = True,
    ctx: RunContext | None = None,
) -> Step:
    """What one step is (default-deny, issue 17 B): isolated, allowed (cannot run the
    repository's code), declared unisolated by a reviewed comment, or plain (with why).
    ``ctx``: the job's paths so far (``script_rules.RunContext``), updated by the step."""
    line = step.start_mark.line + 1
    label = _label(step, index)
    keys = [_scalar(k) for k, _ in _mapping(step)]
    if len(keys) != len(set(keys)):
        # PyYAML keeps the first of two `run:` keys; what the runner would run is not provable
        return Step(line, label, StepKind.PLAIN, "a key given twice")
    reason = declared_unisolated(step, lines, scalar_rows if scalar_rows is not None else set())
    if reason:
        return Step(line, label, StepKind.DECLARED, reason)
    ctx = ctx if ctx is not None else RunContext(has_link=repo.has_link, config=repo.run_config)
    after_failure = AFTER_FAILURE.search(_scalar(_get(step, "if")) or "") is not None
    base = _classify(step, line, label, repo, shell, workdir, workspace_clean, ctx, after_failure)
    env = _get(step, "env")
    if env is not None and base.kind is not StepKind.PLAIN and \
            _env_findings(step, "", "", outside=base.outside):
        return Step(line, label, StepKind.PLAIN, "its env: sets a variable a program outside may read "
                    "config or code from", base.outside)
    return base


def _step_cwd(step: yaml.Node, workdir: str | None, ctx: RunContext) -> tuple[str | None, str]:
    """(the step's start directory, or None; why not): ``working-directory`` placed in the
    workspace, not through a link of the repository nor below a place an earlier run wrote."""
    given = _scalar(_get(step, "working-directory"))
    where = given if given is not None else workdir
    if where is None or where in ("", "."):
        return DEFAULT_WORKSPACE, ""
    if "${{" in where:
        return None, "working-directory: holds an expression"
    cwd = place(where, DEFAULT_WORKSPACE)
    rel = in_workspace(cwd)
    if rel is None:
        return None, f"working-directory: {where} lies outside the workspace"
    link = through_link(rel, ctx.has_link)
    if link is not None:
        return None, f"working-directory: {where} passes through {link!r}, a link in the repository"
    if any(root != cwd and (cwd + "/").startswith(root.rstrip("/") + "/") for root in ctx.written):
        return None, (f"working-directory: {where} lies in a place an earlier run could write (a link "
                      "now?); cd inside the run instead (no-docker run -- bash -c 'cd DIR && ...')")
    return cwd, ""


def _classify(step: yaml.Node, line: int, label: str, repo: WorkflowRepo, shell: str | None,
              workdir: str | None, workspace_clean: bool, ctx: RunContext, after_failure: bool) -> Step:
    uses = _scalar(_get(step, "uses"))
    if uses is not None:
        return _classify_uses(step, uses, line, label, repo, workspace_clean, ctx, after_failure)
    run = _scalar(_get(step, "run"))
    if run is None:
        return Step(line, label, StepKind.PLAIN, "neither run: nor uses:")
    if "${{" in run:
        return Step(line, label, StepKind.PLAIN, "a ${{ }} expression in run:")
    shell = _scalar(_get(step, "shell")) or shell
    if shell is not None and shell.strip() not in PLAIN_SHELLS:
        return Step(line, label, StepKind.PLAIN, f"runs with shell: {shell}")
    cwd, why = _step_cwd(step, workdir, ctx)
    if cwd is None:
        return Step(line, label, StepKind.PLAIN, why)
    judged = judge_script(run, ctx.step(cwd, after_failure=after_failure))
    outside = any(j.outside for j in judged)
    isolated = [c for c in judged if c.kind is Kind.ISOLATED]
    plain = [c for c in judged if c.kind is Kind.PLAIN]
    if isolated and plain:
        return Step(line, label, StepKind.MIXED,
                    f"plain command `{_one_line(plain[0].text)}` ({plain[0].reason})", outside)
    if plain:
        return Step(line, label, StepKind.PLAIN, f"`{_one_line(plain[0].text)}`: {plain[0].reason}")
    if isolated:
        return Step(line, label, StepKind.ISOLATED, "every command is isolated or cannot run repository code",
                    outside)
    return Step(line, label, StepKind.ALLOWED, "no command can run the repository's code", outside)


def _classify_uses(step: yaml.Node, uses: str, line: int, label: str, repo: WorkflowRepo,
                   workspace_clean: bool, ctx: RunContext, after_failure: bool) -> Step:
    if NO_DOCKER_ACTION.fullmatch(uses) or uses.startswith("./"):
        if uses.startswith("./"):
            if not repo.is_no_docker_action(uses[2:]):
                return Step(line, label, StepKind.PLAIN, f"uses {uses}: a local action that is not "
                            "no-docker's ci/action.yml (compared by content, not by name)")
            if not workspace_clean:
                return Step(line, label, StepKind.PLAIN, f"uses {uses} after a step that ran the "
                            "repository's code or wrote the workspace, which may have rewritten the "
                            "action there")
        problem = _action_inputs_problem(step, ctx, after_failure)
        if problem:
            return Step(line, label, StepKind.PLAIN, f"uses {uses}: {problem}")
        return Step(line, label, StepKind.ISOLATED, "uses the no-docker action")
    name, at, ref = uses.partition("@")
    if at and ref and "${{" not in ref and name in ALLOWED_ACTIONS:
        problem = _action_effects(step, name, ref).problem
        if problem:
            return Step(line, label, StepKind.PLAIN, f"uses {name}: {problem}")
        if name == "actions/download-artifact":
            problem = _download_problem(step, ctx)
            if problem:
                return Step(line, label, StepKind.PLAIN, f"uses {name}: {problem}")
        return Step(line, label, StepKind.ALLOWED, f"uses {name}, which runs no repository code")
    if at and ref and "${{" not in ref and name in CACHE_ACTIONS:
        return Step(line, label, StepKind.ALLOWED, f"uses {name}: its restore runs nothing")
    return Step(line, label, StepKind.PLAIN, f"uses {uses}: not on the allowlist of actions that "
                "cannot run the repository's code (actions/checkout, setup-python/node/go/java, "
                "upload-artifact, download-artifact; cache with a finding)")


def _action_effects(step: yaml.Node, name: str, ref: str) -> Effects:
    """What an allowlisted action does with its ``with:`` inputs, written and defaulted
    (``known_actions``: rt4 G1, ``pip-install``; G3, setup-go's cache on by default)."""
    with_node = _get(step, "with")
    if with_node is not None and not isinstance(with_node, yaml.MappingNode):
        return effects(name, ref, None)
    return effects(name, ref, {_scalar(k) or "": _scalar(v) for k, v in _mapping(with_node)})


def _foreign_checkout(step: yaml.Node, uses: str, checked_out: bool) -> str | None:
    """Why an ``actions/checkout`` step writes content the guard did not review into the
    workspace, or None (rt4 G2): a checkout with ``repository:``, ``ref:``, ``path:``,
    ``github-server-url:`` or submodules, first or not (it replaces files there, a local action
    among them). The guard reviews one tree: the repository's commit at the workspace root; the
    same commit checked out again is that tree (a checkout after an isolated step is an order
    finding anyway: RULE_ORDER), so CHECKED_OUT changes nothing here."""
    name, _, ref = uses.partition("@")
    if name != "actions/checkout":
        return None
    foreign = _action_effects(step, name, ref).foreign
    if foreign and checked_out:
        return f"a second checkout of the job, of {', '.join(foreign)}"
    return f"a checkout of {', '.join(foreign)}" if foreign else None


def _download_problem(step: yaml.Node, ctx: RunContext) -> str | None:
    """``actions/download-artifact`` writes its files to ``path:`` (default the workspace): only
    inside the workspace, where nothing outside runs them (a tool dir on PATH, ``$HOME``'s
    dotfiles or the runner's file commands would)."""
    path = _scalar(_get(_get(step, "with"), "path"))
    if path is None or "${{" in path or "$" in path or "\n" in path:
        return ("give path: one literal subdirectory of the workspace (into its root an artifact "
                "could bring a pyproject.toml [tool.no-docker] the next run reads)")
    target = place(path, DEFAULT_WORKSPACE)
    rel = in_workspace(target)
    if rel in (".", "") or (rel is not None and rel.split("/")[0] == ".git"):
        return (f"path: {path} is the workspace itself or inside .git: give a subdirectory of the "
                "workspace (a pyproject.toml or .git/config there would be read outside later)")
    problem = writable_problem(target, ctx.has_link, ctx.written)
    return f"path: {path} ({target}): {problem}" if problem else None


def _action_inputs_problem(step: yaml.Node, ctx: RunContext, after_failure: bool) -> str | None:
    """The no-docker action's inputs that act outside the run: ``install`` (pip, outside) must
    be a requirement by name from the index; ``options`` literal, its paths judged like those
    of ``no-docker run`` (the action splits them without expanding ``~`` or ``$``);
    ``working-directory``, the run's work dir, inside the workspace."""
    with_node = _get(step, "with")
    install_node = _get(with_node, "install")
    if install_node is not None:
        install = _scalar(install_node)
        problem = requirement_problem(install) if install is not None and "${{" not in install else \
            "an expression or not one word"
        if problem:
            return f"install: {problem}; the action pip-installs it outside"
    options = _scalar(_get(with_node, "options"))
    if options is not None and "${{" in options:
        return "options: holds an expression"
    cwd, why = _step_cwd(with_node, None, ctx) if with_node is not None else (DEFAULT_WORKSPACE, "")
    if cwd is None:
        return why
    kind, why = judge_run_options(list((options or "").split()), ctx.step(cwd, after_failure=after_failure),
                                  expands=False)
    if kind is not Kind.ISOLATED:
        return f"options: {why}" if options else why
    return None


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
    job_id: str, job: yaml.Node, lines: list[str], file: str, repo: WorkflowRepo, workflow: yaml.Node,
    scalar_rows: set[int] | None = None,
) -> list[Finding]:
    findings = _continue_on_error(job, file, f"job '{job_id}'")
    findings += _env_findings(job, file, f"job '{job_id}'")
    findings += _shell_findings(_defaults_node(job, "shell"), file, f"job '{job_id}'")
    findings += _container_findings(job, file, job_id)
    called = _get(job, "uses")
    if called is not None and not (_scalar(called) or "").startswith("./"):
        # a reusable workflow of another repository: its steps are not here to be checked
        findings.append(Finding(file, called.start_mark.line + 1, RULE_UNISOLATED,
                                f"job '{job_id}' calls the workflow {_scalar(called)!r} of another "
                                "repository, whose steps the guard cannot check"))
    shell = _defaults(job, "shell") or _defaults(workflow, "shell")
    workdir = _defaults(job, "working-directory") or _defaults(workflow, "working-directory")
    rows = scalar_rows if scalar_rows is not None else _scalar_rows(workflow)
    steps = _get(job, "steps")
    if not isinstance(steps, yaml.SequenceNode):
        return findings
    first_isolated: Step | None = None
    workspace_clean = True
    checked_out = False
    ctx = RunContext(has_link=repo.has_link, config=repo.run_config)
    for index, node in enumerate(steps.value):
        what = f"step '{_label(node, index)}' of job '{job_id}'"
        findings += _continue_on_error(node, file, what)
        if not isinstance(node, yaml.MappingNode):
            continue
        findings += _shell_findings(_get(node, "shell"), file, what)
        wrote_before = len(ctx.written)
        step = classify_step(node, index, lines, repo, shell=shell, workdir=workdir, scalar_rows=rows,
                             workspace_clean=workspace_clean, ctx=ctx)
        findings += _env_findings(node, file, what, outside=step.outside)
        uses_name = (_scalar(_get(node, "uses")) or "").partition("@")[0]
        if step.kind is not StepKind.DECLARED:
            findings += _cache_findings(node, uses_name, file, what)
        if step.kind is StepKind.MIXED:
            findings.append(Finding(file, step.line, RULE_MIXED,
                                    f"step '{step.label}' of job '{job_id}' mixes isolated commands with a "
                                    f"{step.detail}; run every command under no-docker run or split "
                                    "the step"))
        elif step.kind is not StepKind.ISOLATED and step.kind is not StepKind.DECLARED and \
                first_isolated is not None and not (
                    step.kind is StepKind.ALLOWED and uses_name in AFTER_ISOLATED_ACTIONS):
            findings.append(Finding(file, step.line, RULE_ORDER,
                                    f"step '{step.label}' of job '{job_id}' is not isolated ({step.detail}) "
                                    f"but runs after the isolated step '{first_isolated.label}' (line "
                                    f"{first_isolated.line}); " + _remedy(
                                        step.detail, "move it before, isolate it, or use another job")))
        elif step.kind is StepKind.PLAIN:
            findings.append(Finding(file, step.line, RULE_UNISOLATED,
                                    f"step '{step.label}' of job '{job_id}' may run the repository's code "
                                    f"outside no-docker run ({step.detail}); " + _remedy(
                                        step.detail, "run it under no-docker run or the no-docker action, "
                                        "or declare it with a reviewed `# no-docker: unisolated: REASON` "
                                        "comment above it")))
        if step.kind in (StepKind.ISOLATED, StepKind.MIXED) and first_isolated is None:
            first_isolated = step
        foreign = _foreign_checkout(node, _scalar(_get(node, "uses")) or "", checked_out)
        checked_out = checked_out or uses_name == "actions/checkout"
        if uses_name in ("actions/download-artifact", *CACHE_ACTIONS) or foreign:
            # files it wrote may be links now, or a pyproject.toml: nothing below them is trusted
            # (a foreign checkout's too: its links and [tool.no-docker] are not the reviewed ones)
            restored = _restored_paths(node)
            ctx.written.extend(restored)
            ctx.runs.append(EarlierRun("", tuple(restored), False, None, False))
        if step.kind is not StepKind.ALLOWED or uses_name in ("actions/download-artifact", *CACHE_ACTIONS) \
                or foreign or len(ctx.written) != wrote_before:  # it wrote: a local action may differ now
            workspace_clean = False
    return findings


# What to do, by what was refused (the first that matches the step's detail); else the default.
_REMEDIES = (
    (re.compile(r"earlier step of the job"),
     "check out or download other content into a subdirectory that no run's work dir holds"),
    (re.compile(r"pyproject\.toml"),
     "let a failed run stop the later ones (no `|| true`, no `if: always()`) or use one no-docker run"),
    (re.compile(r"no-docker run (--rw|--ro|--work|--report)|its work dir|working-directory|cd |"
                r"passes through"),
     "give no-docker run only paths inside the workspace or ~/.cache/NAME, by their real name "
     "(docs/ci-guard.md, Paths)"),
    (re.compile(r"short list|load other code|env:"), "set outside a run only the variables of the "
     "guard's short list; pass others to the command inside (no-docker run -- env NAME=VALUE CMD)"),
    (re.compile(r"pip|apt|install:"), "install tools by NAME[==VERSION] from the index, and the project "
     "itself inside a run (no-docker run -- pip install .)"),
)


def _remedy(detail: str, default: str) -> str:
    return next((todo for pattern, todo in _REMEDIES if pattern.search(detail)), default)


def _restored_paths(step: yaml.Node) -> list[str]:
    """Where a download or a cache restore writes (``with: path:``, one a line; the workspace
    when it is not given or not literal)."""
    text = _scalar(_get(_get(step, "with"), "path"))
    if text is None or "${{" in text or "$" in text:
        return [DEFAULT_WORKSPACE]
    return [place(p.strip(), DEFAULT_WORKSPACE) for p in text.splitlines() if p.strip()
            and not p.strip().startswith("!")] or [DEFAULT_WORKSPACE]


def _cache_findings(step: yaml.Node, uses_name: str, file: str, what: str) -> list[Finding]:
    """A restored cache holds what an earlier workflow run saved after its code under test ran
    (actions/cache saves in a post step, at the job's end): a poisoned ~/.cache/pip installs a
    fake no-docker, a restored venv or tool dir runs outside. One finding a cache, saying so."""
    name, _, ref = (_scalar(_get(step, "uses")) or "").partition("@")
    caches = _action_effects(step, name, ref).caches if uses_name in SETUP_CACHE_ACTIONS else ()
    if uses_name in CACHE_ACTIONS:
        source = uses_name
    elif caches:  # written, or on by the action's default for its version (rt4 G3: setup-go@v5)
        source = f"{uses_name} with {', '.join(caches)}"
    else:
        return []
    return [Finding(file, step.start_mark.line + 1, RULE_CACHE,
                    f"{what} restores a cache ({source}): it holds what an earlier run saved after its "
                    "code under test ran, and a poisoned pip cache, venv or tool dir runs outside here; "
                    "cache only what the runs alone use and declare the step with a reviewed "
                    "`# no-docker: unisolated: REASON` comment (--allow-declared), or drop the cache")]


def workflow_notes(text: str, file: str) -> list[str]:
    """What the guard accepts but a reviewer should know, as ``file:line: note`` (never a
    finding): actions/checkout keeping its token in ``.git/config`` (persist-credentials, its
    default), readable by the code under test inside every run of the job."""
    root = parse_workflow(text, file)
    notes: list[str] = []
    for _, job in _mapping(_get(root, "jobs")):
        steps = _get(job, "steps")
        for node in steps.value if isinstance(steps, yaml.SequenceNode) else []:
            name = (_scalar(_get(node, "uses")) or "").partition("@")[0]
            persist = _scalar(_get(_get(node, "with"), "persist-credentials"))
            if name == "actions/checkout" and (persist or "").strip().lower() != "false":
                notes.append(f"{file}:{node.start_mark.line + 1}: actions/checkout keeps the job's token in "
                             ".git/config, where the code under test can read it inside a run; set "
                             "`with: persist-credentials: false`")
    return notes


def _duplicate_keys(root: yaml.Node | None, file: str) -> list[Finding]:
    """A key given twice in one mapping: the guard reads the first (`_get`), the runner may read
    another (a second `steps:` of a job would go unchecked)."""
    findings: list[Finding] = []
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = _scalar(key)
                if name is not None and name in seen:
                    findings.append(Finding(file, key.start_mark.line + 1, RULE_UNISOLATED,
                                            f"key {name!r} given twice: the guard and the runner may "
                                            "read different values"))
                if name is not None:
                    seen.add(name)
                stack += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return findings


def unisolated_declarations(text: str, file: str) -> list[tuple[int, str, str]]:
    """Every step declared ``# no-docker: unisolated: REASON``: (line, job/step label, reason).

    The guard prints them (stderr, and ``--json``) so that an exemption is never silent."""
    root = parse_workflow(text, file)
    lines = text.splitlines()
    rows = _scalar_rows(root)
    out: list[tuple[int, str, str]] = []
    for key, job in _mapping(_get(root, "jobs")):
        steps = _get(job, "steps")
        for index, node in enumerate(steps.value if isinstance(steps, yaml.SequenceNode) else []):
            if isinstance(node, yaml.MappingNode):
                reason = declared_unisolated(node, lines, rows)
                if reason:
                    out.append((node.start_mark.line + 1, f"{_scalar(key)}/{_label(node, index)}", reason))
    return out


def check_workflow(text: str, file: str, repo: WorkflowRepo) -> list[Finding]:
    """T-19 findings of one workflow file; WorkflowError when it is not YAML."""
    root = parse_workflow(text, file)
    lines = text.splitlines()
    rows = _scalar_rows(root)
    findings: list[Finding] = _env_findings(root, file, "the workflow") + _duplicate_keys(root, file)
    findings += _shell_findings(_defaults_node(root, "shell"), file, "the workflow")
    for key, job in _mapping(_get(root, "jobs")):
        findings += check_job(_scalar(key) or "?", job, lines, file, repo, root, rows)
    return sorted(findings)
