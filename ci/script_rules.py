"""What a workflow ``run:`` script runs, judged default-deny (issue 17 B).

Every simple command of the script is one of

- **isolated**: ``no-docker run ...`` (also after ``exec``, ``time``, ``nice``, ``nohup``, or
  ``env``/``sudo`` with only the options listed below): what follows ``run`` runs inside;
- **allowed**: a command that cannot run the repository's code: the builtins that run no
  program (``set``, ``echo``, ``printf``, ``cd``, ``export NAME=VALUE``, ``[ ]``...), the
  no-docker commands that only read (``guard``, ``check``, ``stanza``, ``--version``), and
  installs *by name* (``apt-get install PKG``, ``pip install NAME``, ``python -I -m pip``);
- **plain**: everything else, with the reason.

The whole script is refused (one plain entry at the construct) when it holds something bash
could run that the tree does not show as a command: arithmetic contexts (``$(( ))``,
``(( ))``, ``[[ -eq ]]`` over values, subscripts: a value ``a[$(make test)]`` runs make),
``${!x}``, ``${x@P}``, ``printf -v``, ``eval``, ``source``, ``trap``, here-documents whose end
bash and tree-sitter might see differently, and environment that makes a shell or python
load code (``BASH_ENV``, ``PYTHONPATH``...). Writes to ``$GITHUB_ENV``/``$GITHUB_PATH`` are
refused except a constant ``NAME=VALUE`` line whose name is safe, from echo/printf.

Not counted as isolated any more, although they isolate the tests: ``pytest --no-docker``
(``python -m`` puts the working directory first on ``sys.path``, and plugins named with
``-p`` or in ``addopts`` are imported before the re-execution) and scripts starting with the
re-exec stanza (an earlier isolated step may have rewritten them in the workspace). Run them
as ``no-docker run -- ...``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from no_docker.mutants.bash_parser import HeredocRefused, heredoc_body, mask_unsafe, parse
from tree_sitter import Node

from .environment import before_no_docker_problem, outside_problem, refused_before_no_docker
from .runner_paths import (
    DEFAULT_WORKSPACE,
    HOME,
    in_workspace,
    place,
    readable_problem,
    through_link,
    writable_problem,
)


class Kind(enum.Enum):
    ISOLATED = "isolated"
    ALLOWED = "allowed"
    PLAIN = "plain"


@dataclass(frozen=True)
class Judged:
    row: int  # 0-based line within the script
    kind: Kind
    text: str
    reason: str
    outside: bool = False  # an allowed program other than no-docker and the shell's builtins


def _no_link(rel: str) -> bool:
    return False


def _no_config(rel: str) -> list[tuple[str, str]] | None:
    return []


@dataclass
class EarlierRun:
    """A ``no-docker run`` an earlier command of the job started: its work dir, what it could
    write, and whether its failure stops every later command (``fatal``: a top-level command of
    a ``bash -e`` script, or the action's ``exec``; a later step without ``if: always()``...)."""

    work: str
    writable: tuple[str, ...]
    fatal: bool  # its failure stops every later command of its script
    node: Node | None = None
    fails_step: bool = True  # its failure fails its step, so no later step runs (without if:)


@dataclass
class RunContext:
    """What the path checks know of a job, carried from step to step and command to command.

    ``cwds``: every directory the next command may start in (a ``cd`` may or may not have taken
    effect); ``written``: every place an earlier run of the job could write; ``has_link(rel)``:
    the repository holds a link at ``rel`` (relative to the workspace); ``config(rel)``: the
    ``rw``/``ro`` paths of ``[tool.no-docker]`` in the tracked ``rel/pyproject.toml`` as
    ``(option, path)``, None when it cannot be read."""

    cwds: set[str] = field(default_factory=lambda: {DEFAULT_WORKSPACE})
    written: list[str] = field(default_factory=list)
    has_link: Callable[[str], bool] = _no_link
    config: Callable[[str], list[tuple[str, str]] | None] = _no_config
    runs: list[EarlierRun] = field(default_factory=list)
    errexit: bool = True  # GitHub runs bash and sh with -e; `set +e` turns it off

    def step(self, cwd: str, *, after_failure: bool = False) -> RunContext:
        """A copy for a step starting in ``cwd``, sharing what earlier runs could write.
        ``after_failure``: the step may run after a failed one (``if: always()``, ``failure()``,
        ``cancelled()``), so no earlier run's failure stops it."""
        runs = [EarlierRun(r.work, r.writable, r.fails_step and not after_failure, None,
                           r.fails_step and not after_failure) for r in self.runs]
        self.runs[:] = runs
        return RunContext({cwd}, self.written, self.has_link, self.config, self.runs)


def unsafe_env_name(name: str) -> bool:
    """True when bash, python, glibc or no-docker read ``name`` outside (``environment.REFUSED``)."""
    return refused_before_no_docker(name)


SET_WORDS = frozenset({"-e", "+e", "-u", "+u", "-x", "+x", "-o", "+o", "pipefail", "errexit", "nounset",
                       "xtrace", "-eu", "-euo", "-eux", "-euxo", "-ex", "-eo"})
# Builtins that run no program; their arguments are checked below where they matter.
NEUTRAL = frozenset({":", "true", "false", "echo", "printf", "cd", "exit", "return", "set", "test", "[",
                     "pwd", "shift"})
READ_ONLY_NO_DOCKER = frozenset({"guard", "check", "stanza", "--version", "--help", "runs"})
APT = frozenset({"apt-get", "apt"})
APT_FLAGS = frozenset({"-y", "-q", "-qq", "--yes", "--quiet", "--no-install-recommends", "--assume-yes"})
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+~:-]+)?\Z")  # deb-control(5) names
PIP_FLAGS = frozenset({"-q", "--quiet", "-U", "--upgrade", "--user", "--no-cache-dir",
                       "--break-system-packages", "--disable-pip-version-check", "--pre"})
