"""Which commands of a CI ``run:`` script run code under test isolated (T-19).

The script is parsed with a real bash parser (tree-sitter-bash), so ``a && b``, ``$(...)``,
``if`` bodies, pipelines and here-documents fed to ``sh`` are all seen as the separate commands
they are. Each command is one of:

- **isolated**: ``no-docker run ...``; ``pytest --no-docker`` (or plain ``pytest`` when the
  repository's pytest configuration turns the plugin on *and* requires it, so that a missing
  plugin fails the run instead of silently running unisolated); a script whose first command is
  the re-exec stanza (``bash t.sh``, ``./t.sh``);
- **neutral**: a shell builtin that runs no program (``set``, ``cd``, ``echo``, ``export``...);
  commands inside its arguments (``$(...)``) are judged on their own;
- **plain**: everything else, including anything the parser could not make sense of.

Nothing here touches the file system: what the classification needs from the repository comes
through ``RepoView``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from no_docker.mutants.bash_parser import mask_unsafe, parse
from tree_sitter import Node


class CommandKind(enum.Enum):
    ISOLATED = "isolated"
    NEUTRAL = "neutral"
    PLAIN = "plain"


@dataclass(frozen=True)
class ShellCommand:
    text: str
    row: int  # 0-based line within the script
    kind: CommandKind


class RepoView(Protocol):
    def script_has_stanza(self, path: str) -> bool:
        """True when the tracked file ``path`` (relative to the repository) starts with the stanza."""
        ...

    def pytest_config_isolates(self) -> bool:
        """True when the pytest configuration sets ``no_docker = true`` and requires the plugin."""
        ...


# Builtins that run no program themselves. `eval`, `source`/`.`, `exec` with a command,
# `trap` and `command` are absent on purpose: they run code.
NEUTRAL_BUILTINS = frozenset(
    {
        "set",
        "shopt",
        "cd",
        "pushd",
        "popd",
        ":",
        "true",
        "false",
        "echo",
        "printf",
        "export",
        "unset",
        "umask",
        "exit",
        "return",
        "shift",
        "local",
        "declare",
        "typeset",
        "readonly",
    }
)
# Node types that are commands in tree-sitter-bash's grammar.
COMMAND_NODES = frozenset({"command", "declaration_command", "unset_command", "test_command"})
NEUTRAL_NODES = frozenset({"declaration_command", "unset_command", "test_command"})
# Prefixes that run the command after them (their own options skipped).
WRAPPERS = frozenset({"exec", "command", "time", "env", "sudo", "nice", "nohup"})
PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?\Z")
GHA_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)


def _mask_for_parser(script: str) -> str:
    """What the parser gets.

    ``${{ ... }}`` (GitHub expressions, not bash) becomes a word of the same length, so bash
    never sees the braces. Characters that could crash tree-sitter-bash become U+FFFD
    (``mask_unsafe``): a workflow under review must not be able to crash its guard, and an
    emoji in an ``echo`` must not fail it either. Rows stay the same; such a character in a
    command's name makes that command plain, the safe side."""
    masked = GHA_EXPRESSION.sub(lambda m: re.sub(r"[^\n]", "_", m.group(0)), script)
    return mask_unsafe(masked)


def _word_value(node: Node) -> str | None:
    """The literal value of a word node, or None when it is dynamic ($x, $(...), globs...)."""
    text = node.text.decode("utf-8", "replace") if node.text is not None else ""
    if node.type == "command_name":
        return _word_value(node.named_children[0]) if node.named_child_count == 1 else None
    if node.type == "word" and not any(c in text for c in "$`*?[\\"):
        return text
    if node.type == "raw_string":
        return text[1:-1]
    if node.type == "string" and all(c.type == "string_content" for c in node.named_children):
        return text[1:-1]  # "..." without expansions
    return None


def _argv(node: Node) -> list[str | None]:
    """Name and arguments of a ``command`` node (assignments and redirections left out)."""
    words: list[str | None] = []
    for child in node.named_children:
        if child.type in ("variable_assignment", "file_redirect", "herestring_redirect", "heredoc_redirect"):
            continue
        words.append(_word_value(child))
    return words


