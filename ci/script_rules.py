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
from dataclasses import dataclass
from pathlib import PurePosixPath

from no_docker.mutants.bash_parser import HeredocRefused, heredoc_body, mask_unsafe, parse
from tree_sitter import Node


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


# Environment that makes a shell, python, the linker or no-docker itself load or run other
# code (`env:` keys, `NAME=VALUE cmd`, `export`, lines written to $GITHUB_ENV).
UNSAFE_ENV = frozenset({
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "PATH", "IFS", "CDPATH",
    "GLOBIGNORE", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "ZDOTDIR", "GCONV_PATH", "HOSTALIASES", "PIP_CONFIG_FILE", "SUDO_ASKPASS",
    "EDITOR", "VISUAL", "PAGER", "HOME", "XDG_CONFIG_HOME", "TMPDIR", "CONFIG_SITE",
})
UNSAFE_ENV_PREFIXES = ("BASH_FUNC_", "LD_", "PYTHON", "GIT_", "NO_DOCKER_", "DOCKER_", "CONTAINER_",
                       "PIP_", "DYLD_")


def unsafe_env_name(name: str) -> bool:
    return name in UNSAFE_ENV or name.startswith(UNSAFE_ENV_PREFIXES) or "%" in name


SET_WORDS = frozenset({"-e", "+e", "-u", "+u", "-x", "+x", "-o", "+o", "pipefail", "errexit", "nounset",
                       "xtrace", "-eu", "-euo", "-eux", "-euxo", "-ex", "-eo"})
# Builtins that run no program; their arguments are checked below where they matter.
NEUTRAL = frozenset({":", "true", "false", "echo", "printf", "cd", "exit", "return", "set", "test", "[",
                     "pwd", "shift"})
READ_ONLY_NO_DOCKER = frozenset({"guard", "check", "stanza", "--version", "--help", "runs"})
APT = frozenset({"apt-get", "apt"})
APT_FLAGS = frozenset({"-y", "-q", "-qq", "--yes", "--quiet", "--no-install-recommends", "--assume-yes"})
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+~:-]+)?\Z")
PIP_FLAGS = frozenset({"-q", "--quiet", "-U", "--upgrade", "--user", "--no-cache-dir",
                       "--break-system-packages", "--disable-pip-version-check", "--pre"})
REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?([<>=!~]=?[A-Za-z0-9.*+!_-]+)?\Z")
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


def _unwrap(words: list[str | None]) -> tuple[list[str | None], str | None]:
    """Strip wrappers with only their listed options; (rest, refusal reason)."""
    while words and words[0] is not None and PurePosixPath(words[0]).name in WRAPPERS:
        name = PurePosixPath(words[0]).name
        flags, values = WRAPPERS[name]
        rest = words[1:]
        while rest:
            w = rest[0]
            if w is None:
                return rest, f"{name} with a word that is not literal"
            if name == "env" and "=" in w and not w.startswith("-"):
                var = w.split("=", 1)[0]
                if unsafe_env_name(var) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                    return rest, f"env {var}=...: makes a program load other code"
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
                return rest, f"{name} {w}: an option the guard does not model"
            break
        if not rest:
            return rest, None if name == "exec" else f"{name} without a command"
        words = rest
    return words, None


def _judge_command(words: list[str | None]) -> tuple[Kind, str]:
    words, refusal = _unwrap(words)
    if refusal is not None:
        return Kind.PLAIN, refusal
    if not words:
        return Kind.ALLOWED, "exec with redirections only"
    name = words[0]
    if name is None:
        return Kind.PLAIN, "the command name is not literal"
    base = PurePosixPath(name).name
    if base == "no-docker" and name in ("no-docker",):
        sub = words[1] if len(words) > 1 else None
        if sub == "run":
            return judge_run_options(words[2:])
        if sub in READ_ONLY_NO_DOCKER:
            return Kind.ALLOWED, f"no-docker {sub}"
        return Kind.PLAIN, f"no-docker {sub}: not run and not read-only"
    if name in NEUTRAL:
        return _judge_neutral(name, words[1:])
    if base in APT and "/" not in name:
        return _judge_apt(words)
    if base in ("pip", "pip3") and "/" not in name:
        return _judge_pip(words[1:])
    if PYTHON_NAME.match(base) and "/" not in name:
        if len(words) > 3 and words[1] in ("-I", "-P") and words[2] == "-m" and words[3] == "pip":
            return _judge_pip(words[4:])
        if "-m" in words[1:3] and "pip" in words[2:4]:
            return Kind.PLAIN, ("python -m pip imports pip from the working directory first: "
                                "use python -I -m pip")
        if "pytest" in words:
            return Kind.PLAIN, "pytest outside no-docker run (pytest --no-docker re-executes itself, but " \
                "what it imports before that is not provable here): use no-docker run -- pytest"
        return Kind.PLAIN, f"{name} runs outside no-docker run"
    if base == "sysctl" and "/" not in name:
        if all(w is not None and SYSCTL_WORDS.fullmatch(w) for w in words[1:]):
            return Kind.ALLOWED, "sysctl"
        return Kind.PLAIN, "sysctl with arguments the guard does not model"
    if base in ("id", "uname", "whoami", "nproc") and "/" not in name and all(
            w is not None and re.fullmatch(r"-[a-z]+", w) for w in words[1:]):
        return Kind.ALLOWED, base
    return Kind.PLAIN, f"`{name}` runs outside no-docker run"