# A requirement from an index: a PEP 508 name, extras, at most one PEP 440 specifier. Never a path,
# an archive, a URL (`name @ url`), a VCS link or a local dir (pip's req_install.parse_req_from_line
# takes any word that ends like an archive and exists as a file for that file).
# The version: PEP 440's public form (N[.N]*, a pre-, post- or dev-release), `.*` after == or
# != only; T-87 measures the pattern against pip itself.
# As packaging's Specifier reads them (specifiers.py, the regex of each operator): `.*` follows a
# release only (`==1.0a1.*` is no specifier), and `~=` needs two release segments at least (`~=0` is
# none: pip says "Invalid requirement", T-87's hypothesis run found it).
_RELEASE = r"[0-9]+(\.[0-9]+)*"
_TAIL = r"((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?"
_VERSION = _RELEASE + _TAIL
_SPECIFIER = rf"(==|!=)({_RELEASE}\.\*|{_VERSION})|(<=|>=|<|>){_VERSION}|~=[0-9]+(\.[0-9]+)+{_TAIL}"
_EXTRA = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"  # PEP 508's identifier, as a name
REQUIREMENT = re.compile(rf"{_EXTRA}(\[{_EXTRA}(,{_EXTRA})*\])?({_SPECIFIER})?\Z")
# pip's utils.filetypes.ARCHIVE_EXTENSIONS (.zip .whl .tar.bz2 .tbz .tar.xz .txz .tlz .tar.lz
# .tar.lzma .tar.gz .tgz .tar), widened to every compression suffix; and apt's local files.
ARCHIVE_SUFFIXES = (".zip", ".whl", ".tar", ".tgz", ".tbz", ".txz", ".tlz", ".gz", ".bz2", ".xz", ".lz",
                    ".lzma", ".zst", ".egg", ".pybundle")
DEB_SUFFIXES = (".deb", ".udeb", ".ddeb", ".dsc", ".changes")


def requirement_problem(word: str | None) -> str | None:
    """Why ``word`` is not a requirement pip takes from an index by name, or None."""
    if word is None:
        return "a word that is not literal"
    if word.lower().endswith(ARCHIVE_SUFFIXES):
        return f"{word!r} ends like an archive: pip installs a local file of that name (its build code runs)"
    if not REQUIREMENT.match(word):
        return f"{word!r} is not NAME[EXTRAS][SPECIFIER] (a path, URL, VCS link or local dir runs build code)"
    return None
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?\Z")
SYSCTL_WORDS = re.compile(r"-n|-q|-w|-qw|[a-z0-9_.]+|[a-z0-9_.]+=[0-9]+\Z")
INTEGER = re.compile(r"-?[0-9]+\Z")
GITHUB_FILES = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT")
_PARAM = r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9])"
EXPANSION_FORMS = (
    re.compile(rf"{_PARAM}|[?!#$@*]"),
    re.compile(rf"#{_PARAM}"),
    re.compile(rf"{_PARAM}:?[-+].*", re.S),
    re.compile(rf"{_PARAM}(?:%%?|##?).*", re.S),
    re.compile(rf"{_PARAM}//?.*", re.S),
    re.compile(rf"{_PARAM}:[0-9]+(?::[0-9]+)?"),
)