def _unwrap(argv: list[str | None]) -> list[str | None]:
    """Drop ``exec``/``env``/``sudo``... and their options: what runs is the command after them."""
    while argv and argv[0] is not None and PurePosixPath(argv[0]).name in WRAPPERS:
        rest = argv[1:]
        while rest and rest[0] is not None and (rest[0].startswith("-") or "=" in rest[0]):
            rest = rest[1:]
        if not rest:  # a bare `exec` (redirections only) or `env`: runs nothing we know of
            return argv
        argv = rest
    return argv


def _is_pytest(argv: list[str | None]) -> tuple[bool, list[str | None]]:
    name = PurePosixPath(argv[0] or "").name
    if name in ("pytest", "py.test"):
        return True, argv[1:]
    if PYTHON_NAME.match(name):
        i = 1
        while i < len(argv):
            word = argv[i]
            if word == "-m":
                if i + 1 < len(argv) and argv[i + 1] == "pytest":
                    return True, argv[i + 2 :]
                break
            if word is None or not word.startswith("-") or word == "-c":
                break
            i += 2 if word in ("-X", "-W") else 1  # the options of python that take a value
    return False, []


def _script_path(argv: list[str | None], workdir: str) -> str | None:
    """The script a command runs: ``./t.sh``, ``tests/t.sh``, ``bash t.sh``, ``sh t.sh``."""
    name = argv[0]
    if name is None:
        return None
    target: str | None = None
    if "/" in name:
        target = name
    elif name in ("bash", "sh"):
        for word in argv[1:]:
            if word is None:
                return None
            if word.startswith("-"):
                if word in ("-c", "-s"):  # the code comes from a string or stdin, not a file
                    return None
                continue
            target = word
            break
    if target is None or target.startswith("/"):
        return None
    parts: list[str] = []
    for part in PurePosixPath(workdir, target).parts:
        if part == "..":
            if not parts:
                return None  # outside the repository
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts) or None


def classify(argv: list[str | None], repo: RepoView, workdir: str = "") -> CommandKind:
    """The kind of one simple command given its words (None for a word that is not literal)."""
    argv = _unwrap(argv)
    if not argv or argv[0] is None:
        return CommandKind.PLAIN
    name = PurePosixPath(argv[0]).name
    if name == "no-docker":
        return CommandKind.ISOLATED if len(argv) > 1 and argv[1] == "run" else CommandKind.PLAIN
    if argv[0] in NEUTRAL_BUILTINS or argv == ["exec"]:  # a bare `exec >log` only redirects
        return CommandKind.NEUTRAL
    is_pytest, pytest_args = _is_pytest(argv)
    if is_pytest:
        disabled = any(
            a is not None and a.replace(" ", "") in ("no:no_docker", "-pno:no_docker") for a in pytest_args
        )
        if not disabled and ("--no-docker" in pytest_args or repo.pytest_config_isolates()):
            return CommandKind.ISOLATED
        return CommandKind.PLAIN
    script = _script_path(argv, workdir)
    if script is not None and repo.script_has_stanza(script):
        return CommandKind.ISOLATED
    return CommandKind.PLAIN


def _walk_commands(node: Node) -> list[Node]:
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in COMMAND_NODES:
            found.append(current)
        stack.extend(reversed(current.named_children))
    return sorted(found, key=lambda n: n.start_byte)


def commands_of(script: str, repo: RepoView, workdir: str = "") -> list[ShellCommand] | None:
    """Every command of a ``run:`` script with its kind, in order; None when bash cannot parse it."""
    tree = parse(_mask_for_parser(script).encode())
    if tree.root_node.has_error:
        return None
    commands = []
    for node in _walk_commands(tree.root_node):
        text = (node.text or b"").decode("utf-8", "replace")
        kind = CommandKind.NEUTRAL if node.type in NEUTRAL_NODES else classify(_argv(node), repo, workdir)
        commands.append(ShellCommand(text=text, row=node.start_point[0], kind=kind))
    return commands


def has_stanza_first(script_text: str, stanza: str) -> bool:
    """True when ``stanza`` is the script's first command: only a shebang, comments and blank
    lines may come before it, so nothing runs outside before the script isolates itself."""
    for line in script_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        return stripped == stanza.strip()
    return False