def judge_run_options(args: list[str | None]) -> tuple[Kind, str]:
    """``no-docker run`` options: a ``--rw`` the guard cannot resolve, or one over the runner's
    temp directory (where $GITHUB_ENV and $GITHUB_PATH live), would let code under test set the
    environment of later steps, whose shell would then source what it wrote."""
    for i, word in enumerate(args):
        if word == "--":
            break
        if word == "--rw":
            value = args[i + 1] if i + 1 < len(args) else None
            if value is None:
                return Kind.PLAIN, "no-docker run --rw of a path the guard cannot resolve"
            if value.rstrip("/") in ("", "/home", "/home/runner", "/home/runner/work") or any(
                    part in value for part in ("_temp", "RUNNER_TEMP", "_runner_file_commands")):
                return Kind.PLAIN, f"no-docker run --rw {value}: the runner's file commands would be writable"
    return Kind.ISOLATED, "no-docker run"


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
    args = [w for w in words[1:] if w not in APT_FLAGS]
    if args == ["update"]:
        return Kind.ALLOWED, "apt update"
    if args and args[0] == "install" and len(args) > 1 and all(
            a is not None and PACKAGE.match(a) for a in args[1:]):
        return Kind.ALLOWED, "apt install by name"
    return Kind.PLAIN, "apt with arguments the guard does not model (a path installs the repository's files)"


def _judge_pip(args: list[str | None]) -> tuple[Kind, str]:
    if not args or args[0] != "install":
        return Kind.PLAIN, "pip other than install NAME..."
    names = [a for a in args[1:] if a not in PIP_FLAGS]
    if names and all(a is not None and not a.startswith("-") and REQUIREMENT.match(a) for a in names):
        return Kind.ALLOWED, "pip install by name"
    return Kind.PLAIN, "pip install of a path, a file or an option the guard does not model " \
        "(installing the repository runs its build code)"


def _redirect_target(r: Node) -> str:
    dest = r.child_by_field_name("destination")
    return _text(dest) if dest is not None else ""


def _judge_redirects(kind: Kind, words: list[str | None], redirects: list[Node]) -> str | None:
    """A reason to refuse the command's redirections, or None."""
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
            if (kind is Kind.ALLOWED and github == "GITHUB_ENV" and line is not None
                    and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=[^\n<]*", line)
                    and not unsafe_env_name(line.split("=")[0])):
                continue  # echo NAME=VALUE >> "$GITHUB_ENV", a constant line with a safe name
            return f"writes to ${github}: it sets the environment or path of later steps"
        if target in ("/dev/null", "/dev/stdout", "/dev/stderr") or '"$GITHUB_STEP_SUMMARY"' in target \
                or target == "$GITHUB_STEP_SUMMARY":
            continue
        dest = r.child_by_field_name("destination")
        if dest is None or _literal(dest) is None:
            return f"a redirection to {target!r}, which the guard cannot resolve"
    return None


def judge_script(script: str) -> list[Judged]:
    """Every command of a ``run:`` script with its kind and reason, in order (see the module doc).

    A script that bash cannot parse, or that holds a refused construct, is one plain entry."""
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
    for node in sorted(found, key=lambda n: n.start_byte):
        text = _text(node)
        if node.type == "test_command":
            judged.append(Judged(node.start_point[0], Kind.ALLOWED, text, "test"))
            continue
        words, assigns, redirects = _argv(node)
        kind, reason = _judge_command(words)
        for name, _value in assigns:
            if unsafe_env_name(name):
                kind, reason = Kind.PLAIN, f"{name}=... makes a program load other code"
        # A redirection after a list or a group applies to (some of) the commands under it:
        # each of them is checked against it, which can only refuse more than bash would.
        parent = node.parent
        while parent is not None:
            if parent.type == "redirected_statement":
                redirects += [c for c in parent.children if c.type.endswith("redirect")]
            parent = parent.parent
        problem = _judge_redirects(kind, words, redirects) if kind is not Kind.PLAIN else None
        if problem is not None:
            kind, reason = Kind.PLAIN, problem
        judged.append(Judged(node.start_point[0], kind, text, reason))
    return judged