class _Refused(Exception):
    def __init__(self, node: Node, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _literal(node: Node) -> str | None:
    """A word's value when it is a literal (quotes removed), else None."""
    t = node.type
    text = _text(node)
    if t == "command_name":
        return _literal(node.named_children[0]) if node.named_child_count == 1 else None
    if t in ("word", "number") and not re.search(r"[$`*?\[\\{}~]", text):
        return text
    if t == "word" and (text == "~" or text.startswith("~/")) and not re.search(r"[$`*?\[\\{}~]", text[1:]):
        return HOME + text[1:]  # tilde expansion of an unquoted word: the runner's $HOME
    if t == "raw_string":
        return text[1:-1]
    if t == "string" and all(c.type == "string_content" for c in node.named_children):
        inner = text[1:-1]
        return None if re.search(r"[$`\\]", inner) else inner
    if t == "concatenation":
        parts = [_literal(c) for c in node.children]
        return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
    return None


def _check_constructs(root: Node, source: bytes) -> None:
    """Refuse what bash could run that the tree does not show as a command (see module doc)."""
    stack = [root]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        t = n.type
        if t in ("arithmetic_expansion", "c_style_for_statement", "subscript", "translated_string"):
            raise _Refused(n, f"{t.replace('_', ' ')}: evaluated as code where a value could run a command")
        if t == "compound_statement" and n.children and n.children[0].type == "((":
            raise _Refused(n, "(( )) evaluates its text arithmetically")
        if t == "for_statement" and n.children and n.children[0].type != "for":
            raise _Refused(n, "select")
        if t in ("word", "number") and ("$[" in _text(n) or "$((" in _text(n)):
            raise _Refused(n, "$[ ] evaluates its text arithmetically")
        if t in ("word", "number") and re.search(r"\$[({]|`", re.sub(r"\\.", "", _text(n), flags=re.S)):
            raise _Refused(n, "an expansion the parser read as plain text (bash would run it)")
        if t == "$" and n.next_sibling is not None and n.next_sibling.type == "string" and \
                n.next_sibling.start_byte == n.end_byte:
            raise _Refused(n, '$"..." (locale translation)')
        if t == "expansion":
            _check_expansion(n)
        if t == "heredoc_redirect":
            try:
                heredoc_body(n, source)
            except HeredocRefused as err:
                raise _Refused(err.node, str(err)) from err
        if t == "test_command":
            _check_test(n)
        if t == "variable_assignment":
            name = n.child_by_field_name("name")
            if name is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", _text(name)):
                raise _Refused(n, f"assignment to {_text(name) if name else '?'!r}")
            if unsafe_env_name(_text(name)):
                raise _Refused(n, f"{_text(name)} makes a shell or program load other code")
            value = n.child_by_field_name("value")
            if value is not None and value.type == "array":
                raise _Refused(n, "arrays (an index is evaluated arithmetically)")
        if t == "declaration_command":
            keyword = _text(n.children[0]) if n.children else ""
            if keyword != "export":
                raise _Refused(n, f"{keyword}: only export NAME=VALUE")
            for c in n.named_children:
                if c.type != "variable_assignment":
                    raise _Refused(c, f"export {_text(c)!r}: only NAME=VALUE")
        if t == "unset_command":
            raise _Refused(n, "unset")
        if t == "function_definition" and any(c.type.endswith("redirect") for c in n.children):
            raise _Refused(n, "a redirection on a function definition (it applies at every call)")


def _check_expansion(n: Node) -> None:
    opener, closer = n.children[0], n.children[-1]
    if opener.type != "${" or closer.type != "}" or _text(opener).strip() != "${":
        raise _Refused(n, f"expansion {_text(n)!r} of unknown shape")
    raw = n.text or b""
    inner = raw[opener.end_byte - n.start_byte:closer.start_byte - n.start_byte].decode("utf-8", "replace")
    if "`" in inner or "$(" in inner or not any(f.fullmatch(inner) for f in EXPANSION_FORMS):
        raise _Refused(n, f"${{{inner}}}: indirection, @ transformations, assignment, subscripts and "
                       "non-literal offsets are refused (they run or evaluate code)")


def _check_test(n: Node) -> None:
    double = bool(n.children) and n.children[0].type == "[["
    stack = list(n.named_children)
    while stack:
        c = stack.pop()
        stack.extend(c.named_children)
        if c.type == "test_operator" and _text(c) in ("-v", "-R"):
            raise _Refused(c, f"test {_text(c)} evaluates a subscript")
        if double and c.type == "binary_expression" and len(c.children) == 3:
            op = _text(c.children[1])
            if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                for side in (c.children[0], c.children[2]):
                    value = _literal(side)
                    if value is None or not INTEGER.match(value):
                        raise _Refused(side, f"[[ {op} ]] evaluates {_text(side)!r} arithmetically")


def _argv(node: Node) -> tuple[list[str | None], list[tuple[str, str | None]], list[Node]]:
    """(words, prefix assignments (name, literal value), redirections) of a command node."""
    words: list[str | None] = []
    assigns: list[tuple[str, str | None]] = []
    redirects: list[Node] = []
    for child in node.named_children:
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            value = child.child_by_field_name("value")
            assigns.append((_text(name) if name else "", _literal(value) if value else ""))
        elif child.type.endswith("redirect"):
            redirects.append(child)
        else:
            words.append(_literal(child))
    return words, assigns, redirects


WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # name -> (flags, options taking a value); anything else after it is the command
    "exec": (frozenset(), frozenset()),
    "time": (frozenset({"-p"}), frozenset()),
    "nice": (frozenset(), frozenset({"-n"})),
    "nohup": (frozenset(), frozenset()),
    "sudo": (frozenset({"-n"}), frozenset()),
    "env": (frozenset(), frozenset({"-u"})),
}


def _unwrap(words: list[str | None]) -> tuple[list[str | None], str | None, list[tuple[str, str]]]:
    """Strip wrappers with only their listed options; (rest, refusal reason, ``env NAME=VALUE``
    assignments, which set the environment of the command like a prefix assignment)."""
    assigns: list[tuple[str, str]] = []
    while words and words[0] is not None and PurePosixPath(words[0]).name in WRAPPERS:
        name = PurePosixPath(words[0]).name
        flags, values = WRAPPERS[name]
        rest = words[1:]
        while rest:
            w = rest[0]
            if w is None:
                return rest, f"{name} with a word that is not literal", assigns
            if name == "env" and "=" in w and not w.startswith("-"):
                var, _, value = w.partition("=")
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                    return rest, f"env {var}=...: not a variable name", assigns
                assigns.append((var, value))
                rest = rest[1:]
                continue
            if w == "--":
                rest = rest[1:]
                break
            if w.startswith("-") and w != "-":
                if w in flags:
                    rest = rest[1:]
                    continue
                if w in values and len(rest) > 1:
                    rest = rest[2:]
                    continue
                return rest, f"{name} {w}: an option the guard does not model", assigns
            break
        if not rest:
            return rest, None if name == "exec" else f"{name} without a command", assigns
        words = rest
    return words, None, assigns


def _judge_command(words: list[str | None], ctx: RunContext,
                   node: Node | None = None) -> tuple[Kind, str, bool]:
    """(kind, reason, outside): ``outside`` when an allowed program other than no-docker and the
    shell's builtins runs outside (pip, apt, sysctl...): the environment it gets must then be on
    ``environment.ALLOWED``."""
    name = words[0] if words else None
    if not words:
        return Kind.ALLOWED, "exec with redirections only", False
    if name is None:
        return Kind.PLAIN, "the command name is not literal", False
    base = PurePosixPath(name).name
    if base == "no-docker" and name in ("no-docker",):
        sub = words[1] if len(words) > 1 else None
        if sub == "run":
            fatal = node is None or _stops_script(node, ctx)
            fails_step = fatal or (node is not None and _last_status(node))
            kind, why = judge_run_options(words[2:], ctx, node=node, fatal=fatal, fails_step=fails_step)
            return kind, why, False
        if sub in READ_ONLY_NO_DOCKER:
            return Kind.ALLOWED, f"no-docker {sub}", False
        return Kind.PLAIN, f"no-docker {sub}: not run and not read-only", False
    if name == "cd":
        kind, why = _judge_cd(words[1:], ctx)
        return kind, why, False
    if name in NEUTRAL:
        kind, why = _judge_neutral(name, words[1:])
        return kind, why, False
    if base in APT and "/" not in name:
        return (*_judge_apt(words), True)
    if base in ("pip", "pip3") and "/" not in name:
        return (*_judge_pip(words[1:]), True)
    if PYTHON_NAME.match(base) and "/" not in name:
        if len(words) > 3 and words[1] in ("-I", "-P") and words[2] == "-m" and words[3] == "pip":
            return (*_judge_pip(words[4:]), True)
        if "-m" in words[1:3] and "pip" in words[2:4]:
            return Kind.PLAIN, ("python -m pip imports pip from the working directory first: "
                                "use python -I -m pip"), True
        if "pytest" in words:
            return Kind.PLAIN, "pytest outside no-docker run (pytest --no-docker re-executes itself, but " \
                "what it imports before that is not provable here): use no-docker run -- pytest", True
        return Kind.PLAIN, f"{name} runs outside no-docker run", True
    if base == "sysctl" and "/" not in name:
        if all(w is not None and SYSCTL_WORDS.fullmatch(w) for w in words[1:]):
            return Kind.ALLOWED, "sysctl", True
        return Kind.PLAIN, "sysctl with arguments the guard does not model", True
    if base in ("id", "uname", "whoami", "nproc") and "/" not in name and all(
            w is not None and re.fullmatch(r"-[a-z]+", w) for w in words[1:]):
        return Kind.ALLOWED, base, True
    return Kind.PLAIN, f"`{name}` runs outside no-docker run", True


# `no-docker run` options whose value is a path the run makes visible: what the run may write
# (--rw, --work, and --report, which no-docker itself writes outside) and read (--ro).
_WRITABLE_OPTIONS = ("--rw", "--work", "--report")
_PATH_OPTIONS = (*_WRITABLE_OPTIONS, "--ro")
_OTHER_VALUE_OPTIONS = ("--keep-env", "--publish", "--max-pids", "--end-timeout", "--tmp-size",
                        "--memory-max")


def judge_run_options(args: list[str | None], ctx: RunContext | None = None, *, expands: bool = True,
                      node: Node | None = None, fatal: bool = True,
                      fails_step: bool = True) -> tuple[Kind, str]:
    """``no-docker run`` options, with the paths they make writable judged against the runner's
    layout (``runner_paths``) from every directory the command may start in, and the tracked
    ``[tool.no-docker]`` table of its work dir. A run that can write the runner's file commands,
    ``_temp``, the tool cache or ``$HOME`` lets code under test set what later steps run.
    ``expands``: the words went through bash (``~`` expanded); the action splits its
    ``options:`` input without any expansion. On success the run's writable places are added
    to ``ctx.written`` (a later run must not trust what lies below them) and the run to
    ``ctx.runs``: a later run whose work dir's ``pyproject.toml`` this one could rewrite is
    refused, unless this one's failure stops it (the supervisor fails a run, 125, that changed
    its own work dir's ``[tool.no-docker]``; a changed table elsewhere it does not see)."""
    ctx = ctx if ctx is not None else RunContext()
    given: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        if word is None:
            return Kind.PLAIN, "no-docker run with an option that is not a literal"
        if not word.startswith("-"):
            break  # the supervisor takes the first word that is not an option for CMD
        flag, eq, value = word.partition("=")
        if flag in _PATH_OPTIONS:
            path = value if eq else (args[i + 1] if i + 1 < len(args) else None)
            i += 1 if eq else 2
            if path is None or not path or (not expands and ("~" in path or "$" in path)):
                return Kind.PLAIN, f"no-docker run {flag} of a path the guard cannot resolve"
            given.append((flag, path))
            continue
        # the run's other options with a value (supervisor/run.py _VALUE_OPTIONS) take the next word
        i += 2 if flag in _OTHER_VALUE_OPTIONS and not eq else 1
    written: list[str] = []
    runs: list[EarlierRun] = []
    for cwd in sorted(ctx.cwds):
        works = [place(p, cwd) for f, p in given if f == "--work"] or [cwd]
        work = works[-1]
        where = "its work dir" if not any(f == "--work" for f, _ in given) else "--work"
        problem = writable_problem(work, ctx.has_link, ctx.written)
        if problem:
            return Kind.PLAIN, f"no-docker run: {where} {work}: {problem}"
        config_file = work.rstrip("/") + "/pyproject.toml"
        for earlier in ctx.runs:
            if any(is_under_path(config_file, root) for root in earlier.writable) and not (
                    earlier.work == work and (earlier.fatal or _and_follows(earlier.node, node))):
                if not earlier.work:  # a step wrote it: a download, a cache, a foreign checkout
                    return Kind.PLAIN, (f"no-docker run reads {work}/pyproject.toml [tool.no-docker] (its rw "
                                        "and ro defaults), which an earlier step of the job (a download, a "
                                        "cache, a checkout of other content) wrote: it is not "
                                        "the reviewed one; put such content in a subdirectory")
                return Kind.PLAIN, (f"no-docker run reads {work}/pyproject.toml [tool.no-docker] (its rw "
                                    "and ro defaults), which an earlier run could rewrite and still let "
                                    "this one start: let a failed run stop it (a plain top-level "
                                    "command, no `|| true`, no `if: always()`), or use one run")
        rel = in_workspace(work)
        from_config = ctx.config(rel) if rel is not None else []
        if from_config is None:
            return Kind.PLAIN, f"no-docker run: {work}/pyproject.toml [tool.no-docker] cannot be read"
        options = [(f, place(p, cwd)) for f, p in given if f != "--work"]
        options += [(f, place(p, work)) for f, p in from_config]
        for flag, path in options:
            judge = writable_problem if flag in _WRITABLE_OPTIONS else readable_problem
            problem = judge(path, ctx.has_link, ctx.written)
            if problem:
                return Kind.PLAIN, f"no-docker run {flag} {path}: {problem}"
        writable = (work, *[p for f, p in options if f == "--rw"])
        runs.append(EarlierRun(work, writable, fatal, node, fails_step))  # one per place it may start
        written += writable
    ctx.runs.extend(runs)
    ctx.written.extend(p for p in dict.fromkeys(written) if p not in ctx.written)
    return Kind.ISOLATED, "no-docker run"


def _and_follows(earlier: Node | None, later: Node | None) -> bool:
    """``later`` runs only when ``earlier`` succeeded: it is right of ``earlier`` in ``A && B``."""
    if earlier is None or later is None or earlier.parent is None or earlier.parent.type != "list":
        return False
    operator = earlier.next_sibling
    if operator is None or operator.type != "&&":
        return False
    start, end = later.start_byte, later.end_byte
    return any(c.start_byte <= start and end <= c.end_byte for c in earlier.parent.named_children[1:]
               ) and earlier.parent.named_children[0] == earlier


def is_under_path(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _judge_cd(args: list[str | None], ctx: RunContext) -> tuple[Kind, str]:
    """``cd DIR``: the next run's default work dir. Every directory it may lead to is added to
    ``ctx.cwds`` (the cd may not take effect: a failed cd without ``set -e`` goes on where it
    was). Refused: no DIR (``$HOME``), ``-``, a word that is not literal, a link the repository
    holds, and a place below one an earlier run could write (it may be a link now)."""
    if len(args) != 1 or args[0] is None or args[0] in ("-", ""):
        return Kind.PLAIN, "cd without one literal directory (cd alone goes to $HOME, cd - to $OLDPWD)"
    new = set(ctx.cwds)
    for cwd in ctx.cwds:
        target = place(args[0], cwd)
        rel = in_workspace(target)
        link = through_link(rel, ctx.has_link) if rel is not None else None
        if link is not None:
            return Kind.PLAIN, f"cd {args[0]}: it passes through {link!r}, a link in the repository"
        if any(is_under_path(target, root) and target != root for root in ctx.written):
            return Kind.PLAIN, f"cd {args[0]}: an earlier run could write there and leave a link"
        new.add(target)
    if len(new) > 64:
        return Kind.PLAIN, "cd: more possible directories than the guard follows"
    ctx.cwds = new
    return Kind.ALLOWED, "cd"


def _judge_neutral(name: str, args: list[str | None]) -> tuple[Kind, str]:
    if name == "set" and not all(a is not None and a in SET_WORDS for a in args):
        return Kind.PLAIN, ("set with options the guard does not model "
                            "(set -k turns arguments into environment)")
    if name == "printf" and (not args or args[0] is None or args[0].startswith("-")):
        return Kind.PLAIN, "printf whose format is not a literal (printf -v assigns)"
    if name in ("exit", "return", "shift") and any(a is not None and not INTEGER.match(a) for a in args):
        return Kind.PLAIN, f"{name} of a non-integer"
    if name in ("test", "[") and any(a in ("-v", "-R") for a in args):
        return Kind.PLAIN, f"{name} -v evaluates a subscript"
    return Kind.ALLOWED, name


def _judge_apt(words: list[str | None]) -> tuple[Kind, str]:
    """``apt-get update`` and ``install PKG...`` by name with the flags of ``APT_FLAGS`` only:
    ``-o``/``-c`` (apt.conf(5) options, a DPkg::Pre-Invoke hook is a command), ``-t``, and a
    local ``x.deb`` (apt(8) installs a file argument) are refused."""
    options = [w for w in words[1:] if w is None or w.startswith("-")]
    bad = [w for w in options if w not in APT_FLAGS]
    if bad:
        return Kind.PLAIN, (f"apt option {bad[0]!r}: only {' '.join(sorted(APT_FLAGS))} (-o and -c set "
                            "apt.conf options, whose hooks are commands)")
    args = [w for w in words[1:] if w not in APT_FLAGS]
    if args == ["update"]:
        return Kind.ALLOWED, "apt update"
    if args and args[0] == "install" and len(args) > 1:
        for a in args[1:]:
            if a is None or not PACKAGE.match(a) or a.endswith(DEB_SUFFIXES):
                return Kind.PLAIN, (f"apt install {a!r}: not a package name (a .deb or a path installs "
                                    "the repository's file)")
        return Kind.ALLOWED, "apt install by name"
    return Kind.PLAIN, "apt other than update or install PKG..."


def _judge_pip(args: list[str | None]) -> tuple[Kind, str]:
    """``pip install NAME...`` from the index, with the flags of ``PIP_FLAGS`` only. Refused:
    -e, -r, -c (files of the repository), -f/--find-links, -i/--index-url/--extra-index-url
    (a file: or local index), --no-index, --config-settings, --global-option, --prefix,
    --target, --root, --src, --no-binary, and every other option (default-deny)."""
    if not args or args[0] != "install":
        return Kind.PLAIN, "pip other than install NAME..."
    names = [a for a in args[1:] if a not in PIP_FLAGS]
    if not names:
        return Kind.PLAIN, "pip install of nothing"
    for a in names:
        if a is not None and a.startswith("-"):
            return Kind.PLAIN, (f"pip option {a!r}: only {' '.join(sorted(PIP_FLAGS))} (-e, -r, -c, "
                                "--find-links, --index-url read the repository's files)")
        problem = requirement_problem(a)
        if problem:
            return Kind.PLAIN, f"pip install {problem}"
    return Kind.ALLOWED, "pip install by name"


def _redirect_target(r: Node) -> str:
    dest = r.child_by_field_name("destination")
    return _text(dest) if dest is not None else ""


def _judge_redirects(kind: Kind, words: list[str | None], redirects: list[Node],
                     ctx: RunContext | None = None) -> str | None:
    """A reason to refuse the command's redirections, or None. A file written outside a run is
    a path like a run's ``--rw`` (``runner_paths``): ``echo ... > ~/.gitconfig`` would set what
    git runs in checkout's post step. What it writes is added to ``ctx.written``: a local action
    or a work dir's ``pyproject.toml`` there is no longer the tracked one."""
    for r in redirects:
        if r.type in ("heredoc_redirect", "herestring_redirect"):
            continue
        target = _redirect_target(r)
        op = next((c.type for c in r.children if not c.is_named), "")
        if op in ("<", "<&", ">&", "<&-", ">&-") and (op == "<" or re.fullmatch(r"[0-9-]", target)):
            continue
        github = next((g for g in GITHUB_FILES if g in target), None)
        if github is not None:
            line = words[1] if len(words) == 2 and words[0] == "echo" else None
            if kind is Kind.ALLOWED and github == "GITHUB_ENV" and line is not None \
                    and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=[^\n<]*", line):
                # echo NAME=VALUE >> "$GITHUB_ENV": it reaches every later step and the actions'
                # post steps, outside: only the short list of environment.ALLOWED
                name, _, value = line.partition("=")
                problem = outside_problem(name, value)
                if problem is None:
                    continue
                return f"writes {name} to $GITHUB_ENV: {problem}"
            return f"writes to ${github}: it sets the environment or path of later steps"
        if target in ("/dev/null", "/dev/stdout", "/dev/stderr") or '"$GITHUB_STEP_SUMMARY"' in target \
                or target == "$GITHUB_STEP_SUMMARY":
            continue
        dest = r.child_by_field_name("destination")
        path = _literal(dest) if dest is not None else None
        if path is None:
            return f"a redirection to {target!r}, which the guard cannot resolve"
        if ctx is not None and op != "<":
            for cwd in sorted(ctx.cwds):
                placed = place(path, cwd)
                problem = writable_problem(placed, ctx.has_link, ctx.written)
                if problem:
                    return f"writes {placed}: {problem}"
                if placed not in ctx.written:
                    ctx.written.append(placed)
                ctx.runs.append(EarlierRun("", (placed,), False, None, False))
    return None


_REPEATS = ("for_statement", "while_statement", "function_definition")


def _exports(root: Node) -> list[tuple[Node, str, str | None, bool]]:
    """Assignments outside a command's prefix: (node, name, literal value, exported). A plain
    ``NAME=VALUE`` of a name already in the environment is exported too (bash(1), ENVIRONMENT),
    and the guard does not know the runner's environment: an upper-case name counts as one."""
    out: list[tuple[Node, str, str | None, bool]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        stack.extend(n.named_children)
        if n.type != "variable_assignment" or (n.parent is not None and n.parent.type == "command"):
            continue
        name_node, value = n.child_by_field_name("name"), n.child_by_field_name("value")
        name = _text(name_node) if name_node is not None else ""
        exported = (n.parent is not None and n.parent.type == "declaration_command") or name.isupper()
        out.append((n, name, _literal(value) if value is not None else "", exported))
    return out


def judge_script(script: str, ctx: RunContext | None = None) -> list[Judged]:
    """Every command of a ``run:`` script with its kind and reason, in order (see the module doc).

    A script that bash cannot parse, or that holds a refused construct, is one plain entry.
    ``ctx`` carries the job's paths (``RunContext``) and is updated by each ``cd`` and run."""
    ctx = ctx if ctx is not None else RunContext()
    source = mask_unsafe(script).encode()
    tree = parse(source)
    root = tree.root_node
    if root.has_error:
        return [Judged(0, Kind.PLAIN, script, "its run: script cannot be parsed as bash")]
    try:
        _check_constructs(root, source)
    except _Refused as err:
        return [Judged(err.node.start_point[0], Kind.PLAIN, _text(err.node), f"unsupported: {err.reason}")]
    judged: list[Judged] = []
    stack = [root]
    found: list[Node] = []
    while stack:
        n = stack.pop()
        if n.type in ("command", "test_command"):
            found.append(n)
        stack.extend(n.named_children)
    found.sort(key=lambda n: n.start_byte)
    for node in found:
        words = _argv(node)[0] if node.type == "command" else []
        if words and words[0] == "set" and any(w is None or w.startswith("+") for w in words[1:]):
            ctx.errexit = False  # `set +e` (or +o errexit): a failed run no longer ends the script
    for node in found:
        text = _text(node)
        if node.type == "test_command":
            judged.append(Judged(node.start_point[0], Kind.ALLOWED, text, "test"))
            continue
        words, assigns, redirects = _argv(node)
        words, refusal, env_assigns = _unwrap(words)
        if refusal is not None:
            judged.append(Judged(node.start_point[0], Kind.PLAIN, text, refusal, True))
            continue
        if words and words[0] == "cd" and _inside(node, _REPEATS):
            judged.append(Judged(node.start_point[0], Kind.PLAIN, text,
                                 "cd in a loop or a function (the guard follows each cd once)"))
            continue
        kind, reason, outside = _judge_command(words, ctx, node)
        for name, value in [*assigns, *env_assigns]:
            # the command's own environment: the short list where a program other than
            # no-docker runs outside, else only not what bash, python or no-docker read
            problem = outside_problem(name, value) if outside else before_no_docker_problem(name)
            if problem is not None and kind is not Kind.PLAIN:
                kind, reason = Kind.PLAIN, f"{name}=...: {problem}"
        # A redirection after a list or a group applies to (some of) the commands under it:
        # each of them is checked against it, which can only refuse more than bash would.
        parent = node.parent
        while parent is not None:
            if parent.type == "redirected_statement":
                redirects += [c for c in parent.children if c.type.endswith("redirect")]
            parent = parent.parent
        problem = _judge_redirects(kind, words, redirects, ctx) if kind is not Kind.PLAIN else None
        if problem is not None:
            kind, reason = Kind.PLAIN, problem
        judged.append(Judged(node.start_point[0], kind, text, reason, outside and kind is Kind.ALLOWED))
    # An exported variable reaches every later command of the script: the short list when one
    # of them is a program other than no-docker outside, else only not what no-docker reads.
    runs_outside = any(j.outside for j in judged)
    extra: list[Judged] = []
    for node, name, value, exported in _exports(root):
        problem = (outside_problem(name, value) if exported and runs_outside
                   else before_no_docker_problem(name))
        if problem is not None:
            extra.append(Judged(node.start_point[0], Kind.PLAIN, _text(node), f"{name}: {problem}"))
    return sorted(judged + extra, key=lambda j: j.row) if extra else judged


def _same(a: Node, b: Node) -> bool:
    return (a.start_byte, a.end_byte, a.type) == (b.start_byte, b.end_byte, b.type)


def _stops_script(node: Node, ctx: RunContext) -> bool:
    """A failure of ``node`` ends the script, so the step fails and no later step runs (unless
    it asks to, ``if: always()``). bash(1) on ``-e`` (GitHub runs ``bash -e``/``sh -e``): the
    shell exits when a command fails, except in an ``if``/``while`` condition, a ``&&``/``||``
    list but its last element, after ``!``, and in a pipeline but its last element; a compound
    command (``if`` body, ``{ }``, a subshell, a loop body) fails with its failing command."""
    if not ctx.errexit:
        return False
    child, parent = node, node.parent
    while parent is not None and parent.type != "program":
        t = parent.type
        if t in ("if_statement", "elif_clause"):
            then = next((c for c in parent.children if c.type == "then"), None)
            if then is None or child.start_byte < then.end_byte:
                return False  # the condition
        elif t in ("while_statement", "for_statement"):
            if child.type != "do_group":
                return False
        elif t == "list":
            if not _same(parent.named_children[-1], child):
                return False
        elif t not in ("redirected_statement", "compound_statement", "subshell", "do_group", "else_clause"):
            return False  # a pipeline, `!`, a function body, a substitution...
        child, parent = parent, parent.parent
    return parent is not None


def _last_status(node: Node) -> bool:
    """When ``node`` fails nothing after it runs and its status is the script's: it is left of
    ``&&`` only (``a && b``, which short-circuits) in the script's last statement."""
    child, parent = node, node.parent
    while parent is not None and parent.type != "program":
        if parent.type == "list":
            operator = child.next_sibling
            if not _same(parent.named_children[-1], child) and (operator is None or operator.type != "&&"):
                return False
        elif parent.type != "redirected_statement":
            return False
        child, parent = parent, parent.parent
    if parent is None:
        return False
    statements = [c for c in parent.named_children if c.type != "comment"]
    return bool(statements) and _same(statements[-1], child)


def _inside(node: Node, types: tuple[str, ...]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in types:
            return True
        parent = parent.parent
    return False
